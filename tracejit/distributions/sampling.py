"""Samplers for the distributions whose draws are not a plain transform of uniform or normal noise: Gamma (and so
Chi2, Beta, Dirichlet, StudentT), Poisson and Binomial. Each is a composite of tracejit ops over tj.rand / tj.randn,
so it follows tracejit.manual_seed and traces like any other program (no registry op of its own).

Rejection samplers run vectorized: every round proposes a value for every element, and an element keeps the first
proposal it accepts. Eagerly the rounds stop once every element has accepted; a traced program runs them all (the
acceptance rates are >= 0.9, so after the fixed number of rounds an element is left unaccepted with probability
below 1e-20). The numbers differ from PyTorch's draws for the same seed (another generator); their laws agree."""
import tracejit as tj

from .distribution import _checkable
from .utils import finfo

_ROUNDS = 24


def _first_accepted(propose):
    """Vectorized rejection sampling: propose() -> (candidates, accepted mask), called until all are accepted."""
    out, done = propose()
    for _ in range(_ROUNDS - 1):
        if _checkable() and bool(done.all()):
            break
        x, ok = propose()
        out = tj.where(done, out, x)
        done = done | ok
    return out


def standard_gamma(concentration, generator=None):
    """Gamma(concentration, 1) draws of concentration's shape: Marsaglia and Tsang's squeeze method, with the
    boost X * U^(1/a) for a < 1 (drawn at a + 1, where the method's acceptance rate is high)."""
    alpha = concentration.detach().double()
    shape = tuple(alpha.shape)
    boost = alpha < 1
    a = tj.where(boost, alpha + 1, alpha)
    d = a - 1.0 / 3
    c = (9 * d).rsqrt()

    def propose():
        z = tj.randn(shape, dtype=tj.float64, generator=generator)
        u = tj.rand(shape, dtype=tj.float64, generator=generator)
        v = (1 + c * z) ** 3
        ok = (v > 0) & (tj.log(u) < 0.5 * z * z + d - d * v + d * tj.log(v.clamp(min=1e-300)))
        return d * v, ok

    x = _first_accepted(propose)
    u = tj.rand(shape, dtype=tj.float64, generator=generator).clamp(min=1e-300)
    x = tj.where(boost, x * tj.exp(tj.log(u) / alpha), x)
    return x.to(concentration.dtype).clamp(min=float(finfo(concentration.dtype).tiny))


def _inversion(first, ratio, steps, shape, generator):
    """Sequential search of the cdf: k with cdf(k - 1) <= u < cdf(k), where pmf(0) = first and
    pmf(i) = pmf(i - 1) * ratio(i). A fixed number of steps: callers use it where the tail beyond is negligible."""
    u = tj.rand(shape, dtype=tj.float64, generator=generator)
    k = tj.zeros(shape, dtype=tj.float64)
    pmf, cdf = first, first
    for i in range(1, steps):
        k = k + (u > cdf).double()
        pmf = pmf * ratio(i)
        cdf = cdf + pmf
    return k


def poisson(rate, generator=None):
    """Poisson(rate) draws of rate's shape: inversion below rate 10, Hormann's transformed rejection (PTRS) above."""
    lam = rate.detach().double()
    shape = tuple(lam.shape)
    small = lam < 10
    lam_s = tj.where(small, lam, 0.0)
    k_small = _inversion(tj.exp(-lam_s), lambda i: lam_s / i, 48, shape, generator)

    lam_l = tj.where(small, 10.0, lam)
    log_lam = tj.log(lam_l)
    b = 0.931 + 2.53 * lam_l.sqrt()
    a = -0.059 + 0.02483 * b
    log_inv_alpha = tj.log(1.1239 + 1.1328 / (b - 3.4))
    v_r = 0.9277 - 3.6224 / (b - 2)

    def propose():
        u = tj.rand(shape, dtype=tj.float64, generator=generator) - 0.5
        v = tj.rand(shape, dtype=tj.float64, generator=generator)
        us = (0.5 - u.abs()).clamp(min=1e-12)
        k = ((2 * a / us + b) * u + lam_l + 0.43).floor()
        fast = (us >= 0.07) & (v <= v_r)
        hopeless = (k < 0) | ((us < 0.013) & (v > us))
        kk = k.clamp(min=0)
        slow = (tj.log(v.clamp(min=1e-300)) + log_inv_alpha - tj.log(a / (us * us) + b)
                <= -lam_l + kk * log_lam - tj.lgamma(kk + 1))
        return k, fast | (~hopeless & slow)

    k_large = _first_accepted(propose)
    return tj.where(small, k_small, k_large).to(rate.dtype)


def binomial(total_count, probs, generator=None):
    """Binomial(total_count, probs) draws of their (broadcast) shape: inversion where the mean of the smaller tail
    n * min(p, 1 - p) is below 10, Hormann's transformed rejection (BTRS) above; p > 1/2 draws n - Bin(n, 1 - p)."""
    n, p = tj.broadcast_tensors(total_count.detach().double(), probs.detach().double())
    shape = tuple(n.shape)
    flip = p > 0.5
    q = tj.where(flip, 1 - p, p)
    small = n * q < 10

    qs = tj.where(small, q, 0.0)
    odds = qs / (1 - qs)
    k_small = _inversion(tj.exp(n * tj.log1p(-qs)), lambda i: odds * (n - i + 1).clamp(min=0) / i, 48, shape,
                          generator)

    ql = tj.where(small, 0.5, q)
    nl = tj.where(small, 100.0, n)
    spq = (nl * ql * (1 - ql)).sqrt()
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * ql
    c = nl * ql + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    log_odds = tj.log(ql) - tj.log1p(-ql)
    m = ((nl + 1) * ql).floor()
    h = tj.lgamma(m + 1) + tj.lgamma(nl - m + 1)

    def propose():
        u = tj.rand(shape, dtype=tj.float64, generator=generator) - 0.5
        v = tj.rand(shape, dtype=tj.float64, generator=generator)
        us = (0.5 - u.abs()).clamp(min=1e-12)
        k = ((2 * a / us + b) * u + c).floor()
        inside = (k >= 0) & (k <= nl)
        fast = (us >= 0.07) & (v <= v_r)
        kk = tj.minimum(k.clamp(min=0), nl)
        bound = h - tj.lgamma(kk + 1) - tj.lgamma(nl - kk + 1) + (kk - m) * log_odds
        slow = tj.log((v * alpha / (a / (us * us) + b)).clamp(min=1e-300)) <= bound
        return k, inside & (fast | slow)

    k = tj.where(small, k_small, _first_accepted(propose))
    return tj.where(flip, n - k, k).to(probs.dtype)
