"""CUDA implementations of the registry ops that are not one-op elementwise kernels.

Each entry takes the same arguments as the op's numpy `impl` (device arrays instead of ndarrays) and
returns device arrays. Shape ops are views (CudaArray metadata) where numpy's are; reductions, softmax,
matmul and indexing launch the kernels in `kernels/cuda/`. The ops' shape and dtype rules are the
registry's: results are checked against `op.meta` where a numpy error would have been raised.
"""
import numpy as np

from ... import _dtype as D
from ...ops.registry import OPS, AVal
from . import array as A
from .array import CudaArray

IMPLS = {}
OUT_VARIANT = set()     # the ops whose kernel here can write into a preallocated `out=`
CHECKED = set()         # the ops whose kernel checks indices by reading a flag back (`_check=False` skips that)


def impl(name, out=False, checked=False):
    """Register this function as the CUDA kernel of the registry op `name` (and what the kernel can do)."""
    def reg(fn):
        IMPLS[name] = fn
        if out:
            OUT_VARIANT.add(name)
        if checked:
            CHECKED.add(name)
        return fn
    return reg


def _dt(a):
    return D._FROM_NP[a.dtype]


def _aval(a):
    return AVal(a.shape, _dt(a)) if type(a) is CudaArray else a


def _meta(name, *args, **attrs):
    return OPS[name].meta(*[_aval(a) for a in args], **attrs)


def _cast(a, dt):
    dt = np.dtype(dt)
    if a.dtype == dt:
        return a
    out = A.empty(a.shape, dt)
    A.copy_into(out, a)
    return out


def _rows(x, dims):
    """x viewed as C-contiguous [M, K] rows: kept dims first, `dims` last (copied when the view is not)."""
    keep = [d for d in range(x.ndim) if d not in dims]
    v = x.permute(keep + list(dims)) if dims != tuple(range(x.ndim - len(dims), x.ndim)) else x
    if not v.contiguous:
        v = v.copy()
    M = 1
    for d in keep:
        M *= x.shape[d]
    K = 1
    for d in dims:
        K *= x.shape[d]
    return v, M, K, tuple(x.shape[d] for d in keep)


# ----------------------------------------------------------------------------- shape ops (views)

@impl("reshape")
def reshape(x, shape):
    return A.CudaArray(x.copy().buf, shape)     # never aliases (the `view` op is the aliasing reshape)


@impl("view")
def view(x, shape):
    # legality was decided by view() on eager strides (or a tracer's modelled ones): a compiled program's node
    # whose array is laid out otherwise gets the values by a copy
    v = x.try_view(shape)
    return v if v is not None else A.CudaArray(x.copy().buf, shape)


@impl("permute")
def permute(x, dims):
    return x.permute(dims)


@impl("expand")
def expand(x, shape):
    return x.expand(shape)


@impl("slice")
def slice_(x, spec):
    return x[spec]


@impl("flip")
def flip(x, dims):
    return x.flip(dims).copy()          # numpy's impl copies: the result does not alias its input


@impl("contiguous")
def contiguous(x):
    return x if x.contiguous else x.copy()


@impl("cat")
def cat(*xs, dim):
    aval = _meta("cat", *xs, dim=dim)
    out = A.empty(aval.shape, aval.dtype.np)
    start = 0
    for x in xs:
        if x.size == 0 and x.ndim == 1 and out.ndim != 1:     # legacy: empty 1-D tensors are skipped
            continue
        n = x.shape[dim]
        key = (slice(None),) * dim + (slice(start, start + n),)
        A.copy_into(out[key], x)
        start += n
    return out


@impl("roll")
def roll(x, shifts, dims):
    src = x
    for s, d in zip(shifts, dims):
        n = x.shape[d]
        if n == 0:
            continue
        s %= n
        if s == 0:
            continue
        out = A.empty(x.shape, x.dtype)
        pre = (slice(None),) * d
        A.copy_into(out[pre + (slice(s, None),)], x[pre + (slice(0, n - s),)])
        A.copy_into(out[pre + (slice(0, s),)], x[pre + (slice(n - s, None),)])
        x = out
    return x if x is not src else x.copy()      # numpy's roll never aliases its input


def _tri(x, k, upper):
    from tracejit.kernels.cuda.index import tri
    if x.ndim < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    src = x if x.contiguous else x.copy()
    out = A.empty(x.shape, x.dtype)
    tri(src.buf, src.offset, out.buf, x.shape[-2], x.shape[-1], int(k), x.size, upper)
    return out


@impl("tril")
def tril(x, k):
    return _tri(x, k, False)


@impl("triu")
def triu(x, k):
    return _tri(x, k, True)


@impl("round")
def round_(x, decimals=0):
    if decimals:
        raise NotImplementedError("tracejit: round(decimals != 0) has no CUDA kernel yet. Run it on the CPU: "
                                  "move its input with .cpu() (and the result back with .cuda()).")
    from .eager import elementwise
    return elementwise(OPS["round"], [x], {"decimals": 0})


# ----------------------------------------------------------------------------- reductions

def _reduce(kind, x, dims, keepdim, out_dt, acc_dt, mean=False, out=None):
    from tracejit.kernels.cuda.reduce import reduce_rows
    out_shape = tuple((1 if d in dims else s) for d, s in enumerate(x.shape)) if keepdim else \
        tuple(s for d, s in enumerate(x.shape) if d not in dims)
    if out is None:
        out = A.empty(out_shape, out_dt)
    if not dims:                        # numpy: a reduction over no axes is a copy in the result dtype
        A.copy_into(out, x)
        return out
    v, M, K, _ = _rows(x, dims)
    if K == 0 and kind != "sum":
        raise RuntimeError(f"{kind}(): cannot reduce over a zero-size dimension (the op has no identity)")
    scale = (1.0 / K if K else float("nan")) if mean else 1.0
    reduce_rows(kind, v.buf, v.offset, M, K, out.buf, out.offset, acc_dt, scale)
    return out


def _sum_acc(out_dt):
    out_dt = np.dtype(out_dt)
    return out_dt if out_dt.kind in "fiu" else np.dtype(np.int64)


@impl("sum", out=True)
def sum_(x, dims, keepdim, dtype=None, out=None):
    out_dt = _meta("sum", x, dims=dims, keepdim=keepdim, dtype=dtype).dtype.np
    if x.dtype.kind == "b":
        x = _cast(x, np.int64)
    return _reduce("sum", x, dims, keepdim, out_dt, _sum_acc(out_dt), out=out)


@impl("mean", out=True)
def mean(x, dims, keepdim, dtype=None, out=None):
    out_dt = _meta("mean", x, dims=dims, keepdim=keepdim, dtype=dtype).dtype.np
    return _reduce("sum", x, dims, keepdim, out_dt, out_dt, mean=bool(dims), out=out)


def _minmax(kind, x, dims, keepdim, out=None):
    if x.dtype.kind == "b":
        res = _reduce(kind, _cast(x, np.uint8), dims, keepdim, np.uint8, np.uint8)
        if out is None:
            return _cast(res, np.bool_)
        A.copy_into(out, res)
        return out
    return _reduce(kind, x, dims, keepdim, x.dtype, x.dtype, out=out)


@impl("amax", out=True)
def amax(x, dims, keepdim, out=None):
    return _minmax("max", x, dims, keepdim, out)


@impl("amin", out=True)
def amin(x, dims, keepdim, out=None):
    return _minmax("min", x, dims, keepdim, out)


@impl("prod")
def prod(x, dims, keepdim, dtype=None):
    out_dt = _meta("prod", x, dims=dims, keepdim=keepdim, dtype=dtype).dtype.np
    return _reduce("prod", _cast(x, out_dt), dims, keepdim, out_dt, out_dt)


def _ew(name, *args, **attrs):
    from .eager import elementwise
    return elementwise(OPS[name], list(args), attrs)


def _arg(is_max, x, dim):
    """(values, indices) of the max (min) over `dim` (None: all), keepdim shapes; NaN first, ties first."""
    from tracejit.kernels.cuda.reduce import arg_rows
    if dim is None:
        x = x.reshape((-1,))
        dim = 0
    v, M, K, _ = _rows(x, (dim,))
    if K == 0:
        raise RuntimeError("argmax(): Expected reduction dim to be specified for input.numel() == 0.")
    shape = _red_shape(x, (dim,), True)
    vals, idx = A.empty(shape, x.dtype), A.empty(shape, np.int64)
    arg_rows(is_max, v.buf, v.offset, M, K, vals.buf, idx.buf)
    return vals, idx


def _argfn(is_max):
    def f(x, dim, keepdim):
        if x.ndim == 0:
            return A.from_host(np.zeros((), np.int64))
        _, idx = _arg(is_max, x, dim)
        if dim is None:
            return idx.reshape((1,) * x.ndim if keepdim else ())
        return idx if keepdim else idx.reshape(_red_shape(x, (dim,), False))
    return f


def _dimfn(is_max):
    def f(x, dim, keepdim):
        if x.ndim == 0:
            return x.copy(), A.from_host(np.zeros((), np.int64))
        vals, idx = _arg(is_max, x, dim)
        if not keepdim:
            shape = _red_shape(x, (dim,), False)
            vals, idx = vals.reshape(shape), idx.reshape(shape)
        return vals, idx
    return f


IMPLS["argmax"], IMPLS["argmin"] = _argfn(True), _argfn(False)
IMPLS["max_dim"], IMPLS["min_dim"] = _dimfn(True), _dimfn(False)


def _logical(kind, x, dims, keepdim, empty):
    if x.size == 0:
        return A.from_host(np.full(_red_shape(x, dims, keepdim), empty, np.bool_))
    u = _cast(_cast(x, np.bool_), np.uint8)          # nonzero -> 1 first: 0.5 counts as True
    return _cast(_reduce(kind, u, dims, keepdim, np.uint8, np.uint8), np.bool_)


@impl("all")
def all_(x, dims, keepdim):
    return _logical("min", x, dims, keepdim, True)


@impl("any")
def any_(x, dims, keepdim):
    return _logical("max", x, dims, keepdim, False)


def _red_shape(x, dims, keepdim):
    if keepdim:
        return tuple(1 if d in dims else s for d, s in enumerate(x.shape))
    return tuple(s for d, s in enumerate(x.shape) if d not in dims)


# ----------------------------------------------------------------------------- softmax

def _softmax(x, dim, log, out=None):
    from tracejit.kernels.cuda.softmax import softmax_rows
    if x.ndim == 0:
        x1 = x.reshape((1,))
        return _softmax(x1, 0, log).reshape(())
    if x.dtype.kind != "f":
        raise RuntimeError(f"softmax: expected a floating point tensor, got {x.dtype}")
    last = x.ndim - 1
    perm = list(range(x.ndim))
    perm[dim], perm[last] = perm[last], perm[dim]
    v = x.permute(perm) if dim != last else x
    if not v.contiguous:
        v = v.copy()
    K = v.shape[-1]
    M = v.size // K if K else 0
    res = out if (out is not None and dim == last and out.contiguous) else A.empty(v.shape, x.dtype)
    softmax_rows(v.buf, v.offset, M, K, res.buf, res.offset, log)
    res = res.permute(perm) if dim != last else res
    if out is not None and res is not out:
        A.copy_into(out, res)
        return out
    return res


@impl("softmax", out=True)
def softmax(x, dim, out=None):
    return _softmax(x, dim, False, out)


@impl("log_softmax", out=True)
def log_softmax(x, dim, out=None):
    return _softmax(x, dim, True, out)


# ----------------------------------------------------------------------------- matmul

@impl("matmul", out=True)
def matmul(a, b, out=None):
    from tracejit.kernels.cuda.matmul import matmul as mm
    aval = _meta("matmul", a, b)
    shape = aval.shape
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    batch_shape = shape[:-2]
    nb = 1
    for s in batch_shape:
        nb *= s
    if out is None or not (out.contiguous and out.offset == 0):
        out = A.empty(shape, a.dtype)
    if out.size == 0:
        return out
    if K == 0:
        A.copy_into(out, 0)
        return out
    aoffs = _batch_offsets(a, batch_shape)
    boffs = _batch_offsets(b, batch_shape)
    mm(a.buf, aoffs, a.st[-2], a.st[-1], b.buf, boffs, b.st[-2], b.st[-1], out.buf, nb, M, N, K)
    return out


_CONSTS = {}      # small index arrays uploaded once per layout (compiled graphs call with the same layouts)


def _cached_upload(key, make):
    a = _CONSTS.get(key)
    if a is None:
        if len(_CONSTS) > 1024:
            _CONSTS.clear()
        a = _CONSTS[key] = _upload_i64(make())
    return a


def _batch_offsets(x, batch_shape):
    """Device int64 array: the element offset of each (broadcast) batch matrix of x (uploaded once per layout)."""
    return _cached_upload(("batch", x.offset, x.shape, x.st, tuple(batch_shape)),
                          lambda: _host_batch_offsets(x, batch_shape))


def _host_batch_offsets(x, batch_shape):
    bshape = x.shape[:-2]
    pad = len(batch_shape) - len(bshape)
    st = [0] * pad + [0 if s == 1 else t for s, t in zip(bshape, x.st[:-2])]
    offs = np.full(batch_shape, x.offset, np.int64)
    for d, s in enumerate(st):
        if s:
            shp = [1] * len(batch_shape)
            shp[d] = batch_shape[d]
            offs = offs + (np.arange(batch_shape[d], dtype=np.int64) * s).reshape(shp)
    return offs.reshape(-1)


def _upload_i64(a):
    from numba import cuda
    a = np.ascontiguousarray(a, np.int64)
    return cuda.to_device(a if a.size else np.zeros(1, np.int64))


# ----------------------------------------------------------------------------- indexing

def _host_index(i):
    return i.to_host() if type(i) is CudaArray else np.asarray(i)


def _offsets(x, spec, idx):
    """Flat element offsets into x.buf of x[spec with index tensors] (numpy's advanced-indexing rules)."""
    from ...ops.indexing import _resolve
    return _key_offsets(x, _resolve(spec, [_host_index(i) for i in idx]))


def _key_offsets(x, key):
    offs = np.full((), x.offset, np.int64)
    for d in range(x.ndim):
        shp = [1] * x.ndim
        shp[d] = x.shape[d]
        coord = np.broadcast_to(np.arange(x.shape[d], dtype=np.int64).reshape(shp), x.shape)
        try:
            offs = offs + coord[key] * x.st[d]
        except IndexError as e:
            raise IndexError(str(e)) from None
    if x.ndim == 0:
        offs = np.broadcast_to(offs, np.zeros((), np.int8)[key].shape)
    return np.ascontiguousarray(offs)


@impl("index")
def index(x, *idx, spec):
    from tracejit.kernels.cuda.index import take
    offs = _offsets(x, spec, idx)
    out = A.empty(offs.shape, x.dtype)
    take(x.buf, _upload_i64(offs.reshape(-1)), out.buf, 0, offs.size)
    return out


@impl("index_backward")
def index_backward(g, *idx, shape, spec):
    from tracejit.kernels.cuda.index import put
    z = A.empty(shape, g.dtype)
    A.copy_into(z, 0)
    if not idx:
        from ...ops.indexing import _resolve
        A.copy_into(z[_resolve(spec, ())], g)
        return z
    offs = _offsets(z, spec, idx)
    gv = A.empty(offs.shape, g.dtype)
    A.copy_into(gv, g)
    put(z.buf, offs.reshape(-1), gv.buf, 0, offs.size, True)
    return z


@impl("index_put")
def index_put(x, v, *idx, spec, accumulate):
    from tracejit.kernels.cuda.index import put
    out = x.copy()
    if not idx:
        from ...ops.indexing import _resolve
        target = out[_resolve(spec, ())]
        if accumulate:
            from .eager import elementwise
            A.copy_into(target, elementwise(OPS["add"], [target, v], {}))
        else:
            A.copy_into(target, v)
        return out
    offs = _offsets(out, spec, idx)
    vals = A.empty(offs.shape, x.dtype)
    A.copy_into(vals, v)
    put(out.buf, offs.reshape(-1), vals.buf, 0, offs.size, accumulate)
    return out


def _along_dim(mode, x, index, src, dim, out=None, check=True):
    from numba import cuda
    from tracejit.kernels.cuda.index import along_dim
    r = index.ndim
    sst = src.st if type(src) is CudaArray and src.ndim else (0,) * r

    def make_meta():
        meta = np.zeros((4, max(r, 1)), np.int64)
        meta[0, :r] = index.shape
        meta[1, :r] = index.st
        meta[2, :r] = x.st if x.ndim else 0
        meta[3, :r] = sst
        return meta
    key = ("along", index.shape, index.st, x.st, sst)
    meta = _CONSTS.get(key)
    if meta is None:
        meta = _CONSTS[key] = cuda.to_device(make_meta())
    err = cuda.to_device(np.zeros(1, np.int32)) if check else _dummy(np.int32)
    size = x.shape[dim] if x.ndim else 1
    sbuf, so = (src.buf, src.offset) if type(src) is CudaArray else (_dummy(x.dtype), 0)
    obuf = out.buf if out is not None else _dummy(x.dtype)
    along_dim(mode, x.buf, x.offset, index.buf, index.offset, sbuf, so, obuf, meta, r, dim, size, index.size, err)
    if check and err.copy_to_host()[0]:
        raise RuntimeError(f"index out of bounds for dimension {dim} with size {size}")


def _dummy(dt):
    """A one-element device array standing for an unused kernel argument (made once per dtype)."""
    key = ("dummy", np.dtype(dt).str)
    a = _CONSTS.get(key)
    if a is None:
        from numba import cuda
        a = _CONSTS[key] = cuda.to_device(np.zeros(1, dt))
    return a


@impl("gather", checked=True)
def gather(x, index, dim, _check=True):
    _meta("gather", x, index, dim=dim)
    out = A.empty(index.shape, x.dtype)
    if x.ndim == 0:
        A.copy_into(out, x)
        return out
    _along_dim("gather", x, index, None, dim, out, _check)
    return out


@impl("scatter", checked=True)
def scatter(x, index, src, dim, reduce=None, _check=True):
    _meta("scatter", x, index, src, dim=dim, reduce=reduce)
    if reduce in ("multiply", "prod"):
        raise NotImplementedError("tracejit: scatter(reduce='multiply') has no CUDA kernel yet. Run it on the CPU: "
                                  "move its inputs with .cpu() (and the result back with .cuda()).")
    if reduce not in (None, "add", "sum"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    out = x.copy()
    if type(src) is not CudaArray:
        src = A.from_host(np.asarray(src, x.dtype).reshape(()))
    elif src.dtype != x.dtype:
        src = _cast(src, x.dtype)
    if reduce:
        _along_dim("scatter_add", out, index, src, dim, None, _check)
        return out
    owner = A.empty((max(out.size, 1),), np.int64)      # which index position writes each element: the last
    owner.fill(-1)
    _along_dim("claim", out, index, src, dim, owner, _check)
    _along_dim("scatter", out, index, src, dim, owner, False)
    return out


def setitem(x, key, value):
    """x[key] = value in place (eager, no autograd): a view copy, or a scatter by offsets for index arrays."""
    from tracejit.kernels.cuda.index import put
    key = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(k, (np.ndarray, CudaArray)) for k in key):
        x[key].copy_from(value)
        return
    offs = _key_offsets(x, tuple(_host_index(k) if isinstance(k, (np.ndarray, CudaArray)) else k for k in key))
    vals = A.empty(offs.shape, x.dtype)
    A.copy_into(vals, value if not (isinstance(value, np.ndarray) and value.ndim) else A.from_host(value))
    put(x.buf, offs.reshape(-1), vals.buf, 0, offs.size, False)
