"""nn ops without PyTorch (tracejit/ops/nn_ops.py), second round: what the survivors of a mutation-testing run
over the functions tests/ops/test_nn_ops_edges.py was not first written for showed unchecked (issue 23). float32
and float16 inputs keep their dtype through every output and gradient (the shape rules' dtypes), float16 batch
norm computes its statistics in float32, softmax's numpy path warns of nothing, the row kernels' operands of a
3-d input, batch norm's gradients in eval and each gradient gated by its own input, a 0-d softmax's dim checked.
References are float64 formulas written from the definitions."""
import math
import warnings

import numpy as np
import pytest

import tracejit as torch
import tracejit.nn.functional as F
from tracejit.ops.nn_ops import _native_batch_norm
from tracejit.ops.registry import OPS, apply


def _close(got, want, tol=1e-12):
    got = got.detach().numpy() if hasattr(got, "numpy") else np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol, equal_nan=True)


def _rng(seed=0):
    return np.random.default_rng(100 + seed)


# ----------------------------------------------------------------------------- softmax, log_softmax


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_of_a_0d_tensor_checks_its_dim(fn):
    """PyTorch takes dim 0 or -1 of a 0-d tensor and refuses any other (tracejit used to take any dim)."""
    x = torch.tensor(2.5, dtype=torch.float64)
    for d in (0, -1):
        _close(fn(x, d), np.array(1.0 if fn is torch.softmax else 0.0))
    for d in (1, -2, 3):
        with pytest.raises(IndexError) as e:
            fn(x, d)
        assert str(e.value) == f"Dimension out of range (expected to be in range of [-1, 0], but got {d})"
