"""Layouts while tracing: the strides a tensor would have eagerly, for tracers (PyTorch's fake tensors' idea).

The IR is functional: a node's value is its elements in row-major order, and a backend may compute a `view`
node as an alias or as a copy (numpy's reshape). Where eager mode's behaviour depends on strides, the tracer
answers from this model instead: whether `view` is legal (after a transpose it is not, after `.contiguous()`
it is), what `stride()` and `is_contiguous()` return, and where an in-place update of a view lands in its
base (see TraceContext.write). A tracer's strides live on the tensor (`_layout`, None when row-major), not on
the IR value: an in-place update gives the tensor a new value but keeps its strides, as eagerly.

The strides of a view op's result come from running the op's own numpy implementation on a stand-in array
that has the input's strides and no memory behind it (views only compute strides, they never read), so the
model is eager mode's rule by construction. Other ops: an elementwise op's result follows the layout of its
first full-size, non-broadcast operand (its dims ordered by stride, as numpy's and PyTorch's do); every other
result is row-major.
"""
import numpy as np


def contiguous_strides(shape):
    st, acc = [], 1
    for s in reversed(tuple(shape)):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def is_contiguous(shape, strides):
    """PyTorch's rule: sizes of 1 (and empty tensors) do not constrain the strides."""
    if any(s == 0 for s in shape):
        return True
    acc = 1
    for s, st in zip(reversed(tuple(shape)), reversed(tuple(strides))):
        if s != 1 and st != acc:
            return False
        acc *= s
    return True


def strides_of(t):
    """The element strides of tensor `t`, real or tracer."""
    if t._data is not None:
        isz = t._data.itemsize
        return tuple(s // isz for s in t._data.strides)
    lay = t.__dict__.get("_layout")
    return lay if lay is not None else contiguous_strides(t._value.shape)


_RESHAPE_COPY_KW = tuple(int(v) for v in np.__version__.split(".")[:2]) >= (2, 1)


def reshape_view(a, shape):
    """`a` reshaped to `shape` as a view sharing its memory, or None where its strides need a copy (numpy's own
    rule). A C-contiguous array's reshape always is one (the common case, and the cheap call: 0.3 us against
    1.3 for reshape(copy=False)); otherwise numpy >= 2.1 says so through reshape(copy=False), older ones by
    assigning `.shape` to a view (which numpy 2.5 deprecates)."""
    if a.flags.c_contiguous:
        return a.reshape(shape)
    if _RESHAPE_COPY_KW:
        try:
            return np.reshape(a, shape, copy=False)
        except ValueError:
            return None
    v = a.view()
    try:
        v.shape = shape
    except AttributeError:
        return None
    return v


def _stand_in(shape, strides):
    # itemsize 1: byte strides are element strides; nothing is ever read through it
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), tuple(shape), tuple(strides))


def view_strides(shape, strides, new_shape):
    """The strides of `view(new_shape)` of a tensor with these strides, or None where eager mode's view
    fails ("view size is not compatible with input tensor's size and stride")."""
    v = reshape_view(_stand_in(shape, strides), tuple(new_shape))
    return None if v is None else v.strides


def view_op_window(op, shape, attrs):
    """(element offset, element strides) where a view op's result reads a row-major input, from the op's own
    implementation run on a stand-in (a loop kernel reads a slice in place by them)."""
    x = _stand_in(shape, contiguous_strides(shape))
    v = op.impl(x, **attrs)
    return v.__array_interface__["data"][0] - x.__array_interface__["data"][0], v.strides


def view_op_strides(op, shape, strides, attrs):
    """The strides of a view op's result, from the op's own implementation run on a stand-in."""
    if op.name == "view":           # its impl copies where it cannot alias; the model asks the strict question
        st = view_strides(shape, strides, attrs["shape"])
        return st if st is not None else contiguous_strides(attrs["shape"])
    return op.impl(_stand_in(shape, strides), **attrs).strides


def result_layout(op, args, out_shape):
    """`_layout` of a non-view op's result: None (row-major) or strides."""
    if op.kind != "elementwise" or op.makes_contiguous:
        return None
    from .._tensor import Tensor
    out_shape = tuple(out_shape)
    for a in args:
        if isinstance(a, Tensor) and tuple(a.shape) == out_shape:
            st = strides_of(a)
            if is_contiguous(out_shape, st):
                return None
            if any(x == 0 for x in st):       # a broadcast operand says nothing about the order
                continue
            order = sorted(range(len(out_shape)), key=lambda d: (-st[d], d))
            res, acc = [0] * len(out_shape), 1
            for d in reversed(order):
                res[d] = acc
                acc *= max(out_shape[d], 1)
            return tuple(res)
    return None
