"""Discrete distributions: Bernoulli, Categorical, OneHotCategorical, each given by probs or by logits (the other is
computed on first use). Samples carry no gradient; log_prob does, to whichever parameter was given."""
import tracejit as tj

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, finfo, lazy_property, logits_to_probs, probs_to_logits


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class _ProbsOrLogits(Distribution):
    """A distribution given by event probabilities or their log-odds: the other is computed on first use."""
    _params = {"probs": 0, "logits": 0}

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    _param = property(lambda self: self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"])
    param_shape = property(lambda self: self._param.size())


class Bernoulli(_ProbsOrLogits):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        name = "probs" if probs is not None else "logits"
        given = probs if probs is not None else logits
        scalar = not isinstance(given, tj.Tensor)
        (value,) = broadcast_all(given)
        self.__dict__[name] = value
        super().__init__(() if scalar else value.size(), validate_args=validate_args)

    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        m = (self.probs >= 0.5).to(self.probs.dtype)
        return tj.where(self.probs == 0.5, float("nan"), m)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with tj.no_grad():
            p = self.probs.expand(shape)
            return (tj.rand(shape, dtype=p.dtype) < p).to(p.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -tj.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return tj.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = tj.arange(2, dtype=self._param.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class Categorical(Distribution):
    """One of K categories (the last dim of probs/logits): probs are normalized to sum to 1, logits so that their
    logsumexp is 0."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True
    _params = {"probs": 1, "logits": 1}

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        param = self._param
        self._num_events = param.shape[-1]
        super().__init__(param.shape[:-1] if param.ndim > 1 else (), validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    _param = property(lambda self: self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"])
    param_shape = property(lambda self: self._param.size())

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    mean = property(lambda self: tj.full(tuple(self._extended_shape()), float("nan"), dtype=self._param.dtype))
    variance = mean
    mode = property(lambda self: self.probs.argmax(-1))

    def sample(self, sample_shape=()):
        """The Gumbel-max trick: argmax(logits + Gumbel noise) is a draw from probs (a zero prob, -inf, never)."""
        shape = tuple(self._extended_shape(sample_shape)) + (self._num_events,)
        with tj.no_grad():
            logits = self.logits.expand(shape)
            u = tj.rand(shape, dtype=logits.dtype).clamp(min=float(finfo(logits.dtype).tiny))
            return (logits - tj.log(-tj.log(u))).argmax(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = tj.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=float(finfo(self.logits.dtype).min))     # 0 * -inf would be nan
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = tj.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    """A Categorical whose draws are one-hot vectors (event_shape (K,))."""
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    _param = property(lambda self: self._categorical._param)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self._categorical.probs * (1 - self._categorical.probs))

    @property
    def mode(self):
        probs = self._categorical.probs
        return tj.nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        index = self._categorical.sample(sample_shape)
        return tj.nn.functional.one_hot(index, probs.shape[-1]).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = tj.eye(n, dtype=self._param.dtype).reshape((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand((n,) + tuple(self._batch_shape) + (n,)) if expand else values
