"""Shape ops. Primitives: reshape/view, permute, expand, cat, flip, roll, tril/triu, clone/contiguous;
everything else (squeeze, transpose, stack, split, tile, ...) is composed from them and so gets its
derivative, shape rule and code generation for free."""
import builtins
import math

import numpy as np

from .._dtype import dtype as _dtype_cls
from ..autograd.graph import node_class
from .registry import AVal, apply, defop, norm_dim, norm_dims, OPS
from ..tracing.layout import reshape_view


def _infer_shape(shape, numel):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for i, s in enumerate(shape):
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
            known *= s
    if neg:
        if known == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} because the unspecified "
                               f"dimension size -1 can be any value and is ambiguous")
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _view_np(x, shape):
    """The aliasing reshape. Whether a view is legal is decided by `view()` from the strides eager mode has (a
    real array's, or a tracer's modelled ones: tracing/layout.py); a node of a compiled program computes the
    values, by a copy where the backend's array is laid out otherwise (its `contiguous` was elided, say)."""
    out = reshape_view(x, shape)
    return x.reshape(shape) if out is None else out


def _view_error():
    return RuntimeError("view size is not compatible with input tensor's size and stride (at least one dimension "
                        "spans across two contiguous subspaces). Use .reshape(...) instead.")


def _viewable_t(t, shape):
    """Would eager mode's `t.view(shape)` succeed (real tensor: its array; tracer: its modelled strides)?"""
    if t._data is not None:
        return _viewable(t._data, shape)
    lay = t.__dict__.get("_layout")
    if lay is None:
        return True
    from ..tracing.layout import view_strides
    return view_strides(t._value.shape, lay, shape) is not None


def _reshape_np(x, shape):
    out = x.reshape(shape)
    # never alias: a reshape that can share memory is the `view` op (which shares the version counter)
    return out.copy() if np.may_share_memory(out, x) else out


def _viewable(arr, shape):
    if type(arr) is not np.ndarray and hasattr(arr, "try_view"):    # a device array (cuda)
        return arr.try_view(shape) is not None
    return reshape_view(arr, shape) is not None


def _inverse(dims):
    """The permutation that undoes `dims` (np.argsort's, in Python ints: no array round trip per backward)."""
    return tuple(sorted(range(len(dims)), key=dims.__getitem__))


def _always(attrs, out):
    return True


defop("reshape", _reshape_np, lambda x, shape: AVal(shape, x.dtype),
      lambda c, g: (reshape(g, c.shapes[0]),), kind="shape", saves="", grad_name="UnsafeViewBackward0",
      noop=_always, reshapes=True)
defop("view", _view_np, lambda x, shape: AVal(shape, x.dtype), lambda c, g: (reshape(g, c.shapes[0]),),
      kind="shape", saves="", view=True, noop=_always, reshapes=True)
defop("permute", lambda x, dims: np.transpose(x, dims), lambda x, dims: AVal([x.shape[d] for d in dims], x.dtype),
      lambda c, g: (permute(g, _inverse(c.attrs["dims"])),), kind="shape", saves="", view=True,
      noop=lambda attrs, out: tuple(attrs["dims"]) == tuple(range(out.ndim)))
def _expand_np(x, shape):
    """np.broadcast_to(x, shape): a read-only view with stride 0 on broadcast dims. Built here for a contiguous
    array (numpy's own goes through nditer, ~2 us; sum's backward expands a scalar on every call)."""
    strides = _broadcast_strides(x, shape)
    if strides is None:
        return np.broadcast_to(x, shape)
    out = np.ndarray(shape, x.dtype, x, 0, strides)
    out.setflags(write=False)
    return out


def _broadcast_strides(x, shape):
    """The strides of contiguous, non-empty `x` broadcast to `shape`; None for any other case (numpy handles it,
    and raises if `shape` is not a broadcast of x's)."""
    lead = len(shape) - x.ndim
    if type(x) is not np.ndarray or lead < 0 or not x.size or not x.flags.c_contiguous or min(shape, default=0) < 0:
        return None
    if not x.ndim:
        return (0,) * lead
    strides = [0] * lead
    for s, want, st in zip(x.shape, shape[lead:], x.strides):
        if s == want:
            strides.append(st)
        elif s == 1:
            strides.append(0)
        else:
            return None
    return tuple(strides)


defop("expand", _expand_np, lambda x, shape: AVal(shape, x.dtype),
      lambda c, g: (g,), kind="shape", saves="", view=True,  # the engine sums g back to the input shape
      noop=_always, broadcasts=True, passthrough=True)
defop("clone", lambda x: x.copy(order="K"), lambda x: AVal(x.shape, x.dtype), lambda c, g: (g,), kind="elementwise",
      expr="{0}", saves="")   # keeps its operand's layout (order="K", preserve_format)
defop("contiguous", np.ascontiguousarray, lambda x: AVal(x.shape, x.dtype), lambda c, g: (g,), kind="elementwise",
      expr="{0}", saves="", grad_name="CloneBackward0", noop=_always, makes_contiguous=True)


def _to_format_np(x, format):
    from .. import _memory_format as M
    fmt = getattr(M, format)
    return x.copy(order="K") if M.is_contiguous_as(x, fmt) else M.as_format(x, fmt)


# a layout change (values unchanged): compiled programs compute in the contiguous format, so it lowers to nothing
defop("to_memory_format", _to_format_np, lambda x, format: AVal(x.shape, x.dtype), lambda c, g: (g,),
      kind="other", saves="", grad_name="CloneBackward0", decompose=lambda x, format: x,
      fuses_in_parts=True)


def _cat_np(*xs, dim):
    from .. import _dtype as D
    dt = D.result_type(*[_A(x) for x in xs])
    return np.concatenate([x.astype(dt.np, copy=False) for x in xs], axis=dim)


class _A:
    __slots__ = ("dtype", "ndim")

    def __init__(self, a):
        from .. import _dtype as D
        self.dtype, self.ndim = D._FROM_NP[a.dtype], 1


def _check_cat_shapes(shapes, dim, numbers=None):
    """PyTorch's errors for operands of cat whose shapes differ outside `dim` (`numbers`: their places in the list
    the caller gave, where legacy empty vectors were left out)."""
    ref = shapes[0]
    for k, shape in enumerate(shapes[1:], 1):
        if len(shape) != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and {len(shape)}")
        for i, (a, b) in enumerate(zip(ref, shape)):
            if i != dim and a != b:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected size {a} but "
                                   f"got size {b} for tensor number {k if numbers is None else numbers[k]} in the "
                                   f"list.")


def _cat_meta(*xs, dim):
    from .. import _dtype as D
    ref = xs[0].shape
    _check_cat_shapes([x.shape for x in xs], dim)
    shape = list(ref)
    shape[dim] = builtins.sum(x.shape[dim] for x in xs)
    return AVal(shape, D.result_type(*[_Dim(x.dtype) for x in xs]))


class _Dim:
    __slots__ = ("dtype", "ndim")

    def __init__(self, d):
        self.dtype, self.ndim = d, 1


def _cat_vjp(c, g):
    dim = c.attrs["dim"]
    out, start = [], 0
    for s in c.shapes:
        out.append(narrow(g, dim, start, s[dim]))
        start += s[dim]
    return tuple(out)


def _cat_places(node):
    from ..tracing.layout import contiguous_strides
    dim, cs = node.attrs["dim"], contiguous_strides(node.outputs[0].shape)
    res, start = [], 0
    for x in node.inputs:
        res.append((start * cs[dim], cs))
        start += x.shape[dim]
    return res


defop("cat", _cat_np, _cat_meta, _cat_vjp, kind="shape", saves="", places=_cat_places)
defop("flip", lambda x, dims: np.flip(x, dims).copy() if x.ndim else x.copy(), lambda x, dims: AVal(x.shape, x.dtype),
      lambda c, g: (flip(g, c.attrs["dims"]),), kind="shape", saves="")
defop("roll", lambda x, shifts, dims: np.roll(x, shifts, dims), lambda x, shifts, dims: AVal(x.shape, x.dtype),
      lambda c, g: (roll(g, tuple(-s for s in c.attrs["shifts"]), c.attrs["dims"]),), kind="shape", saves="")
defop("tril", lambda x, k: np.tril(x, k), lambda x, k: AVal(x.shape, x.dtype), lambda c, g: (tril(g, c.attrs["k"]),),
      kind="shape", saves="")
defop("triu", lambda x, k: np.triu(x, k), lambda x, k: AVal(x.shape, x.dtype), lambda c, g: (triu(g, c.attrs["k"]),),
      kind="shape", saves="")


# ----------------------------------------------------------------------------- public API

def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(map(int, shape))


def _shape_of(t):
    """tuple(t.shape), without building a Size."""
    return tuple(t._data.shape if t._data is not None else t._value.shape)


def reshape(input, *shape):
    have = _shape_of(input)
    shape = _infer_shape(_shape_arg(shape), _numel(have))
    if shape == have:
        return input if input._data is None else apply(OPS["view"], input, shape=shape)
    if _viewable_t(input, shape):  # like PyTorch: a view when it can be (also while tracing: the same aliasing)
        return apply(OPS["view"], input, shape=shape)
    return apply(OPS["reshape"], input, shape=shape)


def view(input, *shape):
    if len(shape) == 1 and isinstance(shape[0], _dtype_cls):
        raise NotImplementedError("view(dtype) reinterpretation is not supported by tracejit")
    shape = _infer_shape(_shape_arg(shape), _numel(_shape_of(input)))
    if not _viewable_t(input, shape):
        raise _view_error()
    return apply(OPS["view"], input, shape=shape)


def permute(input, *dims):
    dims = tuple(norm_dim(d, input.ndim) for d in _shape_arg(dims))
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                           f"of the desired ordering of dimensions i.e. input.dim() = {input.ndim} is not equal to "
                           f"len(dims) = {len(dims)}" if len(dims) != input.ndim else "permute(): duplicate dims")
    return apply(OPS["permute"], input, dims=dims)


def transpose(input, dim0, dim1):
    n = input.ndim
    if n == 0:
        return input
    d0, d1 = norm_dim(dim0, n), norm_dim(dim1, n)
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return _node_named(apply(OPS["permute"], input, dims=tuple(dims)), input, "TransposeBackward0")


def _node_named(out, input, name):
    """Name the node this call recorded as PyTorch names the call's (t() and transpose are a permute, unsqueeze
    a reshape, here: the same computation, PyTorch's name)."""
    fn = out.grad_fn
    if fn is not None and out is not input and fn is not input.grad_fn:
        fn.__class__ = node_class(name)
    return out


swapaxes = swapdims = transpose


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return _node_named(transpose(input, 0, 1), input, "TBackward0") if input.ndim == 2 else input


def adjoint(input):
    return transpose(input, -2, -1)


def _expanded_shape(have, sizes, name):
    """The shape `expand(sizes)` gives a tensor of shape `have` (dtype `name`), or PyTorch's error."""
    n, lead = len(sizes), len(sizes) - len(have)
    if lead < 0:
        raise RuntimeError(f"expand({name}{{{list(have)}}}, size={list(sizes)}): the number of sizes "
                           f"provided ({n}) must be greater or equal to the number of dimensions in the tensor "
                           f"({len(have)})")
    shape = []
    for i, want in enumerate(sizes):
        s = have[i - lead] if i >= lead else 1
        if want == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            want = s
        if s != want and s != 1:
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the existing size ({s}) at "
                               f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                               f"{list(have)}")
        shape.append(want)
    return tuple(shape)


def expand(input, *sizes):
    sizes = _shape_arg(sizes)
    have = _shape_of(input)
    if sizes == have:
        return input
    if not have and -1 not in sizes:    # a 0-d tensor (a loss's gradient) broadcasts to any shape as it is
        return apply(OPS["expand"], input, shape=sizes)
    shape = _expanded_shape(have, sizes, input.dtype.name)
    if shape == have:
        return input
    return apply(OPS["expand"], input, shape=shape)


def expand_as(input, other):
    return expand(input, other.shape)


def broadcast_to(input, shape):
    return expand(input, shape)


def broadcast_tensors(*tensors):
    from .registry import broadcast_shapes
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(expand(t, shape) for t in tensors)


def squeeze(input, dim=None):
    if dim is None:
        shape = tuple(s for s in input.shape if s != 1)
    else:
        dims = (dim,) if isinstance(dim, int) else dim
        dims = {norm_dim(d, input.ndim) for d in dims}
        shape = tuple(s for i, s in enumerate(input.shape) if not (i in dims and s == 1))
    # a new view even when no dim has size 1 (as PyTorch: a node of its own); squeeze((0, 1)) is PyTorch's squeeze.dims
    return _node_named(reshape(input, shape), input, "SqueezeBackward0" if dim is None else
                       "SqueezeBackward1" if isinstance(dim, int) else "SqueezeBackward2")


def unsqueeze(input, dim):
    d = norm_dim(dim, input.ndim + 1) if input.ndim else norm_dim(dim, 1)
    shape = list(input.shape)
    shape.insert(d, 1)
    return _node_named(reshape(input, tuple(shape)), input, "UnsqueezeBackward0")


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, (1,))
    s, e = norm_dim(start_dim, input.ndim), norm_dim(end_dim, input.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (_numel(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(input, dim, sizes):
    d = norm_dim(dim, input.ndim)
    shape = tuple(input.shape)
    if any(s < -1 for s in sizes):      # PyTorch checks each size before the product: "invalid shape dimension"
        _infer_shape(tuple(sizes), shape[d])
    known, free = math.prod(s for s in sizes if s != -1), list(sizes).count(-1)
    divides = shape[d] % known == 0 if known else shape[d] == 0       # (two -1: _infer_shape's message)
    if (free == 0 and known != shape[d]) or (free == 1 and not divides):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({shape[d]}) in the input tensor")
    sizes = _infer_shape(tuple(sizes), shape[d])
    return reshape(input, shape[:d] + sizes + shape[d + 1:])


def ravel(input):
    return reshape(input, (-1,))


def movedim(input, source, destination):
    n = input.ndim
    src = [norm_dim(s, n) for s in ((source,) if isinstance(source, int) else source)]
    dst = [norm_dim(d, n) for d in ((destination,) if isinstance(destination, int) else destination)]
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, tuple(order)) if order != list(range(n)) else input


moveaxis = movedim


def contiguous(input, memory_format=None):
    from .. import _memory_format as M
    fmt = M.check(M.contiguous_format if memory_format is None else memory_format)
    if fmt is M.preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    if fmt is not M.contiguous_format:
        return _to_memory_format(input, fmt)
    if input.is_contiguous():       # a tracer's modelled strides, as eagerly: a no-op on a row-major tensor
        return input
    return apply(OPS["contiguous"], input)


def _to_memory_format(input, memory_format):
    """`input` laid out in `memory_format` (itself if it already is): Tensor.contiguous / .to(memory_format=)."""
    from .. import _memory_format as M
    fmt = M.check(memory_format)
    if fmt is M.preserve_format:
        return input
    if fmt is not M.contiguous_format and input.ndim != (4 if fmt is M.channels_last else 5):
        raise RuntimeError(f"required rank {4 if fmt is M.channels_last else 5} tensor to use {fmt.name} format")
    if input._data is not None and isinstance(input._data, np.ndarray) and M.is_contiguous_as(input._data, fmt):
        return input
    return apply(OPS["to_memory_format"], input, format=fmt.name)


def clone(input, memory_format=None):
    from .. import _memory_format as M
    fmt = M.check(M.preserve_format if memory_format is None else memory_format)
    out = apply(OPS["clone"], input)
    if fmt is not M.preserve_format:
        out = apply(OPS["to_memory_format"], out, format=fmt.name)
    return out


def cat(tensors, dim=0):
    tensors = [t for t in tensors]
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    # PyTorch skips legacy empty 1-D tensors
    keep = [i for i, t in enumerate(tensors) if not (t.ndim == 1 and t.shape[0] == 0)] or [0]
    nonempty = [tensors[i] for i in keep]
    d = norm_dim(dim, nonempty[0].ndim)
    _check_cat_shapes([_shape_of(t) for t in nonempty], d, keep)     # (eagerly numpy's error would name others)
    if len(nonempty) == 1:
        return nonempty[0] * 1 if nonempty[0].requires_grad else clone(nonempty[0])
    return apply(OPS["cat"], *nonempty, dim=d)


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t_ in enumerate(tensors[1:], 1):
        if tuple(t_.shape) != tuple(tensors[0].shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at "
                               f"entry 0 and {list(t_.shape)} at entry {i}")
    d = norm_dim(dim, tensors[0].ndim + 1)
    return cat([unsqueeze(t_, d) for t_ in tensors], d)


def atleast_1d(x):
    return reshape(x, (1,)) if x.ndim == 0 else x


def atleast_2d(x):
    return reshape(x, (1,) * (2 - x.ndim) + tuple(x.shape)) if x.ndim < 2 else x


def atleast_3d(x):
    if x.ndim == 0:
        return reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return reshape(x, (1, x.shape[0], 1))
    if x.ndim == 2:
        return unsqueeze(x, -1)
    return x


def hstack(tensors):
    tensors = [atleast_1d(t_) for t_ in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([atleast_2d(t_) for t_ in tensors], 0)


row_stack = vstack


def dstack(tensors):
    return cat([atleast_3d(t_) for t_ in tensors], 2)


def column_stack(tensors):
    return cat([reshape(t_, (-1, 1)) if t_.ndim <= 1 else t_ for t_ in tensors], 1)


def narrow(input, dim, start, length):
    d = norm_dim(dim, input.ndim)
    size = input.shape[d]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    from .indexing import slice_dim
    return slice_dim(input, d, start, start + length)


def split(tensor, split_size_or_sections, dim=0):
    d = norm_dim(dim, tensor.ndim)
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and (step < 0 or size):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
                               if step == 0 else f"split expects split_size be non-negative, but got {step}")
        if step == 0:
            return (tensor,)
        sizes = [builtins.min(step, size - i) for i in range(0, size, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != size:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size "
                               f"at dimension {d}), but got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(tensor, d, start, s))
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = input.shape[norm_dim(dim, input.ndim)]
    step = -(-size // chunks)
    return split(input, step, dim) if size else split(input, [0] * chunks, dim)    # an empty dim: `chunks` pieces


def tensor_split(input, indices_or_sections, dim=0):
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = norm_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        bounds, s = [], 0
        for i in range(n - 1):
            s += q + (1 if i < r else 0)
            bounds.append(s)
    else:
        bounds = [int(i) for i in indices_or_sections]
    out, prev = [], 0
    for b in bounds + [size]:
        start, stop, _ = slice(prev, b).indices(size)      # the piece is x[prev:b], as Python slices it
        out.append(narrow(input, d, start, builtins.max(stop - start, 0)))
        prev = b
    return tuple(out)


def _split_dir(name, input, sections, dim, rank):
    """hsplit/vsplit/dsplit: tensor_split along `dim`, an int of sections only where it divides the size."""
    if input.ndim < rank:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {rank} dimension, but got a tensor with "
                           f"{input.ndim} dimensions!")
    if isinstance(sections, int) and (sections == 0 or input.shape[dim] % sections):
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                           f"{input.shape[dim]} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input, sections):
    return _split_dir("hsplit", input, sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input, sections):
    return _split_dir("vsplit", input, sections, 0, 2)


def dsplit(input, sections):
    return _split_dir("dsplit", input, sections, 2, 3)


def unbind(input, dim=0):
    d = norm_dim(dim, input.ndim)
    from .indexing import select
    return tuple(select(input, d, i) for i in range(input.shape[d]))


def repeat(input, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    shape = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    x = reshape(input, shape)
    inter = tuple(v for s in shape for v in (1, s))
    big = tuple(v for r, s in zip(sizes, shape) for v in (r, s))
    return reshape(expand(reshape(x, inter), big), tuple(r * s for r, s in zip(sizes, shape)))


def tile(input, dims):
    dims = tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


def flip(input, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return apply(OPS["flip"], input, dims=norm_dims(dims, input.ndim))     # (PyTorch's error for a repeated dim)


def fliplr(input):
    return flip(input, (1,))


def flipud(input):
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    if dims is None:
        return reshape(roll(flatten(input), shifts, 0), tuple(input.shape))
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return apply(OPS["roll"], input, shifts=shifts, dims=tuple(norm_dim(d, input.ndim) for d in dims))


def tril(input, diagonal=0):
    return apply(OPS["tril"], input, k=int(diagonal))


def triu(input, diagonal=0):
    return apply(OPS["triu"], input, k=int(diagonal))


def diagonal(input, offset=0, dim1=0, dim2=1):
    from ..creation import arange
    x = movedim(input, (dim1, dim2), (-2, -1))
    n, m = x.shape[-2], x.shape[-1]
    length = builtins.max(0, builtins.min(n, m - offset) if offset >= 0 else builtins.min(n + offset, m))
    i = arange(length)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    return x[..., rows, cols]


def diag(input, diagonal=0):
    if input.ndim == 1:
        from ..creation import zeros
        n = input.shape[0] + builtins.abs(diagonal)
        from .indexing import index_put
        from ..creation import arange
        i = arange(input.shape[0])
        rows, cols = (i, i + diagonal) if diagonal >= 0 else (i - diagonal, i)
        return index_put(zeros((n, n), dtype=input.dtype), (rows, cols), input)
    if input.ndim == 2:
        return globals()["diagonal"](input, diagonal)
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    from ..creation import eye
    if offset != 0 or (dim1, dim2) != (-2, -1):
        raise NotImplementedError("diag_embed: tracejit supports offset=0, dim1=-2, dim2=-1 only")
    return unsqueeze(input, -1) * eye(input.shape[-1], dtype=input.dtype)


def sum_to(g, shape):
    """Sum a broadcast tensor back to `shape` (the reverse of broadcasting)."""
    from .reduction import sum as rsum
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    if dims:
        g = rsum(g, dims, keepdim=True)
    return reshape(g, shape) if tuple(g.shape) != shape else g
