"""Running extremes and the running log-sum-exp along a dim (cummax, cummin, logcumsumexp): registry ops.

Each is O(n) in numpy; written with other ops they would need an (n, n) mask per row (cummax) or lose precision
where a row's values span more than exp can hold (logcumsumexp). Their derivatives are written with registry ops.
"""
import numpy as np

from .registry import AVal, apply, defop, norm_dim, OPS
from .reduction import cummax_t, cummin_t, _select_vjp  # noqa: F401  (the namedtuples PyTorch returns)


def _running_np(better):
    """(values, indices) of the running extreme along `dim`: a value at least as good as the current one (ties:
    the later index, as PyTorch) or a NaN takes over, and after a NaN only a later NaN does."""
    def impl(x, dim):
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        xs = np.moveaxis(x, dim, 0)
        vals, idx = np.empty_like(xs), np.empty(xs.shape, np.int64)
        cur, at = xs[0].copy(), np.zeros(xs.shape[1:], np.int64)
        for i in range(xs.shape[0]):
            v = xs[i]
            take = np.isnan(v) | (~np.isnan(cur) & better(v, cur)) if x.dtype.kind == "f" else better(v, cur)
            cur = np.where(take, v, cur)
            at = np.where(take, i, at)
            vals[i], idx[i] = cur, at
        return np.moveaxis(vals, 0, dim), np.moveaxis(idx, 0, dim)
    return impl


def _running_meta(x, dim):
    from .. import _dtype as D
    return AVal(x.shape, x.dtype), AVal(x.shape, D.int64)


def _running_vjp(c, g, gi=None):
    """g flows to the index each running value came from (summed where several positions share one)."""
    return _select_vjp(_KeepDim(c), g)


class _KeepDim:
    """A view of a VJP context whose op kept its dim (scan outputs have the input's shape)."""
    def __init__(self, c):
        self.out, self.attrs, self.shapes = c.out, dict(c.attrs, keepdim=True), c.shapes


defop("cummax", _running_np(np.greater_equal), _running_meta, _running_vjp, nout=2, saves="o", kind="other")
defop("cummin", _running_np(np.less_equal), _running_meta, _running_vjp, nout=2, saves="o", kind="other")


def _lcse_np(x, dim):
    if x.ndim == 0:
        return x.copy()
    return np.logaddexp.accumulate(x, axis=dim).astype(x.dtype, copy=False)


def _lcse_meta(x, dim):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"logcumsumexp(): not implemented for {x.dtype.name} tensors: convert the input "
                                  f"with .float() or .double()")
    return AVal(x.shape, x.dtype)


def _lcse_vjp(c, g):
    """d out_i / d x_j = exp(x_j - out_i) for j <= i, so grad_j = sum over i >= j of g_i exp(x_j - out_i). Summed
    in log space, the positive and the negative parts of g apart (their logs stay finite where exp would not)."""
    from .elementwise import where, log, exp, abs as _abs
    from .shape_ops import flip
    x, out, d = c.inputs[0], c.out, c.attrs["dim"]
    if not c.shapes[0]:
        return (g,)

    def rev_lcse(v):
        return flip(logcumsumexp(flip(v, (d,)), d), (d,))
    lowest = float(np.finfo(g.dtype.np).min)
    logabs = log(_abs(g))
    pos = exp(rev_lcse(where(g > 0, logabs, lowest) - out) + x)
    neg = exp(rev_lcse(where(g < 0, logabs, lowest) - out) + x)
    return (pos - neg,)


defop("logcumsumexp", _lcse_np, _lcse_meta, _lcse_vjp, saves="io", kind="other")


def _scan(name, input, dim):
    if not input.dtype.is_floating_point and name == "logcumsumexp":
        _lcse_meta(input, 0)
    return apply(OPS[name], input, dim=norm_dim(dim, input.ndim))


def cummax(input, dim):
    """(values, indices): the running maximum along `dim` and where it was taken (the later one of equal values;
    NaN propagates)."""
    return cummax_t(*_scan("cummax", input, dim))


def cummin(input, dim):
    """(values, indices): the running minimum along `dim`, as cummax."""
    return cummin_t(*_scan("cummin", input, dim))


def logcumsumexp(input, dim):
    """log(cumsum(exp(x))) along `dim`, computed without overflow or underflow."""
    return _scan("logcumsumexp", input, dim)
