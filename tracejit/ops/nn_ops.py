"""softmax and log_softmax as primitives (a row reduction plus pointwise work: fusion targets), the
normalizations (batch_norm; layer_norm, eager), nll_loss, and the binary cross entropy, a primitive because
PyTorch's derivative at the clamped edges (x = 0 or 1) is not the derivative of its clamped formula."""
import math

import numpy as np

from .._state import STATE
from .registry import AVal, apply, call, defop, norm_dim, OPS


_ROW_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# Shifted by the row's max as it is (PyTorch): a row holding +inf, or only -inf, gives NaN everywhere (x - max
# is NaN there). logsumexp instead shifts by 0 when the max is not finite (inf and -inf, as PyTorch).
def _by_rows(kernel, x, *more):
    """kernel(x, *more, out) on [N, D] rows of the last dim (C-ordered copies where needed); out in x's shape."""
    xr = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    out = np.empty_like(xr)
    kernel(*[np.ascontiguousarray(np.broadcast_to(a, x.shape)).reshape(xr.shape) for a in more], xr, out) \
        if more else kernel(xr, out)
    return out.reshape(x.shape)


def _rows_apply(x, dim, *more):
    """Whether the row kernels (kernels/cpu/norm.py) take this call: the last dim of a non-empty float32/64 array,
    the other operands (gradients) of its dtype."""
    return dim == x.ndim - 1 and x.dtype in _ROW_DTYPES and x.size and all(a.dtype == x.dtype for a in more)


def _softmax_np(x, dim):
    if _rows_apply(x, dim):
        from tracejit.kernels.cpu.norm import softmax_rows
        return _by_rows(softmax_rows, x)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.amax(x, axis=dim, keepdims=True, initial=-np.inf))
        return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax_np(x, dim):
    if _rows_apply(x, dim):
        from tracejit.kernels.cpu.norm import log_softmax_rows
        return _by_rows(log_softmax_rows, x)
    with np.errstate(invalid="ignore"):
        s = x - np.amax(x, axis=dim, keepdims=True, initial=-np.inf)
        return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


# The gradients' formulas in registry ops (on tensors): the VJPs with create_graph and traced, and the backward ops'
# `decompose` (what a backend without their kernels runs). Without create_graph, eagerly, each VJP is one backward
# op: a pass over the rows.
def _softmax_grad(g, y, dim):
    return y * (g - (g * y).sum(dim, keepdim=True))


def _log_softmax_grad(g, y, dim):
    return g - y.exp() * g.sum(dim, keepdim=True)


def _no_graph():
    """Eagerly, with no graph of the gradient recorded: a VJP may run its one backward op (a row kernel)."""
    return STATE.tracer is None and not STATE.grad_enabled


def _rows_vjp(grad, backward_op):
    def vjp(c, g):
        d = c.attrs["dim"]
        if _no_graph():
            return (apply(OPS[backward_op], g, c.out, dim=d),)
        return (grad(g, c.out, d),)
    return vjp


def _on_arrays(fn, *arrays, **attrs):
    """fn, written with registry ops, on numpy arrays (no graph recorded): a backward op's impl where its row
    kernel does not apply is its formula, not a numpy copy of it."""
    from .._tensor import Tensor
    from ..autograd.grad_mode import no_grad
    with no_grad():
        out = fn(*[Tensor._wrap(a) for a in arrays], **attrs)
    return tuple(o._data for o in out) if isinstance(out, tuple) else out._data


def _softmax_backward_np(g, y, dim):
    if _rows_apply(y, dim, g):
        from tracejit.kernels.cpu.norm import softmax_rows_backward
        return _by_rows(softmax_rows_backward, y, g)
    return _on_arrays(_softmax_grad, g, y, dim=dim)


def _log_softmax_backward_np(g, y, dim):
    if _rows_apply(y, dim, g):
        from tracejit.kernels.cpu.norm import log_softmax_rows_backward
        return _by_rows(log_softmax_rows_backward, y, g)
    return _on_arrays(_log_softmax_grad, g, y, dim=dim)


_meta = lambda x, dim: AVal(x.shape, x.dtype)  # noqa: E731
_grad_meta = lambda g, y, dim: AVal(y.shape, y.dtype)  # noqa: E731
defop("softmax", _softmax_np, _meta, _rows_vjp(_softmax_grad, "softmax_backward"), kind="reduction", saves="o",
      row_reduce={"dim"}, row_exp=True)
defop("softmax_backward", _softmax_backward_np, _grad_meta, None, kind="other", decompose=_softmax_grad)
defop("log_softmax_backward", _log_softmax_backward_np, _grad_meta, None, kind="other", decompose=_log_softmax_grad)
defop("log_softmax", _log_softmax_np, _meta, _rows_vjp(_log_softmax_grad, "log_softmax_backward"), kind="reduction",
      saves="o", row_reduce={"dim"}, row_exp=True)


# ----------------------------------------------------------------------------- nll_loss (PyTorch's nll_loss_forward)
# One op, as in PyTorch, rather than a gather and a dozen ops of masks and sums around it: eager runs one
# numpy function, and a compiled classifier gets no generated kernels for them (each is a compilation of
# 0.2-0.4 s in a cold process). PyTorch's op also returns the total weight 'mean' divides by; nothing here
# reads it (the gradient recomputes it from the targets), so this one returns the loss only.
# Its gradient is one coefficient per sample (nll_loss_coef, [N], from the targets alone: it does not wait for
# the forward) put at the sample's target by elementwise ops, `where(arange(C) == target, coef, 0)`, which
# fuse into the row kernel of log_softmax's backward: the [N, C] one-hot gradient is never in memory.

def _nll_weights(target, weight, ignore_index, classes, dtype):
    """(valid, targets with ignored ones at 0, per-sample weights); 'Target N is out of bounds.' when classes."""
    valid = target != ignore_index
    t = np.where(valid, target, 0)
    if classes and t.size:
        lo, hi = t.min(), t.max()
        if lo < 0 or hi >= classes:
            raise IndexError(f"Target {lo if lo < 0 else hi} is out of bounds.")
    w = valid.astype(dtype)
    if weight is not None:
        w *= weight[t]
    return valid, t, w


def _nll_np(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    _, t, w = _nll_weights(target, weight, ignore_index, logp.shape[1], logp.dtype)
    loss = -(logp[np.arange(t.size), t] * w)
    if reduction == "none":
        return loss
    s = loss.sum()
    return np.asarray(s if reduction == "sum" else s / w.sum(), logp.dtype)


def _nll_meta(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    from .. import _dtype as D
    if logp.ndim != 2 or target.shape != logp.shape[:1]:
        raise ValueError(f"Expected input batch_size ({logp.shape[0] if logp.ndim else 1}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 1}).")
    if target.dtype.is_floating_point or target.dtype is D.bool_:
        from .._out import _CATEGORY
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_CATEGORY[target.dtype.name]}")
    if weight is not None and tuple(weight.shape) != logp.shape[1:]:
        raise RuntimeError(f"weight tensor should be defined either for all {logp.shape[1]} classes or no classes "
                           f"but got weight tensor of shape: {list(weight.shape)}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return AVal(logp.shape[:1] if reduction == "none" else (), logp.dtype)


def _nll_vjp(c, g):
    from ..creation import arange
    from .elementwise import eq, where
    logp, target, *weight = c.inputs
    if weight and c.edges[2] is not None:
        raise RuntimeError("the derivative for 'weight' is not implemented")
    coef = apply(OPS["nll_loss_coef"], g, target, *weight, **c.attrs)
    hit = eq(arange(c.shapes[0][1], device=target.device), target.unsqueeze(1))
    return (where(hit, coef.unsqueeze(1), 0.0), None) + (None,) * len(weight)


def _nll_coef_np(g, target, weight=None, ignore_index=-100, reduction="mean"):
    valid, _, w = _nll_weights(target, weight, ignore_index, 0, g.dtype)
    scale = g / np.asarray(w.sum(), g.dtype) if reduction == "mean" else g
    return np.where(valid, -(w * scale), 0).astype(g.dtype, copy=False)    # ignored: 0 (not -(0 * inf))


def _nll_coef_vjp(c, h):
    # linear in g: coef(g) = g * coef(1) (a scalar g) or g_i * coef(1)_i (reduction='none')
    from ..creation import ones
    g, target, *weight = c.inputs
    if c.edges[0] is None:
        return (None,) * len(c.inputs)
    unit = apply(OPS["nll_loss_coef"], ones(c.shapes[0], dtype=h.dtype, device=h.device), target, *weight, **c.attrs)
    gg = h * unit
    return (gg.sum() if len(c.shapes[0]) == 0 else gg,) + (None,) * (len(c.inputs) - 1)


def _nll_weights_ops(like, target, weight, ignore_index):
    valid = call("ne", target, ignore_index)
    t = call("where", valid, target, 0)
    w = call("cast", valid, dtype=like.dtype)
    if weight is not None:
        w = call("mul", w, call("gather", weight, t, dim=0))
    return valid, t, w


def _nll_decompose(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    _nll_meta(logp, target, weight, ignore_index, reduction)
    _, t, w = _nll_weights_ops(logp, target, weight, ignore_index)
    n = target.shape[0]
    picked = call("reshape", call("gather", logp, call("reshape", t, shape=(n, 1)), dim=1), shape=(n,))
    loss = call("neg", call("mul", picked, w))
    if reduction == "none":
        return loss
    s = call("sum", loss, dims=(0,), keepdim=False)
    return s if reduction == "sum" else call("div", s, call("sum", w, dims=(0,), keepdim=False))


def _nll_coef_decompose(g, target, weight=None, ignore_index=-100, reduction="mean"):
    valid, _, w = _nll_weights_ops(g, target, weight, ignore_index)
    scale = call("div", g, call("sum", w, dims=(0,), keepdim=False)) if reduction == "mean" else g
    return call("where", valid, call("neg", call("mul", w, scale)), 0.0)    # ignored: 0 (not -(0 * inf))


# their VJPs read the targets and weights, not the log-probabilities
defop("nll_loss", _nll_np, _nll_meta, _nll_vjp, saves="i", kind="other", grad_name="NllLossBackward0",
      reads=lambda i, args: i >= 1, decompose=_nll_decompose)
defop("nll_loss_coef", _nll_coef_np, lambda g, target, weight=None, ignore_index=-100, reduction="mean":
      AVal(target.shape, g.dtype), _nll_coef_vjp, saves="i", kind="other", reads=lambda i, args: i >= 1,
      decompose=_nll_coef_decompose)


def _bce_np(x, t):
    from .. import _dtype as D
    dt = D.result_type(AVal(x.shape, D._FROM_NP[x.dtype]), AVal(t.shape, D._FROM_NP[t.dtype])).np
    x, t = x.astype(dt, copy=False), t.astype(dt, copy=False)
    lo = dt.type(-100)
    return -(t * np.maximum(np.log(x), lo) + (1 - t) * np.maximum(np.log1p(-x), lo))


def _bce_meta(x, t):
    from .. import _dtype as D
    from .registry import broadcast_shapes
    return AVal(broadcast_shapes(x.shape, t.shape), D.result_type(x, t))


def _bce_vjp(c, g):
    # PyTorch: d/dx = (x - t) / max(x (1 - x), 1e-12); d/dt = log(1 - x) - log(x), both unclamped
    from .elementwise import clamp, log, log1p
    x, t = c.inputs
    gx = g * (x - t) / clamp(x * (1 - x), min=1e-12) if c.edges[0] is not None else None
    gt = g * (log1p(-x) - log(x)) if c.edges[1] is not None else None
    return gx, gt


defop("binary_cross_entropy", _bce_np, _bce_meta, _bce_vjp, kind="elementwise", saves="i")


def _prep(input, dim, dtype):
    from .. import _dtype as D
    if dtype is not None:
        input = input.to(D.to_dtype(dtype))
    elif not input.dtype.is_floating_point:
        input = input.to(D.get_default_dtype())
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1  # PyTorch's legacy implicit dim
    return input, norm_dim(dim, input.ndim)     # (a 0-d input takes dim 0 or -1, as PyTorch)


def softmax(input, dim=None, dtype=None):
    input, d = _prep(input, dim, dtype)
    return apply(OPS["softmax"], input, dim=d)


def log_softmax(input, dim=None, dtype=None):
    input, d = _prep(input, dim, dtype)
    return apply(OPS["log_softmax"], input, dim=d)


# ----------------------------------------------------------------------------- batch_norm (PyTorch's native_batch_norm)
# One op: outputs (y, mean, var) of the batch (training: the biased variance; eval: the running statistics given).
# Its VJP is PyTorch's formula, two per-channel sums (of g and of g * xhat) and one pass for the input's gradient
# (autodiff through mean and var would sum four per-channel quantities and keep a full intermediate), written
# with registry ops so that higher-order gradients exist. A backend that has row kernels lowers the forward by
# `decompose` (mean and var over (0, 2, ...) and one multiply-add: one row kernel with the ReLU after it); the
# interpreter runs `impl`. The caller (nn.functional.batch_norm) updates the running statistics from the outputs.

def _bn_axes(ndim):
    return (0,) + tuple(range(2, ndim)), (1, -1) + (1,) * (ndim - 2)


def _bn_np(x, weight=None, bias=None, running_mean=None, running_var=None, *, training, eps):
    if training and x.dtype in (np.float32, np.float64) and x.ndim >= 2 and x.size and x.flags.c_contiguous and \
            all(v is None or v.dtype == x.dtype for v in (weight, bias)):      # (numpy's y keeps x's layout)
        from tracejit.kernels.cpu.norm import batch_norm_channels
        N, C = x.shape[:2]
        y, stats = np.empty(x.shape, x.dtype), np.empty((2, C), x.dtype)
        none = np.zeros(0, x.dtype)
        batch_norm_channels(x.reshape(N, C, -1), none if weight is None else weight,
                            none if bias is None else bias, eps, y.reshape(N, C, -1), stats[0], stats[1])
        return y, stats[0], stats[1]
    axes, shape = _bn_axes(x.ndim)
    ct = np.float32 if x.dtype == np.float16 else x.dtype
    if training:
        mean = x.mean(axis=axes, dtype=ct)
        d = x - mean.reshape(shape)
        var = np.mean(d * d, axis=axes, dtype=ct)
    else:
        mean, var = running_mean.astype(ct), running_var.astype(ct)
    alpha = (1 / np.sqrt(var + eps)).astype(ct, copy=False)
    if weight is not None:
        alpha = alpha * weight
    beta = -mean * alpha
    if bias is not None:
        beta = beta + bias
    y = x * alpha.reshape(shape).astype(x.dtype) + beta.reshape(shape).astype(x.dtype)
    return y.astype(x.dtype, copy=False), mean.astype(x.dtype), var.astype(x.dtype)


def _bn_meta(x, weight=None, bias=None, running_mean=None, running_var=None, *, training, eps):
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (got {x.ndim}D input)")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"batch_norm: expected a floating point input but got {x.dtype}")
    C = x.shape[1]
    for what, v in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if v is not None and tuple(v.shape) != (C,):
            raise RuntimeError(f"{what} should contain {C} elements not {int(np.prod(v.shape))}")
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: running_mean and running_var are required when training=False")
    if training and int(np.prod(x.shape)) // max(C, 1) <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(x.shape)}")
    c = AVal((C,), x.dtype)
    return AVal(x.shape, x.dtype), c, c


def _bn_decompose(x, weight=None, bias=None, running_mean=None, running_var=None, *, training, eps):
    """The forward in registry ops (mean, var, rsqrt, multiply-add): what a backend fuses into a row kernel.
    Per-channel values keep the reduced dims (1, C, 1, ...) so that nothing but elementwise work sits between
    the statistics and y (one row kernel); only the statistics returned are reshaped to (C,)."""
    from . import elementwise as E, reduction as R, shape_ops as S
    axes, shape = _bn_axes(x.ndim)
    r = lambda v: S.reshape(v, shape)  # noqa: E731
    if training:
        mean, var = R.mean(x, axes, keepdim=True), R.var(x, axes, keepdim=True, correction=0)
    else:
        mean, var = r(running_mean), r(running_var)
    alpha = E.rsqrt(var + eps)
    if weight is not None:
        alpha = alpha * r(weight)
    beta = -mean * alpha
    if bias is not None:
        beta = beta + r(bias)
    C = (x.shape[1],)
    return x * alpha + beta, S.reshape(mean, C), S.reshape(var, C)


def _bn_train_grads(gy, x, mean, invstd, scale):
    """Training batch norm's gradients from the output's gradient gy, per-channel values shaped (1, C, 1, ...):
    (gx, sum of gy * xhat, sum of gy), the sums per channel in that shape; PyTorch's formula, two sums and one
    pass: gx = (gy - mean(gy) - xhat * mean(gy * xhat)) * scale, xhat = (x - mean) * invstd."""
    from . import reduction as R
    axes, _ = _bn_axes(len(x.shape))
    n = int(np.prod(x.shape)) // x.shape[1]
    xhat = (x - mean) * invstd
    sg = R.sum(gy, axes, keepdim=True)
    sgx = R.sum(gy * xhat, axes, keepdim=True)
    return (gy - sg * (1.0 / n) - xhat * (sgx * (1.0 / n))) * scale, sgx, sg


def _bn_backward_np(gy, x, mean, invstd, scale):
    """batch_norm_backward's impl: kernels/cpu/norm.py's pass per channel for contiguous float32/64, else the
    formula."""
    if x.dtype in (np.float32, np.float64) and gy.dtype == x.dtype and x.ndim >= 2 and x.size and \
            x.flags.c_contiguous and gy.flags.c_contiguous:      # (else the formula: its gx keeps x's layout)
        from tracejit.kernels.cpu.norm import batch_norm_backward_channels
        N, C = x.shape[:2]
        gx = np.empty(x.shape, x.dtype)
        sums = np.empty((2, C), x.dtype)
        per = [np.ascontiguousarray(v, np.float64).reshape(C) for v in (mean, invstd, scale)]
        batch_norm_backward_channels(gy.reshape(N, C, -1), x.reshape(N, C, -1), *per, gx.reshape(N, C, -1), sums)
        return gx, sums[0].reshape(mean.shape), sums[1].reshape(mean.shape)
    return _on_arrays(_bn_train_grads, gy, x, mean, invstd, scale)


def _bn_vjp(c, gy, gmean=None, gvar=None):
    from . import elementwise as E, reduction as R, shape_ops as S
    x, weight, bias = (tuple(c.inputs) + (None, None))[:3]
    training, eps = c.attrs["training"], c.attrs["eps"]
    shp = tuple(x.shape)
    axes, shape = _bn_axes(len(shp))
    n, C = int(np.prod(shp)) // shp[1], (shp[1],)
    nf = c.edges
    want = [k < len(nf) and nf[k] is not None for k in range(5)]
    if training:
        _, mean, var = c.out
    else:
        mean, var = c.inputs[3], c.inputs[4]
    # per-channel values as (1, C, 1, ...): elementwise work with the sums, one row kernel when traced
    r = lambda v: S.reshape(v, shape)  # noqa: E731
    invstd = E.rsqrt(r(var) + eps)
    scale = invstd if weight is None else invstd * r(weight)
    gx = gw = gb = grm = grv = None
    if gy is not None:
        if training:
            # eagerly with no graph of the gradient: one op, one numba pass per channel (no elementwise temporaries)
            gx, sgx, sg = apply(OPS["batch_norm_backward"], gy, x, r(mean), invstd, scale) if _no_graph() else \
                _bn_train_grads(gy, x, r(mean), invstd, scale)
            gx = gx if want[0] else None
        else:
            sg = R.sum(gy, axes, keepdim=True)
            sgx = R.sum(gy * ((x - r(mean)) * invstd), axes, keepdim=True)
            gx = gy * scale if want[0] else None
        gw = S.reshape(sgx, C) if want[1] else None
        gb = S.reshape(sg, C) if want[2] else None
        if not training:
            grm = S.reshape(-sg * scale, C) if want[3] else None
            grv = S.reshape(sgx * scale * invstd * -0.5, C) if want[4] else None
    if training and want[0]:                    # gradients reaching the batch statistics themselves
        extra = None
        if gmean is not None:
            extra = r(gmean * (1.0 / n))
        if gvar is not None:
            t = (x - r(mean)) * r(gvar * (2.0 / n))
            extra = t if extra is None else extra + t
        if extra is not None:       # (a gradient of the mean alone is per channel: expanded to x's shape)
            gx = S.expand(extra, shp) if gx is None else gx + extra
    return (gx, gw, gb, grm, grv)[:len(c.inputs)]


# saved_outputs: the statistics, not y (an in-place ReLU after it is no error)
defop("batch_norm", _bn_np, _bn_meta, _bn_vjp, nout=3, saves="io", kind="other",
      grad_name="NativeBatchNormBackward0", decompose=_bn_decompose, fuses_in_parts=True,
      saved_outputs=(1, 2))
# eager's first-order training backward (no VJP of its own: with a graph of the gradient the VJP is the formula)
defop("batch_norm_backward", _bn_backward_np,
      lambda gy, x, mean, invstd, scale: (AVal(x.shape, x.dtype), AVal(mean.shape, x.dtype), AVal(mean.shape, x.dtype)),
      None, nout=3, kind="other", decompose=_bn_train_grads)


def _native_batch_norm(input, weight=None, bias=None, running_mean=None, running_var=None, *, training, eps):
    """(y, mean, var): the op itself (nn.functional.batch_norm wraps it and updates the running statistics).
    The shape rule runs here on every call: eager runs none, and in training the running statistics the caller
    updates are no inputs of the op (a cuda tensor runs the op's `decompose`: backends/numba_cuda/eager.py)."""
    _bn_meta(input, weight, bias, running_mean, running_var, training=training, eps=eps)
    args = (input, weight, bias) if training else (input, weight, bias, running_mean, running_var)
    return apply(OPS["batch_norm"], *args, training=training, eps=eps)


# ----------------------------------------------------------------------------- layer_norm (PyTorch's native_layer_norm)
# Eager layer_norm of a CPU array is this one op: a pass over the rows forward and one backward (kernels/cpu/norm.py)
# instead of a dozen numpy passes of mean, var and elementwise ops each way. A trace records the composite of
# nn.functional.layer_norm, whose parts fuse into row kernels with the work around them. Outputs (y, mean, rstd) as
# PyTorch's, the statistics with the normalized dims (the last k) kept as 1. The VJP is PyTorch's formula in
# registry ops (_ln_grad: create_graph, higher order); without create_graph it is one kernel, layer_norm_backward,
# which computes the same formula (and whose `decompose` is _ln_grad).

def _ln_rows(x, k):
    return np.ascontiguousarray(x).reshape(-1, math.prod(x.shape[x.ndim - k:]))


def _ln_affine(p, d, fill, dtype):
    return np.full(d, fill, dtype) if p is None else p.reshape(d)


def _ln_np(x, weight=None, bias=None, *, k, eps):
    from tracejit.kernels.cpu.norm import layer_norm_rows
    xr = _ln_rows(x, k)
    n, d = xr.shape
    y = np.empty_like(xr)
    mean, rstd = np.empty(n, x.dtype), np.empty(n, x.dtype)
    layer_norm_rows(xr, _ln_affine(weight, d, 1, x.dtype), _ln_affine(bias, d, 0, x.dtype), eps, y, mean, rstd)
    stat = x.shape[:x.ndim - k] + (1,) * k
    return y.reshape(x.shape), mean.reshape(stat), rstd.reshape(stat)


def _ln_meta(x, weight=None, bias=None, *, k, eps):
    stat = AVal(tuple(x.shape[:len(x.shape) - k]) + (1,) * k, x.dtype)
    return AVal(x.shape, x.dtype), stat, stat


def _ln_grad(gy, x, mean, rstd, weight=None, *, k):
    """(gx, gw, gb) in registry ops: the VJP with create_graph and traced, and layer_norm_backward's `decompose`."""
    from . import reduction as R
    dims, lead = tuple(range(x.ndim - k, x.ndim)), tuple(range(x.ndim - k))
    xhat = (x - mean) * rstd
    gyw = gy if weight is None else gy * weight
    gx = (gyw - R.mean(gyw, dims, keepdim=True) - xhat * R.mean(gyw * xhat, dims, keepdim=True)) * rstd
    return (gx,) + ((R.sum(gy * xhat, lead), R.sum(gy, lead)) if lead else (gy * xhat, gy))


def _ln_vjp(c, gy, gmean=None, grstd=None):
    from .shape_ops import expand
    x, weight, bias = c.inputs
    k = c.attrs["k"]
    _, mean, rstd = c.out
    gx = gw = gb = None
    if gy is not None:  # without create_graph, eagerly: one kernel
        gx, gw, gb = (apply(OPS["layer_norm_backward"], gy, x, mean, rstd, weight, k=k) if _no_graph() else
                      _ln_grad(gy, x, mean, rstd, weight, k=k))
    # gradients reaching the statistics (a second derivative: the VJP above reads them as outputs of this node)
    d = 1.0 / math.prod(x.shape[x.ndim - k:])
    for extra in (None if gmean is None else gmean * d,
                  None if grstd is None else grstd * (rstd * rstd * rstd) * (x - mean) * -d):
        if extra is not None:       # (a gradient of the mean alone is per row: expanded to x's shape)
            gx = expand(extra, tuple(x.shape)) if gx is None else gx + extra
    return gx, gw if weight is not None else None, gb if bias is not None else None


def _ln_backward_np(g, x, mean, rstd, weight=None, *, k):
    from tracejit.kernels.cpu.norm import layer_norm_rows_backward
    xr = _ln_rows(x, k)
    n, d = xr.shape
    gx, gw, gb = np.empty_like(xr), np.empty(d, x.dtype), np.empty(d, x.dtype)
    layer_norm_rows_backward(_ln_rows(g.astype(x.dtype, copy=False), k), xr, mean.reshape(n), rstd.reshape(n),
                             _ln_affine(weight, d, 1, x.dtype), gx, gw, gb)
    norm = x.shape[x.ndim - k:]
    return gx.reshape(x.shape), gw.reshape(norm), gb.reshape(norm)


def _ln_backward_meta(g, x, mean, rstd, weight=None, *, k):
    norm = AVal(tuple(x.shape[len(x.shape) - k:]), x.dtype)
    return AVal(x.shape, x.dtype), norm, norm


# saved_outputs: the statistics, not y (an in-place op on it is no error); the bias is saved but never read
defop("layer_norm", _ln_np, _ln_meta, _ln_vjp, nout=3, saves="io", kind="other", grad_name="NativeLayerNormBackward0",
      saved_outputs=(1, 2), reads=lambda i, args: i < 2)
defop("layer_norm_backward", _ln_backward_np, _ln_backward_meta, None, nout=3, kind="other", decompose=_ln_grad)


# ----------------------------------------------------------------------------- class-value checks
# A data-dependent error eager raises before computing (one_hot's class values out of range) must be raised by
# compiled code too, on every call: this op is a node of the graph that checks its integer input's values and
# passes it through (run by its numpy impl, never fused).
def _check_classes_np(x, num_classes):
    if x.size:
        if x.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if x.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return x


defop("check_classes", _check_classes_np, lambda x, num_classes: AVal(x.shape, x.dtype), kind="other",
      aliases=True)        # (returns its operand)


def check_classes(x, num_classes):
    return apply(OPS["check_classes"], x, num_classes=num_classes)


# max_unpool's indices must each lie in its output plane (of spatial size `dims`), checked the same way: PyTorch's
# RuntimeError naming the first bad index, before the scatter (whose own bounds message names flat sizes)
def _check_unpool_index_np(index, dims):
    if index.size:
        bad = index[(index < 0) | (index >= int(np.prod(dims)))]
        if bad.size:
            raise RuntimeError(f"Found an invalid max index: {int(bad[0])} (output volumes are of size "
                               f"{'x'.join(map(str, dims))})")
    return index


defop("check_unpool_index", _check_unpool_index_np, lambda index, dims: AVal(index.shape, index.dtype), kind="other",
      aliases=True)        # (returns its operand)


def check_unpool_index(index, dims):
    return apply(OPS["check_unpool_index"], index, dims=tuple(int(d) for d in dims))
