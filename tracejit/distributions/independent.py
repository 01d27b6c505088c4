"""Distributions built from others: Independent (batch dims read as event dims) and MixtureSameFamily (a categorical
mixture of one family's components)."""
import tracejit as tj

from . import constraints
from .discrete import Categorical
from .distribution import Distribution
from .utils import sum_rightmost


class Independent(Distribution):
    """base_distribution with its rightmost `reinterpreted_batch_ndims` batch dims made event dims: log_prob and
    entropy sum over them (a diagonal Normal as one multivariate event, for example)."""
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual {n} "
                             f"vs {len(base_distribution.batch_shape)}")
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:], validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        inner = tuple(self._event_shape[:self.reinterpreted_batch_ndims])
        new.base_dist = self.base_dist.expand(tuple(batch_shape) + inner)
        new.reinterpreted_batch_ndims = self.reinterpreted_batch_ndims
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    has_enumerate_support = property(lambda self: False if self.reinterpreted_batch_ndims else
                                     self.base_dist.has_enumerate_support)
    support = property(lambda self: constraints.independent(self.base_dist.support, self.reinterpreted_batch_ndims)
                       if self.reinterpreted_batch_ndims else self.base_dist.support)
    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_dist}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamily(Distribution):
    """Choose component k with probability mixture_distribution.probs[k], then draw from component k: the components
    are component_distribution's rightmost batch dim."""
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mb, cb = tuple(mixture_distribution.batch_shape), tuple(component_distribution.batch_shape)
        if not cb:
            raise ValueError("`component_distribution` needs at least one batch dimension")
        for a, b in zip(reversed(mb), reversed(cb[:-1])):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_distribution.batch_shape}) is not "
                                 f"compatible with `component_distribution.batch_shape`({cb[:-1]})")
        k = mixture_distribution.logits.shape[-1]
        if k != cb[-1]:
            raise ValueError(f"`mixture_distribution component` ({k}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({cb[-1]})")
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        self._num_component = k
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cb[:-1], component_distribution.event_shape, validate_args)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)
    support = property(lambda self: self._component_distribution.support)

    def _pad(self, x):
        """x with a component dim where component_distribution has it."""
        return x.unsqueeze(-1 - self._event_ndims)

    def _mix_probs(self):
        return self._mixture_distribution.probs.reshape(
            tuple(self._mixture_distribution.probs.shape) + (1,) * self._event_ndims)

    @property
    def mean(self):
        return (self._mix_probs() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs, dim = self._mix_probs(), -1 - self._event_ndims
        mean = self._component_distribution.mean
        within = (probs * self._component_distribution.variance).sum(dim)
        between = (probs * (mean - self._pad(self.mean)) ** 2).sum(dim)
        return within + between

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_px = self._component_distribution.log_prob(self._pad(value))
        log_mix = tj.log_softmax(self._mixture_distribution.logits, -1)
        return tj.logsumexp(log_px + log_mix, -1)

    def cdf(self, value):
        cdf_x = self._component_distribution.cdf(self._pad(value))
        return (cdf_x * self._mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape=()):
        with tj.no_grad():
            s = tuple(sample_shape)
            n = len(s) + len(self._batch_shape)
            k = self._mixture_distribution.sample(s)                     # sample + mixture batch
            x = self._component_distribution.sample(s)                   # sample + batch + (K,) + event
            pad = (1,) * (n - k.ndim)
            index = k.reshape(s + pad + tuple(k.shape[len(s):]) + (1,) * (1 + self._event_ndims))
            index = index.expand(tuple(x.shape[:n]) + (1,) + tuple(x.shape[n + 1:]))
            return x.gather(n, index).squeeze(n)

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self._mixture_distribution},\n  {self._component_distribution})")
