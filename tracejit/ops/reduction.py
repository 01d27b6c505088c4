"""Reductions, scans and sorting: registry entries plus their public functions."""
import collections
import math

import numpy as np

from .. import _dtype as D
from .registry import AVal, apply, call, defop, norm_dim, norm_dims, OPS
from .shape_ops import reshape, expand

values_indices = collections.namedtuple("values_indices", ["values", "indices"])
for _n in ("max", "min", "sort", "topk", "kthvalue", "median", "mode", "cummax", "cummin"):
    globals()[_n + "_t"] = collections.namedtuple(_n, ["values", "indices"])


def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _red_meta(dtype_fn):
    def meta(x, dims, keepdim, **kw):
        return AVal(_reduced_shape(x.shape, dims, keepdim), dtype_fn(x.dtype, kw))
    return meta


def _sum_dtype(dt, kw):
    if kw.get("dtype") is not None:
        return kw["dtype"]
    return dt if dt.is_floating_point else D.int64


def _float_dtype(dt, kw):
    if kw.get("dtype") is not None:
        return kw["dtype"]
    if not dt.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {dt.name.capitalize()}")
    return dt


def _var_dtype(dt, kw):
    if not dt.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    return dt


def _same(dt, kw):
    return dt


def _bool(dt, kw):
    return D.bool_


def _i64(dt, kw):
    return D.int64


def _expand_back(g, c):
    """Broadcast a reduced gradient back to the input's shape."""
    shape = c.shapes[0]
    dims, keepdim = c.attrs["dims"], c.attrs["keepdim"]
    if not keepdim and len(dims) < len(shape):     # a full reduction's 0-d gradient broadcasts as it is
        g = reshape(g, _reduced_shape(shape, dims, True))
    return expand(g, shape)


def count_like(mask, c):
    """How many positions of the reduced group share the value (ties), broadcast to the input shape."""
    return _expand_back(sum(mask, c.attrs["dims"], c.attrs["keepdim"]), c)


def _count(c):
    shape = c.shapes[0]
    return int(np.prod([shape[d] for d in c.attrs["dims"]])) if shape else 1


# numpy dtype -> the numpy dtype sum() accumulates and returns in (_sum_dtype, looked up instead of called)
_SUM_NP = {d.np: _sum_dtype(d, {}).np for d in D.ALL}


def _np_sum(x, dims, keepdim, dtype=None):
    dt = _SUM_NP[x.dtype] if dtype is None else dtype.np
    # np.sum minus its Python wrapper (~1 us); positional: numpy parses keywords slower
    return np.add.reduce(x, dims, dt, None, keepdim)


def _np_mean(x, dims, keepdim, dtype=None):
    return np.mean(x, axis=dims, keepdims=keepdim, dtype=dtype.np if dtype else None)


def _minmax_vjp(c, g):
    # amax/amin: ties share the gradient evenly (PyTorch's rule)
    x = c.inputs[0]
    out = _expand_back(c.out, c)
    mask = (x == out)
    return (_expand_back(g, c) * mask / count_like(mask, c),)


def _red_grad_name(full, partial):
    """PyTorch's node name for a reduction: one formula for all dims without keepdim (x.sum()), one with dims"""
    def name(attrs, args):
        return full if not attrs["keepdim"] and len(attrs["dims"]) == args[0].ndim else partial
    return name


_SUM = defop("sum", _np_sum, _red_meta(_sum_dtype), lambda c, g: (_expand_back(g, c),), kind="reduction", saves="",
             grad_name=_red_grad_name("SumBackward0", "SumBackward1"), row_reduce={"dims", "keepdim", "dtype"})
defop("mean", _np_mean, _red_meta(_float_dtype), lambda c, g: (_expand_back(g, c) / _count(c),), kind="reduction",
      saves="", grad_name=_red_grad_name("MeanBackward0", "MeanBackward1"),
      row_reduce={"dims", "keepdim", "dtype"})
defop("amax", lambda x, dims, keepdim: np.amax(x, axis=dims, keepdims=keepdim), _red_meta(_same), _minmax_vjp,
      kind="reduction", saves="io", grad_name=_red_grad_name("MaxBackward1", "AmaxBackward0"),   # x.max(): Max
      row_reduce={"dims", "keepdim"})
defop("amin", lambda x, dims, keepdim: np.amin(x, axis=dims, keepdims=keepdim), _red_meta(_same), _minmax_vjp,
      kind="reduction", saves="io", grad_name=_red_grad_name("MinBackward1", "AminBackward0"),
      row_reduce={"dims", "keepdim"})
defop("all", lambda x, dims, keepdim: np.all(x, axis=dims, keepdims=keepdim), _red_meta(_bool), None,
      kind="reduction")
defop("any", lambda x, dims, keepdim: np.any(x, axis=dims, keepdims=keepdim), _red_meta(_bool), None,
      kind="reduction")


def _prod_vjp(c, g):
    # d prod / d x_i = product of the others (exclusive cumprods from both sides: exact with zeros)
    from .shape_ops import flatten, reshape, flip, movedim
    x = c.inputs[0]
    dims = c.attrs["dims"]
    if len(dims) != 1:
        shape = x.shape
        xf = flatten(x)
        left = cumprod(cat_one(xf), 0)[:-1]
        right = flip(cumprod(cat_one(flip(xf, (0,))), 0)[:-1], (0,))
        return (reshape(left * right, shape) * _expand_back(g, c),)
    d = dims[0]
    xm = movedim(x, d, -1)
    left = cumprod(cat_one(xm), -1)[..., :-1]
    right = flip(cumprod(cat_one(flip(xm, (-1,))), -1)[..., :-1], (-1,))
    return (movedim(left * right, -1, d) * _expand_back(g, c),)


def cat_one(x):
    from .shape_ops import cat
    from ..creation import ones
    return cat([ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype), x], -1)


defop("prod", lambda x, dims, keepdim, dtype=None: np.prod(x, axis=dims, keepdims=keepdim,
                                                            dtype=(dtype or _sum_dtype(D._FROM_NP[x.dtype], {})).np),
      _red_meta(_sum_dtype), _prod_vjp, kind="reduction", saves="i")


def _var_np(x, dims, keepdim, correction):
    n = int(np.prod([x.shape[d] for d in dims])) if x.ndim else 1
    m = np.mean(x, axis=dims, keepdims=True)
    d = x - m
    return (np.sum(d * d, axis=dims, keepdims=keepdim) / x.dtype.type(n - correction if n > correction else 0)).astype(x.dtype)


def _var_vjp(c, g):
    x = c.inputs[0]
    n = _count(c)
    m = mean(x, c.attrs["dims"], True)
    dof = n - c.attrs["correction"]  # as the forward: no degrees of freedom (dof <= 0) give inf (PyTorch)
    return (_expand_back(g, c) * (2.0 / dof if dof > 0 else math.inf) * (x - m),)


def _std_vjp(c, g):
    x = c.inputs[0]
    n = _count(c)
    m = mean(x, c.attrs["dims"], True)
    gs = where(c.out == 0, 0.0, g / c.out)  # PyTorch: zero gradient where the std is 0
    return (_expand_back(gs, c) * (x - m) / (n - c.attrs["correction"]),)


def _var_decompose(x, dims, keepdim, correction):
    n = int(np.prod([x.shape[d] for d in dims]))
    d = call("sub", x, call("mean", x, dims=dims, keepdim=True))
    s = call("sum", call("mul", d, d), dims=dims, keepdim=keepdim)
    return call("cast", call("div", s, float(n - correction if n > correction else 0)), dtype=x.dtype)


defop("var", _var_np, _red_meta(_var_dtype), _var_vjp, kind="reduction", saves="i",
      row_reduce={"dims", "keepdim", "correction"}, decompose=_var_decompose)
defop("std", lambda x, dims, keepdim, correction: np.sqrt(_var_np(x, dims, keepdim, correction)),
      _red_meta(_var_dtype), _std_vjp, kind="reduction", saves="io",
      decompose=lambda x, **attrs: call("sqrt", call("var", x, **attrs)))


def _lse_np(x, dims, keepdim):
    if x.ndim == 0:
        return x.copy()
    m = np.amax(x, axis=dims, keepdims=True, initial=-np.inf)  # initial: empty reductions give -inf
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    out = np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True)) + m
    return out if keepdim else np.squeeze(out, axis=dims)


def _lse_decompose(x, dims, keepdim):
    if x.ndim == 0:
        return call("clone", x)
    if x.numel():
        m = call("amax", x, dims=dims, keepdim=True)
        m = call("where", call("isfinite", m), m, 0.0)
    else:           # an empty reduction: shifted by 0
        m = call("cast", call("mul", call("sum", x, dims=dims, keepdim=True), 0), dtype=x.dtype)
    out = call("add", call("log", call("sum", call("exp", call("sub", x, m)), dims=dims, keepdim=True)), m)
    return out if keepdim else call("reshape", out, shape=_reduced_shape(x.shape, dims, False))


defop("logsumexp", _lse_np, _red_meta(_float_dtype),
      lambda c, g: (_expand_back(g, c) * exp(c.inputs[0] - _expand_back(c.out, c)),),
      kind="reduction", saves="io", row_reduce={"dims", "keepdim"}, row_exp=True, decompose=_lse_decompose)


def _vnorm_np(x, dims, keepdim, ord):
    a = np.abs(x)
    if ord == math.inf:
        return np.amax(a, axis=dims, keepdims=keepdim)
    if ord == -math.inf:
        return np.amin(a, axis=dims, keepdims=keepdim)
    if ord == 0:
        return np.sum(a != 0, axis=dims, keepdims=keepdim).astype(x.dtype)
    if ord == 1:
        return np.sum(a, axis=dims, keepdims=keepdim)
    if ord == 2:
        return np.sqrt(np.sum(a * a, axis=dims, keepdims=keepdim))
    return np.power(np.sum(np.power(a, ord), axis=dims, keepdims=keepdim), 1.0 / ord).astype(x.dtype)


def _vnorm_vjp(c, g):
    x = c.inputs[0]
    p = c.attrs["ord"]
    gx = _expand_back(g, c)
    if p == 0:
        return (x * 0,)
    if p == 1:
        return (gx * sign(x),)
    out = _expand_back(c.out, c)
    if p in (math.inf, -math.inf):
        mask = abs(x) == out
        return (gx * sign(x) * mask / count_like(mask, c),)
    if p == 2:
        return (where(out == 0, 0.0, gx * x / out),)
    return (where(out == 0, 0.0, gx * sign(x) * pow(abs(x), p - 1) / pow(out, p - 1)),)


def _vnorm_decompose(x, dims, keepdim, ord):
    a = call("abs", x)
    red = dict(dims=dims, keepdim=keepdim)
    if ord == math.inf:
        return call("amax", a, **red)
    if ord == -math.inf:
        return call("amin", a, **red)
    if ord == 0:
        return call("cast", call("sum", call("ne", a, 0), **red), dtype=x.dtype)
    if ord == 1:
        return call("sum", a, **red)
    if ord == 2:
        return call("sqrt", call("sum", call("mul", a, a), **red))
    return call("pow", call("sum", call("pow", a, float(ord)), **red), 1.0 / ord)


defop("vector_norm", _vnorm_np, _red_meta(_float_dtype), _vnorm_vjp, kind="reduction", saves="io",
      grad_name="LinalgVectorNormBackward0", decompose=_vnorm_decompose)


# ----------------------------------------------------------------------------- index-producing reductions

def _arg_meta(x, dim, keepdim):
    if dim is None:
        return AVal((1,) * x.ndim if keepdim else (), D.int64)
    return AVal(_reduced_shape(x.shape, (dim,), keepdim), D.int64)


def _argmax_np(fn):
    def impl(x, dim, keepdim):
        if dim is None:
            r = fn(x.reshape(-1))
            return np.asarray(r, np.int64).reshape((1,) * x.ndim if keepdim else ())
        if x.ndim == 0:
            return np.zeros((), np.int64)
        return fn(x, axis=dim, keepdims=keepdim).astype(np.int64)
    return impl


def _nan_first(fn):
    # torch.argmax returns the index of the first NaN if any (NaN is the maximum)
    def f(x, axis=None, keepdims=False):
        r = fn(x, axis=axis, keepdims=keepdims) if axis is not None else fn(x)
        if x.dtype.kind == "f":
            nan = np.isnan(x)
            if nan.any():
                first = np.argmax(nan, axis=axis, keepdims=keepdims) if axis is not None else np.argmax(nan)
                r = np.where(np.any(nan, axis=axis, keepdims=keepdims) if axis is not None else True, first, r)
        return r
    return f


defop("argmax", _argmax_np(_nan_first(np.argmax)), _arg_meta, None, kind="reduction")
defop("argmin", _argmax_np(_nan_first(np.argmin)), _arg_meta, None, kind="reduction")


def _maxdim_np(fn, argfn):
    def impl(x, dim, keepdim):
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        idx = _nan_first(argfn)(x, axis=dim, keepdims=True)
        vals = np.take_along_axis(x, idx, axis=dim)
        if not keepdim:
            vals, idx = np.squeeze(vals, dim), np.squeeze(idx, dim)
        return vals, idx.astype(np.int64)
    return impl


def _maxdim_meta(x, dim, keepdim):
    s = _reduced_shape(x.shape, (dim,), keepdim) if x.ndim else ()
    return AVal(s, x.dtype), AVal(s, D.int64)


def _select_vjp(c, g, gi=None):
    """Gradient of (values, indices) = f(x, dim): g flows to the selected positions only."""
    from .indexing import scatter_add_
    idx = c.out[1]
    dim = c.attrs["dim"]
    if c.shapes[0] == ():
        return (g,)
    if not c.attrs.get("keepdim", True):
        g, idx = g.unsqueeze(dim), idx.unsqueeze(dim)
    from ..creation import zeros
    return (scatter_add_(zeros(c.shapes[0], dtype=g.dtype, device=g.device), dim, idx, g),)


defop("max_dim", _maxdim_np(np.amax, np.argmax), _maxdim_meta, _select_vjp, nout=2, saves="o",
      grad_name="MaxBackward0", kind="reduction")
defop("min_dim", _maxdim_np(np.amin, np.argmin), _maxdim_meta, _select_vjp, nout=2, saves="o",
      grad_name="MinBackward0", kind="reduction")


def _sort_np(x, dim, descending, stable=False):
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    key = x
    if descending:
        # stable descending that keeps NaN first (NaN is the largest, as in PyTorch)
        if x.dtype.kind == "f":
            key = np.where(np.isnan(x), -np.inf, -x)
            idx = np.argsort(key, axis=dim, kind="stable")
            nanfirst = np.argsort(~np.isnan(np.take_along_axis(x, idx, dim)), axis=dim, kind="stable")
            idx = np.take_along_axis(idx, nanfirst, dim)
        else:
            # (~ reverses the order of every integer and bool dtype; -x overflows at a signed dtype's minimum)
            idx = np.argsort(~key, axis=dim, kind="stable")
    else:
        idx = np.argsort(key, axis=dim, kind="stable")
    return np.take_along_axis(x, idx, dim), idx.astype(np.int64)


def _sort_meta(x, dim, descending, stable=False):
    return AVal(x.shape, x.dtype), AVal(x.shape, D.int64)


defop("sort", _sort_np, _sort_meta, _select_vjp, nout=2, saves="o", kind="other")


def _topk_np(x, k, dim, largest, sorted=True):
    v, i = _sort_np(x, dim, largest)
    sl = [slice(None)] * x.ndim
    sl[dim] = slice(0, k)
    return v[tuple(sl)], i[tuple(sl)]


def _topk_meta(x, k, dim, largest, sorted=True):
    s = list(x.shape)
    if x.ndim:
        if k > s[dim]:
            raise RuntimeError(f"selected index k out of range (k={k}, size {s[dim]} at dim {dim})")
        s[dim] = k
    return AVal(s, x.dtype), AVal(s, D.int64)


defop("topk", _topk_np, _topk_meta, _select_vjp, nout=2, saves="o", kind="other")


def _cumsum_np(x, dim, dtype=None):
    dt = dtype or _sum_dtype(D._FROM_NP[x.dtype], {})
    return np.cumsum(x, axis=dim, dtype=dt.np) if x.ndim else x.astype(dt.np)


def _cumsum_vjp(c, g):
    from .shape_ops import flip
    d = c.attrs["dim"]
    if not c.shapes[0]:
        return (g,)
    return (flip(cumsum(flip(g, (d,)), d), (d,)),)


def _cumprod_vjp(c, g):
    # grad_i = sum_{j>=i} g_j * prod_{k<=j, k!=i} x_k, exact with zeros and O(n): before the first zero
    # of a row it is revcumsum(g * out)_i / x_i; at the first zero z it is revcumsum(g * P)_z with P the
    # cumprod of x where x_z is replaced by 1; after z every term holds x_z = 0.
    from .shape_ops import flip
    x = c.inputs[0]
    d = c.attrs["dim"]
    if not c.shapes[0]:
        return (g,)

    def revcumsum(v):
        return flip(cumsum(flip(v, (d,)), d), (d,))
    zero = x == 0
    nz = cumsum(zero, d)
    before = nz == 0
    first = logical_and(zero, nz == 1)
    fast = revcumsum(g * c.out) / where(before, x, 1.0)
    at_zero = revcumsum(g * cumprod(where(first, 1.0, x), d))
    return (where(before, fast, where(first, at_zero, 0.0)),)


def _scan_meta(x, dim, dtype=None):
    return AVal(x.shape, dtype or _sum_dtype(x.dtype, {}))


defop("cumsum", _cumsum_np, _scan_meta, _cumsum_vjp, saves="")
def _cumprod_np(x, dim, dtype=None):
    dt = dtype or _sum_dtype(D._FROM_NP[x.dtype], {})
    return np.cumprod(x, axis=dim, dtype=dt.np) if x.ndim else x.astype(dt.np)    # (a 0-d one too: its dtype)


defop("cumprod", _cumprod_np, _scan_meta, _cumprod_vjp, saves="io")


# ----------------------------------------------------------------------------- public API

def _dims(input, dim):
    if dim is None:         # the common call, norm_dims(None, ndim) without its calls
        return tuple(range(input._data.ndim if input._data is not None else len(input._value.shape)))
    if isinstance(dim, (tuple, list)) and not dim:
        dim = None  # PyTorch: an empty dim list reduces over every dim
    return norm_dims(dim, input.ndim)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is None:
        return apply(_SUM, input, dims=_dims(input, dim), keepdim=keepdim)
    return apply(_SUM, input, dims=_dims(input, dim), keepdim=keepdim, dtype=D.to_dtype(dtype))


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    return sum(where(isnan(input), 0.0, input), dim, keepdim, dtype=dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    attrs = {"dims": _dims(input, dim), "keepdim": keepdim}
    if dtype is not None:
        attrs["dtype"] = D.to_dtype(dtype)
    _float_dtype(input.dtype, attrs)  # eager runs no shape rule: raise its error here
    return apply(OPS["mean"], input, **attrs)


def nanmean(input, dim=None, keepdim=False):
    m = logical_not(isnan(input))
    return nansum(input, dim, keepdim) / sum(m, dim, keepdim)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    attrs = {"dims": _dims(input, dim), "keepdim": keepdim}
    if dtype is not None:
        attrs["dtype"] = D.to_dtype(dtype)
    return apply(OPS["prod"], input, **attrs)


def amax(input, dim=(), keepdim=False):
    _nonempty(input, "amax", None if dim == () else dim)
    return apply(OPS["amax"], input, dims=_dims(input, None if dim == () else dim), keepdim=keepdim)


def amin(input, dim=(), keepdim=False):
    _nonempty(input, "amin", None if dim == () else dim)
    return apply(OPS["amin"], input, dims=_dims(input, None if dim == () else dim), keepdim=keepdim)


def _nonempty(input, name, dim=None):
    """PyTorch's checks of a max/min-like reduction of an empty tensor (shapes only: traced the same): a reduced
    dim of size 0 has no identity to give; reducing the other dims of an empty tensor gives an empty result."""
    if input.numel() != 0:
        return
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                           f"Specify the reduction dim with the 'dim' argument.")
    shape = tuple(input.shape)
    for d in (dim if isinstance(dim, (tuple, list)) else (dim,)):
        d = norm_dim(d, len(shape))
        if shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _max_like(name, opname, binop):
    def f(input, dim=None, keepdim=False):      # (out=: tracejit/_out.py)
        from .._tensor import Tensor
        if isinstance(dim, Tensor):
            return binop(input, dim)
        if dim is None:
            _nonempty(input, name)
            return apply(OPS[opname], input, dims=_dims(input, None), keepdim=False)
        d = norm_dim(dim, input.ndim)
        _nonempty(input, name, d)
        v, i = apply(OPS[name + "_dim"], input, dim=d, keepdim=keepdim)
        return globals()[name + "_t"](v, i)
    f.__name__ = name
    return f


def argmax(input, dim=None, keepdim=False):
    return apply(OPS["argmax"], input, dim=None if dim is None else norm_dim(dim, input.ndim), keepdim=keepdim)


def argmin(input, dim=None, keepdim=False):
    return apply(OPS["argmin"], input, dim=None if dim is None else norm_dim(dim, input.ndim), keepdim=keepdim)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _var_dtype(input.dtype, {})
    return apply(OPS["var"], input, dims=_dims(input, dim), keepdim=keepdim, correction=_correction(unbiased, correction))


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _var_dtype(input.dtype, {})
    return apply(OPS["std"], input, dims=_dims(input, dim), keepdim=keepdim, correction=_correction(unbiased, correction))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def logsumexp(input, dim=None, keepdim=False):
    if not input.dtype.is_floating_point:
        input = input.to(D.get_default_dtype())
    return apply(OPS["logsumexp"], input, dims=_dims(input, dim), keepdim=keepdim)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: a vector p-norm ('fro' and None: 2) over dim (all elements when None); p 'nuc' (or another
    string) is linalg.matrix_norm's over the 2-tuple dim (all dims when None: an error unless the input is 2-D)."""
    if isinstance(p, str) and p != "fro":
        from ..linalg import matrix_norm
        return matrix_norm(input, p, tuple(range(input.ndim)) if dim is None else dim, keepdim, dtype=dtype)
    if p == "fro" or p is None:
        p = 2
    return vector_norm(input, p, dim, keepdim)


def vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point tensor as input. Got {input.dtype.name}")
    return apply(OPS["vector_norm"], input, dims=_dims(input, dim), keepdim=keepdim, ord=float(ord))


def all(input, dim=None, keepdim=False):
    return apply(OPS["all"], input, dims=_dims(input, dim), keepdim=keepdim)


def any(input, dim=None, keepdim=False):
    return apply(OPS["any"], input, dims=_dims(input, dim), keepdim=keepdim)


def count_nonzero(input, dim=None):
    return sum(input != 0, dim)


def cumsum(input, dim, *, dtype=None):
    return apply(OPS["cumsum"], input, dim=norm_dim(dim, input.ndim), **({"dtype": D.to_dtype(dtype)} if dtype else {}))


def cumprod(input, dim, *, dtype=None):
    return apply(OPS["cumprod"], input, dim=norm_dim(dim, input.ndim), **({"dtype": D.to_dtype(dtype)} if dtype else {}))


def sort(input, dim=-1, descending=False, stable=False):
    v, i = apply(OPS["sort"], input, dim=norm_dim(dim, input.ndim), descending=descending)
    return sort_t(v, i)  # noqa: F821


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable).indices


def topk(input, k, dim=-1, largest=True, sorted=True):
    _topk_meta(input, int(k), norm_dim(dim, input.ndim), largest)  # eager runs no shape rule: check k here
    v, i = apply(OPS["topk"], input, k=int(k), dim=norm_dim(dim, input.ndim), largest=largest)
    return topk_t(v, i)  # noqa: F821


def msort(input):
    return sort(input, 0).values


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest value along `dim` and its index (through sort, so its gradient is sort's)."""
    d = norm_dim(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    v, i = sort(input.reshape(1) if input.ndim == 0 else input, d)
    v, i = v.narrow(d, k - 1, 1), i.narrow(d, k - 1, 1)
    if not keepdim or input.ndim == 0:
        v, i = v.squeeze(d), i.squeeze(d)
    return kthvalue_t(v, i)  # noqa: F821


def median(input, dim=None, keepdim=False):
    """The lower median (PyTorch's: of an even count, the smaller middle value); without dim, of all values."""
    if dim is None:
        flat = input.reshape(-1)
        if flat.shape[0] == 0:
            from ..creation import full
            return full((), math.nan, dtype=input.dtype)
        return kthvalue(flat, (flat.shape[0] + 1) // 2, 0).values
    d = norm_dim(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    v, i = kthvalue(input, (n + 1) // 2, d, keepdim)
    return median_t(v, i)  # noqa: F821


aminmax_t = collections.namedtuple("aminmax", ["min", "max"])


def aminmax(input, *, dim=None, keepdim=False):
    if dim is None:
        return aminmax_t(amin(input, (), keepdim), amax(input, (), keepdim))
    return aminmax_t(amin(input, dim, keepdim), amax(input, dim, keepdim))


from .elementwise import exp, where, sign, pow, isnan, logical_not, logical_and, maximum, minimum  # noqa: E402

max = _max_like("max", "amax", maximum)
min = _max_like("min", "amin", minimum)
