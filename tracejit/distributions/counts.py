"""Distributions of counts: Poisson, Binomial, Geometric, Multinomial. Samples are float tensors of whole numbers
(as PyTorch's) and carry no gradient; log_prob does, to whichever parameter was given."""
import tracejit as tj

from . import constraints
from .discrete import Categorical, _one_of, _ProbsOrLogits
from .distribution import Distribution, _checkable
from .sampling import binomial, poisson
from .utils import broadcast_all, finfo


class Poisson(Distribution):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer
    _params = {"rate": 0}

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.size(), validate_args=validate_args)

    mean = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())
    variance = property(lambda self: self.rate)

    def sample(self, sample_shape=()):
        with tj.no_grad():
            return poisson(self.rate.expand(tuple(self._extended_shape(sample_shape))))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return tj.xlogy(value, rate) - rate - tj.lgamma(value + 1)


def _clamp_by_zero(x):
    """max(x, 0) whose derivative at 0 is 1/2 (so log_prob's gradient at logit 0 is PyTorch's)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_ProbsOrLogits):
    """The number of successes in total_count independent trials of probability probs (a tensor of counts allowed)."""
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True
    _params = {"total_count": 0, "probs": 0, "logits": 0}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        name, given = ("probs", probs) if probs is not None else ("logits", logits)
        total_count, value = broadcast_all(total_count, given)
        self.total_count = total_count.to(value.dtype)
        self.__dict__[name] = value
        super().__init__(value.size(), validate_args=validate_args)

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    mean = property(lambda self: self.total_count * self.probs)
    mode = property(lambda self: tj.minimum(((self.total_count + 1) * self.probs).floor(), self.total_count))
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with tj.no_grad():
            return binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_binom = tj.lgamma(n + 1) - tj.lgamma(value + 1) - tj.lgamma(n - value + 1)
        # k log p + (n - k) log(1 - p) = k logit - n max(logit, 0) - n log1p(exp(-|logit|)), stable for any logit
        return value * logits - n * _clamp_by_zero(logits) - n * tj.log1p(tj.exp(-logits.abs())) + log_binom

    def _homogeneous_count(self, what):
        n = int(self.total_count.max())
        if int(self.total_count.min()) != n:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return n

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(tj.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        n = self._homogeneous_count("enumerate_support")
        values = tj.arange(1 + n, dtype=self._param.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class Geometric(_ProbsOrLogits):
    """The number of failures before the first success in trials of probability probs (which must be > 0)."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        name, given = ("probs", probs) if probs is not None else ("logits", logits)
        (value,) = broadcast_all(given)
        self.__dict__[name] = value
        super().__init__(value.size(), validate_args=validate_args)
        if self._validate_args and _checkable() and probs is not None and not bool((value > 0).all()):
            raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) of "
                             f"distribution {self!r} to be positive but found invalid values:\n{value[~(value > 0)]}")

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: tj.zeros_like(self.probs))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with tj.no_grad():
            probs = self.probs
            u = tj.rand(shape, dtype=probs.dtype).clamp(min=float(finfo(probs.dtype).tiny))
            return (tj.log(u) / tj.log1p(-probs)).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = tj.where((probs == 1) & (value == 0), 0.0, probs)      # 0 * log(0) counted as 0
        return value * tj.log1p(-probs) + tj.log(self.probs)

    def entropy(self):
        bce = tj.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
        return bce / self.probs


class Multinomial(Distribution):
    """Counts of total_count independent draws from K categories (event_shape (K,)); total_count is one int."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self):
        return constraints.multinomial(self.total_count)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        """total_count categorical draws, counted per category."""
        with tj.no_grad():
            k = self._categorical.sample((self.total_count,) + tuple(tj.Size(sample_shape)))
            counts = tj.nn.functional.one_hot(k, self._event_shape[0]).sum(0)
            return counts.reshape(tuple(self._extended_shape(sample_shape))).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = tj.where((value == 0) & (logits == float("-inf")), 0.0, logits)
        return tj.lgamma(value.sum(-1) + 1) - tj.lgamma(value + 1).sum(-1) + (logits * value).sum(-1)

    def entropy(self):
        """n H(categorical) - log n! + E[sum_i log x_i!], the expectation over each count's Binomial(n, p_i)."""
        n = self.total_count
        binom = Binomial(n, probs=self.probs, validate_args=False)
        support = binom.enumerate_support(expand=False)[1:]
        weights = tj.lgamma(support + 1)
        expected = (tj.exp(binom.log_prob(support)) * weights).sum((0, -1))
        return n * self._categorical.entropy() - tj.lgamma(tj.tensor(float(n + 1))) + expected
