"""softmax and log_softmax as primitives (a row reduction plus pointwise work: fusion targets), and the
binary cross entropy, a primitive because PyTorch's derivative at the clamped edges (x = 0 or 1) is not
the derivative of its clamped formula."""
import numpy as np

from .registry import AVal, apply, defop, norm_dim, OPS


# Shifted by the row's max as it is (PyTorch): a row holding +inf, or only -inf, gives NaN everywhere (x - max
# is NaN there). logsumexp instead shifts by 0 when the max is not finite (inf and -inf, as PyTorch).
def _softmax_np(x, dim):
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.amax(x, axis=dim, keepdims=True, initial=-np.inf))
        return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax_np(x, dim):
    with np.errstate(invalid="ignore"):
        s = x - np.amax(x, axis=dim, keepdims=True, initial=-np.inf)
        return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def _softmax_vjp(c, g):
    y = c.out
    d = c.attrs["dim"]
    return (y * (g - (g * y).sum(d, keepdim=True)),)


def _log_softmax_vjp(c, g):
    d = c.attrs["dim"]
    return (g - c.out.exp() * g.sum(d, keepdim=True),)


_meta = lambda x, dim: AVal(x.shape, x.dtype)  # noqa: E731
defop("softmax", _softmax_np, _meta, _softmax_vjp, kind="reduction", saves="o")
defop("log_softmax", _log_softmax_np, _meta, _log_softmax_vjp, kind="reduction", saves="o")


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
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.name.capitalize()}")
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
    if weight and c.next_functions[2] is not None:
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
    if c.next_functions[0] is None:
        return (None,) * len(c.inputs)
    unit = apply(OPS["nll_loss_coef"], ones(c.shapes[0], dtype=h.dtype, device=h.device), target, *weight, **c.attrs)
    gg = h * unit
    return (gg.sum() if len(c.shapes[0]) == 0 else gg,) + (None,) * (len(c.inputs) - 1)


defop("nll_loss", _nll_np, _nll_meta, _nll_vjp, saves="i", kind="other", grad_name="NllLossBackward0")
defop("nll_loss_coef", _nll_coef_np, lambda g, target, weight=None, ignore_index=-100, reduction="mean":
      AVal(target.shape, g.dtype), _nll_coef_vjp, saves="i", kind="other")
OPS["nll_loss"].reads = lambda i, args: i >= 1          # the targets and weights, not the log-probabilities
OPS["nll_loss_coef"].reads = lambda i, args: i >= 1


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
    gx = g * (x - t) / clamp(x * (1 - x), min=1e-12) if c.next_functions[0] is not None else None
    gt = g * (log1p(-x) - log(x)) if c.next_functions[1] is not None else None
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
    return input, (norm_dim(dim, input.ndim) if input.ndim else 0)


def softmax(input, dim=None, dtype=None):
    input, d = _prep(input, dim, dtype)
    return apply(OPS["softmax"], input, dim=d)


def log_softmax(input, dim=None, dtype=None):
    input, d = _prep(input, dim, dtype)
    return apply(OPS["log_softmax"], input, dim=d)


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


defop("check_classes", _check_classes_np, lambda x, num_classes: AVal(x.shape, x.dtype), kind="other")


def check_classes(x, num_classes):
    return apply(OPS["check_classes"], x, num_classes=num_classes)
