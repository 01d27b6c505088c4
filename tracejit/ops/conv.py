"""Convolution and pooling primitives over numba kernels (kernels/cpu/conv.py, kernels/cpu/pool.py).

Each backward is itself a registry op, and each backward op's VJP is written with the forward ops again:
conv2d, conv2d_backward_input and conv2d_backward_weight are the three faces of one bilinear map, and
the pooling backward ops are linear maps whose adjoints are the forward ops (max pooling: a gather by
the saved argmax indices). So gradients of any order exist, eager or traced.

Only 2-d forms are primitives: conv1d runs as conv2d over a height-1 image (see nn/functional.py).
"""
import numpy as np

from .. import _dtype as D
from .._memory_format import like as _layout       # channels_last in, channels_last out
from .registry import AVal, apply, defop, OPS


def _pair(v, name="value"):
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return (int(v[0]), int(v[0]))
        if len(v) != 2:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of 2 values, got {list(v)}")
        return (int(v[0]), int(v[1]))
    return (int(v), int(v))


def _float_kernel_dtype(a):
    """numba kernels are compiled for float32/float64; float16 is computed in float32."""
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float32)


def _check_float(x, what):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{what}: expected a floating point input but got {x.dtype}")


# ----------------------------------------------------------------------------- convolution

def _conv_meta(x, w, b=None, *, stride, padding, dilation, groups):
    from tracejit.kernels.cpu.conv import conv_out_size
    _check_pair(x, w, "conv2d")
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    if C != Cg * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input{list(x.shape)} "
                           f"to have {Cg * groups} channels, but got {C} channels instead")
    if O % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(w.shape)} instead")
    OH = conv_out_size(H, kh, stride[0], padding[0], dilation[0])
    OW = conv_out_size(W, kw, stride[1], padding[1], dilation[1])
    if OH <= 0 or OW <= 0:
        raise RuntimeError(f"Calculated padded input size per channel: ({H + 2 * padding[0]} x {W + 2 * padding[1]}). "
                           f"Kernel size: ({dilation[0] * (kh - 1) + 1} x {dilation[1] * (kw - 1) + 1}). "
                           f"Kernel size can't be greater than actual input size")
    if b is not None:
        if b.ndim != 1 or b.shape[0] != O:
            raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with {O} "
                               f"elements, but got bias of size {list(b.shape)} instead")
        if b.dtype is not x.dtype:
            raise RuntimeError(f"Input type ({x.dtype.name}) and bias type ({b.dtype.name}) should be the same")
    return AVal((N, O, OH, OW), x.dtype)


def _av(a):
    return AVal(a.shape, D._FROM_NP[a.dtype])


def _conv_impl(x, w, b=None, *, stride, padding, dilation, groups):
    from tracejit.kernels.cpu.conv import conv2d_forward
    # eager runs impl only: check shapes here
    _conv_meta(_av(x), _av(w), None if b is None else _av(b), stride=stride, padding=padding, dilation=dilation,
               groups=groups)
    dt = x.dtype
    out = conv2d_forward(_float_kernel_dtype(x), _float_kernel_dtype(w), stride, padding, dilation, groups,
                         None if b is None else _float_kernel_dtype(b))
    return _layout(out.astype(dt, copy=False), x, w)


def _geom(c):
    a = c.attrs
    return dict(stride=a["stride"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])


def _conv_vjp(c, g):
    x, w = c.inputs[:2]
    gx = gw = None
    if c.edges[0] is not None:
        gx = apply(OPS["conv2d_backward_input"], g, w, input_shape=tuple(x.shape), **_geom(c))
    if c.edges[1] is not None:
        gw = apply(OPS["conv2d_backward_weight"], x, g, weight_shape=tuple(w.shape), **_geom(c))
    if len(c.inputs) == 2:
        return gx, gw
    gb = apply(OPS["sum"], g, dims=(0, 2, 3), keepdim=False) if c.edges[2] is not None else None
    return gx, gw, gb


def _bwd_input_impl(g, w, input_shape, stride, padding, dilation, groups):
    from tracejit.kernels.cpu.conv import conv2d_input_grad
    dt = g.dtype
    return _layout(conv2d_input_grad(_float_kernel_dtype(g), _float_kernel_dtype(w), input_shape, stride, padding,
                                     dilation, groups).astype(dt, copy=False), g, w)


def _bwd_input_vjp(c, h):
    # z = A_w^T g  =>  dz/dg^T h = conv(h, w),  dz/dw^T h = backward_weight(h, g)
    g, w = c.inputs
    gg = gw = None
    if c.edges[0] is not None:
        gg = _crop(apply(OPS["conv2d"], h, w, **_geom(c)), g.shape)
    if c.edges[1] is not None:
        gw = apply(OPS["conv2d_backward_weight"], h, g, weight_shape=tuple(w.shape), **_geom(c))
    return gg, gw


def _crop(y, shape):
    """conv2d over an image of conv_transpose2d's size has one more row (column) than the transposed conv's input
    when its output_padding is >= the stride (allowed below the dilation): those never met the input."""
    if tuple(y.shape) == tuple(shape):
        return y
    from .shape_ops import narrow
    return narrow(narrow(y, 2, 0, shape[2]), 3, 0, shape[3])


def _bwd_weight_impl(x, g, weight_shape, stride, padding, dilation, groups):
    from tracejit.kernels.cpu.conv import conv2d_weight_grad
    dt = x.dtype
    return _layout(conv2d_weight_grad(_float_kernel_dtype(x), _float_kernel_dtype(g), weight_shape, stride, padding,
                                      dilation, groups).astype(dt, copy=False), x, g)


def _bwd_weight_vjp(c, k):
    # z = dW(x, g) = d/dw <conv(x, w), g>  =>  dz/dx^T k = backward_input(g, k),  dz/dg^T k = conv(x, k)
    x, g = c.inputs
    gx = gg = None
    if c.edges[0] is not None:
        gx = apply(OPS["conv2d_backward_input"], g, k, input_shape=tuple(x.shape), **_geom(c))
    if c.edges[1] is not None:
        gg = _crop(apply(OPS["conv2d"], x, k, **_geom(c)), g.shape)
    return gx, gg


defop("conv2d", _conv_impl, _conv_meta, _conv_vjp, kind="other", saves="i", grad_name="ConvolutionBackward0")
defop("conv2d_backward_input", _bwd_input_impl,
      lambda g, w, input_shape, **k: AVal(input_shape, g.dtype), _bwd_input_vjp, kind="other", saves="i")
defop("conv2d_backward_weight", _bwd_weight_impl,
      lambda x, g, weight_shape, **k: AVal(weight_shape, x.dtype), _bwd_weight_vjp, kind="other", saves="i")


def conv2d(input, weight, stride=1, padding=0, dilation=1, groups=1, bias=None):
    """The primitive (the bias is added inside the kernel, as the output is laid out; nn.functional.conv2d
    handles padding='same')."""
    stride, padding, dilation, groups = _conv_args(stride, padding, dilation, groups)
    args = (input, weight) if bias is None else (input, weight, bias)
    return apply(OPS["conv2d"], *args, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _conv_args(stride, padding, dilation, groups):
    """(stride, padding, dilation) as pairs and groups as an int, checked as PyTorch checks them."""
    stride, padding, dilation = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(padding) < 0:
        raise RuntimeError("negative padding is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("dilation should be greater than zero")
    if int(groups) <= 0:
        raise RuntimeError("non-positive groups is not supported")
    return stride, padding, dilation, int(groups)


def _check_pair(x, w, what):
    """4-d floating-point input and weight of one dtype."""
    if x.ndim != 4 or w.ndim != 4:
        raise RuntimeError(f"{what}: expected 4-D input and weight, got input of shape {list(x.shape)} and "
                           f"weight of shape {list(w.shape)}")
    _check_float(x, what)
    if x.dtype is not w.dtype:
        raise RuntimeError(f"Input type ({x.dtype.name}) and weight type ({w.dtype.name}) should be the same")


def check_transposed(input, weight, groups, bias):
    """PyTorch's checks of a transposed convolution's channels (input's dim 1 against the weight's dim 0) and bias
    (one per output channel), for any number of spatial dims."""
    Ci, Og = weight.shape[:2]
    if input.shape[1] != Ci or Ci % groups:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input{list(input.shape)} "
                           f"to have {Ci} channels, but got {input.shape[1]} channels instead")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != Og * groups):
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {Og * groups} elements, but got bias of size {list(bias.shape)} "
                           f"instead")


def conv_transpose2d(input, weight, stride=1, padding=0, output_padding=0, groups=1, dilation=1, bias=None):
    """The adjoint of conv2d in its input (PyTorch's transposed convolution): the conv2d_backward_input op with
    the input as the output gradient, so its gradients are conv2d and conv2d_backward_weight again. The bias is
    added after it (a broadcast add: the fusion pass's work when traced)."""
    from .shape_ops import reshape
    _check_pair(input, weight, "conv_transpose2d")
    stride, padding, dilation, groups = _conv_args(stride, padding, dilation, groups)
    output_padding = _pair(output_padding, "output_padding")
    if min(output_padding) < 0 or any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {output_padding[0]} output_padding_width: {output_padding[1]} "
                           f"stride_height: {stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    N, C, H, W = input.shape
    Ci, Og, kh, kw = weight.shape
    check_transposed(input, weight, groups, bias)
    size = [(n - 1) * s - 2 * p + d * (k - 1) + op + 1
            for n, s, p, d, k, op in zip((H, W), stride, padding, dilation, (kh, kw), output_padding)]
    if min(size) <= 0:
        raise RuntimeError(f"Given input size per channel: ({H} x {W}). Calculated output size per channel: "
                           f"({size[0]} x {size[1]}). Output size is too small")
    out = apply(OPS["conv2d_backward_input"], input, weight, input_shape=(N, Og * groups, size[0], size[1]),
                stride=stride, padding=padding, dilation=dilation, groups=groups)
    return out if bias is None else out + reshape(bias, (1, -1, 1, 1))


# ----------------------------------------------------------------------------- max pooling

def _pool_geom_check(x, kernel, stride, padding, dilation, name):
    _check_float(x, name)
    if x.ndim != 4:
        raise RuntimeError(f"{name}: expected a 4-D (N, C, H, W) input, got shape {list(x.shape)}")
    if min(kernel) <= 0 or min(stride) <= 0 or min(dilation) <= 0:
        raise RuntimeError(f"{name}: kernel_size, stride and dilation must be greater than zero")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={list(padding)}, "
                           f"kernel_size={list(kernel)}")


def _max_meta(x, kernel, stride, padding, dilation, ceil_mode):
    from tracejit.kernels.cpu.pool import pool_out_size
    _pool_geom_check(x, kernel, stride, padding, dilation, "max_pool2d")
    N, C, H, W = x.shape
    OH = pool_out_size(H, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
    OW = pool_out_size(W, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)
    if OH <= 0 or OW <= 0:
        raise RuntimeError(f"max_pool2d: output size is too small (input {list(x.shape)}, kernel {list(kernel)})")
    return AVal((N, C, OH, OW), x.dtype), AVal((N, C, OH, OW), D.int64)


def _max_impl(x, kernel, stride, padding, dilation, ceil_mode):
    from tracejit.kernels.cpu.pool import max_pool2d, max_pool2d_2x2
    shape = _max_meta(_av(x), kernel, stride, padding, dilation, ceil_mode)[0].shape
    xx = np.ascontiguousarray(_float_kernel_dtype(x))
    out = np.empty(shape, xx.dtype)
    idx = np.empty(shape, np.int64)
    if kernel == stride == (2, 2) and padding == (0, 0) and dilation == (1, 1) and 2 * shape[2] <= xx.shape[2] \
            and 2 * shape[3] <= xx.shape[3]:
        max_pool2d_2x2(xx, out, idx)
    else:
        max_pool2d(xx, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], dilation[0],
                   dilation[1], out, idx)
    return _layout(out.astype(x.dtype, copy=False), x), _layout(idx, x)


def _max_vjp(c, g, _gi=None):
    if g is None:
        return (None,)
    idx = c.out[1]
    return (apply(OPS["max_pool2d_backward"], g, idx, input_shape=c.shapes[0]),)


def _max_bwd_impl(g, idx, input_shape):
    from tracejit.kernels.cpu.pool import max_pool2d_backward
    N, C, H, W = input_shape
    gg = np.ascontiguousarray(_float_kernel_dtype(g))
    out = np.empty((N, C, H * W), gg.dtype)
    max_pool2d_backward(gg, np.ascontiguousarray(idx), out)
    return _layout(out.reshape(input_shape).astype(g.dtype, copy=False), g)


def _max_bwd_vjp(c, h):
    # a scatter by the argmax indices; its adjoint gathers by them
    from .indexing import gather
    g, idx = c.inputs
    N, C, H, W = c.attrs["input_shape"]
    flat = idx.reshape(N, C, -1)
    return (gather(h.reshape(N, C, H * W), 2, flat).reshape(tuple(idx.shape)), None)


defop("max_pool2d", _max_impl, _max_meta, _max_vjp, nout=2, saves="o", kind="other",
      grad_name="MaxPool2DWithIndicesBackward0")
defop("max_pool2d_backward", _max_bwd_impl, lambda g, idx, input_shape: AVal(input_shape, g.dtype), _max_bwd_vjp,
      kind="other", saves="i")


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _pair(stride, "stride")
    return apply(OPS["max_pool2d"], input, kernel=k, stride=s, padding=_pair(padding, "padding"),
                 dilation=_pair(dilation, "dilation"), ceil_mode=bool(ceil_mode))


# ----------------------------------------------------------------------------- average pooling

def _avg_meta(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    from tracejit.kernels.cpu.pool import pool_out_size
    _pool_geom_check(x, kernel, stride, padding, (1, 1), "avg_pool2d")
    N, C, H, W = x.shape
    OH = pool_out_size(H, kernel[0], stride[0], padding[0], 1, ceil_mode)
    OW = pool_out_size(W, kernel[1], stride[1], padding[1], 1, ceil_mode)
    if OH <= 0 or OW <= 0:
        raise RuntimeError(f"avg_pool2d: output size is too small (input {list(x.shape)}, kernel {list(kernel)})")
    return AVal((N, C, OH, OW), x.dtype)


def _avg_args(kernel, stride, padding, count_include_pad, divisor_override):
    return (kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], bool(count_include_pad),
            int(divisor_override or 0))


def _avg_impl(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    from tracejit.kernels.cpu.pool import avg_pool2d
    shape = _avg_meta(_av(x), kernel, stride, padding, ceil_mode, count_include_pad,
                      divisor_override).shape
    xx = np.ascontiguousarray(_float_kernel_dtype(x))
    out = np.empty(shape, xx.dtype)
    avg_pool2d(xx, *_avg_args(kernel, stride, padding, count_include_pad, divisor_override), out)
    return _layout(out.astype(x.dtype, copy=False), x)


def _avg_vjp(c, g):
    return (apply(OPS["avg_pool2d_backward"], g, input_shape=c.shapes[0], **c.attrs),)


def _avg_bwd_impl(g, input_shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    from tracejit.kernels.cpu.pool import avg_pool2d_backward
    gg = np.ascontiguousarray(_float_kernel_dtype(g))
    out = np.empty(input_shape, gg.dtype)
    avg_pool2d_backward(gg, *_avg_args(kernel, stride, padding, count_include_pad, divisor_override), out)
    return _layout(out.astype(g.dtype, copy=False), g)


def _avg_bwd_vjp(c, h):
    attrs = {k: v for k, v in c.attrs.items() if k != "input_shape"}
    return (apply(OPS["avg_pool2d"], h, **attrs),)


defop("avg_pool2d", _avg_impl, _avg_meta, _avg_vjp, kind="other", saves="", grad_name="AvgPool2DBackward0")
defop("avg_pool2d_backward", _avg_bwd_impl, lambda g, input_shape, **k: AVal(input_shape, g.dtype), _avg_bwd_vjp,
      kind="other", saves="")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _pair(stride, "stride")
    if divisor_override is not None and int(divisor_override) <= 0:
        raise RuntimeError("divisor must be not zero")
    return apply(OPS["avg_pool2d"], input, kernel=k, stride=s, padding=_pair(padding, "padding"),
                 ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad),
                 divisor_override=None if divisor_override is None else int(divisor_override))


# ----------------------------------------------------------------------------- adaptive average pooling

def _adaptive_meta(x, output_size):
    _check_float(x, "adaptive_avg_pool2d")
    if x.ndim != 4:
        raise RuntimeError(f"adaptive_avg_pool2d: expected a 4-D (N, C, H, W) input, got shape {list(x.shape)}")
    if x.shape[2] == 0 or x.shape[3] == 0:
        raise RuntimeError("adaptive_avg_pool2d: input spatial size must be non-empty")
    return AVal(tuple(x.shape[:2]) + tuple(output_size), x.dtype)


def _adaptive_impl(x, output_size):
    from tracejit.kernels.cpu.pool import adaptive_avg_pool2d
    _adaptive_meta(_av(x), output_size)
    xx = np.ascontiguousarray(_float_kernel_dtype(x))
    out = np.empty(tuple(x.shape[:2]) + tuple(output_size), xx.dtype)
    adaptive_avg_pool2d(xx, out)
    return _layout(out.astype(x.dtype, copy=False), x)


def _adaptive_bwd_impl(g, input_shape):
    from tracejit.kernels.cpu.pool import adaptive_avg_pool2d_backward
    gg = np.ascontiguousarray(_float_kernel_dtype(g))
    out = np.empty(input_shape, gg.dtype)
    adaptive_avg_pool2d_backward(gg, out)
    return _layout(out.astype(g.dtype, copy=False), g)


defop("adaptive_avg_pool2d", _adaptive_impl, _adaptive_meta,
      lambda c, g: (apply(OPS["adaptive_avg_pool2d_backward"], g, input_shape=c.shapes[0]),),
      kind="other", saves="", grad_name="AdaptiveAvgPool2DBackward0")
defop("adaptive_avg_pool2d_backward", _adaptive_bwd_impl, lambda g, input_shape: AVal(input_shape, g.dtype),
      lambda c, h: (apply(OPS["adaptive_avg_pool2d"], h, output_size=tuple(c.shapes[0][2:])),),
      kind="other", saves="")


def adaptive_avg_pool2d(input, output_size):
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 2:
            raise ValueError(f"adaptive_avg_pool2d: output_size must be 2, got {len(output_size)}")
        size = tuple(input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(output_size))
    else:
        size = (int(output_size), int(output_size))
    return apply(OPS["adaptive_avg_pool2d"], input, output_size=size)
