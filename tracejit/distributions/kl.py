"""KL divergence KL(p || q) with a registry of closed forms by the pair of types, as PyTorch's register_kl /
kl_divergence: the most specific registered pair (by the classes' method resolution order) is used."""
import math

import tracejit as tj

from .continuous import _EULER, Cauchy, Exponential, Gumbel, HalfNormal, Laplace, LogNormal, Normal, Uniform
from .counts import Binomial, Geometric, Poisson
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .gamma import Beta, Dirichlet, Gamma
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
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


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * tj.log(p.rate / q.rate)
    t2 = tj.lgamma(q.concentration) - tj.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * tj.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * tj.log(ratio)
    return t1 + ratio + tj.lgamma(q.concentration) + q.concentration * _EULER - (1 + _EULER)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - tj.log(q.rate) + q.rate * (p.concentration / p.rate)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    s1, s2 = a1 + b1, a2 + b2
    t1 = tj.lgamma(a2) + tj.lgamma(b2) + tj.lgamma(s1)
    t2 = tj.lgamma(a1) + tj.lgamma(b1) + tj.lgamma(s2)
    t3 = (a1 - a2) * tj.digamma(a1) + (b1 - b2) * tj.digamma(b1)
    return t1 - t2 + t3 + (s2 - s1) * tj.digamma(s1)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    cp, cq = p.concentration, q.concentration
    sp, sq = cp.sum(-1), cq.sum(-1)
    t1 = tj.lgamma(sp) - tj.lgamma(sq)
    t2 = (tj.lgamma(cp) - tj.lgamma(cq)).sum(-1)
    t3 = ((cp - cq) * (tj.digamma(cp) - tj.digamma(sp).unsqueeze(-1))).sum(-1)
    return t1 - t2 + t3


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (tj.log(p.rate) - tj.log(q.rate)) - (p.rate - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    """Closed form where both count the same trials; inf where p has more trials than q (q rules out p's top
    counts); PyTorch leaves q with more trials than p unimplemented, and so does this."""
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + tj.log1p(-p.probs) - tj.log1p(-q.probs))
    return tj.where(p.total_count > q.total_count, _INF, kl)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - tj.log1p(-q.probs) / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -tj.log(ct1) - ct2 + ct3
    t3 = tj.exp(ct2 + tj.lgamma(1 + ct1) - ct3)
    return t1 + ct1 * _EULER + t3 - (1 + _EULER)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    num = (p.scale + q.scale) ** 2 + (p.loc - q.loc) ** 2
    return tj.log(num / (4 * p.scale * q.scale))


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    """log(|Sq| / |Sp|) / 2 + (tr(Sq^-1 Sp) + Mahalanobis(mq - mp) - k) / 2, all from the Cholesky factors."""
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = q._half_log_det() - p._half_log_det()
    shape = tuple(tj.broadcast_shapes(tuple(lq.shape[:-2]), tuple(lp.shape[:-2]))) + tuple(lp.shape[-2:])
    term2 = (tj.linalg.solve_triangular(lq.expand(shape), lp.expand(shape), upper=False) ** 2).sum((-2, -1))
    term3 = _batch_mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - p.event_shape[0])
