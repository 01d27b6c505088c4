"""kernels/cpu/scatter.py: the rows scatter-add behind indexing's backward (embedding gradients)."""
import numpy as np
import pytest

import tracejit
import tracejit.nn.functional as F
import tracejit.ops.indexing as I


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (7, 5), (7, 3, 2)])
def test_index_backward_adds_rows_as_numpy_add_at(dtype, shape):
    rng = np.random.default_rng(0)
    idx = rng.integers(-7, 7, (4, 6))                     # repeats and negative indices
    g = rng.standard_normal(idx.shape + shape[1:]).astype(dtype)
    want = np.zeros(shape, dtype)
    np.add.at(want, idx, g)
    for spec in [(I._T(0),), (I._T(0),) + (slice(None),) * (len(shape) - 1), (I._T(0), Ellipsis)]:
        got = I._index_backward_np(g, idx, shape=shape, spec=spec)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)          # same order of additions: bit-identical


def test_out_of_range_rows_raise_pytorch_s_message():
    with pytest.raises(IndexError, match="index out of range in self"):
        I._index_backward_np(np.ones((2, 3), np.float32), np.array([1, 9]), shape=(4, 3), spec=(I._T(0),))


def test_embedding_weight_gradient_eager_and_traced():
    tracejit.manual_seed(0)
    w = tracejit.randn(10, 4, requires_grad=True)
    ids = tracejit.tensor([[1, 2, 1], [9, 0, 1]])

    def f(w):
        return (F.embedding(ids, w) * tracejit.arange(4.0)).sum()

    f(w).backward()
    want = np.zeros((10, 4), np.float32)
    np.add.at(want, ids.numpy(), np.broadcast_to(np.arange(4.0, dtype=np.float32), (2, 3, 4)))
    np.testing.assert_allclose(w.grad.numpy(), want)
    w2 = w.detach().clone().requires_grad_()
    tracejit.trace(lambda w: f(w).backward())(w2)
    np.testing.assert_allclose(w2.grad.numpy(), want)
