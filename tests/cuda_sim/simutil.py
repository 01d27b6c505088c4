"""Helpers of the CUDA simulator tests."""
import numpy as np


def close(a, b, rtol=2e-6, atol=1e-6):
    """Device result `a` (tensor) against CPU result `b` (tensor): same dtype, shape and values."""
    assert a.device.type == "cuda", a.device
    assert b.device.type == "cpu"
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
