"""PyTorch functions written with other tracejit ops: eager, tracing and gradients come from those ops.

Windows and repeats (unfold, repeat_interleave, diff, kron, rot90, block_diag, cartesian_prod, combinations,
tril_indices/triu_indices), elementwise functions (nan_to_num, heaviside, logaddexp, logaddexp2, hypot, copysign),
quantiles and unique_consecutive. Index arrays that depend only on shapes are computed here in numpy and enter the
graph as constants. Where an output's shape depends on values (tensor repeats, unique_consecutive) the function
runs eagerly only and says so when traced.
"""
import builtins
import itertools
import math

import numpy as np

from .. import _dtype as D
from .registry import norm_dim
from . import elementwise as E, reduction as R, shape_ops as S
from .indexing import gather, getitem

__all__ = ["repeat_interleave", "diff", "kron", "rot90", "block_diag", "cartesian_prod", "combinations",
           "tril_indices", "triu_indices", "nan_to_num", "heaviside", "logaddexp", "logaddexp2", "hypot", "copysign",
           "quantile", "nanquantile", "unique_consecutive"]


def _const(array):
    from ..creation import tensor
    return tensor(array)


# ----------------------------------------------------------------------------- windows and repeats

def unfold(input, dimension, size, step):
    """Tensor.unfold: every window of `size` elements along `dimension`, `step` apart, as a new last dim (a copy
    made by indexing, not a view)."""
    x = input.reshape(1) if input.ndim == 0 else input
    d = norm_dim(dimension, x.ndim)
    n = x.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    starts = np.arange((n - size) // step + 1) * step
    windows = S.movedim(x, d, -1)[..., _const(starts[:, None] + np.arange(size))]
    out = S.movedim(windows, -2, d)
    return out.reshape(size) if input.ndim == 0 else out


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along `dim`) repeated `repeats` times in place; `repeats` an int or one count per
    element. With one tensor argument: arange(len(input)) with input's counts. Tensor counts make the output's
    length depend on values: eager only."""
    from .._tensor import Tensor
    if repeats is None:
        return repeat_interleave(_const(np.arange(input.shape[0])), input, 0, output_size=output_size)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else norm_dim(dim, x.ndim)
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim <= 1:
        repeats._concrete("repeat_interleave() with tensor repeats (its output's shape depends on them)")
        repeats = int(repeats.reshape(()).item())
    if isinstance(repeats, Tensor):
        repeats._concrete("repeat_interleave() with tensor repeats (its output's shape depends on them)")
        r = repeats.numpy()
        if r.ndim != 1 or r.shape[0] != x.shape[d]:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{r.shape[0] if r.ndim else 1} and input.size({d}) = {x.shape[d]}")
        if (r < 0).any():
            raise RuntimeError("repeats can not be negative")
        if output_size is not None and output_size != r.sum():
            raise RuntimeError(f"allocated size does not match required size: output_size={output_size}, but the "
                               f"repeats add up to {r.sum()}")
        return getitem(x, (slice(None),) * d + (_const(np.repeat(np.arange(r.shape[0]), r)),))
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    if x.ndim == 0:
        x = x.reshape(1)
    shape = list(x.shape)
    expanded = S.unsqueeze(x, d + 1).expand(*shape[:d + 1], repeats, *shape[d + 1:])
    return expanded.reshape(*shape[:d], shape[d] * repeats, *shape[d + 1:])


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along `dim` (bool: whether neighbours differ), after concatenating `prepend`
    before and `append` after the input."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = norm_dim(dim, input.ndim)
    parts = []
    for extra in (prepend, input, append):
        if extra is None:
            continue
        if extra is not input and extra.ndim != input.ndim:
            raise RuntimeError(f"diff expects prepend or append to be the same dimension as input (input has "
                               f"{input.ndim} dims, the other {extra.ndim})")
        parts.append(extra)
    if len(parts) > 1:
        dt = parts[0].dtype
        for p in parts[1:]:
            dt = D.promote_types(dt, p.dtype)
        parts = [p if p.dtype is dt else p.to(dt) for p in parts]
    x = S.cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = S.narrow(x, d, 1, m - 1), S.narrow(x, d, 0, m - 1)
        x = E.ne(hi, lo) if x.dtype is D.bool_ else E.sub(hi, lo)
    return x


def kron(input, other):
    """The Kronecker product: each element of `input` times the whole of `other`, laid out block by block."""
    nd = builtins.max(input.ndim, other.ndim)
    a = (1,) * (nd - input.ndim) + tuple(input.shape)
    b = (1,) * (nd - other.ndim) + tuple(other.shape)
    pa = input.reshape(*[v for s in a for v in (s, 1)]) if nd else input
    pb = other.reshape(*[v for s in b for v in (1, s)]) if nd else other
    return E.mul(pa, pb).reshape(*[x * y for x, y in zip(a, b)])


def rot90(input, k=1, dims=(0, 1)):
    """Rotation by 90 degrees k times in the plane of `dims`, from the first dim towards the second."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    if dims[0] == dims[1] or builtins.abs(dims[0] - dims[1]) == input.ndim:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    d0, d1 = norm_dim(dims[0], input.ndim), norm_dim(dims[1], input.ndim)
    k %= 4
    if k == 1:
        return S.transpose(S.flip(input, (d1,)), d0, d1)
    if k == 2:
        return S.flip(input, (d0, d1))
    if k == 3:
        return S.transpose(S.flip(input, (d0,)), d0, d1)
    return S.clone(input)


def block_diag(*tensors):
    """The tensors (each at most 2-D: a scalar is 1x1, a vector one row) along the diagonal of a zero matrix."""
    from ..creation import zeros
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
        mats.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t)
    if not mats:
        return zeros(1, 0)
    dt = mats[0].dtype
    for m in mats[1:]:
        dt = D.promote_types(dt, m.dtype)
    cols = builtins.sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        pieces = [zeros(r, left, dtype=dt), m.to(dt), zeros(r, cols - left - c, dtype=dt)]
        rows.append(S.cat(pieces, 1))
        left += c
    return S.cat(rows, 0)


def _check_vector(t):
    if t.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


def cartesian_prod(*tensors):
    """Every tuple of one element from each 1-D tensor, in row-major order, one tuple per row."""
    from .. import meshgrid
    for t in tensors:
        _check_vector(t)
    if len(tensors) == 1:
        return tensors[0]
    if any(t.dtype is not tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    return S.stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of a 1-D tensor's elements (as itertools.combinations orders them), one per row."""
    _check_vector(input)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input[:0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    return getitem(input, _const(idx))


def _tri_indices(name, np_fn, row, col, offset, dtype):
    from .._tensor import Tensor
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dtype = D.to_dtype(dtype)
    if dtype.is_floating_point or dtype is D.bool_:
        raise NotImplementedError(f"{name}: not implemented for {dtype.name}: give an integer dtype (int64, the "
                                  f"default, or int32)")
    return Tensor._wrap(np.stack(np_fn(row, offset, col)).astype(dtype.np).reshape(2, -1))


def tril_indices(row, col, offset=0, *, dtype=D.int64, device="cpu", layout=None):
    """The (row, col) coordinates of the lower triangle of a row x col matrix (offset: which diagonal bounds it),
    as a 2 x N tensor in row-major order."""
    return _tri_indices("tril_indices", np.tril_indices, row, col, offset, dtype)


def triu_indices(row, col, offset=0, *, dtype=D.int64, device="cpu", layout=None):
    """The (row, col) coordinates of the upper triangle, as tril_indices."""
    return _tri_indices("triu_indices", np.triu_indices, row, col, offset, dtype)


# ----------------------------------------------------------------------------- elementwise

def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default 0 and the dtype's largest and
    lowest finite values); other dtypes are copied."""
    if not input.dtype.is_floating_point:
        return S.clone(input)
    info = np.finfo(input.dtype.np)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = E.where(E.isnan(input), nan, E.where(input == math.inf, posinf, E.where(input == -math.inf, neginf, input)))
    return out if out.dtype is input.dtype else out.to(input.dtype)


def _need_float(name, *xs):
    for x in xs:
        dt = getattr(x, "dtype", None)
        if isinstance(dt, D.dtype) and not dt.is_floating_point:
            raise NotImplementedError(f"{name}: not implemented for {dt.name} tensors: convert them with .float() "
                                      f"or .double()")


def heaviside(input, values):
    """The step function: 0 below zero, 1 above, `values` at zero. Both tensors have one dtype, as in PyTorch."""
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return E.where(input == 0, values, (input > 0).to(input.dtype))


def _logaddexp(input, other, exp_fn, scale):
    """max + log1p(b^-|a - b|) / ln b: exact where the terms differ by far; equal infinities give themselves."""
    _need_float("logaddexp", input, other)
    hi = E.maximum(input, other)
    tail = E.log1p(exp_fn(-E.abs(input - other)))
    out = hi + (tail if scale == 1 else tail * scale)
    return E.where(E.logical_and(input == other, E.isinf(input)), input, out)


def logaddexp(input, other):
    """log(exp(input) + exp(other)) without overflow."""
    return _logaddexp(input, other, E.exp, 1)


def logaddexp2(input, other):
    """log2(2^input + 2^other) without overflow."""
    return _logaddexp(input, other, E.exp2, 1 / math.log(2.0))


def hypot(input, other):
    """sqrt(input^2 + other^2), scaled by the larger magnitude so that squares of large values do not overflow;
    the scale is a constant of the derivative, which is x / hypot."""
    _need_float("hypot", input, other)
    m = E.maximum(E.abs(input), E.abs(other)).detach()
    m = E.where(E.logical_or(m == 0, E.isinf(m)), 1.0, m)
    out = m * E.sqrt(E.square(input / m) + E.square(other / m))
    return E.where(E.logical_or(E.isinf(input), E.isinf(other)), math.inf, out)


def copysign(input, other):
    """|input| with the sign (bit) of `other`, in a floating dtype (integers give the default float)."""
    from .._tensor import Tensor
    dt = D.result_type(input, other)
    if not dt.is_floating_point:
        dt = D.get_default_dtype()
    if isinstance(other, Tensor):
        sign = E.where(E.signbit(other.to(dt) if not other.dtype.is_floating_point else other), -1.0, 1.0)
    else:
        sign = math.copysign(1.0, other)
    out = E.abs(input.to(dt)) * sign
    return out if out.dtype is dt else out.to(dt)


# ----------------------------------------------------------------------------- quantiles

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    from .._tensor import Tensor
    if not input.dtype.is_floating_point:
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if q._data is not None and q.numel() and not ((q._data >= 0) & (q._data <= 1)).all():
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        qs, scalar = q.reshape(-1), q.ndim == 0      # (q gets a gradient too, through the weights)
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        qs, scalar = _const(np.array([q], input.dtype.np)), True
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    x = input.reshape(-1) if dim is None else (input.reshape(1) if input.ndim == 0 else input)
    d = 0 if dim is None else norm_dim(dim, x.ndim)
    rows = S.movedim(R.sort(x, d).values, d, -1)                # NaN sorts last
    n = rows.shape[-1]
    nans = E.isnan(rows)
    if ignore_nan:
        count = R.sum(E.logical_not(nans), -1, keepdim=True).to(input.dtype)
        rank = E.clamp_min(qs * (count - 1), 0.0)
    else:
        rank = E.where(R.any(nans, -1, keepdim=True), float(n - 1), qs * (n - 1))
    lo, hi = E.floor(rank), E.ceil(rank)
    pick = {"lower": lo, "higher": hi, "nearest": E.round(rank)}.get(interpolation)
    if pick is not None:
        out = gather(rows, -1, pick.long())
    else:
        below, above = gather(rows, -1, lo.long()), gather(rows, -1, hi.long())
        out = E.lerp(below, above, 0.5 if interpolation == "midpoint" else rank - lo)
    out = S.movedim(out, -1, 0)                                 # (len(q), the other dims...)
    if keepdim:
        out = out.reshape(out.shape[0], *([1] * input.ndim)) if dim is None else S.unsqueeze(out, d + 1)
    return out[0] if scalar else out


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along `dim` (all values when None), interpolating between the neighbouring order
    statistics as `interpolation` says; a NaN in a row makes its quantiles NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaNs (a row of NaNs only gives NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


# ----------------------------------------------------------------------------- unique_consecutive

def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The input with each run of equal consecutive elements (or slices along `dim`) kept once; optionally the
    run each element belongs to and the runs' lengths. Its length depends on values: eager only."""
    input._concrete("unique_consecutive() (its result's shape depends on the tensor's values)")
    x = input.detach().numpy()
    if dim is None:
        flat = x.reshape(-1)
        starts = np.ones(flat.shape[0], bool)
        starts[1:] = flat[1:] != flat[:-1]
        out = getitem(input.reshape(-1), _const(np.flatnonzero(starts)))
        inv_shape = x.shape
    else:
        d = norm_dim(dim, input.ndim)
        rows = np.moveaxis(x, d, 0).reshape(x.shape[d], -1) if x.ndim else x.reshape(1, 1)
        starts = np.ones(rows.shape[0], bool)
        starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
        out = getitem(input, (slice(None),) * d + (_const(np.flatnonzero(starts)),))
        inv_shape = (rows.shape[0],)
    res = [out]
    if return_inverse:
        res.append(_const((np.cumsum(starts) - 1).reshape(inv_shape).astype(np.int64)))
    if return_counts:
        res.append(_const(np.diff(np.append(np.flatnonzero(starts), starts.shape[0])).astype(np.int64)))
    return res[0] if len(res) == 1 else tuple(res)
