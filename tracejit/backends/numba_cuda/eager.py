"""Eager ops on cuda tensors: `registry.apply` calls `dispatch` once a cuda tensor exists.

- no cuda array among the operands: the op's numpy `impl`, as before;
- an elementwise op with an `expr` template: a one-op kernel from the same code generator as fused kernels
  (`codegen.generate` over a one-node body), compiled once per (op, dtypes, rank) and kept in the disk cache;
- every other op: its CUDA implementation in `ops.py` (kernels in `kernels/cuda/`), or a NotImplementedError
  that names the op: never a silent host fallback, never a wrong answer.

Operands on different devices raise PyTorch's RuntimeError; 0-d CPU tensors are allowed as scalars, as in
PyTorch.
"""
import numpy as np

from ... import _dtype as D
from ...ir.graph import Node, Value
from ...ops.registry import OPS, broadcast_shapes
from . import array as A
from .array import CudaArray

MIXED = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


def dispatch(op, arrays, attrs):
    on_dev = False
    for a in arrays:
        if type(a) is CudaArray:
            on_dev = True
            break
    if not on_dev:
        return op.impl(*arrays, **attrs)
    from .ops import IMPLS
    impl = IMPLS.get(op.name)
    if impl is not None:
        return impl(*_operands(op, arrays), **attrs)
    if op.kind == "elementwise" and op.expr is not None:
        return elementwise(op, _operands(op, arrays), attrs)
    if op.decompose is not None:            # run its parts (each has a device implementation or fails by name)
        return _decomposed(op, arrays, attrs)
    raise NotImplementedError(
        f"tracejit: the op '{op.name}' has no CUDA kernel yet. Run it on the CPU: move its inputs with .cpu() "
        f"(and the result back with .cuda()).")


def _decomposed(op, arrays, attrs):
    """A composite op with no kernel here: its registry decomposition, each op of it dispatched as above."""
    from ..._tensor import Tensor
    from ...autograd.grad_mode import no_grad
    args = [Tensor._wrap(a) if isinstance(a, (CudaArray, np.ndarray)) else a for a in _operands(op, arrays)]
    with no_grad():
        out = op.decompose(*args, **attrs)
    return out._data if op.nout == 1 else tuple(o._data for o in out)


def _operands(op, arrays):
    """Host arrays among the operands: 0-d ones become device scalars, others are a device mix-up."""
    out = None
    for j, a in enumerate(arrays):
        if type(a) is np.ndarray or isinstance(a, np.ndarray):
            if a.ndim and not op.host_indices:
                raise RuntimeError(MIXED)
            if out is None:
                out = list(arrays)
            out[j] = _scalar(a, a.dtype) if not a.ndim else A.from_host(a)
    return arrays if out is None else out


# ----------------------------------------------------------------------------- one-op elementwise kernels

_MEMO = {}


def _dt(a):
    return D._FROM_NP[a.dtype]


def elementwise(op, arrays, attrs):
    key = _key(op, arrays, attrs)
    hit = _MEMO.get(key) if key is not None else None
    shapes = [a.shape for a in arrays if type(a) is CudaArray]
    shape = broadcast_shapes(*shapes) if len(shapes) > 1 else shapes[0]
    if hit is None:
        hit = _build(op, arrays, attrs)
        if key is not None:
            if len(_MEMO) > 4096:
                _MEMO.clear()
            _MEMO[key] = hit
    mod, params, out_dt = hit
    out = A.empty(shape, out_dt)
    run(mod, [a for a in arrays if type(a) is CudaArray], [out], params)
    return out


def _key(op, arrays, attrs):
    parts = [op]
    for a in arrays:
        if type(a) is CudaArray:
            parts.append((a.dtype.str, a.ndim, a.size == 1))
        elif type(a) is float:
            parts.append((float, a, str(a)))        # str: 0.0 and -0.0 are different constants
        else:
            parts.append((type(a), a))
    try:
        k = (tuple(parts), tuple(sorted(attrs.items())))
        hash(k)
        return k
    except TypeError:
        return None


def _build(op, arrays, attrs):
    """(kernel module, constant params, out numpy dtype) for op over operands shaped like `arrays`."""
    ins, vals = [], []
    for a in arrays:
        if type(a) is CudaArray:
            v = Value(len(ins), a.shape, _dt(a))
            ins.append(v)
            vals.append(v)
        else:
            vals.append(a)
    aval = op.meta(*vals, **attrs)
    out = Value(len(ins), aval.shape, aval.dtype)
    node = Node(op, vals, dict(attrs), [out])
    mod, ks = load(ins, [out], [node], op.name, params=True)
    return mod, ks.params, aval.dtype.np


def load(ins, outs, nodes, name, params=False, header=()):
    """(module holding kernel_flat/kernel_nd, CudaKernelSource) for an elementwise body."""
    from .codegen import generate
    from ..diskcache import load_module
    ks = generate(ins, outs, nodes, name, params=params, header=header)
    mod = load_module(ks.source, "cuda")
    if not hasattr(mod, "tj_tagged"):
        from tracejit.kernels.cuda.launch import tag
        path = getattr(mod, "__file__", "")
        tag(mod.kernel_flat, "gen", path, "kernel_flat")
        tag(mod.kernel_nd, "gen", path, "kernel_nd")
        mod.tj_tagged = True
    return mod, ks


def _bstrides(a, shape):
    """Element strides of `a` broadcast to `shape` (0 on broadcast dims)."""
    r = len(shape)
    pad = r - a.ndim
    st = [0] * r
    for d in range(a.ndim):
        if a.shape[d] != 1 or shape[pad + d] == 1:
            st[pad + d] = a.st[d] if a.shape[d] != 1 else 0
    return st


def run(mod, ins, outs, params=()):
    """Launch an elementwise kernel module over device arrays (inputs broadcast to the outputs' shape)."""
    from tracejit.kernels.cuda.launch import launch1d
    shape = outs[0].shape
    n = outs[0].size
    if n == 0:
        return
    flat = all(o.contiguous for o in outs) and all(
        a.size == 1 or (a.shape == shape and a.contiguous) for a in ins)
    if flat:
        args = [a.buf for a in ins] + [o.buf for o in outs] + [n] + [a.offset for a in ins] + \
            [o.offset for o in outs] + list(params)
        launch1d(mod.kernel_flat, n, *args)
        return
    args = [a.buf for a in ins] + [o.buf for o in outs] + [n] + list(shape)
    for a in ins:
        args.append(a.offset)
        if a.size != 1:
            args += _bstrides(a, shape)
    for o in outs:
        args.append(o.offset)
        args += list(o.st)
    launch1d(mod.kernel_nd, n, *(args + list(params)))


def run_copy(dst, src):
    """dst[...] = src: a one-op `cast` kernel writing through dst's view (src may broadcast; Python scalars ok)."""
    if dst.size == 0:
        return
    if type(src) is not CudaArray:
        src = _scalar(src, dst.dtype) if np.ndim(src) == 0 else A.from_host(np.asarray(src, dtype=dst.dtype))
    key = ("copy", src.dtype.str, dst.dtype.str, len(dst.shape), src.size == 1)
    hit = _MEMO.get(key)
    if hit is None:
        vi = Value(0, src.shape if src.size != 1 else (), _dt(src))
        vo = Value(1, dst.shape, _dt(dst))
        node = Node(OPS["cast"], [vi], {"dtype": _dt(dst)}, [vo])
        hit = _MEMO[key] = load([vi], [vo], [node], "copy")[0]
    run(hit, [src], [dst])


_SCALARS = {}


def _scalar(value, dtype):
    """A 0-d device array holding `value` (uploaded once per value and dtype: fills cost no transfer)."""
    v = np.asarray(value, dtype=dtype)
    key = (v.dtype.str, v.tobytes())
    a = _SCALARS.get(key)
    if a is None:
        if len(_SCALARS) > 256:
            _SCALARS.clear()
        a = _SCALARS[key] = A.from_host(v)
    return a
