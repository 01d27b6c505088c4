"""Indexing: getitem (basic views and advanced copies), index_put (setitem, index_add), gather/scatter."""
import numpy as np

from .. import _dtype as D
from .registry import AVal, apply, defop, norm_dim, OPS, WordedIndexError


class _T:
    """Placeholder in an index spec for the k-th index tensor (an op input)."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __repr__(self):
        return f"%i{self.k}"

    def __eq__(self, o):
        return isinstance(o, _T) and o.k == self.k

    def __hash__(self):
        return hash(("_T", self.k))


def _resolve(spec, idx):
    return tuple(idx[s.k] if isinstance(s, _T) else s for s in spec)


def _dummy(aval):
    """A zero-strided stand-in array of an abstract shape: lets numpy compute indexing shapes for free."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, aval.dtype.np), tuple(aval.shape), (0,) * len(aval.shape))


def _index_meta(x, *idx, spec):
    try:
        shape = _dummy(x)[_resolve(spec, [np.zeros(i.shape, np.int64) for i in idx])].shape
    except IndexError as e:
        raise IndexError(str(e)) from None
    return AVal(shape, x.dtype)


def _index_np(x, *idx, spec):
    key = _resolve(spec, idx)
    if not any(k is Ellipsis for k in key):
        key = key + (Ellipsis,)  # numpy returns a scalar copy for x[i, j]; x[i, j, ...] is a 0-d view, as in PyTorch
    return x[key]


def _index_vjp(c, g):
    idx = c.inputs[1:]
    return (apply(OPS["index_backward"], g, *idx, shape=c.shapes[0], spec=c.attrs["spec"]),) + (None,) * len(idx)


def _index_backward_np(g, *idx, shape, spec):
    z = np.zeros(shape, g.dtype)
    key = _resolve(spec, idx)
    if idx and _rows_of_first_dim(key, g, shape):
        from tracejit.kernels.cpu.scatter import add_rows
        i = key[0].reshape(-1)
        add_rows(z.reshape(shape[0], -1), i, np.ascontiguousarray(g).reshape(i.shape[0], -1))
    elif idx:
        np.add.at(z, key, g)
    else:
        z[key] = g
    return z


def _rows_of_first_dim(key, g, shape):
    """x[i] (or x[i, :, ...]) with an integer index array i and float values: its backward adds rows."""
    i = key[0]
    return isinstance(i, np.ndarray) and i.dtype.kind in "iu" and g.dtype.kind == "f" and len(shape) >= 1 and \
        all(k is Ellipsis or (isinstance(k, slice) and k == slice(None)) for k in key[1:]) and g.shape == i.shape + tuple(shape[1:]) and \
        i.size > 0 and shape[0] > 0


def _slice_grad_name(attrs, args=None):
    # PyTorch applies the index items in order; its grad_fn is the last non-trivial one
    last = None
    for s in attrs["spec"]:
        if isinstance(s, bool) or s is None:
            last = "UnsqueezeBackward0"
        elif isinstance(s, int):
            last = "SelectBackward0"
        elif isinstance(s, slice) and (last is None or s != slice(None)):
            last = "SliceBackward0"
    return last or "AliasBackward0"


def _slice_window(node):
    """(offset, strides) in elements where a basic slice of a row-major input reads, per output dim (numpy's own
    indexing on a stand-in computes them); None with index tensors or a negative stride."""
    if len(node.inputs) != 1:
        return None
    from ..tracing.layout import view_op_window
    off, strides = view_op_window(node.op, node.inputs[0].shape, node.attrs)
    return None if any(st < 0 for st in strides) else (off, tuple(strides))


# the indexing VJPs read only the index tensors: later in-place changes of the data do not matter
defop("slice", _index_np, _index_meta, _index_vjp, kind="shape", saves="i", view=True, grad_name=_slice_grad_name,
      reads=lambda i, args: i >= 1, window=_slice_window)
defop("index", _index_np, _index_meta, _index_vjp, kind="index", saves="i", grad_name="IndexBackward0",
      reads=lambda i, args: i >= 1, host_indices=True, aliases=True)   # (numpy's mixed indexing can give a view)
defop("index_backward", _index_backward_np, lambda g, *idx, shape, spec: AVal(shape, g.dtype),
      lambda c, g: (apply(OPS["index"], g, *c.inputs[1:], spec=c.attrs["spec"]),) + (None,) * (len(c.inputs) - 1),
      kind="index", saves="i", reads=lambda i, args: i >= 1, host_indices=True)


def _index_put_np(x, v, *idx, spec, accumulate):
    out = x.copy()
    key = _resolve(spec, idx)
    v = v.astype(x.dtype, copy=False) if isinstance(v, np.ndarray) else v
    if accumulate:
        np.add.at(out, key, v)
    else:
        out[key] = v
    return out


def _index_put_vjp(c, g):
    x, v, *idx = c.inputs
    spec = c.attrs["spec"]
    gx = g if c.attrs["accumulate"] else apply(OPS["index_put"], g, 0.0, *idx, spec=spec, accumulate=False)
    gv = None
    if c.edges[1] is not None:
        gv = apply(OPS["index"], g, *idx, spec=spec)
    return (gx, gv) + (None,) * len(idx)


defop("index_put", _index_put_np, lambda x, v, *idx, spec, accumulate: AVal(x.shape, x.dtype), _index_put_vjp,
      kind="index", saves="i", grad_name="IndexPutBackward0", reads=lambda i, args: i >= 2, host_indices=True)


# ----------------------------------------------------------------------------- index normalization

def _prepare(x, index):
    """-> (spec, index tensors, basic?) with Python lists, numpy arrays and bool masks made tensors."""
    from .._tensor import Tensor
    from ..creation import tensor as _tensor
    if not isinstance(index, tuple):
        index = (index,)
    spec, tensors = [], []
    dim = 0
    for it in index:
        if isinstance(it, (list, np.ndarray)) or (isinstance(it, Tensor)):
            t = it if isinstance(it, Tensor) else _tensor(np.asarray(it) if not isinstance(it, list) else it)
            if t.dtype is D.bool_ or t.dtype is D.uint8:
                # boolean mask: its True positions become index tensors (data-dependent shape)
                t._concrete("boolean-mask indexing (its result's shape depends on the mask's values)")
                if not any(i is Ellipsis for i in index):
                    _check_mask(x, t, dim)
                for nz in np.nonzero(t._data):
                    spec.append(_T(len(tensors)))
                    tensors.append(Tensor._wrap(nz.astype(np.int64)))
                dim += t.ndim
                continue
            if t.dtype.is_floating_point:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            spec.append(_T(len(tensors)))
            tensors.append(t)
            dim += 1
        elif it is None or it is Ellipsis or isinstance(it, slice):
            if isinstance(it, slice) and it.step is not None and it.step <= 0:
                raise ValueError("step must be greater than zero")
            spec.append(it if not isinstance(it, slice) else slice(*(_int(v) for v in (it.start, it.stop, it.step))))
            dim += isinstance(it, slice)
        elif isinstance(it, bool):
            spec.append(it)
        else:
            try:
                i = int(it)
            except TypeError:
                raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                                 f"valid indices (got {type(it).__name__})") from None
            spec.append(i)
            dim += 1
    if dim > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    _check_ints(x, spec)
    return tuple(spec), tensors


def _check_mask(x, m, dim):
    want = tuple(x.shape[dim:dim + m.ndim])
    for k, (a, b) in enumerate(zip(m.shape, want)):
        if a != b:
            raise IndexError(f"The shape of the mask {list(m.shape)} at index {k} does not match the shape of the "
                             f"indexed tensor {list(x.shape)} at index {dim + k}")


def _int(v):
    return None if v is None else int(v)


def _check_ints(x, spec):
    # PyTorch's message for an out-of-range integer index
    shape = tuple(x.shape)
    d = 0
    n_ell = shape and len([s for s in spec if s is not None and s is not Ellipsis and not isinstance(s, bool)])
    for s in spec:
        if s is Ellipsis:
            d = len(shape) - (n_ell - d) if n_ell else d
            continue
        if s is None or isinstance(s, bool):
            continue
        if isinstance(s, int) and d < len(shape) and not -shape[d] <= s < shape[d]:
            raise IndexError(f"index {s} is out of bounds for dimension {d} with size {shape[d]}")
        d += 1


def getitem(x, index):
    spec, tensors = _prepare(x, index)
    if not tensors:
        return apply(OPS["slice"], x, spec=spec)
    return apply(OPS["index"], x, *tensors, spec=spec)


def index_put(x, indices, values, accumulate=False):
    spec, tensors = _prepare(x, indices if isinstance(indices, tuple) else (indices,))
    return apply(OPS["index_put"], x, values, *tensors, spec=spec, accumulate=accumulate)


def setitem(x, index, value):
    from .._tensor import Tensor
    from .._state import STATE
    if STATE.tracer is None and x._data is not None and not x._inference and not (STATE.grad_enabled and (
            x._requires_grad or (isinstance(value, Tensor) and value._requires_grad))):
        # eager, no autograd: write straight into the buffer
        spec, tensors = _prepare(x, index)
        v = value._data if isinstance(value, Tensor) else value
        where = _resolve(spec, [t._data for t in tensors])
        try:
            x._data[where] = v
        except ValueError as e:
            err = RuntimeError(f"setitem: {e}")
        else:
            x._version.v += 1
            return
        if isinstance(value, Tensor):    # a shape mismatch: PyTorch's message names both shapes
            value.expand(x._data[where].shape)
        raise err
    from .inplace import inplace
    inplace(x, lambda s: index_put(s, index, value), (value,))


def select(input, dim, index):
    d = norm_dim(dim, input.ndim)
    return getitem(input, (slice(None),) * d + (int(index),))


def slice_dim(input, dim, start, stop):
    """input[:, ..., start:stop] along dim (normalized, start and stop in range: narrow's): the spec getitem's
    parsing would give, made directly (split calls it per part)."""
    return apply(OPS["slice"], input, spec=(slice(None, None, None),) * dim + (slice(int(start), int(stop), None),))


def _check_index_np(index, size):
    if index.size and (int(index.min()) < 0 or int(index.max()) >= size):
        raise WordedIndexError("index out of range in self")
    return index


# index_select's indices must lie in [0, size) (getitem would wrap a negative one): checked on every call, in
# compiled programs too (a node that checks its integer input and passes it through, never fused)
defop("check_index", _check_index_np, lambda index, size: AVal(index.shape, index.dtype), kind="other",
      aliases=True)        # (returns its operand)


def index_select(input, dim, index):
    d = norm_dim(dim, input.ndim)
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    index = apply(OPS["check_index"], index, size=input.shape[d])
    return getitem(input, (slice(None),) * d + (index.reshape(-1),))


def index_add(input, dim, index, source, *, alpha=1):
    d = norm_dim(dim, input.ndim)
    src = source if alpha == 1 else source * alpha
    return index_put(input, (slice(None),) * d + (index,), src, accumulate=True)


def index_fill(input, dim, index, value):
    d = norm_dim(dim, input.ndim)
    return index_put(input, (slice(None),) * d + (index,), value)


def index_copy(input, dim, index, source):
    d = norm_dim(dim, input.ndim)
    return index_put(input, (slice(None),) * d + (index,), source)


def masked_fill(input, mask, value):
    from .elementwise import where
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    out = where(mask, value, input)
    return out if out.dtype is input.dtype else out.to(input.dtype)  # the value is cast to input's dtype


def masked_select(input, mask):
    from .shape_ops import broadcast_tensors
    x, m = broadcast_tensors(input, mask)
    return getitem(x, m)


def nonzero(input, *, as_tuple=False):
    input._concrete("nonzero() (its result's shape depends on the tensor's values)")
    from .._tensor import Tensor
    nz = np.nonzero(np.atleast_1d(input._data))
    if input.ndim == 0 and not as_tuple:  # PyTorch: shape (1, 0) or (0, 0)
        return Tensor._wrap(np.zeros((len(nz[0]), 0), np.int64))
    if as_tuple:
        return tuple(Tensor._wrap(i.astype(np.int64)) for i in nz)
    return Tensor._wrap(np.stack(nz, axis=1).astype(np.int64) if nz else np.zeros((1, 0), np.int64))


def argwhere(input):
    return nonzero(input)


def take(input, index):
    return getitem(input.reshape(-1), index)


# ----------------------------------------------------------------------------- gather / scatter

def _grid(index, dim):
    if index.ndim == 0:
        return ()
    g = list(np.indices(index.shape, sparse=True))
    g[dim] = index
    return tuple(g)


def _check_bounds(index, size, dim):
    """PyTorch's gather/scatter take no negative (wrapping) indices: every index is in [0, size)."""
    if index.size:
        lo, hi = index.min(), index.max()
        if lo < 0 or hi >= size:
            raise RuntimeError(f"index {lo if lo < 0 else hi} is out of bounds for dimension {dim} with size {size}")


def _gather_np(x, index, dim):
    _check_bounds(index, x.shape[dim] if x.ndim else 1, dim)
    if x.ndim == 0:
        return x[()] if index.ndim == 0 else np.broadcast_to(x, index.shape).copy()
    return x[_grid(index, dim)]


def _gather_meta(x, index, dim):
    if index.ndim != x.ndim and x.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d, (i, s) in enumerate(zip(index.shape, x.shape)):
        if d != dim and i > s:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(index.shape)} to be no "
                               f"larger than self {list(x.shape)} apart from dimension {dim}")
    return AVal(index.shape, x.dtype)


def _gather_vjp(c, g):
    x, index = c.inputs
    from ..creation import zeros
    return (scatter_add(zeros(c.shapes[0], dtype=g.dtype, device=g.device), c.attrs["dim"], index, g), None)


defop("gather", _gather_np, _gather_meta, _gather_vjp, kind="index", saves="i", reads=lambda i, args: i == 1)


def _src_region(src, index):
    if isinstance(src, np.ndarray) and src.ndim:
        return src[tuple(slice(0, s) for s in index.shape)]
    return src


def _scatter_np(x, index, src, dim, reduce=None):
    _check_bounds(index, x.shape[dim] if x.ndim else 1, dim)
    out = x.copy()
    key = _grid(index, dim)
    v = _src_region(src, index)
    if reduce is None:
        out[key] = v
    elif reduce in ("add", "sum"):
        np.add.at(out, key, v)
    elif reduce in ("multiply", "prod"):
        np.multiply.at(out, key, v)
    else:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    return out


def _scatter_vjp(c, g):
    x, index, src = c.inputs
    dim, red = c.attrs["dim"], c.attrs.get("reduce")
    if red in ("multiply", "prod"):
        raise RuntimeError("scatter with reduce='multiply' has no derivative in tracejit (nor in PyTorch)")
    gx = g if red else scatter(g, dim, index, 0.0)
    gs = None
    if c.edges[2] is not None:
        gs = gather(g, dim, index)
        if tuple(gs.shape) != c.shapes[2]:
            from ..creation import zeros
            from .indexing import index_put as _ip
            gs = _ip(zeros(c.shapes[2], dtype=g.dtype, device=g.device), tuple(slice(0, s) for s in gs.shape), gs)
    return gx, None, gs


def _scatter_meta(x, index, src, dim, reduce=None):
    src_shape = getattr(src, "shape", None)
    if index.ndim != x.ndim or (src_shape is not None and len(src_shape) != index.ndim and x.ndim):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if any((d != dim and i > s) or (src_shape is not None and i > src_shape[d])
           for d, (i, s) in enumerate(zip(index.shape, x.shape))):
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(x.shape)} apart from "
                           f"dimension {dim}" + (f" and to be no larger size than src {list(src_shape)}"
                                                 if src_shape is not None else ""))
    return AVal(x.shape, x.dtype)


defop("scatter", _scatter_np, _scatter_meta, _scatter_vjp, kind="index", saves="i", reads=lambda i, args: i == 1)


def gather(input, dim, index, *, sparse_grad=False):
    d = norm_dim(dim, input.ndim)
    _gather_meta(input, index, d)  # eager runs no shape rule: raise its errors here
    return apply(OPS["gather"], input, index, dim=d)


def take_along_dim(input, indices, dim=None):
    if dim is None:
        return take(input, indices.reshape(-1))
    from .shape_ops import broadcast_to
    d = norm_dim(dim, input.ndim)
    shape = list(np.broadcast_shapes(tuple(input.shape[:d]) + (1,) + tuple(input.shape[d + 1:]),
                                     tuple(indices.shape[:d]) + (1,) + tuple(indices.shape[d + 1:])))
    ishape, xshape = list(shape), list(shape)
    ishape[d], xshape[d] = indices.shape[d], input.shape[d]
    return gather(broadcast_to(input, xshape), d, broadcast_to(indices, ishape))


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    if src is None:
        src = value
    attrs = {"dim": norm_dim(dim, input.ndim)}
    _scatter_meta(input, index, src, attrs["dim"])  # eager runs no shape rule: raise its errors here
    if reduce is not None:
        attrs["reduce"] = reduce
    return apply(OPS["scatter"], input, index, src, **attrs)


def scatter_add(input, dim, index, src):
    d = norm_dim(dim, input.ndim)
    _scatter_meta(input, index, src, d)
    return apply(OPS["scatter"], input, index, src, dim=d, reduce="add")


_REDUCES = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum, "amin": np.minimum}


def _identity(reduce, dtype):
    """What a position reduced without its own value starts from."""
    if reduce in ("amax", "amin"):
        big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
        return -big if reduce == "amax" else big
    return 1 if reduce == "prod" else 0


def _scatter_reduce_np(x, index, src, dim, reduce, include_self):
    _check_bounds(index, x.shape[dim] if x.ndim else 1, dim)
    key, v = _grid(index, dim), _src_region(src, index)
    out = x.copy()
    hits = np.zeros(x.shape, np.int64)
    np.add.at(hits, key, 1)
    if not include_self:
        out[hits > 0] = _identity(reduce, x.dtype)
    _REDUCES[reduce].at(out, key, v)
    if reduce == "mean":
        n = np.maximum(hits + include_self, 1).astype(x.dtype)
        out = out // n if x.dtype.kind in "iub" else (out / n).astype(x.dtype)
    return out


def _scatter_reduce_vjp(c, g):
    """PyTorch's derivatives: sum and mean pass g (over the count) back; amax/amin split g evenly among the
    values equal to the result; prod gives each factor the product of the others (exact with one zero among
    them, 0 with more)."""
    from ..creation import zeros
    from .elementwise import where
    x, index, src = c.inputs
    dim, red, keep = c.attrs["dim"], c.attrs["reduce"], c.attrs["include_self"]
    region = tuple(slice(0, s) for s in index.shape)
    s = src[region]
    hits = scatter_add(zeros(c.shapes[0], dtype=g.dtype, device=g.device), dim, index, (s == s).to(g.dtype))
    untouched = hits == 0
    if red == "sum":
        gx, gs = g, gather(g, dim, index)
    elif red == "mean":
        n = hits + 1 if keep else where(untouched, 1.0, hits)
        gx, gs = g / n, gather(g / n, dim, index)
    elif red in ("amax", "amin"):
        res = apply(OPS["scatter_reduce"], x.detach(), index, s.detach(), dim=dim, reduce=red, include_self=keep)
        x_is, s_is = res == x, s == gather(res, dim, index)
        # (PyTorch counts an input value equal to the result among the ties even where include_self=False
        # leaves it out of the reduction; its own gradient there is 0 all the same)
        share = g / scatter_add(x_is.to(g.dtype), dim, index, s_is.to(g.dtype))
        gx, gs = where(x_is, share, 0.0), where(s_is, gather(share, dim, index), 0.0)
    else:
        res = apply(OPS["scatter_reduce"], x, index, s, dim=dim, reduce="prod", include_self=keep)
        one_x, one_s = where(x == 0, 1.0, x), where(s == 0, 1.0, s)
        others = apply(OPS["scatter_reduce"], one_x, index, one_s, dim=dim, reduce="prod", include_self=keep)
        zeros_at = scatter_add((x == 0).to(g.dtype) if keep else zeros(c.shapes[0], dtype=g.dtype, device=g.device),
                               dim, index, (s == 0).to(g.dtype))
        lone = g * where(zeros_at == 1, others, 0.0)
        gx = where(x == 0, lone, g * res / one_x) if keep else g
        gs = where(s == 0, gather(lone, dim, index), gather(g * res, dim, index) / one_s)
    if not keep:
        gx = where(untouched, g if red != "amax" and red != "amin" else gx, 0.0)
    if tuple(gs.shape) != c.shapes[2]:
        gs = index_put(zeros(c.shapes[2], dtype=g.dtype, device=g.device), region, gs)
    return gx, None, gs


defop("scatter_reduce", _scatter_reduce_np, lambda x, index, src, dim, reduce, include_self: _scatter_meta(
    x, index, src, dim), _scatter_reduce_vjp, kind="index", saves="io", reads=lambda i, args: True)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Each src value reduced into input at its index along `dim` by sum, prod, mean, amax or amin; with
    include_self=False the input's own values at the positions written are left out of the reduction."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if reduce in ("sum", "prod") and include_self:
        return scatter(input, dim, index, src, reduce=reduce)
    if input.dtype is not src.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    d = norm_dim(dim, input.ndim)
    _scatter_meta(input, index, src, d)
    return apply(OPS["scatter_reduce"], input, index, src, dim=d, reduce=reduce, include_self=bool(include_self))


def scatter_add_(input, dim, index, src):
    """Out-of-place in effect: used by VJP rules on fresh zero tensors."""
    return scatter_add(input, dim, index, src)
