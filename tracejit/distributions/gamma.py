"""The gamma family: Gamma, Chi2, Beta, Dirichlet and StudentT. Densities and entropies are lgamma/digamma
composites; draws come from sampling.standard_gamma (Beta and Dirichlet as normalized gammas, StudentT as a normal
over the root of a chi-square).

rsample: a gamma draw g of concentration a is reparameterized implicitly (`implicit_gamma`): its derivative in a
is that of the quantile at the draw's level, -(dP/da) / p(g), with P the regularized incomplete gamma function
(`gammainc`, differentiated through its series / continued fraction) and p the density. Beta, Dirichlet (normalized
gammas), Chi2 and StudentT (its chi-square) inherit it."""
import math

import tracejit as tj

from . import constraints
from .distribution import Distribution
from .sampling import standard_gamma
from .utils import broadcast_all, finfo



def gammainc(a, x, steps=400):
    """The regularized lower incomplete gamma function P(a, x), a composite of tracejit ops: its power series where
    x < a + 1, else 1 minus the continued fraction of Q(a, x) (modified Lentz). Eagerly the loop stops once every
    element has converged; a traced program runs all `steps`."""
    from .distribution import _checkable
    a, x = tj.broadcast_tensors(a, x)
    tiny = 1e-300 if a.dtype == tj.float64 else 1e-37
    eps = float(finfo(a.dtype).eps)
    use_series = x < a + 1
    xs = tj.where(use_series, x, tj.zeros_like(x))                   # each branch sees values it converges on
    xc = tj.where(use_series, a + 2, x)
    log_front = lambda z: a * tj.log(z.clamp(min=tiny)) - z                           # noqa: E731
    # series: P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1)...(a + n))
    term = tj.ones_like(a)
    total = term
    # continued fraction for Q
    b = xc + 1 - a
    c = tj.full_like(a, 1 / tiny)
    d = 1 / b
    h = d
    for i in range(1, steps):
        term = term * xs / (a + i)
        total = total + term
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = 1 / tj.where(d.abs() < tiny, tiny, d)
        c = b + an / c
        c = tj.where(c.abs() < tiny, tiny, c)
        delta = d * c
        h = h * delta
        if i % 16 == 0 and _checkable():
            done = tj.where(use_series, term / total, delta - 1).abs() < eps
            if bool(done.all()):
                break
    p_series = tj.exp(log_front(xs) - tj.lgamma(a + 1)) * total
    q_frac = tj.exp(log_front(xc) - tj.lgamma(a)) * h
    return tj.where(use_series, p_series, 1 - q_frac)


def implicit_gamma(concentration, g):
    """g (Gamma(concentration, 1) draws, no gradient) with the implicit reparameterization gradient: the value is g,
    the derivative in the concentration -(dP(a, g)/da) / p(g; a)."""
    if not concentration.requires_grad:
        return g
    a = concentration
    p = gammainc(a, g)
    with tj.no_grad():
        dens = tj.exp(tj.xlogy(a - 1, g) - g - tj.lgamma(a)).clamp(min=float(finfo(g.dtype).tiny))
    return g - (p - p.detach()) / dens


def rsample_gamma(concentration):
    """Gamma(concentration, 1) draws of concentration's shape, reparameterized (`implicit_gamma`)."""
    with tj.no_grad():
        g = standard_gamma(concentration)
    return implicit_gamma(concentration, g)


class Gamma(Distribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = {"concentration": 0, "rate": 0}

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.size(), validate_args=validate_args)

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate ** 2)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        x = rsample_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return x.clamp(min=float(finfo(x.dtype).tiny))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return tj.xlogy(c, r) + tj.xlogy(c - 1, value) - r * value - tj.lgamma(c)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self):
        c = self.concentration
        return c - tj.log(self.rate) + tj.lgamma(c) + (1.0 - c) * tj.digamma(c)


class Chi2(Gamma):
    """Chi-square with df degrees of freedom: Gamma(df / 2, 1 / 2)."""
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    df = property(lambda self: self.concentration * 2)


class Beta(Distribution):
    """Beta(concentration1, concentration0) on [0, 1]: G1 / (G1 + G0) for independent gammas of those shapes."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        # held as the Dirichlet of (x, 1 - x), as PyTorch does: its checks and messages are that Dirichlet's
        conc = tj.stack(broadcast_all(concentration1, concentration0), -1)
        self._dirichlet = Dirichlet(conc, validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    concentration1 = property(lambda self: self._dirichlet.concentration[..., 0])
    concentration0 = property(lambda self: self._dirichlet.concentration[..., 1])

    mean = property(lambda self: self.concentration1 / (self.concentration1 + self.concentration0))
    mode = property(lambda self: self._dirichlet.mode[..., 0])

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (tj.xlogy(a - 1, value) + tj.xlogy(b - 1, 1 - value)
                + tj.lgamma(a + b) - tj.lgamma(a) - tj.lgamma(b))

    def entropy(self):
        return self._dirichlet.entropy()


class Dirichlet(Distribution):
    """Dirichlet(concentration) on the simplex of the last dim: gammas normalized to sum to 1."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True
    _params = {"concentration": 1}

    def __init__(self, concentration, validate_args=None):
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    mean = property(lambda self: self.concentration / self.concentration.sum(-1, keepdim=True))

    @property
    def mode(self):
        """The argmax of the density; where every concentration is below 1 (density unbounded at the corners) the
        first corner, as PyTorch returns."""
        cm1 = (self.concentration - 1).clamp(min=0.0)
        at_corner = (self.concentration < 1).all(-1, keepdim=True)
        total = cm1.sum(-1, keepdim=True)
        mode = cm1 / tj.where(at_corner, tj.ones_like(total), total)    # (no 0/0 in the branch not taken)
        corner = (tj.arange(mode.shape[-1]) == 0).to(mode.dtype)
        return tj.where(at_corner, corner, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (con0 - self.concentration) / (con0 ** 2 * (con0 + 1))

    def rsample(self, sample_shape=()):
        g = rsample_gamma(self.concentration.expand(tuple(self._extended_shape(sample_shape))))
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return tj.xlogy(c - 1.0, value).sum(-1) + tj.lgamma(c.sum(-1)) - tj.lgamma(c).sum(-1)

    def entropy(self):
        c = self.concentration
        k, a0 = c.shape[-1], c.sum(-1)
        return (tj.lgamma(c).sum(-1) - tj.lgamma(a0) - (k - a0) * tj.digamma(a0)
                - ((c - 1.0) * tj.digamma(c)).sum(-1))


class StudentT(Distribution):
    """Student's t with df degrees of freedom, location loc and scale: loc + scale * Z / sqrt(V / df) for a standard
    normal Z and V ~ Chi2(df)."""
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = {"df": 0, "loc": 0, "scale": 0}

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        Chi2(self.df)            # (PyTorch builds its chi-square here, so a bad df is reported as Chi2's)
        super().__init__(self.df.size(), validate_args=validate_args)

    mode = property(lambda self: self.loc)

    @property
    def mean(self):
        return tj.where(self.df <= 1, float("nan"), self.loc)

    @property
    def variance(self):
        """scale^2 df / (df - 2) for df > 2, inf for 1 < df <= 2, undefined (nan) below."""
        df = self.df
        safe = tj.where(df > 2, df, tj.full_like(df, 3.0))         # no inf/nan in the branch not taken
        finite = self.scale ** 2 * safe / (safe - 2)
        return tj.where(df > 2, finite, tj.where(df > 1, float("inf"), float("nan")))

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        z = tj.randn(shape, dtype=self.df.dtype)
        v = Chi2(self.df, validate_args=False).rsample(sample_shape)
        return self.loc + self.scale * z * (v / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        df = self.df
        z = (tj.log(self.scale) + 0.5 * tj.log(df) + 0.5 * math.log(math.pi)
             + tj.lgamma(0.5 * df) - tj.lgamma(0.5 * (df + 1.0)))
        return -0.5 * (df + 1.0) * tj.log1p(y ** 2 / df) - z

    def entropy(self):
        df = self.df
        lbeta = tj.lgamma(0.5 * df) + math.lgamma(0.5) - tj.lgamma(0.5 * (df + 1))
        return (tj.log(self.scale) + 0.5 * (df + 1) * (tj.digamma(0.5 * (df + 1)) - tj.digamma(0.5 * df))
                + 0.5 * tj.log(df) + lbeta)
