"""Lookups and counts: searchsorted/bucketize, histc, bincount, mode.

searchsorted and histc are registry ops with no derivative (their outputs are positions and counts); mode selects an
element, so its gradient flows to the index it returns, as max(dim)'s does. bincount's length depends on the values
of its input: it runs eagerly only, like nonzero.
"""
import numpy as np

from .. import _dtype as D
from .registry import AVal, apply, defop, norm_dim, OPS
from .reduction import mode_t, _reduced_shape, _select_vjp


# ----------------------------------------------------------------------------- searchsorted / bucketize

def _searchsorted_np(seq, values, right, out_int32):
    """A binary search per value, in the comparisons PyTorch makes (a NaN value lands after every element)."""
    n = seq.shape[-1]
    v = np.asarray(values)
    rows = seq.reshape(-1, n) if seq.ndim > 1 else seq.reshape(1, n)
    vv = v.reshape(rows.shape[0], -1) if seq.ndim > 1 else v.reshape(1, -1)
    lo = np.zeros(vv.shape, np.int64)
    hi = np.full(vv.shape, n, np.int64)
    r = np.arange(rows.shape[0])[:, None]
    with np.errstate(invalid="ignore"):
        while (lo < hi).any():
            active = lo < hi
            mid = (lo + hi) // 2
            m = rows[r, np.minimum(mid, n - 1)] if n else np.zeros(vv.shape, seq.dtype)
            go_right = ~(m > vv) if right else ~(m >= vv)
            lo = np.where(active & go_right, mid + 1, lo)
            hi = np.where(active & ~go_right, mid, hi)
    return lo.reshape(v.shape).astype(np.int32 if out_int32 else np.int64)


def _searchsorted_meta(seq, values, right, out_int32):
    vshape = tuple(getattr(values, "shape", ()))
    if len(seq.shape) > 1 and tuple(seq.shape[:-1]) != vshape[:-1]:
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           f"dimensions of boundaries tensor and input value tensor must match, but we got "
                           f"boundaries tensor {list(seq.shape)} and input value tensor {list(vshape)}")
    return AVal(vshape, D.int32 if out_int32 else D.int64)


defop("searchsorted", _searchsorted_np, _searchsorted_meta, None, kind="other")


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Indices where `input`'s values would be inserted into the last dim of `sorted_sequence` to keep it sorted:
    the first such place (side='left'), or the last (right=True or side='right'). `sorter` sorts an unsorted
    sequence (argsort's indices)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    if sorted_sequence.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got "
                           "boundaries tensor [] and input value tensor " + str(list(getattr(input, "shape", []))))
    if sorter is not None:
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                               f"tensor {list(sorted_sequence.shape)} and got sorter tensor {list(sorter.shape)}")
        from .indexing import gather
        sorted_sequence = gather(sorted_sequence, -1, sorter)
    if not hasattr(input, "shape"):
        from ..creation import tensor
        input = tensor(input, dtype=sorted_sequence.dtype)
    _searchsorted_meta(sorted_sequence, input, bool(right), bool(out_int32))
    return apply(OPS["searchsorted"], sorted_sequence.detach(), input.detach(), right=bool(right),
                 out_int32=bool(out_int32))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among the 1-D `boundaries`: searchsorted(boundaries, input)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ----------------------------------------------------------------------------- histc

def _histc_np(x, bins, min, max):
    lo, hi = x.dtype.type(min), x.dtype.type(max)
    if lo == hi and x.size:
        lo, hi = x.min(), x.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo:g}, {hi:g}] is not finite")
    v = x.reshape(-1)
    v = v[(v >= lo) & (v <= hi)]
    pos = ((v - lo) * x.dtype.type(bins) / (hi - lo)).astype(np.int64)
    pos = np.minimum(pos, bins - 1)         # the right edge belongs to the last bin
    return np.bincount(pos, minlength=bins).astype(x.dtype)


defop("histc", _histc_np, lambda x, bins, min, max: AVal((bins,), x.dtype), None, kind="other")


def histc(input, bins=100, min=0, max=0):
    """A histogram of `bins` equal bins over [min, max] (both 0: over the data's own range); values outside are
    not counted."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"histc: not implemented for {input.dtype.name} tensors: convert the input with "
                                  f".float() or .double()")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    return apply(OPS["histc"], input.detach(), bins=int(bins), min=float(min), max=float(max))


# ----------------------------------------------------------------------------- bincount

def bincount(input, weights=None, minlength=0):
    """Counts of each non-negative integer in the 1-D `input` (the sums of `weights` at them, if given); its
    length, max(input) + 1 (at least minlength), depends on the values, so it runs eagerly only."""
    from .._tensor import Tensor
    input._concrete("bincount() (its result's length depends on the tensor's values)")
    if input.dtype.is_floating_point or input.dtype is D.bool_:
        raise NotImplementedError(f"bincount: not implemented for {input.dtype.name} tensors: it counts "
                                  f"non-negative integers (convert with .long())")
    x = input.numpy()
    if x.ndim != 1 or (x.size and x.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return Tensor._wrap(np.bincount(x, minlength=minlength).astype(np.int64))
    weights._concrete("bincount()")
    w = weights.detach().numpy()
    if w.ndim != 1 or w.shape[0] != x.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    dt = np.float32 if w.dtype == np.float32 else np.float64
    return Tensor._wrap(np.bincount(x, w.astype(np.float64), minlength=minlength).astype(dt))


# ----------------------------------------------------------------------------- mode

def _mode_np(x, dim, keepdim):
    """The most frequent value of each row along `dim` (the smallest of equally frequent ones) and the index of
    its last occurrence, as PyTorch's CPU mode."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    rows = np.moveaxis(x, dim, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    vals, idx = np.empty(flat.shape[0], x.dtype), np.empty(flat.shape[0], np.int64)
    for k, row in enumerate(flat):
        u, counts = np.unique(row, return_counts=True)
        vals[k] = u[np.argmax(counts)]
        idx[k] = np.flatnonzero(row == vals[k])[-1] if vals[k] == vals[k] else np.flatnonzero(row != row)[-1]
    shape = rows.shape[:-1]
    vals, idx = vals.reshape(shape), idx.reshape(shape)
    if keepdim:
        vals, idx = np.expand_dims(vals, dim), np.expand_dims(idx, dim)
    return vals, idx


def _mode_meta(x, dim, keepdim):
    s = _reduced_shape(x.shape, (dim,), keepdim) if x.ndim else ()
    return AVal(s, x.dtype), AVal(s, D.int64)


defop("mode", _mode_np, _mode_meta, _select_vjp, nout=2, saves="o", kind="other")


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along `dim` (the smallest of a tie) and where it last occurs."""
    d = norm_dim(dim, input.ndim)
    if input.ndim and input.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    return mode_t(*apply(OPS["mode"], input, dim=d, keepdim=bool(keepdim)))
