"""F.adaptive_max_pool3d / nn.AdaptiveMaxPool3d against PyTorch: values and input gradients (overlapping windows,
sizes that do not divide, None entries, unbatched inputs, growing outputs), PyTorch's errors, the repr, ties and
NaN in the values, traced = eager."""
import numpy as np
import pytest

import tracejit as tj
from torch_compare import both as _both, close as _close, same_error as _same_error, torch_or_skip as _torch

RNG = np.random.default_rng(0)

CASES = [  # (input shape, output_size)
    ((2, 3, 4, 6, 8), 2), ((2, 3, 4, 6, 8), (2, 3, 4)), ((2, 3, 5, 7, 9), (3, 4, 5)),     # overlapping windows
    ((1, 2, 5, 5, 5), (5, 5, 5)), ((1, 2, 3, 4, 5), (6, 7, 8)),                          # identity; growing
    ((2, 3, 6, 7), (None, 3, 2)), ((2, 4, 6, 7, 3), (4, None, None)), ((1, 1, 7, 1, 4), (3, 1, 1)),
    ((2, 2, 4, 4, 4), 1), ((2, 2, 4, 4, 4), [2, 1, 3]),
]


@pytest.mark.parametrize("shape, size", CASES)
@pytest.mark.parametrize("module", [False, True])
def test_same_as_torch(shape, size, module):
    x = RNG.standard_normal(shape)
    if module:
        _both(lambda lib, t: lib.nn.AdaptiveMaxPool3d(size)(t), [x], tol=1e-12)
    else:
        _both(lambda lib, t: lib.nn.functional.adaptive_max_pool3d(t, size), [x], tol=1e-12)


def test_float32():
    _both(lambda lib, t: lib.nn.functional.adaptive_max_pool3d(t, (2, 3, 3)),
          [RNG.standard_normal((2, 3, 5, 6, 7)).astype("float32")], tol=1e-6)


def test_ties_and_nan_values():
    torch = _torch()
    x = RNG.integers(0, 3, (2, 2, 5, 6, 7)).astype("float64")
    x[0, 0, 1, 2, 3] = np.nan
    want = torch.nn.functional.adaptive_max_pool3d(torch.tensor(x), (2, 3, 4)).numpy()
    got = tj.nn.functional.adaptive_max_pool3d(tj.tensor(x), (2, 3, 4)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    _close(np.nan_to_num(got), np.nan_to_num(want), 0)


def test_zero_output_size():
    torch = _torch()
    x = RNG.standard_normal((2, 2, 4, 5))
    want = torch.nn.functional.adaptive_max_pool3d(torch.tensor(x), (2, None, 0))
    got = tj.nn.functional.adaptive_max_pool3d(tj.tensor(x), (2, None, 0))
    assert tuple(got.shape) == tuple(want.shape)


def test_errors():
    F = lambda lib: lib.nn.functional  # noqa: E731
    assert "4D or 5D" in _same_error(lambda lib: F(lib).adaptive_max_pool3d(lib.zeros(2, 3, 4), 2))
    assert "4D or 5D" in _same_error(lambda lib: F(lib).adaptive_max_pool3d(lib.zeros(1, 2, 3, 4, 5, 6), 2))
    _same_error(lambda lib: F(lib).adaptive_max_pool3d(lib.zeros(2, 3, 4, 5), (2, 2)))
    assert "non-zero size" in _same_error(lambda lib: F(lib).adaptive_max_pool3d(lib.zeros(2, 0, 4, 5), 2))
    _same_error(lambda lib: F(lib).adaptive_max_pool3d(lib.zeros(2, 3, 4, 5), (2, None, -1)))
    x = tj.tensor(np.random.default_rng(0).standard_normal((1, 2, 3, 4, 5)).astype(np.float32))
    y, idx = tj.nn.AdaptiveMaxPool3d(2, return_indices=True)(x)      # (indices: tests/nn/test_api_gaps.py)
    assert idx.dtype == tj.int64 and idx.shape == y.shape == (1, 2, 2, 2, 2)
    np.testing.assert_array_equal(np.take_along_axis(x.numpy().reshape(1, 2, -1), idx.numpy().reshape(1, 2, -1), 2),
                                  y.numpy().reshape(1, 2, -1))


def test_repr():
    torch = _torch()
    for size in (2, (2, None, 3)):
        assert repr(tj.nn.AdaptiveMaxPool3d(size)) == repr(torch.nn.AdaptiveMaxPool3d(size))


def test_traced_equals_eager():
    x = tj.tensor(RNG.standard_normal((2, 3, 5, 6, 7)), requires_grad=True)
    w = tj.tensor(RNG.standard_normal((2, 3, 3, 4, 2)))

    def f(t):
        return (tj.nn.functional.adaptive_max_pool3d(t, (3, 4, 2)) * w).sum()
    loss = f(x)
    loss.backward()
    want, wgrad = float(loss), x.grad.numpy().copy()
    step = tj.trace(lambda t: (lambda v: (v.backward(), v.detach())[1])(f(t)))
    for _ in range(2):
        x.grad = None
        _close(float(step(x)), want, 1e-12)
        _close(x.grad.numpy(), wgrad, 1e-12)
