"""The gamma family, counts, heavy tails and the multivariate normal of tracejit.distributions against
torch.distributions: from the same parameters and values (float64 and float32), log_prob, entropy, mean, mode,
variance, cdf/icdf and KL divergences and their parameter gradients equal PyTorch's; batch, event, sample and
expanded shapes are PyTorch's; the samplers' draws have the right moments (and, for the counts, the right pmf);
PyTorch's errors for out-of-support parameters and values."""
import math

import numpy as np
import pytest

import tracejit as tj

from test_distributions import D, RNG, _close, _pos, _probs, _torch, same_error, same_shapes  # noqa: F401


def _spd(*shape):
    """Symmetric positive-definite matrices of shape (..., n, n)."""
    a = RNG.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


_CHOL = np.linalg.cholesky(_spd(2, 3, 3))
LOC_SCALE = ["log_prob", "cdf", "icdf", "entropy", "mean", "mode", "variance", "stddev"]

# (name, parameters (arrays become tensors that require grad; other values are passed as they are), a value inside
# the support, what to compare, parameters whose gradients are not compared (PyTorch has none for them))
CASES = [
    ("Gamma", dict(concentration=_pos(3, 2) * 3, rate=_pos(3, 2)), _pos(4, 3, 2) * 3,
     ["log_prob", "entropy", "mean", "mode", "variance", "stddev"], ()),
    ("Gamma", dict(concentration=np.array([0.3, 1.0, 2.5, 40.0, 7.0]), rate=np.array([1.0, 2.0, 0.5, 1.0, 3.0])),
     np.array([0.2, 0.01, 6.0, 35.0, 3.5]), ["cdf", "mode"], ("concentration",)),
    ("Chi2", dict(df=_pos(4) * 4), _pos(3, 4) * 3, ["log_prob", "entropy", "mean", "mode", "variance", "df"], ()),
    ("Chi2", dict(df=np.array([1.0, 3.0, 10.0])), np.array([0.5, 3.0, 14.0]), ["cdf"], ("df",)),
    ("Beta", dict(concentration1=_pos(2, 3) * 2, concentration0=_pos(2, 3) * 2), RNG.random((5, 2, 3)) * 0.9 + 0.05,
     ["log_prob", "entropy", "mean", "variance", "stddev"], ()),
    ("Beta", dict(concentration1=np.array([2.0, 0.5, 3.0, 0.4]), concentration0=np.array([3.0, 4.0, 0.6, 0.3])),
     np.array([0.3, 0.1, 0.8, 0.5]), ["mode", "log_prob"], ()),
    ("Dirichlet", dict(concentration=_pos(3, 4) * 2), _probs(2, 3, 4), ["log_prob", "entropy", "mean", "variance"], ()),
    ("Dirichlet", dict(concentration=np.array([[2.0, 3.0, 1.5], [0.5, 0.3, 0.9], [0.5, 2.0, 3.0]])), _probs(3, 3),
     ["mode"], ()),
    ("StudentT", dict(df=np.array([0.7, 1.5, 2.5, 9.0]), loc=RNG.standard_normal(4), scale=_pos(4)),
     RNG.standard_normal((3, 4)) * 2, ["log_prob", "entropy", "mean", "mode", "variance"], ()),
    ("Poisson", dict(rate=_pos(2, 3) * 4), RNG.integers(0, 8, (4, 2, 3)) * 1.0, ["log_prob", "mean", "mode",
                                                                                 "variance"], ()),
    ("Binomial", dict(total_count=np.array([3.0, 10.0, 7.0]), probs=RNG.random(3)), np.array([[0.0, 4.0, 7.0]]),
     ["log_prob", "mean", "mode", "variance", "logits"], ("total_count",)),
    ("Binomial", dict(total_count=6, logits=RNG.standard_normal((2, 3)) * 2), RNG.integers(0, 7, (2, 3)) * 1.0,
     ["log_prob", "entropy", "mean", "mode", "variance", "probs"], ()),
    ("Geometric", dict(probs=RNG.random(4) * 0.9 + 0.05), RNG.integers(0, 6, (3, 4)) * 1.0,
     ["log_prob", "entropy", "mean", "mode", "variance", "logits"], ()),
    ("Geometric", dict(logits=RNG.standard_normal((2, 3))), RNG.integers(0, 6, (2, 3)) * 1.0,
     ["log_prob", "entropy", "mean", "variance", "probs"], ()),
    ("Cauchy", dict(loc=RNG.standard_normal((2, 3)), scale=_pos(2, 3)), RNG.standard_normal((4, 2, 3)) * 3,
     LOC_SCALE, ()),
    ("Gumbel", dict(loc=RNG.standard_normal(3), scale=_pos(3) + 0.5), RNG.standard_normal((5, 3)) * 0.3, LOC_SCALE,
     ()),
    ("HalfNormal", dict(scale=_pos(2, 3)), _pos(4, 2, 3) * 2, LOC_SCALE, ()),
    ("HalfCauchy", dict(scale=_pos(3)), _pos(2, 3) * 4, LOC_SCALE, ()),
    ("Multinomial", dict(total_count=5, probs=_probs(2, 4)), np.array([[1.0, 0.0, 3.0, 1.0], [0.0, 5.0, 0.0, 0.0]]),
     ["log_prob", "entropy", "mean", "variance", "logits"], ()),
    ("Multinomial", dict(total_count=3, logits=RNG.standard_normal(3)), np.array([[1.0, 1.0, 1.0], [3.0, 0.0, 0.0]]),
     ["log_prob", "entropy", "mean", "variance", "probs"], ()),
    ("MultivariateNormal", dict(loc=RNG.standard_normal((2, 3)), covariance_matrix=_spd(2, 3, 3)),
     RNG.standard_normal((4, 2, 3)), ["log_prob", "entropy", "mean", "variance", "scale_tril", "precision_matrix"], ()),
    ("MultivariateNormal", dict(loc=RNG.standard_normal(3), precision_matrix=_spd(3, 3)),
     RNG.standard_normal((2, 1, 3)), ["log_prob", "entropy", "variance", "covariance_matrix", "scale_tril"], ()),
    ("MultivariateNormal", dict(loc=RNG.standard_normal((4, 1, 3)), scale_tril=_CHOL),
     RNG.standard_normal((4, 2, 3)), ["log_prob", "entropy", "mean", "variance", "covariance_matrix"], ()),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _build(lib, name, params, grad=True, dtype=None, skip=()):
    dtype = dtype or lib.float64
    ps = {k: lib.tensor(v, dtype=dtype, requires_grad=grad and k not in skip) if isinstance(v, np.ndarray) else v
          for k, v in params.items()}
    return getattr(lib.distributions, name)(**ps), {k: v for k, v in ps.items() if isinstance(v, np.ndarray) or
                                                    hasattr(v, "grad")}


def _quantity(d, what, value):
    if what in ("log_prob", "cdf", "icdf"):
        return getattr(d, what)(value)
    if what == "entropy":
        return d.entropy()
    return getattr(d, what)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_values_and_gradients_equal_torch(case, dtype):
    torch = _torch()
    name, params, value, quantities, skip = CASES[case]
    tol = 1e-8 if dtype == "float64" else 2e-4          # (special functions: lgamma, digamma, polygamma)
    for what in quantities:
        v = RNG.random(value.shape) * 0.98 + 0.01 if what == "icdf" else value
        res = []
        for lib in (torch, tj):
            d, ps = _build(lib, name, params, dtype=getattr(lib, dtype), skip=skip)
            out = _quantity(d, what, lib.tensor(v, dtype=getattr(lib, dtype)))
            if out.requires_grad:
                w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)), dtype=out.dtype)
                (out * w).sum().backward()
            grads = [p.grad.numpy() if p.grad is not None else None for p in ps.values()]
            res.append((out.detach().numpy(), tuple(out.shape), str(out.dtype).split(".")[-1], grads))
        (want, wshape, wdtype, wgrads), (got, gshape, gdtype, ggrads) = res
        assert gshape == wshape and gdtype == wdtype, what
        _close(got, want, tol if what != "cdf" else max(tol, 1e-9))
        for a, b in zip(ggrads, wgrads):
            assert (a is None) == (b is None), what
            if a is not None:
                _close(a, b, tol if what != "cdf" else max(tol, 1e-9))


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_shapes_equal_torch(case):
    name, params, _, _, _ = CASES[case]
    same_shapes(_build(tj, name, params, grad=False)[0], _build(_torch(), name, params, grad=False)[0])


# ----------------------------------------------------------------------------- KL

KL_PAIRS = [
    ("Gamma", dict(concentration=_pos(4) * 3, rate=_pos(4)), "Gamma", dict(concentration=_pos(4) * 2, rate=_pos(4))),
    ("Chi2", dict(df=_pos(3) * 3), "Chi2", dict(df=_pos(3) * 5)),
    ("Exponential", dict(rate=_pos(3)), "Gamma", dict(concentration=_pos(3) * 2, rate=_pos(3))),
    ("Gamma", dict(concentration=_pos(3) * 2, rate=_pos(3)), "Exponential", dict(rate=_pos(3))),
    ("Beta", dict(concentration1=_pos(4) * 2, concentration0=_pos(4)), "Beta",
     dict(concentration1=_pos(4), concentration0=_pos(4) * 3)),
    ("Dirichlet", dict(concentration=_pos(2, 4) * 2), "Dirichlet", dict(concentration=_pos(2, 4) * 3)),
    ("Poisson", dict(rate=_pos(4) * 3), "Poisson", dict(rate=_pos(4) * 2)),
    ("Binomial", dict(total_count=np.array([5.0, 8.0, 8.0]), probs=RNG.random(3)), "Binomial",
     dict(total_count=np.array([5.0, 8.0, 6.0]), logits=RNG.standard_normal(3))),
    ("Geometric", dict(probs=RNG.random(4) * 0.9 + 0.05), "Geometric", dict(logits=RNG.standard_normal(4))),
    ("Gumbel", dict(loc=RNG.standard_normal(3), scale=_pos(3)), "Gumbel", dict(loc=RNG.standard_normal(3),
                                                                             scale=_pos(3))),
    ("Cauchy", dict(loc=RNG.standard_normal(3), scale=_pos(3)), "Cauchy", dict(loc=RNG.standard_normal(3),
                                                                             scale=_pos(3))),
    ("HalfNormal", dict(scale=_pos(3)), "HalfNormal", dict(scale=_pos(3))),
    ("MultivariateNormal", dict(loc=RNG.standard_normal((2, 3)), covariance_matrix=_spd(2, 3, 3)),
     "MultivariateNormal", dict(loc=RNG.standard_normal(3), scale_tril=_CHOL[0])),
    ("MultivariateNormal", dict(loc=RNG.standard_normal(3), precision_matrix=_spd(3, 3)),
     "MultivariateNormal", dict(loc=RNG.standard_normal((2, 3)), covariance_matrix=_spd(2, 3, 3))),
]


@pytest.mark.parametrize("case", range(len(KL_PAIRS)), ids=[f"{c[0]}-{c[2]}" for c in KL_PAIRS])
def test_kl_divergence_equals_torch(case):
    torch = _torch()
    pn, pp, qn, qp = KL_PAIRS[case]
    skip = ("total_count",)
    res = []
    for lib in (torch, tj):
        p, ps = _build(lib, pn, pp, skip=skip)
        q, qs = _build(lib, qn, qp, skip=skip)
        kl = lib.distributions.kl_divergence(p, q)
        kl[kl.isfinite()].sum().backward()
        res.append((kl.detach().numpy(), [t.grad.numpy() for t in [*ps.values(), *qs.values()]
                                          if t.grad is not None]))
    _close(res[1][0], res[0][0], 1e-8)
    assert len(res[1][1]) == len(res[0][1])
    for a, b in zip(res[1][1], res[0][1]):
        _close(a, b, 1e-8)


def test_kl_errors_as_torch():
    torch = _torch()
    for code in ["kl_divergence(Binomial(torch.tensor([3., 5.]), torch.tensor([0.5, 0.5])), "
                 "Binomial(torch.tensor([4., 5.]), torch.tensor([0.5, 0.5])))",
                 "kl_divergence(MultivariateNormal(torch.zeros(2), torch.eye(2)), "
                 "MultivariateNormal(torch.zeros(3), torch.eye(3)))",
                 "kl_divergence(Poisson(torch.tensor(1.)), Gamma(torch.tensor(1.), torch.tensor(1.)))"]:
        with pytest.raises(Exception) as want:
            eval(code, {"torch": torch, **vars(torch.distributions)})
        with pytest.raises(type(want.value)) as got:
            eval(code, {"torch": tj, **vars(D)})
        if type(want.value) is ValueError:
            assert str(got.value).split() == str(want.value).split()


# ----------------------------------------------------------------------------- sampling

SAMPLED = [
    lambda: D.Gamma(tj.tensor([0.2, 1.0, 3.0, 150.0]), tj.tensor([1.0, 2.0, 0.5, 3.0])),
    lambda: D.Chi2(tj.tensor([1.0, 7.0])),
    lambda: D.Beta(tj.tensor([0.5, 2.0, 30.0]), tj.tensor([0.5, 5.0, 10.0])),
    lambda: D.Dirichlet(tj.tensor([[0.4, 1.0, 3.0], [10.0, 5.0, 2.0]])),
    lambda: D.StudentT(tj.tensor([5.0, 30.0]), tj.tensor([1.0, -2.0]), tj.tensor([2.0, 0.5])),
    lambda: D.Poisson(tj.tensor([0.0, 0.3, 4.0, 9.99, 10.0, 55.0, 3000.0])),
    lambda: D.Binomial(tj.tensor([0.0, 1.0, 12.0, 12.0, 200.0, 5000.0, 300.0]),
                       tj.tensor([0.4, 0.3, 0.5, 0.97, 0.3, 0.01, 1.0])),
    lambda: D.Geometric(tj.tensor([0.05, 0.5, 1.0])),
    lambda: D.Gumbel(tj.tensor([1.0, -2.0]), tj.tensor([0.5, 3.0])),
    lambda: D.HalfNormal(tj.tensor([0.5, 3.0])),
    lambda: D.Multinomial(7, tj.tensor([0.1, 0.6, 0.3])),
    lambda: D.MultivariateNormal(tj.tensor([1.0, -1.0]), tj.tensor([[2.0, 0.8], [0.8, 1.0]])),
]
SAMPLED_IDS = ["Gamma", "Chi2", "Beta", "Dirichlet", "StudentT", "Poisson", "Binomial", "Geometric", "Gumbel",
               "HalfNormal", "Multinomial", "MultivariateNormal"]


@pytest.mark.parametrize("case", range(len(SAMPLED)), ids=SAMPLED_IDS)
def test_sample_mean_and_variance(case):
    d = SAMPLED[case]()
    tj.manual_seed(case)
    n = 100_000
    x = d.sample((n,)).numpy().astype(np.float64)
    mean, var = d.mean.numpy(), d.variance.numpy()
    se = np.sqrt(var / n)
    assert (np.abs(x.mean(0) - mean) <= 5 * se + 1e-12).all(), (x.mean(0), mean)
    # the variance of a sample variance depends on the fourth moment: 6 % covers these laws at n = 100k
    assert (np.abs(x.var(0) - var) <= 0.06 * var + 1e-12).all(), (x.var(0), var)
    assert bool(d.support.check(tj.tensor(x[:1000])).all())
    if isinstance(d, D.MultivariateNormal):
        _close(np.cov(x.T), d.covariance_matrix.numpy(), 0.04)


def _chi2_pvalue(x, pmf):
    """Pearson's chi-square test of integer draws x against pmf(k), bins with at least 20 expected draws."""
    stats = pytest.importorskip("scipy.stats")
    ks = np.arange(int(x.max()) + 1)
    obs = np.bincount(x.astype(np.int64), minlength=len(ks))
    exp = pmf(ks).astype(np.float64) * len(x)
    keep = exp > 20
    return stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


@pytest.mark.parametrize("law", ["Poisson-3", "Poisson-40", "Binomial-small", "Binomial-large"])
def test_count_samplers_follow_the_pmf(law):
    """Beyond the moments: the inversion and the transformed-rejection samplers draw each count as often as
    PyTorch's pmf says (a wrong acceptance step keeps the mean and variance close but fails this)."""
    _torch()
    tj.manual_seed(7)
    d = {"Poisson-3": D.Poisson(tj.tensor(3.0)), "Poisson-40": D.Poisson(tj.tensor(40.0)),
         "Binomial-small": D.Binomial(tj.tensor(30.0), tj.tensor(0.2)),
         "Binomial-large": D.Binomial(tj.tensor(400.0), tj.tensor(0.35))}[law]
    x = d.sample((100_000,)).numpy()
    pmf = lambda k: np.exp(d.log_prob(tj.tensor(k.astype(np.float32))).numpy())   # noqa: E731
    assert _chi2_pvalue(x, pmf) > 1e-4


def test_gamma_sampler_matches_the_cdf():
    """Kolmogorov-Smirnov distance of gamma draws from Gamma.cdf (shapes below 1 use the boost step)."""
    tj.manual_seed(3)
    for conc in (0.25, 1.0, 6.0):
        d = D.Gamma(tj.tensor(conc, dtype=tj.float64), tj.tensor(2.0, dtype=tj.float64))
        x = np.sort(d.sample((20_000,)).numpy())
        cdf = d.cdf(tj.tensor(x)).numpy()
        ecdf = np.arange(1, len(x) + 1) / len(x)
        assert np.abs(cdf - ecdf).max() < 1.63 / math.sqrt(len(x))     # the 1 % critical value


def test_manual_seed_repeats_draws():
    for make in SAMPLED:
        tj.manual_seed(21)
        a = make().sample((50,)).numpy()
        tj.manual_seed(21)
        b = make().sample((50,)).numpy()
        assert (a == b).all()


def test_rsample():
    torch = _torch()
    tj.manual_seed(0)
    for name, kw in [("Cauchy", dict(loc=[0.3, -1.0], scale=[2.0, 0.5])), ("Gumbel", dict(loc=[0.3], scale=[2.0])),
                     ("HalfNormal", dict(scale=[0.5, 3.0])), ("HalfCauchy", dict(scale=[1.5])),
                     ("StudentT", dict(df=[3.0, 8.0], loc=[0.5, 1.0], scale=[2.0, 0.5]))]:
        ps = {k: tj.tensor(v, requires_grad=True) for k, v in kw.items()}
        d = getattr(D, name)(**ps)
        assert d.has_rsample and getattr(torch.distributions, name)(**{k: torch.tensor(v) for k, v in kw.items()}
                                                                    ).has_rsample
        x = d.rsample((1000,))
        assert x.requires_grad and not d.sample((3,)).requires_grad
        x.sum().backward()
        for k, p in ps.items():
            assert p.grad is not None and np.abs(p.grad.numpy()).min() > 0, (name, k)
    # MultivariateNormal: x = loc + L eps, so d(sum x)/dL[i, j] = the sum of eps[j]
    L = tj.tensor(_CHOL[0], requires_grad=True)
    tj.manual_seed(4)
    x = D.MultivariateNormal(tj.zeros(3, dtype=tj.float64), scale_tril=L).rsample((40,))
    x.sum().backward()
    eps = tj.linalg.solve_triangular(tj.tensor(_CHOL[0]), x.detach().mT, upper=False).mT.numpy()
    _close(L.grad.numpy(), np.broadcast_to(eps.sum(0), (3, 3)), 1e-8)     # (all of L, as PyTorch's matmul)
    with pytest.raises(NotImplementedError):
        D.Poisson(tj.tensor(2.0)).rsample()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_implicit_gamma_gradient_equals_torchs(dtype):
    """A gamma draw's derivative in its concentration (the quantile's at the draw's level) equals -(dP/da) / p from
    central differences of PyTorch's gammainc, concentrations from 0.05 to 200, draws across each one's range; and
    PyTorch's own _standard_gamma_grad, an approximation good to ~2e-4 there."""
    torch = _torch()
    from tracejit.distributions.gamma import implicit_gamma
    a = np.repeat([0.05, 0.3, 1.0, 2.5, 9.0, 40.0, 200.0], 5)
    q = np.tile([0.02, 0.2, 0.5, 0.8, 0.98], 7)                         # levels -> draws by bisection on the cdf
    lo, hi = np.full_like(a, 1e-30), a * 10 + 50
    at = torch.tensor(a)
    for _ in range(200):
        mid = (lo + hi) / 2
        below = torch.special.gammainc(at, torch.tensor(mid)).numpy() < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    g = (lo + hi) / 2
    gt, h = torch.tensor(g), 1e-6 * at
    dp = (torch.special.gammainc(at + h, gt) - torch.special.gammainc(at - h, gt)) / (2 * h)
    want = (-dp / torch.exp(torch.xlogy(at - 1, gt) - gt - torch.lgamma(at))).numpy()
    conc = tj.tensor(a.astype(dtype), requires_grad=True)
    out = implicit_gamma(conc, tj.tensor(g.astype(dtype)))
    np.testing.assert_array_equal(out.detach().numpy(), g.astype(dtype))      # the value is the draw
    out.sum().backward()
    np.testing.assert_allclose(conc.grad.numpy(), want, rtol=1e-6 if dtype == "float64" else 2e-3)
    np.testing.assert_allclose(conc.grad.numpy(), torch._standard_gamma_grad(at, gt).numpy(), rtol=2e-3)


def test_gamma_family_rsample_gradients_are_those_of_the_mean():
    """d/dparam E[rsample] estimated from many reparameterized draws: Gamma's mean a/b, Beta's a/(a+b), a Dirichlet
    coordinate's a_i/sum(a), Chi2's df, StudentT's scale gradient of E|x| (with df's through the chi-square)."""
    tj.manual_seed(3)
    n = 8000
    a, b = tj.tensor(2.5, dtype=tj.float64, requires_grad=True), tj.tensor(1.5, dtype=tj.float64, requires_grad=True)
    D.Gamma(a, b).rsample((n,)).mean().backward()
    _close([a.grad.item(), b.grad.item()], [1 / 1.5, -2.5 / 1.5 ** 2], 0.03)
    a, b = tj.tensor(2.0, dtype=tj.float64, requires_grad=True), tj.tensor(3.0, dtype=tj.float64, requires_grad=True)
    D.Beta(a, b).rsample((n,)).mean().backward()
    _close([a.grad.item(), b.grad.item()], [3 / 25, -2 / 25], 0.03)
    c = tj.tensor([0.7, 2.0, 4.0], dtype=tj.float64, requires_grad=True)
    D.Dirichlet(c).rsample((n,))[:, 0].mean().backward()
    _close(c.grad.numpy(), [6.0 / 6.7 ** 2, -0.7 / 6.7 ** 2, -0.7 / 6.7 ** 2], 0.03)
    df = tj.tensor(3.0, dtype=tj.float64, requires_grad=True)
    D.Chi2(df).rsample((n,)).mean().backward()
    _close(df.grad.item(), 1.0, 0.03)
    df = tj.tensor(3.0, dtype=tj.float64, requires_grad=True)
    D.StudentT(df).rsample((n,)).abs().mean().backward()

    def mean_abs(v):              # E|t_v| = 2 sqrt(v) Gamma((v + 1) / 2) / (sqrt(pi) (v - 1) Gamma(v / 2))
        return 2 * math.sqrt(v / math.pi) * math.exp(math.lgamma((v + 1) / 2) - math.lgamma(v / 2)) / (v - 1)
    _close(df.grad.item(), (mean_abs(3 + 1e-5) - mean_abs(3 - 1e-5)) / 2e-5, 0.02)


def test_gammainc_against_torch():
    torch = _torch()
    a = np.array([0.05, 0.5, 1.0, 3.0, 20.0, 200.0, 1000.0, 7.5])
    x = np.array([0.01, 2.0, 0.0, 30.0, 19.0, 180.0, 1040.0, 7.5])
    from tracejit.distributions.gamma import gammainc
    _close(gammainc(tj.tensor(a), tj.tensor(x)).numpy(), torch.special.gammainc(torch.tensor(a), torch.tensor(x)),
           1e-10)


# ----------------------------------------------------------------------------- validation

ERRORS = [
    "Gamma(torch.tensor([1., -1.]), torch.tensor(1.))",
    "Gamma(torch.tensor(1.), torch.tensor(0.))",
    "Gamma(torch.tensor(2.), torch.tensor(1.)).log_prob(torch.tensor(-1.))",
    "Chi2(torch.tensor([-2.]))",
    "Beta(torch.tensor(0.), torch.tensor(1.))",
    "Beta(torch.tensor(1.), torch.tensor(1.)).log_prob(torch.tensor(1.5))",
    "Dirichlet(torch.tensor(1.))",
    "Dirichlet(torch.tensor([1., -1.]))",
    "Dirichlet(torch.ones(3)).log_prob(torch.tensor([0.5, 0.5, 0.5]))",
    "StudentT(torch.tensor(-1.))",
    "StudentT(torch.tensor(2.), torch.tensor(0.), torch.tensor(-1.))",
    "Poisson(torch.tensor([-1.]))",
    "Poisson(torch.tensor([1.])).log_prob(torch.tensor([1.5]))",
    "Poisson(torch.tensor([1.])).log_prob(torch.tensor([-1.]))",
    "Binomial(torch.tensor(-1.), torch.tensor(0.5))",
    "Binomial(torch.tensor(2.5), torch.tensor(0.5))",
    "Binomial(torch.tensor(3.), torch.tensor(1.5))",
    "Binomial(torch.tensor(3.), torch.tensor(0.5)).log_prob(torch.tensor(4.))",
    "Binomial(torch.tensor([3., 4.]), torch.tensor(0.5)).entropy()",
    "Binomial(5)",
    "Geometric(torch.tensor([0.0, 0.5]))",
    "Geometric(torch.tensor([1.5]))",
    "Geometric(torch.tensor([0.5])).log_prob(torch.tensor([-1.]))",
    "Geometric(probs=torch.tensor(0.5), logits=torch.tensor(0.))",
    "Cauchy(torch.tensor(0.), torch.tensor(-1.))",
    "Gumbel(torch.tensor(0.), torch.tensor(0.))",
    "HalfNormal(torch.tensor([-1.]))",
    "HalfNormal(torch.tensor(1.)).log_prob(torch.tensor(-1.))",
    "HalfCauchy(torch.tensor(1.)).cdf(torch.tensor(-1.))",
    "Multinomial(torch.tensor(3), torch.ones(3))",
    "Multinomial(3, torch.tensor([-1., 1., 1.]))",
    "Multinomial(3, torch.ones(3)).log_prob(torch.tensor([2., 2., 1.]))",
    "Multinomial(3, torch.ones(3)).log_prob(torch.tensor([-1., 2., 1.]))",
    "MultivariateNormal(torch.tensor(0.), torch.eye(1))",
    "MultivariateNormal(torch.zeros(2))",
    "MultivariateNormal(torch.zeros(2), torch.eye(2), scale_tril=torch.eye(2))",
    "MultivariateNormal(torch.zeros(2), torch.ones(2))",
    "MultivariateNormal(torch.zeros(2), scale_tril=torch.ones(2))",
    "MultivariateNormal(torch.zeros(2), precision_matrix=torch.ones(2))",
    "MultivariateNormal(torch.zeros(2), torch.tensor([[1., 2.], [2., 1.]]))",
    "MultivariateNormal(torch.zeros(2), torch.tensor([[1., 0.5], [0., 1.]]))",
    "MultivariateNormal(torch.zeros(2), precision_matrix=torch.tensor([[1., 2.], [2., 1.]]))",
    "MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor([[1., 0.5], [0., 1.]]))",
    "MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor([[1., 0.], [0.5, -1.]]))",
    "MultivariateNormal(torch.zeros(2), torch.eye(2)).log_prob(torch.zeros(3))",
    "MultivariateNormal(torch.zeros(2), torch.eye(2)).log_prob(torch.tensor([0., float('nan')]))",
    "MultivariateNormal(torch.zeros(2, 2), torch.eye(2)).expand((3,))",
]


@pytest.mark.parametrize("code", ERRORS)
def test_errors_as_torch(code):
    same_error(code)


def test_validate_args_off_and_repr():
    torch = _torch()
    assert np.isnan(D.Gamma(tj.tensor([-1.0]), tj.tensor([1.0]), validate_args=False).entropy().numpy()).all()
    assert float(D.Poisson(tj.tensor(2.0), validate_args=False).log_prob(tj.tensor(-1.0))) != 0
    for code in ["Gamma(torch.tensor(2.), torch.tensor(1.))", "Chi2(torch.tensor([2.]))", "Beta(torch.ones(2), 1.)",
                 "Dirichlet(torch.ones(3))", "StudentT(torch.tensor(3.))", "Poisson(torch.tensor([2.]))",
                 "Binomial(torch.tensor(3.), torch.tensor(0.5))", "Geometric(torch.tensor(0.3))",
                 "Cauchy(0., 1.)", "Gumbel(torch.zeros(2), 1.)", "HalfNormal(torch.tensor(1.))",
                 "HalfCauchy(torch.ones(2))", "Multinomial(3, torch.ones(3))",
                 "MultivariateNormal(torch.zeros(2), torch.eye(2))"]:
        want = repr(eval(code, {"torch": torch, **vars(torch.distributions)}))
        got = repr(eval(code, {"torch": tj, **vars(D)})).replace("tracejit.", "torch.")
        assert got == want, code


def test_traced_log_prob_equals_eager():
    """The new densities are tracejit composites: a traced program computes the same values and gradients."""
    conc, rate = tj.tensor([0.7, 2.0, 5.0], requires_grad=True), tj.tensor([1.5, 0.3, 2.0], requires_grad=True)
    x = tj.tensor([0.4, 3.0, 2.2])
    L = tj.tensor(_CHOL[0].astype(np.float32), requires_grad=True)
    v = tj.tensor(RNG.standard_normal((4, 3)).astype(np.float32))

    def loss(conc, rate, L):
        g = D.Gamma(conc, rate).log_prob(x).sum() + D.Beta(conc, rate).entropy().sum()
        return g + D.MultivariateNormal(tj.zeros(3), scale_tril=L).log_prob(v).sum()

    want = loss(conc, rate, L)
    want.backward()
    grads = [t.grad.numpy().copy() for t in (conc, rate, L)]
    step = tj.trace(loss)
    for t in (conc, rate, L):
        t.grad = None
    got = step(conc, rate, L)
    got.backward()
    _close(float(got), float(want), 1e-5)
    for t, g in zip((conc, rate, L), grads):
        _close(t.grad.numpy(), g, 1e-5)


def test_torch_poisson_binomial_and_standard_gamma():
    """torch.poisson, torch.binomial, torch._standard_gamma: the samplers above as torch functions (a generator
    argument, the input's dtype, no gradient), their moments, and PyTorch's errors."""
    torch = _torch()
    tj.manual_seed(0)
    rate = tj.tensor([0.5, 3.0, 40.0] * 20000, dtype=tj.float64, requires_grad=True)
    x = tj.poisson(rate)
    assert x.dtype == tj.float64 and not x.requires_grad
    _close(x.numpy().reshape(-1, 3).mean(0), [0.5, 3.0, 40.0], 0.02)
    b = tj.binomial(tj.tensor([5.0, 100.0] * 20000), tj.tensor([0.3, 0.7] * 20000))
    assert b.dtype == tj.float32
    _close(b.numpy().reshape(-1, 2).mean(0), [1.5, 70.0], 0.02)
    g = tj._standard_gamma(tj.tensor([0.3, 2.0] * 20000))
    _close(g.numpy().reshape(-1, 2).mean(0), [0.3, 2.0], 0.03)
    draws = [tj.poisson(tj.ones(6) * 3, generator=tj.Generator().manual_seed(5)).numpy() for _ in range(2)]
    assert (draws[0] == draws[1]).all()
    for lib in (torch, tj):          # out-of-range counts and probabilities as PyTorch treats them
        assert lib.binomial(lib.tensor([-3.0, 3.0]), lib.tensor([0.5, 1.5])).tolist() == [0.0, 3.0]
    for code in ("torch.poisson(torch.tensor([-1.0]))", "torch.poisson(torch.tensor([1, 2]))",
                 "torch.binomial(torch.tensor([3]), torch.tensor([0.5]))"):
        same_error(code)
