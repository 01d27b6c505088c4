"""A convolution's input columns, copied once: `conv2d(x, w)` and `conv2d_backward_weight(x, g)` of a traced
training step both begin by copying x into the (C*kh*kw, N, OH, OW) column matrix of kernels/cpu/conv.py (im2col);
this lowering makes the copy one `conv_columns` node that both products read (except for the convolutions
kernels/cpu/convtile.py computes in place, without columns). In the CNN bench's second
convolution (64x16x8x8 input, 3x3) the copy is 0.48 ms of the forward's 1.0 ms and of the weight gradient's 1.25.
A backend lowering after autodiff (the new nodes have no derivative), like gemm.py; the interpreter backend keeps
the plain ops as the reference. The shared columns live from the forward to the weight gradient, kh*kw times the
input's size: a graph shares at most BUDGET bytes of them (first come first served), the others are copied twice
as before.
"""
import numpy as np

from tracejit.kernels.cpu.conv import conv_out_size, forward_from_columns, input_columns, weight_grad_from_columns
from tracejit.kernels.cpu.convtile import direct
from ...ir.graph import Value
from ...ops.registry import AVal, Op
from ...passes.rewrite import Rewriter

BUDGET = 256 << 20      # bytes of columns kept alive between a convolution and its weight gradient, per graph


def _cols_meta(x, kh, kw, stride, padding, dilation):
    N, C, H, W = x.shape
    OH = conv_out_size(H, kh, stride[0], padding[0], dilation[0])
    OW = conv_out_size(W, kw, stride[1], padding[1], dilation[1])
    return AVal((C * kh * kw, N, OH, OW), x.dtype)


def _conv_impl(cols, w, b=None, groups=1):
    return forward_from_columns(cols, w, groups, b)


def _conv_meta(cols, w, b=None, groups=1):
    return AVal((cols.shape[1], w.shape[0]) + tuple(cols.shape[2:]), cols.dtype)


CONV_COLUMNS = Op("conv_columns", input_columns, _cols_meta, None, kind="other", saves="")
CONV_FROM_COLUMNS = Op("conv2d_from_columns", _conv_impl, _conv_meta, None, kind="other", saves="")
WEIGHT_GRAD_FROM_COLUMNS = Op("conv2d_weight_grad_from_columns", weight_grad_from_columns,
                              lambda cols, g, weight_shape, groups: AVal(weight_shape, cols.dtype), None,
                              kind="other", saves="")


def shared_columns(g):
    """conv2d / conv2d_backward_weight nodes of one float32/64 input and geometry, two or more -> one
    conv_columns node and conv2d_from_columns / conv2d_weight_grad_from_columns nodes reading it."""
    def key(n):
        if n.op.name != "conv2d" and n.op.name != "conv2d_backward_weight":
            return None
        x, y = n.inputs[:2]
        if not (isinstance(x, Value) and isinstance(y, Value) and x.dtype is y.dtype and
                x.dtype.np in (np.float32, np.float64) and all(isinstance(v, Value) and v.dtype is x.dtype
                                                                for v in n.inputs)):
            return None
        kh, kw = (y.shape if n.op.name == "conv2d" else n.attrs["weight_shape"])[2:]
        a = n.attrs
        k = id(x), kh, kw, tuple(a["stride"]), tuple(a["padding"]), tuple(a["dilation"])
        if direct(x.dtype.np, a["groups"], *k[3:], (kh, kw), _cols_meta(x, *k[1:]).shape[2:]):
            return None                      # convolved in place, no columns (kernels/cpu/convtile.py)
        return k

    count, first = {}, {}
    for n in g.nodes:
        k = key(n)
        if k is not None:
            count[k] = count.get(k, 0) + 1
            first.setdefault(k, n)
    left = BUDGET
    for k, n in first.items():
        if count[k] > 1:
            size = int(np.prod(_cols_meta(n.inputs[0], *k[1:]).shape)) * n.inputs[0].dtype.np.itemsize
            if size > left:
                count[k] = 1                 # copied twice: too big to keep
            else:
                left -= size
    if not any(c > 1 for c in count.values()):
        return g
    r = Rewriter(g)
    cols = {}
    for n in g.nodes:
        k = key(n)
        if k is None or count[k] < 2:
            r.copy(n)
            continue
        if k not in cols:
            x = n.inputs[0]
            attrs = dict(kh=k[1], kw=k[2], stride=k[3], padding=k[4], dilation=k[5])
            (cols[k],) = r.g.add_node(CONV_COLUMNS, [r.get(x)], attrs, [_cols_meta(x, **attrs)])
        c, o = cols[k], n.outputs[0]
        if n.op.name == "conv2d":
            new = r.g.add_node(CONV_FROM_COLUMNS, [c] + [r.get(v) for v in n.inputs[1:]],
                               {"groups": n.attrs["groups"]}, [AVal(o.shape, o.dtype)])
        else:
            new = r.g.add_node(WEIGHT_GRAD_FROM_COLUMNS, [c, r.get(n.inputs[1])],
                               {"weight_shape": tuple(n.attrs["weight_shape"]), "groups": n.attrs["groups"]},
                               [AVal(o.shape, o.dtype)])
        r.alias(o, new[0])
    return r.finish()
