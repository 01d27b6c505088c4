"""lgamma, digamma, polygamma and mvlgamma against PyTorch and against independent references (math.lgamma;
mpmath at 60 digits for digamma and polygamma): float64 to ~1e-14 relative, float32 within a few ulp of the
correctly rounded value, PyTorch's values at the poles and infinities, gradients to third order, the CPU code
generator equal to eager, PyTorch's errors."""
import math

import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")

RNG = np.random.default_rng(7)
# wide ranges: tiny, near the poles, far negative (the reflection and the paired sums), large
XS = np.concatenate([RNG.uniform(-30, 30, 150), 10 ** RNG.uniform(-8, 8, 60), -(10 ** RNG.uniform(-8, 6, 60)),
                     [-64.5, -65.5, -999999.5, -3.0 + 1e-9, -3.0 - 1e-9, 1e-300, 2.0 ** -1074, 1e15]])


def _mp_polygamma(n, x):
    # mpmath sums the cancelling terms at negative arguments: 60 digits, 150 far out (at -999999.5 an even n's
    # value is ~1e-65 of its terms)
    with mpmath.workdps(150 if x < -1000 else 60):
        return float(mpmath.polygamma(n, mpmath.mpf(float(x))))


def _rel(got, want):
    return abs(got - want) / max(abs(want), 1e-300)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 12])
def test_polygamma_float64_against_mpmath(n):
    got = tj.polygamma(n, tj.tensor(XS)).numpy()
    worst = 0.0
    for x, g in zip(XS, got):
        want = _mp_polygamma(n, x)
        if not math.isfinite(want) or abs(want) < 1e-300:
            assert g == want or (abs(want) < 1e-300 and abs(g) < 1e-290), (n, x, g, want)
            continue
        err = _rel(g, want)
        if n == 0 and abs(want) < 1e-3:             # digamma's zero near 1.4616: absolute error
            err = abs(g - want)
        worst = max(worst, err)
    assert worst < 5e-14, worst


def test_lgamma_float64_against_math_lgamma_and_mpmath():
    got = tj.lgamma(tj.tensor(XS)).numpy()
    for x, g in zip(XS, got):
        want = math.lgamma(x)
        with mpmath.workdps(60):
            exact = float(mpmath.log(abs(mpmath.gamma(mpmath.mpf(float(x)))))) if abs(x) < 1e5 else want
        assert abs(g - want) <= 4e-15 * max(abs(want), 1.0) or abs(g - exact) <= 4e-15 * max(abs(exact), 1.0), \
            (x, g, want, exact)


def test_digamma_is_the_derivative_of_lgamma_by_finite_differences():
    """An independent check that needs no mpmath: central differences of math.lgamma (h = 1e-5, error ~1e-9)."""
    x = np.array([0.1, 0.7, 1.5, 3.3, 12.0, -0.4, -2.7, -10.2])
    h = 1e-5
    fd = np.array([(math.lgamma(v + h) - math.lgamma(v - h)) / (2 * h) for v in x])
    np.testing.assert_allclose(tj.digamma(tj.tensor(x)).numpy(), fd, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("name", ["lgamma", "digamma", "polygamma1", "polygamma2", "polygamma3"])
def test_float64_matches_torch(name):
    # PyTorch's own errors: its reflection rounds pi x near the poles, its polygamma(n >= 2) sums the terms below 0
    # one by one (~1e-12 at -64.5, minutes at -1e6): compared on x >= -30 off the poles; mpmath judges the rest
    x = XS[(XS > -30) & (XS < 1e6) & (np.abs(XS - np.round(XS)) > 1e-3)]
    op, n = (name[:-1], int(name[-1])) if name.startswith("polygamma") else (name, None)
    ours = (tj.polygamma(n, tj.tensor(x)) if n is not None else getattr(tj, op)(tj.tensor(x))).numpy()
    theirs = (torch.polygamma(n, torch.tensor(x)) if n is not None else getattr(torch, op)(torch.tensor(x))).numpy()
    # PyTorch's trigamma stops its series at x + 6 (~1e-10 relative); digamma near its zero: absolute
    rtol = 1e-9 if n == 1 else 1e-12
    ok = np.isclose(ours, theirs, rtol=rtol, atol=1e-13 if name == "digamma" else 0)
    assert ok.all(), list(zip(x[~ok], ours[~ok], theirs[~ok]))[:5]


@pytest.mark.parametrize("name", ["lgamma", "digamma", "polygamma1", "polygamma2"])
def test_float32_within_a_few_ulp(name):
    x32 = np.concatenate([np.linspace(-20, 20, 4001), 10 ** np.linspace(-6, 6, 400)]).astype(np.float32)
    x32 = x32[(x32 > 0) | (x32 != np.floor(x32))]
    n = int(name[-1]) if name.startswith("polygamma") else None
    ours = (tj.polygamma(n, tj.tensor(x32)) if n is not None else getattr(tj, name)(tj.tensor(x32)))
    assert ours.dtype == tj.float32
    want = (torch.polygamma(n, torch.tensor(x32.astype(np.float64))) if n is not None else
            getattr(torch, name)(torch.tensor(x32.astype(np.float64)))).numpy().astype(np.float32)
    theirs = (torch.polygamma(n, torch.tensor(x32)) if n is not None else getattr(torch, name)(torch.tensor(x32)))
    ours, theirs = ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64)
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    # ours: the float64 value rounded, within 1 ulp of PyTorch's float64 rounded (1e-12 absolute where libm's
    # lgamma is ill-conditioned, at its zeros), and never further from it than PyTorch's float32 is, plus 1 ulp
    err = np.abs(ours - want)
    assert (err <= ulp + 1e-12).all(), x32[err > ulp + 1e-12][:5]
    assert (err <= np.abs(theirs - want) + ulp).all()


def test_poles_and_infinities_as_torch():
    x = np.array([0.0, -0.0, -1.0, -2.0, -1e20, np.inf, -np.inf, np.nan, 1e300, -1e-300, 1e-320])
    for f, g in [(tj.lgamma, torch.lgamma), (tj.digamma, torch.digamma)] + \
            [((lambda t, n=n: tj.polygamma(n, t)), (lambda t, n=n: torch.polygamma(n, t))) for n in (0, 2, 3)]:
        ours, theirs = f(tj.tensor(x)).numpy(), g(torch.tensor(x)).numpy()
        keep = ~np.isin(x, [np.inf, -np.inf])      # polygamma(n >= 2, +-inf): see below
        np.testing.assert_array_equal(ours[keep], theirs[keep])
        assert np.array_equal(np.signbit(ours[keep]), np.signbit(theirs[keep]))
    # differences from PyTorch, each the limit: trigamma's double poles are +inf (PyTorch: ~1e32 at the negative
    # integers), polygamma(n, +inf) is a signed zero (PyTorch: NaN for n >= 2), -inf (a limit of poles) NaN
    p1 = tj.polygamma(1, tj.tensor([-1.0, -2.0, 0.0, np.inf, -np.inf])).numpy()
    assert np.array_equal(p1[:3], [np.inf] * 3) and p1[3] == 0 and np.isnan(p1[4])
    p2 = tj.polygamma(2, tj.tensor([np.inf, -np.inf])).numpy()
    assert p2[0] == 0 and np.signbit(p2[0]) and np.isnan(p2[1])


def test_gradients_match_torch_to_third_order():
    x = np.array([0.3, 1.0, 2.5, 17.0, -0.5, -2.25])
    a, b = tj.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = tj.lgamma(a).sum(), torch.lgamma(b).sum()
    for _ in range(3):
        (ga,) = tj.autograd.grad(ya, [a], create_graph=True)
        (gb,) = torch.autograd.grad(yb, [b], create_graph=True)
        np.testing.assert_allclose(ga.detach().numpy(), gb.detach().numpy(), rtol=1e-9)
        ya, yb = ga.sum(), gb.sum()
    for n in (0, 1, 2):
        a, b = tj.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        tj.polygamma(n, a).sum().backward()
        torch.polygamma(n, b).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9)


def test_mvlgamma_and_special_names():
    x = np.array([1.6, 2.5, 7.0, 40.0])
    for p in (1, 2, 5):
        a, b = tj.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = tj.mvlgamma(a, p), torch.mvlgamma(b, p)
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-13)
        ya.sum().backward()
        yb.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(tj.special.multigammaln(tj.tensor(x), p).numpy(),
                                   torch.special.multigammaln(torch.tensor(x), p).numpy(), rtol=1e-13)
    t, u = tj.tensor(x), torch.tensor(x)
    for name in ("gammaln", "digamma", "psi"):
        np.testing.assert_allclose(getattr(tj.special, name)(t).numpy(), getattr(torch.special, name)(u).numpy(),
                                   rtol=1e-13)
    np.testing.assert_allclose(tj.special.polygamma(3, t).numpy(), torch.special.polygamma(3, u).numpy(),
                               rtol=1e-12)
    assert tj.mvlgamma(tj.tensor([2, 3]), 2).dtype == torch_dtype_name(torch.mvlgamma(torch.tensor([2, 3]), 2))
    assert tj.lgamma(tj.tensor([1, 2])).dtype == tj.float32 and tj.digamma(tj.tensor([1, 2])).dtype == tj.float32


def torch_dtype_name(t):
    return getattr(tj, str(t.dtype).split(".")[1])


def test_methods_and_inplace():
    x = np.array([0.4, 2.5, 9.0])
    t = tj.tensor(x)
    np.testing.assert_allclose(t.polygamma(2).numpy(), torch.tensor(x).polygamma(2).numpy(), rtol=1e-13)
    np.testing.assert_allclose(t.mvlgamma(2).numpy(), torch.tensor(x).mvlgamma(2).numpy(), rtol=1e-13)
    for name, args in (("lgamma_", ()), ("digamma_", ()), ("polygamma_", (1,))):
        a, b = tj.tensor(x), torch.tensor(x)
        assert getattr(a, name)(*args) is a
        getattr(b, name)(*args)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9)      # (PyTorch's trigamma: ~1e-10)


def test_errors_as_torch():
    t, u = tj.tensor([1.5]), torch.tensor([1.5])
    for call in (lambda m, x: m.polygamma(-1, x), lambda m, x: m.polygamma(1.5, x), lambda m, x: m.mvlgamma(x, 0),
                 lambda m, x: m.mvlgamma(x, p=0.5)):
        with pytest.raises(Exception) as theirs:
            call(torch, u)
        with pytest.raises(type(theirs.value)) as ours:
            call(tj, t)
        assert str(ours.value).split(",")[0][:20] == str(theirs.value).split(",")[0][:20] or \
            type(theirs.value) is TypeError


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_traced_equals_eager(dtype):
    x = np.concatenate([np.linspace(-9.9, 9.9, 199), [1e-6, 30.0, 1e5]]).astype(dtype)
    t = tj.tensor(x)

    def f(v):
        return tj.lgamma(v) + tj.digamma(v) * 0.5 + tj.polygamma(1, v) * 0.25 + tj.polygamma(4, v) * 1e-3

    got = tj.trace(f)(t).numpy()
    want = f(t).numpy()
    # float32: the fused kernel rounds the sum's terms (size ~10) in its own order
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14,
                               atol=1e-5 if dtype == "float32" else 0)
    v = tj.tensor(x[x > 0.5], requires_grad=True)
    w = v.detach().clone().requires_grad_(True)
    tj.trace(lambda a: f(a).sum())(v).backward()
    f(w).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), w.grad.numpy(), rtol=1e-6 if dtype == "float32" else 1e-13)
