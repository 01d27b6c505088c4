"""torch.nn.functional: activations, linear, dropout and the losses, composed from registry ops."""
from .. import _dtype as D
from ..ops import elementwise as E, reduction as R, shape_ops as S, indexing as I, linalg as L
from ..ops.nn_ops import log_softmax, softmax
from ..ops.elementwise import elu, gelu, leaky_relu, relu, sigmoid, silu, softplus, tanh, hardtanh, relu6, \
    hardsigmoid, hardswish, mish, logit  # noqa: F401


def relu_(input):
    return input.relu_()


def softmin(input, dim=None, dtype=None):
    return softmax(-input, dim, dtype)


def logsigmoid(input):
    return -softplus(-input)


def tanhshrink(input):
    return input - tanh(input)


def softsign(input):
    return input / (1 + E.abs(input))


def linear(input, weight, bias=None):
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
    keep = rand(tuple(input.shape), dtype=input.dtype) >= p
    return input * keep * (1.0 / (1.0 - p))


def one_hot(tensor, num_classes=-1):
    from ..creation import arange
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1
    return (S.unsqueeze(tensor, -1) == arange(num_classes)).long()


def normalize(input, p=2.0, dim=1, eps=1e-12):
    return input / E.clamp(R.vector_norm(input, p, dim, keepdim=True), min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    n = E.clamp(R.vector_norm(x1, 2, dim) * R.vector_norm(x2, 2, dim), min=eps)
    return R.sum(x1 * x2, dim) / n


def pad(input, pad, mode="constant", value=0.0):
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r}: tracejit supports mode='constant'")
    from ..creation import full
    out = input
    for i in range(len(pad) // 2):
        d = input.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        parts = []
        if lo:
            s = list(out.shape)
            s[d] = lo
            parts.append(full(s, value, dtype=input.dtype))
        parts.append(out)
        if hi:
            s = list(out.shape)
            s[d] = hi
            parts.append(full(s, value, dtype=input.dtype))
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
    if input.ndim < 1:
        raise ValueError("nll_loss: input must have at least 1 dimension")
    if target.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.name.capitalize()}")
    if input.ndim == 1:
        input, target = S.unsqueeze(input, 0), S.unsqueeze(target, 0)
        squeeze = True
    else:
        squeeze = False
    if input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    C = input.shape[1]
    valid = target != ignore_index
    safe_t = E.where(valid, target, 0)
    if target.numel() and target._data is not None:
        bad = (safe_t < 0) | (safe_t >= C)
        if bool(bad.any()):
            raise IndexError(f"Target {int(safe_t[bad][0].item())} is out of bounds.")
    picked = S.squeeze(I.gather(input, 1, S.unsqueeze(safe_t, 1)), 1)
    w = valid.to(input.dtype)
    if weight is not None:
        w = w * I.getitem(weight, safe_t)
    loss = -picked * w
    if reduction == "mean":
        return R.sum(loss) / R.sum(w)
    out = _reduce(loss, reduction)
    return S.squeeze(out, 0) if squeeze and reduction == "none" else out


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
    loss = -(target * E.clamp(E.log(input), min=-100) + (1 - target) * E.clamp(E.log(1 - input), min=-100))
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
