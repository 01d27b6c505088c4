"""KL divergence KL(p || q) with a registry of closed forms by the pair of types, as PyTorch's register_kl /
kl_divergence: the most specific registered pair (by the classes' method resolution order) is used."""
import math

import tracejit as tj

from .continuous import Exponential, Laplace, LogNormal, Normal, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .independent import Independent
from .utils import sum_rightmost

_KL_REGISTRY = {}
_KL_MEMO = {}


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p || q) for p an instance of type_p and q of type_q."""
    from .distribution import Distribution
    for t in (type_p, type_q):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(f"Expected type_p and type_q to be subclasses of Distribution but got {t}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMO.clear()
        return fn
    return decorator


def _dispatch(type_p, type_q):
    matches = [(tp, tq) for tp, tq in _KL_REGISTRY if issubclass(type_p, tp) and issubclass(type_q, tq)]
    if not matches:
        return None
    rank = lambda m: (type_p.__mro__.index(m[0]), type_q.__mro__.index(m[1]))  # noqa: E731
    return _KL_REGISTRY[min(matches, key=rank)]


def kl_divergence(p, q):
    """KL(p || q), one value per batch element."""
    key = (type(p), type(q))
    if key not in _KL_MEMO:
        _KL_MEMO[key] = _dispatch(*key)
    fn = _KL_MEMO[key]
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fn(p, q)


_INF = float("inf")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - tj.log(var_ratio))


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):       # exp is one-to-one: the KL of the underlying Normals
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    sp = tj.nn.functional.softplus
    t1 = p.probs * (sp(-q.logits) - sp(-p.logits))
    t1 = tj.where(p.probs == 0, 0.0, tj.where(q.probs == 0, _INF, t1))
    t2 = (1 - p.probs) * (sp(q.logits) - sp(p.logits))
    t2 = tj.where(p.probs == 1, 0.0, tj.where(q.probs == 1, _INF, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = tj.where(p.probs == 0, 0.0, tj.where(q.probs == 0, _INF, t))
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    out = tj.log((q.high - q.low) / (p.high - p.low))
    return tj.where((q.low > p.low) | (q.high < p.high), _INF, out)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    d = (p.loc - q.loc).abs()
    return -tj.log(scale_ratio) + d / q.scale + scale_ratio * tj.exp(-d / p.scale) - 1


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -tj.log(rate_ratio) + rate_ratio - 1


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = tj.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * tj.exp(-0.5 * loc_diff_scale_ratio ** 2)
    t3 = loc_diff * tj.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))
