"""A convolution's input, copied once: `conv2d(x, w)` and `conv2d_backward_weight(x, g)` of a traced training step
both begin by copying x, into the (C*kh*kw, N, OH, OW) column matrix of kernels/cpu/conv.py (im2col) or, for the
convolutions kernels/cpu/convtile.py computes in place, into its zero-padded column planes; this lowering makes
the copy one `conv_columns` (`conv_planes`) node that both read; a direct convolution's forward makes the planes
itself (`conv2d_planes_forward`: image by image on the thread that reads them) and returns them for the weight
gradient. In the CNN bench's second convolution (64x16x8x8 input, 3x3) the columns are 0.48 ms of the forward's
1.0 ms and of the weight gradient's 1.25; the planes of the
ResNet bench's 64x16x16x16 input 0.063 ms (0.090 at stride 2), beside its direct forward's 0.9 and weight
gradient's 0.9 (one thread, AMD EPYC znver3).
A backend lowering after autodiff (the new nodes have no derivative), like gemm.py; the interpreter backend keeps
the plain ops as the reference. The shared copies live from the forward to the weight gradient (columns kh*kw
times the input's size): a graph shares at most BUDGET bytes of them (first come first served), the others are
copied twice as before.
"""
import numpy as np

from tracejit.kernels.cpu.conv import conv_out_size, forward_from_columns, input_columns, weight_grad_from_columns
from tracejit.kernels.cpu.convtile import (direct, forward_from_planes, planes, planes_and_forward,
                                           weight_grad_from_planes)
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


def _planes_meta(x, stride, padding):
    N, C, H, W = x.shape
    S = stride[1]
    return AVal((N, C, S, H + 2 * padding[0], -(-(W + 2 * padding[1]) // S)), x.dtype)


CONV_PLANES = Op("conv_planes", planes, _planes_meta, None, kind="other", saves="")
CONV_FROM_PLANES = Op("conv2d_from_planes", lambda xp, w, b=None, stride=None, dilation=None, out_size=None:
                      forward_from_planes(xp, w, b, stride, dilation, out_size),
                      lambda xp, w, b=None, stride=None, dilation=None, out_size=None:
                      AVal((xp.shape[0], w.shape[0]) + tuple(out_size), xp.dtype), None, kind="other", saves="")
# the forward convolution that fills the planes itself, image by image on the thread that reads them, and returns
# them for the weight gradient
CONV_PLANES_FORWARD = Op("conv2d_planes_forward",
                         lambda x, w, b=None, stride=None, padding=None, dilation=None, out_size=None:
                         planes_and_forward(x, w, b, stride, padding, dilation, out_size),
                         lambda x, w, b=None, stride=None, padding=None, dilation=None, out_size=None:
                         (_planes_meta(x, stride, padding), CONV_FROM_PLANES.meta(x, w, out_size=out_size)),
                         None, kind="other", saves="", nout=2)
WEIGHT_GRAD_FROM_PLANES = Op("conv2d_weight_grad_from_planes", weight_grad_from_planes,
                             lambda xp, g, weight_shape, stride, dilation: AVal(weight_shape, xp.dtype), None,
                             kind="other", saves="")

def shared_columns(g):
    """conv2d / conv2d_backward_weight nodes of one float32/64 input and geometry, two or more -> one
    conv_columns node and conv2d_from_columns / conv2d_weight_grad_from_columns nodes reading it (conv_planes,
    conv2d_from_planes, conv2d_weight_grad_from_planes for convtile's direct convolutions)."""
    def key(n):
        if n.op.name != "conv2d" and n.op.name != "conv2d_backward_weight":
            return None
        x, y = n.inputs[:2]
        if not (isinstance(x, Value) and isinstance(y, Value) and x.dtype is y.dtype and
                x.dtype.np in (np.float32, np.float64) and all(isinstance(v, Value) and v.dtype is x.dtype
                                                                for v in n.inputs)):
            return None
        O, C, kh, kw = y.shape if n.op.name == "conv2d" else n.attrs["weight_shape"]
        a = n.attrs
        k = id(x), kh, kw, tuple(a["stride"]), tuple(a["padding"]), tuple(a["dilation"])
        return k + (direct(x.dtype.np, a["groups"], *k[3:], (kh, kw), _cols_meta(x, *k[1:]).shape[2:], (C, O)),)

    def shared(x, k):
        """The shared copy's node: planes for a direct convolution, columns for the others."""
        if k[6]:
            attrs = dict(stride=k[3], padding=k[4])
            return r.g.add_node(CONV_PLANES, [r.get(x)], attrs, [_planes_meta(x, **attrs)])
        attrs = dict(kh=k[1], kw=k[2], stride=k[3], padding=k[4], dilation=k[5])
        return r.g.add_node(CONV_COLUMNS, [r.get(x)], attrs, [_cols_meta(x, **attrs)])

    def reader(n, c, k):
        o = n.outputs[0]
        if n.op.name == "conv2d" and k[6]:
            return r.g.add_node(CONV_FROM_PLANES, [c] + [r.get(v) for v in n.inputs[1:]],
                                dict(stride=k[3], dilation=k[5], out_size=tuple(o.shape[2:])), [AVal(o.shape, o.dtype)])
        if n.op.name == "conv2d":
            return r.g.add_node(CONV_FROM_COLUMNS, [c] + [r.get(v) for v in n.inputs[1:]],
                                {"groups": n.attrs["groups"]}, [AVal(o.shape, o.dtype)])
        if k[6]:
            return r.g.add_node(WEIGHT_GRAD_FROM_PLANES, [c, r.get(n.inputs[1])],
                                dict(weight_shape=tuple(n.attrs["weight_shape"]), stride=k[3], dilation=k[5]),
                                [AVal(o.shape, o.dtype)])
        return r.g.add_node(WEIGHT_GRAD_FROM_COLUMNS, [c, r.get(n.inputs[1])],
                            {"weight_shape": tuple(n.attrs["weight_shape"]), "groups": n.attrs["groups"]},
                            [AVal(o.shape, o.dtype)])

    count, first = {}, {}
    for n in g.nodes:
        k = key(n)
        if k is not None:
            count[k] = count.get(k, 0) + 1
            first.setdefault(k, n)
    left = BUDGET
    for k, n in first.items():
        if count[k] > 1:
            meta = _planes_meta(n.inputs[0], k[3], k[4]) if k[6] else _cols_meta(n.inputs[0], *k[1:6])
            size = int(np.prod(meta.shape)) * n.inputs[0].dtype.np.itemsize
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
        if k not in cols and k[6] and n.op.name == "conv2d":
            o = n.outputs[0]
            attrs = dict(stride=k[3], padding=k[4], dilation=k[5], out_size=tuple(o.shape[2:]))
            cols[k], y = r.g.add_node(CONV_PLANES_FORWARD, [r.get(v) for v in n.inputs], attrs,
                                      [_planes_meta(n.inputs[0], k[3], k[4]), AVal(o.shape, o.dtype)])
            r.alias(o, y)
            continue
        if k not in cols:
            (cols[k],) = shared(n.inputs[0], k)
        r.alias(n.outputs[0], reader(n, cols[k], k)[0])
    return r.finish()
