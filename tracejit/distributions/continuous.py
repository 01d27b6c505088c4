"""Continuous distributions over real numbers: Normal, LogNormal, Uniform, Laplace, Exponential, Cauchy, Gumbel,
HalfNormal, HalfCauchy. Samples are reparameterized (a function of the parameters and parameter-free noise), so rsample
carries gradients to them."""
import math

import tracejit as tj

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, finfo


class _LocScale(Distribution):
    """A distribution of a location and a positive scale, broadcast together."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = {"loc": 0, "scale": 0}

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.size(), validate_args=validate_args)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)


class Normal(_LocScale):
    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale ** 2)

    def rsample(self, sample_shape=()):
        eps = tj.randn(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) ** 2 / (2 * self.scale ** 2)
        return -z - tj.log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + tj.erf((value - self.loc) / self.scale / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * tj.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + tj.log(self.scale)


class LogNormal(_LocScale):
    """exp(X) for X ~ Normal(loc, scale) (PyTorch's TransformedDistribution of a Normal by exp, written out)."""
    support = constraints.positive

    @property
    def base_dist(self):
        return Normal(self.loc, self.scale, validate_args=False)

    mean = property(lambda self: tj.exp(self.loc + self.scale ** 2 / 2))
    mode = property(lambda self: tj.exp(self.loc - self.scale ** 2))
    variance = property(lambda self: tj.expm1(self.scale ** 2) * tj.exp(2 * self.loc + self.scale ** 2))

    def rsample(self, sample_shape=()):
        return tj.exp(self.base_dist.rsample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = tj.log(value)
        return self.base_dist.log_prob(y) - y

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.base_dist.cdf(tj.log(value))

    def entropy(self):
        return self.base_dist.entropy() + self.loc

    def __repr__(self):                 # (PyTorch's shows no parameters: they live in its base Normal)
        return "LogNormal()"


class Uniform(Distribution):
    """Uniform on [low, high): log_prob is -inf outside it."""
    has_rsample = True
    _params = {"low": 0, "high": 0}

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    @property
    def support(self):
        return constraints.interval(self.low, self.high)

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.size(), validate_args=validate_args)

    mean = property(lambda self: (self.high + self.low) / 2)
    mode = property(lambda self: self.high * float("nan"))
    stddev = property(lambda self: (self.high - self.low) / 12 ** 0.5)
    variance = property(lambda self: (self.high - self.low) ** 2 / 12)

    def rsample(self, sample_shape=()):
        u = tj.rand(tuple(self._extended_shape(sample_shape)), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (value < self.high)).to(self.low.dtype)
        return tj.log(inside) - tj.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return tj.log(self.high - self.low)


class Laplace(_LocScale):
    stddev = property(lambda self: math.sqrt(2) * self.scale)
    variance = property(lambda self: 2 * self.scale ** 2)

    def rsample(self, sample_shape=()):
        # u uniform on (-1, 1) (eps - 1 at the lowest, so log1p(-|u|) stays finite): the inverse cdf of (u + 1) / 2
        eps = float(finfo(self.loc.dtype).eps)
        u = tj.rand(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * tj.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -tj.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * tj.expm1(-d.abs() / self.scale)

    def icdf(self, value):
        t = value - 0.5
        return self.loc - self.scale * t.sign() * tj.log1p(-2 * t.abs())

    def entropy(self):
        return 1 + tj.log(2 * self.scale)


class Exponential(Distribution):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = {"rate": 0}

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.size(), validate_args=validate_args)

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: tj.zeros_like(self.rate))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate ** -2)

    def rsample(self, sample_shape=()):
        u = tj.rand(tuple(self._extended_shape(sample_shape)), dtype=self.rate.dtype)    # [0, 1): 1 - u > 0
        return -tj.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return tj.log(self.rate) - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - tj.exp(-self.rate * value)

    def icdf(self, value):
        return -tj.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - tj.log(self.rate)


class Cauchy(_LocScale):
    """Cauchy (Lorentz): no mean or variance (nan and inf, as PyTorch reports them)."""
    mean = property(lambda self: tj.full(tuple(self._extended_shape()), float("nan"), dtype=self.loc.dtype))
    variance = property(lambda self: tj.full(tuple(self._extended_shape()), float("inf"), dtype=self.loc.dtype))

    def rsample(self, sample_shape=()):
        u = tj.rand(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype)
        return self.loc + tj.tan(math.pi * (u - 0.5)) * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - tj.log(self.scale) - tj.log1p(((value - self.loc) / self.scale) ** 2)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return tj.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return tj.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + tj.log(self.scale)


_EULER = 0.57721566490153286061


class Gumbel(_LocScale):
    """Gumbel (type-I extreme value): loc - scale * log(-log U) for U uniform (PyTorch's chain of transforms of a
    Uniform, written out)."""
    mean = property(lambda self: self.loc + self.scale * _EULER)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev ** 2)

    def rsample(self, sample_shape=()):
        fi = finfo(self.loc.dtype)
        u = tj.rand(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype)
        u = u.clamp(min=float(fi.tiny), max=1 - float(fi.eps))
        return self.loc - self.scale * tj.log(-tj.log(u))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - tj.exp(y)) - tj.log(self.scale)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return tj.exp(-tj.exp((self.loc - value) / self.scale))

    def icdf(self, value):
        return self.loc - self.scale * tj.log(-tj.log(value))

    def entropy(self):
        return tj.log(self.scale) + (1 + _EULER)


class _Folded(Distribution):
    """|X| for X of a symmetric base distribution around 0 of the given scale (HalfNormal, HalfCauchy: PyTorch's
    TransformedDistribution by AbsTransform, written out)."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = {"scale": 0}
    _base = None

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        super().__init__(self.scale.size(), validate_args=validate_args)

    @property
    def base_dist(self):
        return self._base(tj.zeros_like(self.scale), self.scale, validate_args=False)

    mode = property(lambda self: tj.zeros_like(self.scale))

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return tj.where(value >= 0, lp, float("-inf"))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)

    def __repr__(self):                 # (PyTorch's shows no parameters: they live in its base distribution)
        return f"{type(self).__name__}()"


class HalfNormal(_Folded):
    _base = Normal
    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    variance = property(lambda self: self.scale ** 2 * (1 - 2 / math.pi))


class HalfCauchy(_Folded):
    _base = Cauchy
    mean = property(lambda self: tj.full(tuple(self._extended_shape()), float("inf"), dtype=self.scale.dtype))
    variance = property(lambda self: self.base_dist.variance)
