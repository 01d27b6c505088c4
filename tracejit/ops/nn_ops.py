"""softmax and log_softmax as primitives (a row reduction plus pointwise work: fusion targets), and the
binary cross entropy, a primitive because PyTorch's derivative at the clamped edges (x = 0 or 1) is not
the derivative of its clamped formula."""
import numpy as np

from .registry import AVal, apply, defop, norm_dim, OPS


def _softmax_np(x, dim):
    m = np.amax(x, axis=dim, keepdims=True, initial=-np.inf)
    e = np.exp(x - np.where(np.isfinite(m), m, 0).astype(x.dtype))
    return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax_np(x, dim):
    m = np.amax(x, axis=dim, keepdims=True, initial=-np.inf)
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


def _bce_np(x, t):
    from .. import _dtype as D
    dt = D.result_type(AVal(x.shape, D._FROM_NP[x.dtype]), AVal(t.shape, D._FROM_NP[t.dtype])).np
    x, t = x.astype(dt, copy=False), t.astype(dt, copy=False)
    lo = dt.type(-100)
    return -(t * np.maximum(np.log(x), lo) + (1 - t) * np.maximum(np.log1p(-x), lo))


def _bce_meta(x, t):
    from .. import _dtype as D
    from .registry import broadcast_shapes
    return AVal(broadcast_shapes(x.shape, t.shape), D.result_type(x, t))


def _bce_vjp(c, g):
    # PyTorch: d/dx = (x - t) / max(x (1 - x), 1e-12); d/dt = log(1 - x) - log(x), both unclamped
    from .elementwise import clamp, log, log1p
    x, t = c.inputs
    gx = g * (x - t) / clamp(x * (1 - x), min=1e-12) if c.next_functions[0] is not None else None
    gt = g * (log1p(-x) - log(x)) if c.next_functions[1] is not None else None
    return gx, gt


defop("binary_cross_entropy", _bce_np, _bce_meta, _bce_vjp, kind="elementwise", saves="i")


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
