"""torch.nn.functional: activations, linear, dropout and the losses, composed from registry ops."""
import math

import numpy as np

from .. import _dtype as D
from .._state import STATE
from ..ops import elementwise as E, reduction as R, shape_ops as S, indexing as I, linalg as L
from ..ops.nn_ops import log_softmax, softmax
from ..ops.registry import OPS, apply
from ..ops.attention import scaled_dot_product_attention  # noqa: F401
from ..ops.elementwise import gelu, sigmoid, softplus, tanh, logit, threshold  # noqa: F401


# ----------------------------------------------------------------------------- activations with inplace=
# (torch.relu and friends take no `inplace`; their torch.nn.functional forms do, positionally too)

def relu(input, inplace=False):
    return input.relu_() if inplace else E.relu(input)


def relu_(input):
    return input.relu_()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return input.leaky_relu_(negative_slope) if inplace else E.leaky_relu(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return input.elu_(alpha) if inplace else E.elu(input, alpha)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return input.hardtanh_(min_val, max_val) if inplace else E.hardtanh(input, min_val, max_val)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def silu(input, inplace=False):
    return input.silu_() if inplace else E.silu(input)


def hardswish(input, inplace=False):
    return input.hardswish_() if inplace else E.hardswish(input)


def hardsigmoid(input, inplace=False):
    return input.hardsigmoid_() if inplace else E.hardsigmoid(input)


def mish(input, inplace=False):
    return input.mish_() if inplace else E.mish(input)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


# in place through elu_, whose derivative reads its output: a copy_ of elu's result would change the input
# that elu's derivative reads

def selu(input, inplace=False):
    if inplace:
        return input.elu_(_SELU_ALPHA).mul_(_SELU_SCALE)
    return _SELU_SCALE * E.elu(input, _SELU_ALPHA)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    if inplace:                                   # celu(x, a) = a * elu(x / a)
        return input.div_(alpha).elu_(1.0).mul_(alpha)
    return E.where(input > 0, input, alpha * E.expm1(input / alpha))


def hardshrink(input, lambd=0.5):
    return E.where(E.abs(input) > lambd, input, 0.0)


def softshrink(input, lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return E.where(input > lambd, input - lambd, E.where(input < -lambd, input + lambd, 0.0))


def glu(input, dim=-1):
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim + input.ndim if dim < 0 else dim
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    a, b = input.chunk(2, d)
    return a * sigmoid(b)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: in training each element at or below zero gets its own slope drawn from
    U(lower, upper); in eval the slope is their mean. The output is input * factor, so the gradient is the factor
    (the drawn slope at zero too, as PyTorch's)."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:       # (leaky_relu's gradient holds its slope as a float32 constant: not used out of place)
        slope = (lower + upper) / 2
        return input.leaky_relu_(slope) if inplace else E.where(input > 0, input, input * slope)
    from ..creation import rand
    slope = lower + (upper - lower) * rand(tuple(input.shape), dtype=input.dtype, device=input.device)
    factor = E.where(input > 0, 1.0, slope).detach()
    return input.mul_(factor) if inplace else input * factor


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def channel_shuffle(input, groups):
    """(N, C, *) with C = groups * k: channel g * k + i moves to i * groups + g (ShuffleNet's interleave)."""
    if input.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    x = S.reshape(input, (n, groups, c // groups, *rest))
    return S.reshape(S.transpose(x, 1, 2), (n, c, *rest))


native_channel_shuffle = channel_shuffle


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over a window of `size` channels around each, zeros past the ends)^beta."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    sq = _pad_constant(input * input, (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2), 0.0)
    c = input.shape[1]
    window = S.narrow(sq, 1, 0, c)
    for i in range(1, size):
        window = window + S.narrow(sq, 1, i, c)
    return input / (window * (alpha / size) + k) ** beta


def softmin(input, dim=None, dtype=None):
    return softmax(-input, dim, dtype)


def logsigmoid(input):
    return -softplus(-input)


def tanhshrink(input):
    return input - tanh(input)


def softsign(input):
    return input / (1 + E.abs(input))


def linear(input, weight, bias=None):
    """PyTorch's graph: addmm for a 2-D input with a bias; eagerly, a contiguous input of other rank with a 1-D
    bias is flattened to 2-D for it (view, addmm, view); otherwise matmul, then the bias added. (Traced, the
    views would stand between the add and the elementwise ops around it, which then fuse no more: the bias
    gradient's sum, the add of a 1-D input's bias.)"""
    _need_tensor("linear", input)
    if bias is not None and weight.ndim == 2 and input.ndim >= 1:
        if input.ndim == 2:
            return L.addmm(bias, input, S.t(weight))
        if bias.ndim == 1 and STATE.tracer is None and input.is_contiguous():
            lead = tuple(input.shape[:-1])
            out = L.addmm(bias, input.reshape(math.prod(lead), input.shape[-1]), S.t(weight))
            return out.reshape(lead + (out.shape[-1],))
    out = L.matmul(input, S.t(weight) if weight.ndim == 2 else weight)
    return out + bias if bias is not None else out


def bilinear(input1, input2, weight, bias=None):
    out = L.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out + bias if bias is not None else out


def dropout(input, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    from ..creation import rand
    keep = rand(tuple(input.shape), dtype=input.dtype, device=input.device) >= p
    return input * keep * (1.0 / (1.0 - p))


# -SELU's negative saturation, scale * alpha: where alpha dropout sets its dropped inputs
_SELU_SATURATION = 1.7580993408473766


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped inputs take SELU's negative saturation value, then an affine map
    a * x + b keeps a standard normal input's mean and variance (PyTorch's a and b)."""
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout with one draw per (dim 0, dim 1) pair: whole channels take the dropped value."""
    return _alpha_dropout(input, p, training, inplace, True)


def _alpha_dropout(input, p, training, inplace, feature):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    from ..creation import rand
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else tuple(input.shape)
    keep = (rand(shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)
    a = 1.0 / math.sqrt((_SELU_SATURATION ** 2 * p + 1) * (1 - p))
    b = (keep - 1.0) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p      # kept: a*s*p; dropped: a*s*(p-1)
    return input.mul_(keep * a).add_(b) if inplace else input * (keep * a) + b


def _need_tensor(fn, x, arg="input", pos=1):
    from .._tensor import Tensor
    if not isinstance(x, Tensor):
        t = type(x)
        name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not {name}")


def one_hot(tensor, num_classes=-1):
    from ..creation import arange
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor._data is not None and tensor.numel() and int(tensor.min().item()) < 0:
            raise RuntimeError("Class values must be non-negative.")
        num_classes = int(tensor.max().item()) + 1
    else:       # (an op: a traced program checks the values on every call, as eager does)
        from ..ops.nn_ops import check_classes
        tensor = check_classes(tensor, num_classes)
    return (S.unsqueeze(tensor, -1) == arange(num_classes)).long()


def normalize(input, p=2.0, dim=1, eps=1e-12):
    return input / E.clamp(R.vector_norm(input, p, dim, keepdim=True), min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    n = E.clamp(R.vector_norm(x1, 2, dim) * R.vector_norm(x2, 2, dim), min=eps)
    return R.sum(x1 * x2, dim) / n


_INTERP_DIMS = {"nearest": (3, 4, 5), "nearest-exact": (3, 4, 5), "linear": (3,), "bilinear": (4,),
                "trilinear": (5,)}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's F.interpolate for the modes nearest, nearest-exact, linear, bilinear and trilinear: per spatial dim
    a gather of the source rows (index_select) and, for the linear modes, the two neighbours' weighted sum, with
    PyTorch's source coordinates (float32 arithmetic, as its CPU kernels): differentiable by the gather's VJP."""
    if mode not in _INTERP_DIMS:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported by tracejit (nearest, "
                                  f"nearest-exact, linear, bilinear, trilinear)")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by tracejit")
    nd = input.ndim - 2
    if input.ndim not in _INTERP_DIMS[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{' or '.join(f'{d}D' for d in _INTERP_DIMS[mode])} input")
    if mode.startswith("nearest") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None else
                         "either size or scale_factor should be defined")
    in_size = tuple(input.shape[2:])
    if size is not None:
        out = (size,) * nd if isinstance(size, int) else tuple(size)
        if len(out) != nd:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(in_size)} and output size of {list(out)}. Please provide "
                             f"input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                             f"format.")
        scales = (None,) * nd
    else:
        sf = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        if len(sf) != nd:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(in_size)} and scale_factor of shape {list(sf)}.")
        out = tuple(int(np.floor(float(n) * float(f))) for n, f in zip(in_size, sf))
        scales = (None,) * nd if recompute_scale_factor else tuple(float(f) for f in sf)
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input {in_size} and output "
                           f"{out}")
    y = input
    for d, (n, m, sc) in enumerate(zip(in_size, out, scales)):
        dim = 2 + d
        if mode.startswith("nearest"):
            y = I.index_select(y, dim, _const(_nearest_index(n, m, sc, mode == "nearest-exact")))
        else:
            i0, i1, w1 = _linear_source(n, m, sc, bool(align_corners))
            shape = [1] * input.ndim
            shape[dim] = m
            w1 = _const(w1.reshape(shape).astype(input.dtype.np))
            y = I.index_select(y, dim, _const(i0)) * (1 - w1) + I.index_select(y, dim, _const(i1)) * w1
    return y


def _const(a):
    from ..creation import tensor
    return tensor(a)


def _scale(n, m, sc, align_corners=False):
    """PyTorch's area_pixel_compute_scale (as float32)."""
    if align_corners:
        return np.float32((n - 1) / (m - 1) if m > 1 else 0.0)
    return np.float32(1.0 / sc if sc is not None and sc > 0 else n / m)


def _nearest_index(n, m, sc, exact):
    s = _scale(n, m, sc)
    j = np.arange(m, dtype=np.float32)
    src = np.floor((j + np.float32(0.5)) * s) if exact else np.floor(j * s)
    return np.minimum(src.astype(np.int64), n - 1)


def _linear_source(n, m, sc, align_corners):
    """(left neighbour, right neighbour, right weight) of each output position along one dim."""
    s = _scale(n, m, sc, align_corners)
    j = np.arange(m, dtype=np.float32)
    src = j * s if align_corners else np.maximum((j + np.float32(0.5)) * s - np.float32(0.5), np.float32(0.0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    return i0, i1, (src - i0.astype(np.float32)).astype(np.float32)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    r = upscale_factor
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = S.reshape(input, (*lead, c // (r * r), r, r, h, w))
    x = S.permute(x, tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return S.reshape(x, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    r = downscale_factor
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                           f"{h} and {w} for downscale_factor={r}")
    n = len(lead)
    x = S.reshape(input, (*lead, c, h // r, r, w // r, r))
    x = S.permute(x, tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return S.reshape(x, (*lead, c * r * r, h // r, w // r))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return R.vector_norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """Pads the trailing len(pad) // 2 dims, the last dim first (pad = (left, right, top, bottom, ...)); negative
    entries crop. 'constant' fills with `value`; 'reflect', 'replicate' and 'circular' (1 to 3 dims, of a batched or
    unbatched input) take each new position's value from a source position: one index_select per padded dim, whose
    gradient (an index_add) sums the copies back into the source."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pad = tuple(pad)
    for i, p in enumerate(pad):
        if not isinstance(p, (int, np.integer)) or isinstance(p, bool):
            raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, but found element of type "
                            f"{type(p).__name__} at pos {i}")
    if mode == "constant":
        return _pad_constant(input, pad, 0.0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pad) // 2
    if len(pad) not in (2, 4, 6) or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\nSupported combinations for "
            f"non-constant padding:\n  - 2D or 3D input: padding size = 2 (pads last dimension)\n  - 3D or 4D input: "
            f"padding size = 4 (pads last 2 dimensions)\n  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    shape = list(input.shape)
    dims = range(input.ndim - k, input.ndim)                          # the padded dims, first to last
    pairs = [(pad[2 * (input.ndim - 1 - d)], pad[2 * (input.ndim - 1 - d) + 1]) for d in dims]
    if mode == "circular":
        for d, (lo, hi) in zip(dims, pairs):
            kept = shape[d] + min(lo, 0) + min(hi, 0)      # what the negative sides leave: the new sides wrap it
            if kept < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
            if max(lo, hi) > kept:
                raise RuntimeError("Padding value causes wrapping around more than once.")
    else:
        if 0 in shape[1 if input.ndim == k + 2 else 0:]:
            raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and "
                               f"other non-zero dimensions for input, but got: {shape}")
        if mode == "reflect":
            for d, (lo, hi) in zip(dims, pairs):
                if lo >= shape[d] or hi >= shape[d]:
                    raise RuntimeError(
                        f"Argument #{2 * (input.ndim - d) + 2}: Padding size should be less than the corresponding "
                        f"input dimension, but got: padding ({lo}, {hi}) at dimension {d} of input {shape}")
        out = [shape[d] + lo + hi for d, (lo, hi) in zip(dims, pairs)]
        if min(out) < 1:
            names = "DHW"[3 - k:]
            raise RuntimeError(f"input ({', '.join(f'{c}: {shape[d]}' for c, d in zip(names, dims))}) is too small. "
                               f"Calculated output {' '.join(f'{c}: {n}' for c, n in zip(names, out))}")
    for d, (lo, hi) in zip(dims, pairs):
        if lo or hi:
            input = I.index_select(input, d, _const(_pad_source(shape[d], lo, hi, mode)))
    return input


def _pad_source(n, lo, hi, mode):
    """The source position along a dim of size n of each position of that dim padded by (lo, hi)."""
    j = np.arange(-lo, n + hi, dtype=np.int64)
    if mode == "replicate":
        return np.clip(j, 0, n - 1)
    if mode == "circular":                                # the cropped range [c, c + kept) wrapped around
        c, kept = max(-lo, 0), n + min(lo, 0) + min(hi, 0)
        return c + np.mod(np.arange(-max(lo, 0), kept + max(hi, 0)), max(kept, 1))
    period = 2 * (n - 1)                                  # reflect: mirrored at 0 and at n - 1, edges not repeated
    j = np.abs(j) % period if period else np.zeros_like(j)
    return np.where(j >= n, period - j, j)


def _pad_constant(input, pad, value):
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    from ..creation import full
    out = input
    for i in range(len(pad) // 2):
        d = input.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        n = out.shape[d]
        keep = n + min(lo, 0) + min(hi, 0)
        if keep < 0:
            raise RuntimeError(f"pad: the padding ({lo}, {hi}) of dim {d} crops more than its size {n}")
        if keep < n:                                       # negative padding crops
            out = S.narrow(out, d, max(-lo, 0), keep)
        block = lambda m: full(tuple(out.shape[:d]) + (m,) + tuple(out.shape[d + 1:]), value,  # noqa: E731
                               dtype=input.dtype, device=input.device)
        parts = ([block(lo)] if lo > 0 else []) + [out] + ([block(hi)] if hi > 0 else [])
        if len(parts) > 1:
            out = S.cat(parts, d)
    return out


# ----------------------------------------------------------------------------- losses

def _reduce(loss, reduction):
    if reduction == "mean":
        return R.mean(loss)
    if reduction == "sum":
        return R.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_same(input, target, name):
    if tuple(input.shape) != tuple(target.shape):
        import warnings
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}) in {name}. This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_same(input, target, "mse_loss")
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_same(input, target, "l1_loss")
    return _reduce(E.abs(input - target), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    d = E.abs(input - target)
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(E.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    d = E.abs(input - target)
    return _reduce(E.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    from ..ops.registry import OPS, apply
    if input.ndim < 1:
        raise ValueError("nll_loss: input must have at least 1 dimension")
    shape = None                      # of a 'none' result that is not [N]
    if input.ndim == 1:               # one sample: [C] and a 0-d target
        input, target, shape = S.unsqueeze(input, 0), S.unsqueeze(target, 0), ()
    elif input.ndim > 2:              # [N, C, d1, ...] -> [N*d1*..., C]
        if tuple(target.shape) != (input.shape[0],) + tuple(input.shape[2:]):
            raise ValueError(f"Expected target size {[input.shape[0]] + list(input.shape[2:])}, got "
                             f"{list(target.shape)}")
        shape = tuple(target.shape)
        input, target = S.reshape(S.movedim(input, 1, -1), (-1, input.shape[1])), S.reshape(target, (-1,))
    args = (input, target) if weight is None else (input, target, weight)
    attrs = dict(ignore_index=int(ignore_index), reduction=reduction)
    OPS["nll_loss"].meta(*args, **attrs)      # eager runs no shape rule: its errors, here
    loss = apply(OPS["nll_loss"], *args, **attrs)
    return S.reshape(loss, shape) if reduction == "none" and shape is not None else loss


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    cdim = 1 if input.ndim > 1 else 0
    logp = log_softmax(input, cdim)
    if target.dtype.is_floating_point:  # class probabilities
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / input.shape[cdim]
        w = 1.0 if weight is None else S.reshape(weight, [-1 if i == cdim else 1 for i in range(input.ndim)])
        loss = -R.sum(logp * target * w, cdim)
        if reduction == "mean":
            return R.sum(loss) / (loss.numel() if loss.ndim else 1)
        return _reduce(loss, reduction)
    if input.ndim > 2:  # (N, C, d1, ...) -> (N*d..., C)
        logp = S.reshape(S.movedim(logp, 1, -1), (-1, input.shape[1]))
        target = S.reshape(target, (-1,))
        out = cross_entropy_from_logp(logp, target, weight, ignore_index, reduction, label_smoothing)
        return out if reduction != "none" else S.reshape(out, (input.shape[0],) + tuple(input.shape[2:]))
    return cross_entropy_from_logp(logp, target, weight, ignore_index, reduction, label_smoothing)


def cross_entropy_from_logp(logp, target, weight, ignore_index, reduction, label_smoothing):
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    cdim = 1 if logp.ndim > 1 else 0
    C = logp.shape[cdim]
    valid = (target != ignore_index).to(logp.dtype)
    w = 1.0 if weight is None else weight
    smooth = -R.sum(logp * w, cdim) * valid
    if reduction == "mean":
        denom = R.sum(valid * (1.0 if weight is None else I.getitem(weight, E.where(target != ignore_index, target, 0))))
        smooth = R.sum(smooth) / denom
    else:
        smooth = _reduce(smooth, reduction)
    return (1 - label_smoothing) * nll + label_smoothing / C * smooth


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    from ..ops.registry import apply, OPS
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    if input._data is not None and input.numel() and not bool(((input >= 0) & (input <= 1)).all()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = apply(OPS["binary_cross_entropy"], input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    # log(sigmoid(x)) = -softplus(-x), log(1-sigmoid(x)) = -softplus(x): stable for large |x|
    if pos_weight is not None:
        loss = (1 - target) * softplus(input) + pos_weight * target * softplus(-input)
    else:
        loss = (1 - target) * softplus(input) + target * softplus(-input)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    loss = E.exp(target) * (target - input) if log_target else E.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return R.sum(loss) / input.shape[0]
    return _reduce(loss, reduction)


# ----------------------------------------------------------------------------- margin, embedding and likelihood losses
# Each is a composite of registry ops (so eager, tracing and autodiff share it); data-dependent checks of index
# targets run in eager mode, where the values are known.

def _type_name(dtype):
    """PyTorch's name of a dtype in messages (Float, Long...)."""
    from .._out import _CATEGORY
    return _CATEGORY.get(str(dtype).split(".")[-1], str(dtype))


def _legacy(size_average, reduce, reduction):
    """The reduction the deprecated size_average/reduce flags ask for (None, None: `reduction` itself)."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _valid_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _known(*ts):
    """Whether every tensor holds concrete values (eager, not tracing), so value checks can run."""
    return STATE.tracer is None and all(t._data is not None for t in ts)


def _need_long(target):
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {_type_name(target.dtype)}")


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), broadcast over the three inputs of equal rank."""
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} ")
    return _reduce(E.clamp_min(-target * (input1 - input2) + margin, 0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where target is -1 (both terms for any other value)."""
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    hinge = E.where(target != 1, E.clamp_min(margin - input, 0), 0.0)
    return _reduce(hinge + E.where(target != -1, input, 0.0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), as softplus (finite where exp overflows)."""
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    margin = input * -target             # (raises for shapes that do not broadcast, naming input first)
    if tuple(margin.shape) != tuple(input.shape):
        raise RuntimeError(f"output with shape {list(input.shape)} doesn't match the broadcast shape "
                           f"{list(margin.shape)}")
    return _reduce(softplus(margin), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Binary cross-entropy with logits per class, averaged over the last (class) dim, one loss per sample."""
    reduction = _legacy(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    if input.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    loss = R.sum(loss, input.ndim - 1) / input.shape[-1]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1 (0 for other values); the
    cosine over the last dim, each squared norm plus 1e-12."""
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    want = 2 if target.ndim == 1 else 1
    if input1.ndim != want or input2.ndim != want:
        raise RuntimeError(f"{target.ndim}D target tensor expects {want}D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    d = target.ndim
    dot = R.sum(input1 * input2, d)
    cos = dot / E.sqrt((R.sum(input1 * input1, d) + 1e-12) * (R.sum(input2 * input2, d) + 1e-12))
    loss = E.where(target == 1, 1 - cos, 0.0) + E.where(target == -1, E.clamp_min(cos - margin, 0), 0.0)
    return _reduce(loss, reduction)


def _distance_triplet(dist, anchor, positive, negative, margin, swap, reduction):
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:            # the positive as anchor when it is nearer the negative (Balntas et al.)
        d_neg = E.minimum(d_neg, dist(positive, negative))
    return _reduce(E.clamp_min(margin + d_pos - d_neg, 0), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with d the p-norm distance of pairwise_distance."""
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    dist = lambda x1, x2: pairwise_distance(x1, x2, p, eps)  # noqa: E731
    return _distance_triplet(dist, anchor, positive, negative, margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """triplet_margin_loss with any distance function (pairwise_distance by default)."""
    _valid_reduction(reduction)
    dist = distance_function if distance_function is not None else pairwise_distance
    return _distance_triplet(dist, anchor, positive, negative, margin, swap, reduction)


def _samples(input, fn):
    """input as (N, C) for the index-target margin losses: a vector is one sample, a scalar one class."""
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or (input.ndim == 1 and input.shape[0] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    n = input.shape[0] if input.ndim == 2 else 1
    c = input.shape[-1] if input.ndim else 1
    return S.reshape(input, (n, c)), n, c


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per sample, sum over classes j != y of max(0, margin - x[y] + x[j])**p (times weight[y]), over C."""
    from ..creation import arange
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x, n, c = _samples(input, "multi_margin_loss")
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{n}], but got {list(target.shape)}. Input "
                           f"has shape {list(input.shape)}.")
    _need_long(target)
    if weight is not None:
        if weight.numel() != c:
            raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(weight.dtype)}")
    if _known(target):
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= c):
            raise RuntimeError("target out of range")
    else:
        target = apply(OPS["check_index"], target, size=c)
    t = S.reshape(target, (n, 1))
    z = E.clamp_min(margin - I.gather(x, 1, t) + x, 0)
    z = E.where(arange(c) == t, 0.0, z if p == 1 else z * z)
    if weight is not None:
        z = z * S.unsqueeze(I.index_select(weight, 0, S.reshape(target, (n,))), 1)
    loss = R.sum(z, 1) / c
    return _reduce(S.reshape(loss, tuple(target.shape)), reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, sum over its target classes y (target's leading entries up to the first -1) and the classes k not
    among them of max(0, 1 - (x[y] - x[k])), over C."""
    from ..creation import arange
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    x, n, c = _samples(input, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    _need_long(target)
    if _known(target):
        if target.numel() and (int(target.min()) < -1 or int(target.max()) >= c):
            raise RuntimeError("argument #2 'target' is out of range")
    else:
        target = apply(OPS["check_index"], target + 1, size=c + 1) - 1
    t = S.reshape(target, (n, c))
    valid = R.cumprod((t >= 0).long(), 1) > 0                           # entries before the first -1
    hit = (S.unsqueeze(t, 2) == arange(c)) & S.unsqueeze(valid, 2)      # (n, entry, class)
    is_target = R.any(hit, 1)                                           # (n, class)
    xt = I.gather(x, 1, E.where(valid, t, 0))                           # x[y] per entry
    z = E.clamp_min(1 - S.unsqueeze(xt, 2) + S.unsqueeze(x, 1), 0)
    z = E.where(S.unsqueeze(valid, 2) & ~S.unsqueeze(is_target, 1), z, 0.0)
    loss = R.sum(z, (1, 2)) / c
    return _reduce(S.reshape(loss, tuple(input.shape[:-1]) if input.ndim == 2 else ()), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(input) - target * input (log_input), else input - target * log(input + eps); `full` adds Stirling's
    target * log(target) - target + log(2 pi target) / 2 where target > 1."""
    reduction = _valid_reduction(_legacy(size_average, reduce, reduction))
    loss = E.exp(input) - target * input if log_input else input - target * E.log(input + eps)
    if full:
        stirling = target * E.log(target) - target + 0.5 * E.log(2 * math.pi * target)
        loss = loss + E.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """(log(var) + (input - target)**2 / var) / 2 (+ log(2 pi) / 2 when full). var is per element, or one short of
    input's last dim, or broadcastable with one dim of size 1; it is clamped to eps without stopping its gradient."""
    from .._tensor import Tensor
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        from ..creation import full as filled
        var = filled(tuple(input.shape), float(var), dtype=input.dtype)
    elif _known(var) and bool(R.any(var < 0)):
        raise ValueError("var has negative entry/entries")
    vs, xs = tuple(var.shape), tuple(input.shape)
    if vs != xs:
        if xs[:-1] == vs:
            var = S.unsqueeze(var, -1)
        elif not (len(vs) == len(xs) and sum(b for a, b in zip(xs, vs) if a != b) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    var = var + (E.clamp_min(var, eps) - var).detach()     # clamped values, the gradient of the unclamped var
    loss = 0.5 * (E.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ----------------------------------------------------------------------------- gumbel-softmax

def _gumbel_noise(logits):
    """Standard Gumbel noise shaped like logits: -log(-log(U)), U uniform on [tiny, 1) so that both logs are
    finite."""
    from ..creation import rand_like
    return -E.log(-E.log(E.clamp_min(rand_like(logits), float(np.finfo(logits.dtype.np).tiny))))


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax (concrete) relaxation of Categorical(logits): softmax((logits + g) / tau) with
    g standard Gumbel noise. hard=True returns the one-hot argmax of that sample in the forward pass and the soft
    sample's gradient in the backward pass (the straight-through estimator)."""
    import warnings
    from ..creation import arange
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    y_soft = softmax((logits + _gumbel_noise(logits)) / tau, dim)
    if not hard:
        return y_soft
    d = dim % logits.ndim if logits.ndim else 0
    n = logits.shape[d] if logits.ndim else 1
    classes = S.reshape(arange(n), [-1 if i == d else 1 for i in range(logits.ndim)])
    y_hard = (R.argmax(y_soft, d, keepdim=True) == classes).to(logits.dtype)
    return y_hard - y_soft.detach() + y_soft


def _lengths(v, name):
    """CTC lengths as an int64 tensor of one dim (a tuple/list of ints, or an integral tensor)."""
    from ..creation import tensor
    from .._tensor import Tensor
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point:
            raise RuntimeError(f"{name} must be integral")
        return S.reshape(v.to(D.int64), (-1,))
    if isinstance(v, (list, tuple)) and all(isinstance(e, (int, np.integer)) for e in v):
        return tensor(list(v), dtype=D.int64)
    raise TypeError(f"ctc_loss(): {name} must be a tuple of ints or an integral Tensor, got {type(v).__name__}")


def _safe_logsumexp(x, dim):
    """logsumexp over dim that is -inf with a zero gradient where every entry is -inf (no NaN from -inf - -inf),
    so gradients through impossible alignment paths are exactly zero."""
    m = R.amax(x, dim, keepdim=True).detach()
    m = E.where(m == float("-inf"), 0.0, m)
    total = R.sum(E.exp(x - m), dim)
    some = total > 0
    return E.where(some, E.log(E.where(some, total, 1.0)) + S.squeeze(m, dim), float("-inf"))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss: -log of the total probability of all alignments of each target
    (labels with blanks between and around, repeats of a label only across a blank) to its input frames.

    The forward variables alpha over the extended label sequence (blank, l1, blank, l2, ..., blank) are computed in
    log space one frame at a time, every sample and position at once: alpha_t(s) = logsumexp of alpha_{t-1} at s,
    s - 1 and (where l_s is no blank and differs from l_{s-2}) s - 2, plus log_probs_t(l_s); frames past a sample's
    input length leave it unchanged. The Python loop over frames unrolls when traced (fine for short inputs).
    Gradients come from autodiff through the recursion. PyTorch's gradient with respect to log_probs is that of
    the logits behind a log_softmax (exp(log_probs) minus the alignment occupation); a term of value zero whose
    gradient is exp(log_probs) on each sample's frames gives the same.

    targets: (N, S) padded or 1-D concatenated (sum(target_lengths)); log_probs (T, N, C) or unbatched (T, C).
    reduction 'mean' divides each loss by its target length (at least 1), then averages; zero_infinity replaces
    infinite losses (impossible alignments) and their gradients by zeros."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 (unbatched) or 3 dims (T, N, C), got "
                           f"{list(log_probs.shape)}")
    if not log_probs.dtype.is_floating_point:
        raise RuntimeError(f"ctc_loss: log_probs must be floating point, got {log_probs.dtype}")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs, targets = S.unsqueeze(log_probs, 1), S.unsqueeze(targets, 0)
    il, tl = _lengths(input_lengths, "input_lengths"), _lengths(target_lengths, "target_lengths")
    T, N, C = log_probs.shape
    if il.shape[0] != N:
        raise RuntimeError("input_lengths must be of size batch_size")
    if tl.shape[0] != N:
        raise RuntimeError("target_lengths must be of size batch_size")
    if not 0 <= blank < C:
        raise RuntimeError(f"blank must be in label range: blank={blank} with {C} classes")
    targets = targets.to(D.int64)
    concrete = STATE.tracer is None
    if concrete:
        ilv, tlv = il.numpy(), tl.numpy()
        if (ilv < 0).any() or (tlv < 0).any():
            which, v = ("input_lengths", ilv) if (ilv < 0).any() else ("target_lengths", tlv)
            raise RuntimeError(f"Expected {which} to have value at least 0, but got value {int(v.min())}")
        if (ilv > T).any():
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {int(ilv.max())}")
    if targets.ndim == 1:                               # concatenated: sample n's labels start at the sum before it
        if not concrete:
            raise RuntimeError("ctc_loss: 1-D (concatenated) targets need concrete target_lengths when traced; "
                               "give padded (N, S) targets")
        if targets.shape[0] < int(tlv.sum()):
            raise RuntimeError(f"Expected tensor to have size {int(tlv.sum())} at dimension 0, but got size "
                               f"{targets.shape[0]} for argument #2 'targets'")
        Smax = max(int(tlv.max()), 1)
        starts = np.concatenate([[0], np.cumsum(tlv)[:-1]]).astype(np.int64)
        pos = np.minimum(starts[:, None] + np.arange(Smax)[None, :], max(targets.shape[0] - 1, 0))
        if targets.shape[0] == 0:
            padded = _const(np.full((N, Smax), blank, np.int64))
        else:
            padded = I.index_select(targets, 0, _const(pos.reshape(-1))).reshape(N, Smax)
    elif targets.ndim == 2:
        if targets.shape[0] != N:
            raise RuntimeError(f"ctc_loss: targets of size {list(targets.shape)} for a batch of {N}")
        padded, Smax = targets, targets.shape[1]
        if concrete and (tlv > Smax).any():
            raise RuntimeError(f"Expected tensor to have size at least {int(tlv.max())} at dimension 1, but got "
                               f"size {Smax} for argument #2 'targets'")
    else:
        raise RuntimeError(f"ctc_loss: targets must be 1-D (concatenated) or 2-D (N, S), got {list(targets.shape)}")
    L = 2 * Smax + 1
    s_idx = _const(np.arange(L, dtype=np.int64))
    label_of = _const(np.maximum((np.arange(L) - 1) // 2, 0).astype(np.int64))
    is_label = _const(np.arange(L) % 2 == 1)
    real = S.unsqueeze(s_idx, 0) < S.unsqueeze(2 * tl, 1)              # (N, L): inside the extended sequence
    lab = I.index_select(padded, 1, label_of) if Smax else _const(np.zeros((N, L), np.int64))
    ext = E.where(is_label & real, lab, blank)                          # (N, L)
    if concrete and Smax:
        used = ext.numpy()
        if (used < 0).any() or (used >= C).any():
            raise RuntimeError(f"ctc_loss: target labels must be in [0, {C}), got {int(used.min())}..."
                               f"{int(used.max())}")
    prev2 = E.where(_const(np.arange(L) >= 2), I.index_select(ext, 1, _const(np.maximum(np.arange(L) - 2, 0))), -1)
    skip = is_label & (ext != prev2)                                   # (N, L): s - 2 -> s allowed
    ninf = float("-inf")
    lp = I.gather(log_probs, 2, S.broadcast_to(S.unsqueeze(ext, 0), (T, N, L)))      # (T, N, L)
    start = _const(np.arange(L) < 2) & real | _const(np.arange(L) == 0)
    alpha = E.where(start, lp[0], ninf)
    pad1 = _const(np.full((N, 1), ninf, log_probs.dtype.np))
    pad2 = _const(np.full((N, 2), ninf, log_probs.dtype.np))
    for t in range(1, T):
        a1 = S.cat([pad1, alpha[:, :L - 1]], 1)
        a2 = E.where(skip, S.cat([pad2, alpha[:, :L - 2]], 1), ninf) if L > 2 else None
        parts = [alpha, a1] + ([a2] if a2 is not None else [])
        new = _safe_logsumexp(S.stack(parts, 0), 0) + lp[t]
        alpha = E.where(S.unsqueeze(il > t, 1), new, alpha)
    end = S.unsqueeze(2 * tl, 1)
    last = I.gather(alpha, 1, end)
    before = E.where(end > 0, I.gather(alpha, 1, E.where(end > 0, end - 1, 0)), ninf)
    nll = -_safe_logsumexp(S.cat([last, before], 1), 1)                 # (N,)
    frames = S.unsqueeze(S.unsqueeze(_const(np.arange(T, dtype=np.int64)), 1) < S.unsqueeze(il, 0), 2)
    p = E.exp(log_probs)
    nll = nll + R.sum(E.where(frames, p - p.detach(), 0.0), (0, 2))      # value 0, gradient exp(log_probs)
    if zero_infinity:
        nll = E.where(nll == float("inf"), 0.0, nll)
    if reduction == "mean":
        return R.mean(nll / E.clamp(tl, min=1).to(nll.dtype))
    if reduction == "sum":
        return R.sum(nll)
    return S.squeeze(nll, 0) if unbatched else nll


# ----------------------------------------------------------------------------- convolution and pooling
# 2-d primitives live in ops/conv.py (numba kernels); 1-d forms run them over a height-1 image.

from ..ops import conv as _C  # noqa: E402


def _single(v):
    return (v[0] if isinstance(v, (list, tuple)) else v)


def _batched(input, ndim, name):
    """(input with a batch dim, whether one was added): unbatched inputs are accepted like PyTorch."""
    if input.ndim == ndim:
        return S.unsqueeze(input, 0), True
    if input.ndim != ndim + 1:
        raise RuntimeError(f"{name}: expected {ndim}D (unbatched) or {ndim + 1}D (batched) input, but got input of "
                           f"size: {list(input.shape)}")
    return input, False


def _same_padding(input, weight_spatial, dilation, stride, name):
    """padding='same': symmetric padding plus, where the total is odd, one extra row/column at the end."""
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    sym, extra = [], []
    for k, d in zip(weight_spatial, dilation):
        total = d * (k - 1)
        sym.append(total // 2)
        extra.append(total - 2 * (total // 2))
    if any(extra):
        spec = []
        for e in reversed(extra):
            spec += [0, e]
        input = pad(input, spec)
    return input, tuple(sym)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x, unbatched = _batched(input, 3, "conv2d")
    stride, dilation = _C._pair(stride, "stride"), _C._pair(dilation, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            x, padding = _same_padding(x, tuple(weight.shape[2:]), dilation, stride, "conv2d")
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    out = _C.conv2d(x, weight, stride, padding, dilation, groups, bias)
    return S.squeeze(out, 0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x, unbatched = _batched(input, 2, "conv1d")
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected 3-D weight, got weight of shape {list(weight.shape)}")
    if isinstance(padding, str):
        p = padding
    else:
        p = (0, int(_single(padding)))
    out = conv2d(S.unsqueeze(x, 2), S.unsqueeze(weight, 2), bias, (1, int(_single(stride))), p,
                 (1, int(_single(dilation))), groups)
    out = S.squeeze(out, 2)
    return S.squeeze(out, 0) if unbatched else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    x, unbatched = _batched(input, 3, "conv_transpose2d")
    out = _C.conv_transpose2d(x, weight, stride, padding, output_padding, groups, dilation, bias)
    return S.squeeze(out, 0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    x, unbatched = _batched(input, 2, "conv_transpose1d")
    if weight.ndim != 3:
        raise RuntimeError(f"conv_transpose1d: expected 3-D weight, got weight of shape {list(weight.shape)}")
    one = lambda v: int(_single(v))  # noqa: E731
    out = _C.conv_transpose2d(S.unsqueeze(x, 2), S.unsqueeze(weight, 2), (1, one(stride)), (0, one(padding)),
                              (0, one(output_padding)), groups, (1, one(dilation)), bias)
    out = S.squeeze(out, 2)
    return S.squeeze(out, 0) if unbatched else out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    x, unbatched = _batched(input, 3, "max_pool2d")
    out, idx = _C.max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
    if unbatched:
        out, idx = S.squeeze(out, 0), S.squeeze(idx, 0)
    return (out, idx) if return_indices else out


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    x, unbatched = _batched(input, 2, "max_pool1d")
    k = int(_single(kernel_size))
    s = k if stride is None or stride == [] else int(_single(stride))
    out, idx = _C.max_pool2d_with_indices(S.unsqueeze(x, 2), (1, k), (1, s), (0, int(_single(padding))),
                                           (1, int(_single(dilation))), ceil_mode)
    out, idx = S.squeeze(out, 2), S.squeeze(idx, 2)
    if unbatched:
        out, idx = S.squeeze(out, 0), S.squeeze(idx, 0)
    return (out, idx) if return_indices else out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    x, unbatched = _batched(input, 3, "avg_pool2d")
    out = _C.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return S.squeeze(out, 0) if unbatched else out


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    x, unbatched = _batched(input, 2, "avg_pool1d")
    k = int(_single(kernel_size))
    s = k if stride is None or stride == [] else int(_single(stride))
    out = S.squeeze(_C.avg_pool2d(S.unsqueeze(x, 2), (1, k), (1, s), (0, int(_single(padding))), ceil_mode,
                                  count_include_pad), 2)
    return S.squeeze(out, 0) if unbatched else out


def adaptive_avg_pool2d(input, output_size):
    x, unbatched = _batched(input, 3, "adaptive_avg_pool2d")
    out = _C.adaptive_avg_pool2d(x, output_size)
    return S.squeeze(out, 0) if unbatched else out


def adaptive_avg_pool1d(input, output_size):
    x, unbatched = _batched(input, 2, "adaptive_avg_pool1d")
    out = S.squeeze(_C.adaptive_avg_pool2d(S.unsqueeze(x, 2), (1, int(_single(output_size)))), 2)
    return S.squeeze(out, 0) if unbatched else out


def _lp_pool(pool, max_pool, input, norm_type, kernel_size, stride, ceil_mode, taps):
    """The p-norm over each window: (sum of x^p)^(1/p) as PyTorch computes it, the window's mean of x^p times
    its size; a window whose sum is zero gets a zero gradient (not 0 * inf)."""
    if norm_type == math.inf:
        return max_pool(E.abs(input), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool(-E.abs(input), kernel_size, stride, 0, 1, ceil_mode)
    out = pool(input ** norm_type, kernel_size, stride, 0, ceil_mode)
    return (E.where(out != 0, out, 0.0) * taps) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(avg_pool1d, max_pool1d, input, norm_type, kernel_size, stride, ceil_mode,
                    int(_single(kernel_size)))


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kh, kw = _C._pair(kernel_size, "kernel_size")
    return _lp_pool(avg_pool2d, max_pool2d, input, norm_type, kernel_size, stride, ceil_mode, kh * kw)


# 3-d forms: a convolution as one conv2d over the depth taps stacked into the channels; pooling separably, the
# 2-d pool over (H, W) of every depth slice, then a (k, 1) pool over (depth, H * W).

def _triple(v, name):
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return (int(v[0]),) * 3
        if len(v) != 3:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of 3 values to match the "
                               f"convolution dimensions, but got {name}={list(v)}")
        return tuple(int(e) for e in v)
    return (int(v),) * 3


def _volumes(input, weight, name, channels):
    """(the input with a batch dim, whether one was added) of a 3-D convolution, its 5-D weight checked
    (`channels`: the names of its first two dims)."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) input to {name}, but got input of size: "
                           f"{list(input.shape)}")
    if weight.ndim != 5:
        raise RuntimeError(f"{name}: expected a 5-D weight ({channels}, kD, kH, kW), got weight of size "
                           f"{list(weight.shape)}")
    return _batched(input, 4, name)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """(N, C, D, H, W) * (O, C/groups, kd, kh, kw): the kd depth taps of each output depth are gathered into the
    channels ((group, tap, channel) order) and convolved by one conv2d with the weight's taps laid out alike."""
    x, unbatched = _volumes(input, weight, "conv3d", "out_channels, in_channels / groups")
    stride, dilation = _triple(stride, "stride"), _triple(dilation, "dilation")
    O, Cg, kd, kh, kw = weight.shape
    if x.shape[1] != Cg * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(x.shape)} to have {Cg * groups} channels, but got {x.shape[1]} channels instead")
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0, 0)
        elif padding == "same":
            x, padding = _same_padding(x, (kd, kh, kw), dilation, stride, "conv3d")
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    pd, ph, pw = _triple(padding, "padding")
    (sd, sh, sw), (dd, dh, dw) = stride, dilation
    if pd:
        x = _pad_constant(x, (0, 0, 0, 0, pd, pd), 0.0)
    N, C, D, H, W = x.shape
    od = (D - dd * (kd - 1) - 1) // sd + 1
    if od < 1 or H + 2 * ph < dh * (kh - 1) + 1 or W + 2 * pw < dw * (kw - 1) + 1:
        raise RuntimeError(f"Calculated padded input size per channel: ({D} x {H + 2 * ph} x {W + 2 * pw}). Kernel "
                           f"size: ({dd * (kd - 1) + 1} x {dh * (kh - 1) + 1} x {dw * (kw - 1) + 1}). Kernel size "
                           f"can't be greater than actual input size")
    taps = S.stack([x[:, :, i * dd:i * dd + sd * (od - 1) + 1:sd] for i in range(kd)], 1)   # (N, kd, C, od, H, W)
    taps = S.reshape(taps, (N, kd, groups, Cg, od, H, W))
    taps = S.reshape(S.permute(taps, (0, 4, 2, 1, 3, 5, 6)), (N * od, groups * kd * Cg, H, W))
    w2 = S.reshape(S.permute(weight, (0, 2, 1, 3, 4)), (O, kd * Cg, kh, kw))
    out = _C.conv2d(taps, w2, (sh, sw), (ph, pw), (dh, dw), groups, bias)                  # (N * od, O, oh, ow)
    out = S.permute(S.reshape(out, (N, od, O) + tuple(out.shape[2:])), (0, 2, 1, 3, 4))
    return S.squeeze(out, 0) if unbatched else out


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """(N, C, D, H, W) by (C, O/groups, kd, kh, kw): one conv_transpose2d of every depth slice with the kd depth
    taps stacked into the output channels ((group, tap, channel) order); each tap's slices are then spread to
    every sd-th depth (zeros between) and shifted by tap * dd - padding into the output depth, and the taps summed."""
    x, unbatched = _volumes(input, weight, "conv_transpose3d", "in_channels, out_channels / groups")
    (sd, sh, sw), (pd, ph, pw) = _triple(stride, "stride"), _triple(padding, "padding")
    (od_, oph, opw), (dd, dh, dw) = _triple(output_padding, "output_padding"), _triple(dilation, "dilation")
    if min(sd, dd) <= 0 or pd < 0:
        raise RuntimeError("conv_transpose3d: stride and dilation must be positive and padding non-negative")
    if not 0 <= od_ < max(sd, dd):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_depth: {od_} stride_depth: {sd} dilation_depth: {dd}")
    Ci, Og, kd, kh, kw = weight.shape
    N, C, Din, H, W = x.shape
    _C.check_transposed(x, weight, groups, bias)
    od = (Din - 1) * sd - 2 * pd + dd * (kd - 1) + od_ + 1
    if od <= 0:
        raise RuntimeError(f"Given input size per channel: ({Din} x {H} x {W}). Calculated output depth: {od}. "
                           f"Output size is too small")
    slices = S.reshape(S.permute(x, (0, 2, 1, 3, 4)), (N * Din, C, H, W))
    w2 = S.reshape(S.permute(weight, (0, 2, 1, 3, 4)), (Ci, kd * Og, kh, kw))
    y = _C.conv_transpose2d(slices, w2, (sh, sw), (ph, pw), (oph, opw), groups, (dh, dw))
    oh, ow = y.shape[2:]
    y = S.reshape(y, (N, Din, groups, kd, Og, oh, ow))
    y = S.reshape(S.permute(y, (0, 3, 2, 4, 1, 5, 6)), (N, kd, Og * groups, Din, 1, oh, ow))
    if sd > 1:                                              # every sd-th depth, zeros between
        y = _pad_constant(y, (0, 0, 0, 0, 0, sd - 1), 0.0)
    y = S.reshape(y, (N, kd, Og * groups, Din * sd, oh, ow))
    out = None
    for i in range(kd):
        lo = i * dd - pd                                    # output depth of this tap's first input slice
        if lo >= od or lo + Din * sd <= 0:
            continue
        tap = _pad_constant(y[:, i], (0, 0, 0, 0, lo, od - lo - Din * sd), 0.0)
        out = tap if out is None else out + tap
    if out is None:                                         # every tap cropped away: only the bias is left
        out = _pad_constant(y[:, 0, :, :0], (0, 0, 0, 0, 0, od), 0.0)
    if bias is not None:
        out = out + S.reshape(bias, (1, -1, 1, 1, 1))
    return S.squeeze(out, 0) if unbatched else out


def _pool3d(input, name, pool2d, k, s, p, extra2d, extra1d):
    """pool2d over (H, W) of each depth slice, then over depth as a (k, 1) pool of (N, C, D, H' * W')."""
    if input.ndim not in (4, 5) or input.numel() == 0 and input.ndim == 4:
        raise RuntimeError(f"{name}: non-empty 4D or 5D (batch mode) tensor expected for input, got "
                           f"{list(input.shape)}")
    x, unbatched = _batched(input, 4, name)
    N, C, D, H, W = x.shape
    hw = pool2d(S.reshape(x, (N, C * D, H, W)), k[1:], s[1:], p[1:], *extra2d)
    oh, ow = hw.shape[2:]
    out = pool2d(S.reshape(hw, (N, C, D, oh * ow)), (k[0], 1), (s[0], 1), (p[0], 0), *extra1d)
    out = S.reshape(out, (N, C, out.shape[2], oh, ow))
    return S.squeeze(out, 0) if unbatched else out


def _pool_args(kernel_size, stride, padding):
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] or stride == () else _triple(stride, "stride")
    return k, s, _triple(padding, "padding")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k, s, p = _pool_args(kernel_size, stride, padding)
    d = _triple(dilation, "dilation")
    if not return_indices:
        return _pool3d(input, "max_pool3d", max_pool2d, k, s, p, (d[1:], ceil_mode), ((d[0], 1), ceil_mode))
    if input.ndim not in (4, 5) or input.numel() == 0 and input.ndim == 4:
        raise RuntimeError(f"max_pool3d: non-empty 4D or 5D (batch mode) tensor expected for input, got "
                           f"{list(input.shape)}")
    if min(k) <= 0 or min(s) <= 0 or min(d) <= 0:
        raise RuntimeError("max_pool3d: kernel_size, stride and dilation must be greater than zero")
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={list(p)}, "
                           f"kernel_size={list(k)}")
    windows = [_pool_windows(n, *a, ceil_mode) for n, a in zip(input.shape[-3:], zip(k, s, p, d))]
    if min(len(w) for w in windows) < 1:
        raise RuntimeError(f"max_pool3d: output size is too small (input {list(input.shape)}, kernel {list(k)})")
    return _max_with_indices(input, windows)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Separable: a window's divisor is the product of its extent in each dim (clipped, or counting only the input
    when count_include_pad is False); a divisor_override divides the plain window sum."""
    k, s, p = _pool_args(kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    one = (ceil_mode, count_include_pad) + ((1,) if divisor_override else ())
    out = _pool3d(input, "avg_pool3d", avg_pool2d, k, s, p, one, one)
    return out / divisor_override if divisor_override else out


def adaptive_avg_pool3d(input, output_size):
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    x, unbatched = _batched(input, 4, "adaptive_avg_pool3d")
    N, C, D, H, W = x.shape
    od, oh, ow = (output_size,) * 3 if isinstance(output_size, int) else tuple(output_size)
    od, oh, ow = D if od is None else od, H if oh is None else oh, W if ow is None else ow
    hw = adaptive_avg_pool2d(S.reshape(x, (N, C * D, H, W)), (oh, ow))
    out = adaptive_avg_pool2d(S.reshape(hw, (N, C, D, oh * ow)), (od, oh * ow))
    out = S.reshape(out, (N, C, od, oh, ow))
    return S.squeeze(out, 0) if unbatched else out


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    k = _triple(kernel_size, "kernel_size")
    return _lp_pool(avg_pool3d, max_pool3d, input, norm_type, kernel_size, stride, ceil_mode, k[0] * k[1] * k[2])


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L), column c*kh*kw + i*kw + j holding tap (i, j) of channel c at each
    of the L output positions: a strided slice per tap (differentiable by the slices' VJPs)."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_C._pair(v, n) for v, n in ((kernel_size, "kernel_size"),
                                              (dilation, "dilation"), (padding, "padding"), (stride, "stride")))
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    x, unbatched = (S.unsqueeze(input, 0), True) if input.ndim == 3 else (input, False)
    if ph or pw:
        x = pad(x, (pw, pw, ph, ph))
    N, C, H, W = x.shape
    oh, ow = (H - dh * (kh - 1) - 1) // sh + 1, (W - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input with spatial size ({H - 2 * ph}, {W - 2 * pw}), kernel_size=({kh}, {kw}), "
                           f"dilation=({dh}, {dw}), padding=({ph}, {pw}), calculated shape of the array of sliding "
                           f"blocks as ({oh}, {ow}), but its components must be at least one.")
    taps = [x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    out = S.reshape(S.stack(taps, 2), (N, C * kh * kw, oh * ow))
    return S.squeeze(out, 0) if unbatched else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, unfold's adjoint: (N, C*kh*kw, L) -> (N, C, H, W), each column's taps added at their places in the
    image (overlapping blocks summed). One index_add of every tap into the flattened padded image, whose gradient is
    the gather of the same places (unfold's)."""
    if isinstance(output_size, (list, tuple)) and len(output_size) != 2:
        raise RuntimeError(f"It is expected output_size equals to 2, but got size {len(output_size)}")
    (H, W), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_C._pair(v, n) for v, n in (
        (output_size, "output_size"), (kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"),
        (stride, "stride")))
    for what, (a, b), bad in (("kernel size", (kh, kw), kh <= 0 or kw <= 0),
                              ("dilation", (dh, dw), dh <= 0 or dw <= 0),
                              ("stride", (sh, sw), sh <= 0 or sw <= 0)):
        if bad:
            name = what.split()[0]
            raise RuntimeError(f"{what} should be greater than zero, but got {name}_height: {a} {name}_width: {b}")
    if ph < 0 or pw < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {ph} pad_width: {pw}")
    if input.ndim not in (2, 3) or 0 in tuple(input.shape[-2:]):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    x, unbatched = (S.unsqueeze(input, 0), True) if input.ndim == 2 else (input, False)
    N, CK, L = x.shape
    if CK % (kh * kw):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={CK} and kernel_size=({kh}, {kw}).")
    Hp, Wp = H + 2 * ph, W + 2 * pw
    oh, ow = max((Hp - dh * (kh - 1) - 1) // sh + 1, 0), max((Wp - dw * (kw - 1) - 1) // sw + 1, 0)
    if L != oh * ow or L == 0:
        raise RuntimeError(f"Given output_size=({H}, {W}), kernel_size=({kh}, {kw}), dilation=({dh}, {dw}), "
                           f"padding=({ph}, {pw}), stride=({sh}, {sw}), expected size of input's dimension 2 to match "
                           f"the calculated number of sliding blocks {oh} * {ow} = {oh * ow}, but got "
                           f"input.size(2)={L}.")
    # the flat place in the padded image of tap (i, j) of block (r, c), in the columns' order (i, j, r, c)
    i, j, r, c = np.ix_(np.arange(kh), np.arange(kw), np.arange(oh), np.arange(ow))
    where = ((i * dh + r * sh) * Wp + j * dw + c * sw).reshape(-1)
    C = CK // (kh * kw)
    from ..creation import zeros
    img = I.index_add(zeros((N, C, Hp * Wp), dtype=x.dtype, device=x.device), 2, _const(where),
                      S.reshape(x, (N, C, kh * kw * L)))
    out = S.reshape(img, (N, C, Hp, Wp))
    if ph or pw:
        out = out[:, :, ph:ph + H, pw:pw + W]
    return S.squeeze(out, 0) if unbatched else out


_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please "
                  "specify align_corners=True if the old behavior is desired. See the documentation of grid_sample "
                  "for details.")


def affine_grid(theta, size, align_corners=None):
    """The sampling grid (N, H, W, 2) of x, y in [-1, 1] (or (N, D, H, W, 3)) that theta (N, 2, 3) (or (N, 3, 4))
    maps the output's pixel centres (align_corners: its corner pixels) to: a matmul of a constant base grid."""
    import warnings
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(v) for v in size]
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {tuple(size)}.")
    k = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (k, k + 1):
        raise ValueError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size {tuple(size)}. "
                         f"Got {theta.shape}.")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation of "
                      "affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {tuple(size)}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"affine_grid: theta holds {theta.shape[0]} matrices for a size of batch {size[0]}")

    def steps(n):           # PyTorch's: linspace(-1, 1, n), scaled by (n - 1) / n without align_corners
        r = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        return r if align_corners else r * (n - 1) / n
    spatial = size[:1:-1]                                    # W, H(, D): x first
    axes = np.meshgrid(*(steps(n) for n in spatial), indexing="ij")
    base = np.stack([a.transpose() for a in axes] + [np.ones(axes[0].shape[::-1])], -1)    # (H, W, 3) / (D, H, W, 4)
    base = _const(base.reshape(1, -1, k + 1).astype(theta.dtype.np))
    grid = L.matmul(base, S.transpose(theta, 1, 2))
    return S.reshape(grid, (size[0], *size[2:], k))


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples input (N, C, H, W) at grid (N, Ho, Wo, 2)'s x, y in [-1, 1]: bilinear (the four neighbours' weighted
    sum) or nearest (half to even), outside the image zeros, the border's value, or the image reflected. One gather
    of the neighbours' flat indices: its gradient flows to the input by the gather's, to the grid by the weights'.
    Not supported: mode 'bicubic' and 5-D (volumetric) input."""
    import warnings
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if input.ndim == 5 and grid.ndim == 5:
        raise NotImplementedError("grid_sample: 5-D (volumetric) input is not supported by tracejit")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode='bicubic' is not supported by tracejit (bilinear, nearest)")
    sizes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    if input.ndim != 4 or grid.ndim != 4:
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with same number of dimensions, but got "
                           f"{sizes}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got {sizes}")
    if grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes "
                           f"{list(grid.shape)}")
    for d in (2, 3):
        if input.shape[d] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {d} being empty")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"grid_sample: input of dtype {input.dtype} (a floating point dtype is needed)")
    if grid.dtype != input.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has {input.dtype} "
                           f"and grid has {grid.dtype}")
    N, C, H, W = input.shape
    Ho, Wo = grid.shape[1:3]
    x = _grid_source(grid[..., 0], W, padding_mode, align_corners)
    y = _grid_source(grid[..., 1], H, padding_mode, align_corners)
    if mode == "nearest":
        corners = [(E.round(x).detach(), E.round(y).detach(), None)]
    else:
        x0, y0 = E.floor(x).detach(), E.floor(y).detach()
        dx, dy = x - x0, y - y0
        corners = [(x0, y0, (1 - dx) * (1 - dy)), (x0 + 1, y0, dx * (1 - dy)), (x0, y0 + 1, (1 - dx) * dy),
                   (x0 + 1, y0 + 1, dx * dy)]
    inside = [E.logical_and(E.logical_and(cx >= 0, cx <= W - 1), E.logical_and(cy >= 0, cy <= H - 1))
              for cx, cy, _ in corners]
    flat = [(E.clamp(cy, 0, H - 1) * W + E.clamp(cx, 0, W - 1)).long() for cx, cy, _ in corners]
    k = len(corners)
    index = S.reshape(S.stack(flat, 1), (N, 1, k * Ho * Wo))                  # (N, 1, corner * Ho * Wo)
    vals = I.gather(S.reshape(input, (N, C, H * W)), 2, S.expand(index, (N, C, k * Ho * Wo)))
    weight = S.stack([E.where(m, 1.0 if w is None else w, 0.0).to(input.dtype)
                      for (_, _, w), m in zip(corners, inside)], 1)
    out = R.sum(S.reshape(vals, (N, C, k, Ho, Wo)) * S.unsqueeze(weight, 1), 2)
    if mode == "nearest" and grid.requires_grad:
        out = out + S.unsqueeze(R.sum(grid, -1), 1) * 0.0       # PyTorch's zero gradient for the grid, not none
    return out


def _grid_source(coord, size, padding_mode, align_corners):
    """A grid coordinate in [-1, 1] as a source pixel coordinate along a dim of `size`, with its padding_mode."""
    if align_corners:
        c = (coord + 1) / 2 * (size - 1)
    else:
        c = ((coord + 1) * size - 1) / 2
    if padding_mode == "zeros":
        return c
    if padding_mode == "reflection":
        lo, span = (0.0, size - 1.0) if align_corners else (-0.5, float(size))
        if span <= 0:
            return c * 0.0
        d = c - lo
        d = E.where(d < 0, -d, d)                    # (PyTorch's derivative at the reflection point: +1)
        extra = E.fmod(d, span)
        odd = E.fmod(E.floor(d / span).detach(), 2.0) != 0
        c = E.where(odd, span - extra, extra) + lo
    # clipped into [0, size - 1], the derivative 0 at and beyond the ends as PyTorch's
    return E.where(c <= 0, 0.0, E.where(c >= size - 1, float(size - 1), c))


def _adaptive_windows(n, m):
    """PyTorch's adaptive pooling windows of m outputs over n inputs, [floor(i*n/m), ceil((i+1)*n/m)), as an
    (m, widest) index array, each window padded with its last index (a repeat changes no max)."""
    lo = [i * n // m for i in range(m)]
    hi = [-(-(i + 1) * n // m) for i in range(m)]
    k = max(h - lo_ for lo_, h in zip(lo, hi))
    return np.array([[min(lo_ + j, h - 1) for j in range(k)] for lo_, h in zip(lo, hi)], np.int64)


def _pool_windows(n, k, s, p, d, ceil_mode):
    """The (m, k) input positions of the m windows of a max pool over a dim of n (PyTorch's output size); a tap in
    the padding repeats the window's first position inside the input (a repeat changes neither max nor argmax)."""
    from tracejit.kernels.cpu.pool import pool_out_size
    m = max(pool_out_size(n, k, s, p, d, ceil_mode), 0)
    pos = np.arange(m)[:, None] * s - p + np.arange(k)[None, :] * d
    inside = (pos >= 0) & (pos < n)
    first = np.take_along_axis(pos, np.argmax(inside, 1)[:, None], 1)
    return np.where(inside, pos, first).astype(np.int64)


def _max_with_indices(x, windows):
    """Max pooling of x's trailing len(windows) dims over the given windows (an (m, k) position array per dim),
    with PyTorch's indices: int64, flat over each (N, C) plane, the first maximum in row-major window order. The
    values are a gather at those indices, so the gradient reaches that one element, as PyTorch's does."""
    nd = len(windows)
    lead, sizes = tuple(x.shape[:-nd]), tuple(x.shape[-nd:])
    strides = [int(np.prod(sizes[i + 1:])) for i in range(nd)]
    table = 0
    for i, (w, st) in enumerate(zip(windows, strides)):   # axes (m_0..m_nd-1, k_0..k_nd-1)
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = w.shape
        table = table + w.reshape(shape) * st
    out_sizes = tuple(len(w) for w in windows)
    table = np.asarray(table, np.int64).reshape(int(np.prod(out_sizes)), -1)
    flat = S.reshape(x, lead + (int(np.prod(sizes)),))
    taps = I.index_select(flat.detach(), -1, _const(table.reshape(-1)))
    pick = R.argmax(S.reshape(taps, lead + table.shape), -1)
    idx = I.take(_const(table), pick + _const(np.arange(table.shape[0]) * table.shape[1]))
    out = I.gather(flat, -1, idx)
    return S.reshape(out, lead + out_sizes), S.reshape(idx, lead + out_sizes)


def _adaptive_max(x, dim, m):
    """The adaptive max over dim (one of the trailing spatial dims) to m outputs: a gather of the windows' rows and
    their amax (the gradient of a repeated element comes back summed through the gather). m = 0: an empty dim."""
    if m < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {m}: adaptive max pooling needs output "
                           f"sizes >= 0")
    if m == 0:
        return S.narrow(x, dim, 0, 0)
    idx = _adaptive_windows(x.shape[dim], m)
    g = I.index_select(x, dim, _const(idx.reshape(-1)))
    return R.amax(S.reshape(g, tuple(x.shape[:dim]) + idx.shape + tuple(x.shape[dim + 1:])), dim + 1)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    x, unbatched = _batched(input, 3, "adaptive_max_pool2d")
    _check_adaptive_nonempty(input, 2)
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    oh, ow = x.shape[2] if oh is None else oh, x.shape[3] if ow is None else ow
    if return_indices:
        return _adaptive_max_indices(input, (oh, ow))
    out = _adaptive_max(_adaptive_max(x, 2, oh), 3, ow)
    return S.squeeze(out, 0) if unbatched else out


def _check_adaptive_nonempty(input, nd):
    """PyTorch's adaptive_max_pool{nd}d accepts an empty batch but no empty channel or spatial dim."""
    for d in range(max(input.ndim - nd - 1, 0), input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(f"adaptive_max_pool{nd}d(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with dimension {d} being empty")


def _adaptive_max_indices(input, sizes):
    """(values, indices) of adaptive max pooling of input's trailing len(sizes) dims to those output sizes."""
    sizes = [int(m) for m in sizes]
    if min(sizes) < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: adaptive max pooling "
                           f"needs output sizes >= 0")
    if min(sizes) == 0:   # an empty output: a zero-length slice keeps it in the graph
        shape = tuple(input.shape[:-len(sizes)]) + tuple(sizes)
        out = S.reshape(S.narrow(S.reshape(input, (-1,)), 0, 0, 0), shape)
        return out, S.reshape(_const(np.zeros(0, np.int64)), shape)
    return _max_with_indices(input, [_adaptive_windows(n, m) for n, m in zip(input.shape[-len(sizes):], sizes)])


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Separable, as the 2-d form: the window max over depth, then height, then width (the max of a box is the max
    of its maxima; the gradient reaches the element that is the box's max through each amax)."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    sizes = (output_size,) * 3 if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != 3:
        raise RuntimeError(f"adaptive_max_pool3d(): output_size must be an int or 3 ints (None keeps that size), "
                           f"got {list(sizes)}")
    _check_adaptive_nonempty(input, 3)
    x, unbatched = _batched(input, 4, "adaptive_max_pool3d")
    if return_indices:
        return _adaptive_max_indices(input, [x.shape[d] if m is None else m for d, m in zip((2, 3, 4), sizes)])
    out = x
    for dim, m in zip((2, 3, 4), sizes):
        out = _adaptive_max(out, dim, x.shape[dim] if m is None else int(m))
    return S.squeeze(out, 0) if unbatched else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    x, unbatched = _batched(input, 2, "adaptive_max_pool1d")
    _check_adaptive_nonempty(input, 1)
    if return_indices:
        return _adaptive_max_indices(input, (int(_single(output_size)),))
    out = _adaptive_max(x, 2, int(_single(output_size)))
    return S.squeeze(out, 0) if unbatched else out


def _ntuple(v, n):
    """PyTorch's _single/_pair/_triple: a sequence as a tuple, a number repeated n times."""
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """The spatial output size of max unpooling: the pooling's input size by default; an explicit output_size
    (optionally with the (N, C) dims in front) must lie strictly within a stride of it."""
    nd = len(kernel_size)
    default = [(input.shape[-nd + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(nd)]
    size = default
    if output_size is not None:
        if len(output_size) == nd + 2:
            output_size = output_size[2:]
        if len(output_size) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} elements, but it has a "
                             f"length of '{len(output_size)}'")
        for d in range(nd):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < output_size[d] < hi:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
        size = [int(m) for m in output_size]
    for d in range(nd):
        if size[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={size[d]}")
    return size


def _max_unpool(input, indices, size, stride=None):
    """Scatter each value of input into a zero (N, C) plane of the given spatial size at its flat index, checked
    as PyTorch's max_unpooling2d/3d kernels check (the 1-d form runs as 2-d with a trailing width of 1)."""
    nd = len(size)
    if indices.dtype is not D.int64:
        raise RuntimeError("elements in indices should be type int64" +
                           (f" but got: {_type_name(indices.dtype)}" if nd == 2 else ""))
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d Tensor, but got a tensor "
                           f"with {input.ndim} dimensions.")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    for d in range(input.ndim - nd - 1, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(f"max_unpooling{nd}d_forward_out_cpu(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but got {list(input.shape)} with dimension {d} being empty.")
    if stride is not None and min(stride) <= 0:
        raise RuntimeError(f"strides should be greater than zero, but got stride: {list(stride)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"max_unpool{nd}d" not implemented for \'{_type_name(input.dtype)}\'')
    lead, volume = tuple(input.shape[:-nd]), int(np.prod(size))
    flat_x = S.reshape(input, lead + (int(np.prod(input.shape[-nd:])),))
    if volume == 0 or flat_x.numel() == 0:   # an empty output: a zero-length slice keeps it in the graph
        return S.reshape(S.narrow(S.reshape(input, (input.numel(),)), 0, 0, 0), lead + tuple(size))
    from ..creation import zeros
    from ..ops.nn_ops import check_unpool_index
    indices = check_unpool_index(indices, size)         # (a node of a traced graph: checked on every call)
    base = zeros(lead + (volume,), dtype=input.dtype, device=input.device)
    out = I.scatter(base, -1, S.reshape(indices, tuple(flat_x.shape)), flat_x)
    return S.reshape(out, lead + tuple(size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """A partial inverse of max_pool1d: each value goes back to its index, every other position is zero."""
    k = _ntuple(kernel_size, 1)
    s, p = k if stride is None else _ntuple(stride, 1), _ntuple(padding, 1)
    size = _unpool_output_size(input, k, s, p, output_size)
    out = _max_unpool(S.unsqueeze(input, -1), S.unsqueeze(indices, -1), size + [1])
    return S.squeeze(out, -1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """A partial inverse of max_pool2d: each value goes back to its index, every other position is zero."""
    k = _ntuple(kernel_size, 2)
    s, p = k if stride is None else _ntuple(stride, 2), _ntuple(padding, 2)
    return _max_unpool(input, indices, _unpool_output_size(input, k, s, p, output_size))


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """A partial inverse of max_pool3d: each value goes back to its index, every other position is zero."""
    k = _ntuple(kernel_size, 3)
    s, p = k if stride is None else _ntuple(stride, 3), _ntuple(padding, 3)
    return _max_unpool(input, indices, _unpool_output_size(input, k, s, p, output_size), s)


# ----------------------------------------------------------------------------- normalization and embedding
# Composites of registry ops: their gradients come from the ops' VJPs, eager and traced alike.

def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}")
    if _native_layer_norm(input, normalized_shape, weight, bias):
        return apply(OPS["layer_norm"], input, weight, bias, k=k, eps=float(eps))[0]
    dims = tuple(range(input.ndim - k, input.ndim))
    mean = R.mean(input, dims, keepdim=True)
    var = R.var(input, dims, keepdim=True, correction=0)
    out = (input - mean) * E.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def _native_layer_norm(x, shape, weight, bias):
    """Eagerly, a float32/64 CPU input with weight and bias (if any) of its dtype and the normalized shape is the
    one op layer_norm (ops/nn_ops.py); traced, and otherwise (promotion, broadcasting weights, empty inputs), the
    composite above."""
    return (STATE.tracer is None and type(x._data) is np.ndarray and x._data.dtype in _LN_DTYPES and x._data.size
            and shape and all(p is None or (type(p._data) is np.ndarray and p._data.dtype == x._data.dtype
                                            and p._data.shape == shape) for p in (weight, bias)))


_LN_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    N, C = input.shape[0], input.shape[1]
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    x = S.reshape(input, (N, num_groups, -1))
    mean = R.mean(x, 2, keepdim=True)
    var = R.var(x, 2, keepdim=True, correction=0)
    out = S.reshape((x - mean) * E.rsqrt(var + eps), tuple(input.shape))
    shape = (1, C) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * S.reshape(weight, shape)
    if bias is not None:
        out = out + S.reshape(bias, shape)
    return out


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """One registry op (ops/nn_ops.py: PyTorch's two-sum backward); in training the running statistics are then
    updated in place under no_grad (traceable: functionalized updates) with the batch's mean and unbiased
    variance, as PyTorch does. `momentum` may be a float or a 0-d tensor (momentum=None's 1/num_batches_tracked)."""
    from ..autograd.grad_mode import no_grad
    from ..ops.nn_ops import _native_batch_norm
    out, mean, var = _native_batch_norm(input, weight, bias, running_mean, running_var, training=bool(training),
                                        eps=float(eps))
    if training and (running_mean is not None or running_var is not None):
        n = input.numel() // input.shape[1]         # > 1: the op checked it
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(var * (momentum * n / (n - 1)))
    return out


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each (sample, channel) plane normalized by its own mean and variance; given running statistics, those
    are updated in place (under no_grad) with the batch's mean of the planes' mean and unbiased variance."""
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    dims = tuple(range(2, input.ndim))
    mean = R.mean(input, dims, keepdim=True)
    var = R.var(input, dims, keepdim=True, correction=0)
    out = (input - mean) * E.rsqrt(var + eps)
    if running_mean is not None or running_var is not None:
        from ..autograd.grad_mode import no_grad
        n = input.numel() // max(input.shape[0] * input.shape[1], 1)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(R.mean(mean.detach(), (0,) + dims) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(R.mean(var.detach(), (0,) + dims) * (momentum * n / (n - 1)))
    shape = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * S.reshape(weight, shape)
    if bias is not None:
        out = out + S.reshape(bias, shape)
    return out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if input.dtype.is_floating_point:
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {input.dtype} instead (while checking arguments for embedding)")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not supported by tracejit")
    num = weight.shape[0]
    if padding_idx is not None:
        if padding_idx < 0:
            if padding_idx < -num:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx += num
        elif padding_idx >= num:
            raise AssertionError("Padding_idx must be within num_embeddings")
    if type(input._data) is np.ndarray and input.numel() and (input._data.min() < 0 or input._data.max() >= num):
        raise IndexError("index out of range in self")              # (getitem would wrap a negative index)
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    w = weight
    if padding_idx is not None and weight.requires_grad:
        # the padding row receives no gradient: read it through a detached copy
        from ..creation import arange
        pad_row = S.unsqueeze(arange(num) == padding_idx, 1)
        w = E.where(pad_row, weight.detach(), weight)
    return I.getitem(w, input)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rows looked up by `input` with norm above max_norm are rescaled in place (eager only, like PyTorch)."""
    import numpy as np
    from ..autograd.grad_mode import no_grad
    input._concrete("embedding(max_norm=...)")
    with no_grad():
        rows = np.unique(input._data.reshape(-1))
        from ..creation import tensor
        idx = tensor(rows)
        sel = I.getitem(weight, idx)
        norms = R.vector_norm(sel, norm_type, 1, keepdim=True)
        scale = E.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[idx] = sel * scale


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sum, mean or max of each bag of looked-up rows: a 2-D input is one bag per row; a 1-D input is cut into
    bags where `offsets` start them. padding_idx entries count in no bag (an empty bag gives zeros).

    The bags become a (B, L) block of indices with a validity mask: a 2-D input is that block; with offsets known
    here (eager, or constants in a trace) each bag is a row, padded to the longest; with traced offsets every bag
    spans all of the input, masked to its own range, and its max then works on a (B, len(input), D) block."""
    from .._tensor import Tensor
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2 and offsets is not None:
        raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed "
                         f"length sequences. However, found offsets of type {type(offsets)}")
    if input.ndim == 1 and (offsets is None or offsets.ndim != 1):
        raise ValueError("offsets has to be a 1D Tensor" + (" but got None" if offsets is None else ""))
    if input.ndim not in (1, 2):
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if input.ndim == 2 and input.shape[1] == 0:
        raise RuntimeError(f"embedding_bag: a 2-D input needs bags of at least one index, got shape "
                           f"{list(input.shape)}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and (scale_grad_by_freq or sparse):
        raise ValueError("max mode does not support " + ("sparse weights" if sparse else
                                                         "scaling the gradient by the frequency"))
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq and sparse gradients are not supported by "
                                  "tracejit")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  f"GitHub.")
    for t in (input, offsets):
        if isinstance(t, Tensor) and t.dtype not in (D.int64, D.int32):
            raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                               f"Long, Int; but got {t.dtype} instead (while checking arguments for embedding_bag)")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{num} through {num - 1}, but "
                               f"got {padding_idx}")
        padding_idx %= num
    if type(input._data) is np.ndarray and input.numel():        # (index_select checks the rest, traced too)
        flat = input._data.reshape(-1)
        bad = np.flatnonzero((flat < 0) | (flat >= num))
        if bad.size:
            raise RuntimeError(f"Index {bad[0]} of input takes value {flat[bad[0]]} which is not in the valid range "
                               f"[0, {num})")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if input.ndim == 2:
        ids, weights, valid = input, per_sample_weights, None
    elif offsets._data is not None:
        ids, weights, valid = _bags_padded(input, offsets, per_sample_weights, include_last_offset)
    else:
        ids, weights, valid = _bags_masked(input, offsets, per_sample_weights, include_last_offset)
    rows = S.reshape(I.index_select(weight, 0, S.reshape(ids, (-1,))), tuple(ids.shape) + (weight.shape[1],))
    if padding_idx is not None:
        valid = ids != padding_idx if valid is None else E.logical_and(valid, ids != padding_idx)
    return _bag_reduce(rows, valid, weights, mode)


def _bags_padded(input, offsets, weights, include_last):
    """(B, L) indices, per-sample weights and validity of the bags cut by concrete offsets, one bag a row."""
    n, offs = input.shape[0], offsets.cpu().numpy().astype(np.int64)
    _check_offsets(offs, n)
    bounds = offs if include_last else np.append(offs, n)
    starts, ends = bounds[:-1], bounds[1:]
    j = np.arange(max(int((ends - starts).max(initial=0)), 1))
    inside = j < (ends - starts)[:, None]
    where = _const(np.where(inside, starts[:, None] + j, n))      # n: the appended pad entry
    from ..creation import zeros

    def take(t):
        return S.reshape(I.index_select(S.cat([t, zeros(1, dtype=t.dtype)]), 0, S.reshape(where, (-1,))),
                         inside.shape)
    return take(input), None if weights is None else take(weights), _const(inside)


def _bags_masked(input, offsets, weights, include_last):
    """The bags of traced offsets: each the whole input (1, n) with a (B, n) mask of its own range."""
    from ..creation import arange
    n = input.shape[0]
    bounds = offsets if include_last else S.cat([offsets, _const(np.array([n])).to(offsets.dtype)])
    pos = S.unsqueeze(arange(n), 0)
    valid = E.logical_and(pos >= S.unsqueeze(bounds[:-1], 1), pos < S.unsqueeze(bounds[1:], 1))
    return S.unsqueeze(input, 0), None if weights is None else S.unsqueeze(weights, 0), valid


def _check_offsets(offs, n):
    if offs.size and offs[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                           f"position 0. However, got {offs[0]}")
    if offs.size and offs[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of "
                           f"{offs[-1]}")
    if (np.diff(offs) < 0).any():
        raise RuntimeError("embedding_bag: offsets must be non-decreasing (each bag starts where the one before "
                           "it ends or later)")


def _bag_reduce(rows, valid, weights, mode):
    """rows (B or 1, L, D) reduced over L within each of the B bags of valid (B, L) (None: all valid)."""
    if mode == "max":
        if valid is None:
            return R.amax(rows, 1)
        out = R.amax(E.where(S.unsqueeze(valid, -1), rows, float("-inf")), 1)
        return E.where(S.unsqueeze(R.any(valid, 1), 1), out, 0.0)       # an empty bag: zeros
    w = weights
    if valid is not None:
        w = valid.to(rows.dtype) if w is None else E.where(valid, w, 0.0)
    if w is None:
        out = R.sum(rows, 1)
    else:    # (B, 1, L) @ (B or 1, L, D): a sum weighted per sample, without a (B, L, D) product
        out = S.squeeze(L.matmul(S.unsqueeze(w.to(rows.dtype), 1), rows), 1)
    if mode == "mean":
        count = rows.shape[1] if valid is None else E.clamp(R.sum(valid.to(rows.dtype), 1, keepdim=True), min=1.0)
        out = out / count
    return out


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout(input, p, training, 2)


def dropout2d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout(input, p, training, 3)


def _channel_dropout(input, p, training, unbatched_ndim):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    from ..creation import rand
    lead = 1 if input.ndim == unbatched_ndim else 2
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    if p == 1.0:
        return input * 0.0
    keep = rand(shape, dtype=input.dtype, device=input.device) >= p
    return input * keep * (1.0 / (1.0 - p))


def flatten(input, start_dim=0, end_dim=-1):
    return S.flatten(input, start_dim, end_dim)
