"""softmax and log_softmax as primitives (a row reduction plus pointwise work: fusion targets)."""
import numpy as np

from .registry import AVal, apply, defop, norm_dim, OPS


def _softmax_np(x, dim):
    m = np.amax(x, axis=dim, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0).astype(x.dtype))
    return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax_np(x, dim):
    m = np.amax(x, axis=dim, keepdims=True)
    s = x - np.where(np.isfinite(m), m, 0).astype(x.dtype)
    return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def _softmax_vjp(c, g):
    y = c.out
    d = c.attrs["dim"]
    return (y * (g - (g * y).sum(d, keepdim=True)),)


def _log_softmax_vjp(c, g):
    d = c.attrs["dim"]
    return (g - c.out.exp() * g.sum(d, keepdim=True),)


_meta = lambda x, dim: AVal(x.shape, x.dtype)  # noqa: E731
defop("softmax", _softmax_np, _meta, _softmax_vjp, kind="reduction", saves="o")
defop("log_softmax", _log_softmax_np, _meta, _log_softmax_vjp, kind="reduction", saves="o")


def _prep(input, dim, dtype):
    from .. import _dtype as D
    if dtype is not None:
        input = input.to(D.to_dtype(dtype))
    elif not input.dtype.is_floating_point:
        input = input.to(D.get_default_dtype())
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1  # PyTorch's legacy implicit dim
    return input, (norm_dim(dim, input.ndim) if input.ndim else 0)


def softmax(input, dim=None, dtype=None):
    input, d = _prep(input, dim, dtype)
    return apply(OPS["softmax"], input, dim=d)


def log_softmax(input, dim=None, dtype=None):
    input, d = _prep(input, dim, dtype)
    return apply(OPS["log_softmax"], input, dim=d)
