"""tracejit.special: torch.special's functions that tracejit has, by their torch.special names."""
import math

from .ops.elementwise import digamma, erf, erfinv, exp2, expm1, lgamma as gammaln, log1p, mvlgamma, polygamma, \
    sigmoid as expit
from .ops.nn_ops import log_softmax, softmax
from .ops.reduction import logsumexp

__all__ = ["erf", "erfinv", "exp2", "expm1", "log1p", "expit", "log_softmax", "softmax", "logsumexp", "logit", "xlogy",
           "ndtr", "ndtri", "gammaln", "digamma", "psi", "polygamma", "multigammaln"]

psi = digamma


def logit(input, eps=None):
    return input.logit(eps)


def xlogy(input, other):
    return input.xlogy(other)


def ndtr(input):
    """The standard normal's cdf: (1 + erf(x / sqrt(2))) / 2."""
    return (1 + erf(input * (1 / math.sqrt(2)))) * 0.5


def ndtri(input):
    """The standard normal's quantile function, the inverse of ndtr: sqrt(2) erfinv(2p - 1)."""
    return erfinv(2 * input - 1) * math.sqrt(2)


def multigammaln(input, p):
    """The multivariate log-gamma function of dimension p (torch.mvlgamma)."""
    return mvlgamma(input, p)
