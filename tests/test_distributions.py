"""tracejit.distributions against torch.distributions: from the same parameters and values, log_prob, entropy, mean,
mode, variance, stddev, cdf/icdf and KL divergences and their parameter gradients equal PyTorch's; batch, event and
sample shapes are PyTorch's; sample statistics over many draws; PyTorch's ValueErrors for out-of-support parameters
and values; traced = eager for a REINFORCE loss and a VAE-style reparameterized Normal with a fixed seed."""
import math

import numpy as np
import pytest

import tracejit as tj

D = tj.distributions
RNG = np.random.default_rng(0)


def _torch():
    torch = pytest.importorskip("torch")
    # torch.compile turns PyTorch's argument validation off for the whole process (another test may have run it)
    torch.distributions.Distribution.set_default_validate_args(True)
    return torch


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)


def _pos(*shape):
    return RNG.random(shape) + 0.2


def _probs(*shape):
    p = RNG.random(shape) + 0.05
    return p / p.sum(-1, keepdims=True)


# (name, parameters (arrays, given as keyword arguments), a value inside the support, what to compare)
CASES = [
    ("Normal", dict(loc=RNG.standard_normal((3, 2)), scale=_pos(3, 2)), RNG.standard_normal((4, 3, 2)),
     ["log_prob", "cdf", "icdf", "entropy", "mean", "mode", "variance", "stddev"]),
    ("Normal", dict(loc=RNG.standard_normal(3), scale=_pos(1)), RNG.standard_normal((2, 1)),
     ["log_prob", "cdf", "entropy", "variance"]),
    ("LogNormal", dict(loc=RNG.standard_normal(4), scale=_pos(4)), _pos(5, 4) * 3,
     ["log_prob", "cdf", "entropy", "mean", "mode", "variance"]),
    ("Uniform", dict(low=-_pos(3) - 1, high=_pos(3) + 1), RNG.random((6, 3)) * 2 - 1.0,
     ["log_prob", "cdf", "icdf", "entropy", "mean", "variance", "stddev"]),
    ("Laplace", dict(loc=RNG.standard_normal((2, 3)), scale=_pos(2, 3)), RNG.standard_normal((2, 3)) * 3,
     ["log_prob", "cdf", "icdf", "entropy", "mean", "mode", "variance", "stddev"]),
    ("Exponential", dict(rate=_pos(5) * 2), _pos(3, 5),
     ["log_prob", "cdf", "icdf", "entropy", "mean", "mode", "variance", "stddev"]),
    ("Bernoulli", dict(probs=RNG.random((2, 4))), (RNG.random((3, 2, 4)) < 0.5) * 1.0,
     ["log_prob", "entropy", "mean", "variance", "logits"]),
    ("Bernoulli", dict(logits=RNG.standard_normal(5) * 3), (RNG.random(5) < 0.5) * 1.0,
     ["log_prob", "entropy", "mean", "mode", "variance", "probs"]),
    ("Categorical", dict(probs=RNG.random((3, 4)) + 0.01), RNG.integers(0, 4, (5, 3)),
     ["log_prob", "entropy", "mode", "probs", "logits"]),
    ("Categorical", dict(logits=RNG.standard_normal((2, 3, 5)) * 2), RNG.integers(0, 5, (2, 1)),
     ["log_prob", "entropy", "probs", "logits"]),
    ("OneHotCategorical", dict(logits=RNG.standard_normal((3, 4))), np.eye(4)[RNG.integers(0, 4, (2, 3))],
     ["log_prob", "entropy", "mean", "mode", "variance"]),
]


def _build(lib, name, params, grad=True):
    ps = {k: lib.tensor(v, requires_grad=grad) for k, v in params.items()}
    return getattr(lib.distributions, name)(**ps), ps


def _quantity(d, what, value):
    if what in ("log_prob", "cdf"):
        return getattr(d, what)(value)
    if what == "icdf":
        return d.icdf(value)
    if what == "entropy":
        return d.entropy()
    return getattr(d, what)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_values_and_gradients_equal_torch(case):
    torch = _torch()
    name, params, value, quantities = CASES[case]
    for what in quantities:
        if what == "icdf":
            v = RNG.random(value.shape) * 0.98 + 0.01
        else:
            v = value
        res = []
        for lib in (torch, tj):
            d, ps = _build(lib, name, params)
            out = _quantity(d, what, lib.tensor(v))
            if out.dtype.is_floating_point and out.requires_grad:
                w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)))
                (out * w).sum().backward()
            grads = [p.grad.numpy() if p.grad is not None else None for p in ps.values()]
            res.append((out.detach().numpy(), tuple(out.shape), grads))
        (want, wshape, wgrads), (got, gshape, ggrads) = res
        assert gshape == wshape, what
        _close(got, want)
        for a, b in zip(ggrads, wgrads):
            assert (a is None) == (b is None), what
            if a is not None:
                _close(a, b)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_shapes_equal_torch(case):
    name, params, _, _ = CASES[case]
    same_shapes(_build(tj, name, params, grad=False)[0], _build(_torch(), name, params, grad=False)[0])


def same_shapes(dj, dt):
    """tracejit's distribution dj and PyTorch's dt (same parameters): batch and event shapes, rsample and support,
    samples' shapes, dtypes and support, log_prob's shape, expand, and enumerate_support as PyTorch's."""
    torch = _torch()
    assert tuple(dj.batch_shape) == tuple(dt.batch_shape) and tuple(dj.event_shape) == tuple(dt.event_shape)
    assert dj.has_rsample == dt.has_rsample and dj.has_enumerate_support == dt.has_enumerate_support
    assert repr(dj.support).replace("tracejit.", "torch.") == repr(dt.support)
    for shape in [(), (5,), (2, 3)]:
        s = dj.sample(shape)
        assert tuple(s.shape) == tuple(dt.sample(shape).shape) and not s.requires_grad
        assert str(s.dtype).split(".")[-1] == str(dt.sample(shape).dtype).split(".")[-1]
        assert bool(dj.support.check(s).all())
        assert tuple(dj.log_prob(s).shape) == tuple(dt.log_prob(torch.tensor(s.numpy())).shape)
    batch = (4,) + tuple(dt.batch_shape)
    et, ej = dt.expand(batch), dj.expand(batch)
    assert tuple(ej.batch_shape) == tuple(et.batch_shape) and tuple(ej.event_shape) == tuple(et.event_shape)
    assert tuple(ej.sample((2,)).shape) == tuple(et.sample((2,)).shape)
    x = dt.sample((3,) + batch[:1])
    _close(ej.log_prob(tj.tensor(x.numpy())).numpy(), et.log_prob(x).numpy())
    if dt.has_enumerate_support:
        for expand in (True, False):
            try:
                want = dt.enumerate_support(expand).numpy()
            except NotImplementedError:              # (a Binomial of several total counts)
                with pytest.raises(NotImplementedError):
                    dj.enumerate_support(expand)
                continue
            _close(dj.enumerate_support(expand).numpy(), want)


def test_categorical_normalizes_as_torch():
    torch = _torch()
    p = RNG.random((2, 3)) * 5
    for kw in (dict(probs=p), dict(logits=np.log(p) + 7.0)):
        dt = torch.distributions.Categorical(**{k: torch.tensor(v) for k, v in kw.items()})
        dj = D.Categorical(**{k: tj.tensor(v) for k, v in kw.items()})
        _close(dj.probs.numpy(), dt.probs.numpy())
        _close(dj.logits.numpy(), dt.logits.numpy())
    # a zero probability: its logit is log(eps) (probs clamped as PyTorch's), entropy finite, never drawn
    dt = torch.distributions.Categorical(torch.tensor([0.0, 0.3, 0.7]))
    dj = D.Categorical(tj.tensor([0.0, 0.3, 0.7]))
    _close(float(dj.entropy()), float(dt.entropy()), 1e-6)
    _close(dj.log_prob(tj.tensor([0, 1])).numpy(), dt.log_prob(torch.tensor([0, 1])).numpy(), 1e-6)
    assert (dj.sample((2000,)).numpy() != 0).all()
    # -inf logits: probability 0, entropy finite (0 * -inf counted as 0)
    logits = [-math.inf, 0.0, 1.0]
    _close(float(D.Categorical(logits=tj.tensor(logits)).entropy()),
           float(torch.distributions.Categorical(logits=torch.tensor(logits)).entropy()), 1e-6)
    assert (D.Categorical(logits=tj.tensor(logits)).sample((2000,)).numpy() != 0).all()


KL_PAIRS = [
    ("Normal", dict(loc=RNG.standard_normal(4), scale=_pos(4)), dict(loc=RNG.standard_normal(4), scale=_pos(4))),
    ("LogNormal", dict(loc=RNG.standard_normal(3), scale=_pos(3)), dict(loc=RNG.standard_normal(3), scale=_pos(3))),
    ("Bernoulli", dict(probs=RNG.random(5)), dict(logits=RNG.standard_normal(5))),
    ("Categorical", dict(probs=_probs(3, 4)), dict(logits=RNG.standard_normal((3, 4)))),
    ("OneHotCategorical", dict(logits=RNG.standard_normal((2, 5))), dict(probs=_probs(2, 5))),
    ("Uniform", dict(low=np.array([0.0, -1.0, 0.5]), high=np.array([1.0, 2.0, 0.7])),
     dict(low=np.array([-1.0, -1.5, 0.0]), high=np.array([2.0, 2.5, 3.0]))),
    ("Laplace", dict(loc=RNG.standard_normal(4), scale=_pos(4)), dict(loc=RNG.standard_normal(4), scale=_pos(4))),
    ("Exponential", dict(rate=_pos(4)), dict(rate=_pos(4))),
]


@pytest.mark.parametrize("case", range(len(KL_PAIRS)), ids=[c[0] for c in KL_PAIRS])
def test_kl_divergence_equals_torch(case):
    torch = _torch()
    name, pp, qp = KL_PAIRS[case]
    res = []
    for lib in (torch, tj):
        p, ps = _build(lib, name, pp)
        q, qs = _build(lib, name, qp)
        kl = lib.distributions.kl_divergence(p, q)
        kl.sum().backward()
        res.append((kl.detach().numpy(), [t.grad.numpy() for t in [*ps.values(), *qs.values()]]))
    _close(res[1][0], res[0][0])
    for a, b in zip(res[1][1], res[0][1]):
        _close(a, b)


def test_kl_edge_cases_and_independent():
    torch = _torch()
    cases = [("Bernoulli", dict(probs=[0.0, 1.0, 0.5, 0.3]), dict(probs=[0.2, 0.7, 0.0, 1.0])),
             ("Categorical", dict(probs=[[0.0, 0.5, 0.5], [0.3, 0.3, 0.4]]), dict(probs=[[0.2, 0.8, 0.0],
                                                                                           [0.1, 0.0, 0.9]])),
             ("Uniform", dict(low=[0.0, 0.0], high=[1.0, 1.0]), dict(low=[0.5, -1.0], high=[2.0, 0.5]))]
    for name, pp, qp in cases:
        want = torch.distributions.kl_divergence(_build(torch, name, pp, False)[0], _build(torch, name, qp, False)[0])
        got = D.kl_divergence(_build(tj, name, pp, False)[0], _build(tj, name, qp, False)[0])
        _close(got.numpy(), want.numpy(), 1e-6)          # inf where q rules out what p allows
        assert (np.isinf(got.numpy()) == np.isinf(want.numpy())).all() and np.isinf(got.numpy()).any()
    loc, scale, loc2, scale2 = RNG.standard_normal((3, 4)), _pos(3, 4), RNG.standard_normal((3, 4)), _pos(3, 4)
    res = []
    for lib in (torch, tj):
        N, Ind = lib.distributions.Normal, lib.distributions.Independent
        p, q = Ind(N(lib.tensor(loc), lib.tensor(scale)), 1), Ind(N(lib.tensor(loc2), lib.tensor(scale2)), 1)
        assert tuple(p.batch_shape) == (3,) and tuple(p.event_shape) == (4,)
        x = lib.tensor(loc2)
        res.append([lib.distributions.kl_divergence(p, q), p.log_prob(x), p.entropy(), p.mean, p.variance])
    for a, b in zip(res[1], res[0]):
        _close(a.numpy(), b.numpy())


def test_register_kl_and_missing_pairs():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), MyNormal(1.0, 2.0)
    _close(float(D.kl_divergence(p, q)), float(D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(1.0, 2.0))), 1e-6)

    @D.register_kl(MyNormal, MyNormal)
    def _mine(p, q):
        return tj.tensor(42.0)

    assert float(D.kl_divergence(p, q)) == 42.0
    assert float(D.kl_divergence(p, D.Normal(1.0, 2.0))) != 42.0
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Exponential(1.0), D.Bernoulli(0.3))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Independent(D.Normal(tj.zeros(2, 3), 1.0), 1),
                        D.Independent(D.Normal(tj.zeros(2, 3), 1.0), 2))


# ----------------------------------------------------------------------------- sampling

SAMPLED = [
    (D.Normal(tj.tensor([0.5, -2.0]), tj.tensor([1.0, 3.0])), ),
    (D.LogNormal(tj.tensor([0.0, 0.5]), tj.tensor([0.5, 0.25])), ),
    (D.Uniform(tj.tensor([-1.0, 2.0]), tj.tensor([3.0, 2.5])), ),
    (D.Laplace(tj.tensor([1.0, -1.0]), tj.tensor([0.5, 2.0])), ),
    (D.Exponential(tj.tensor([0.5, 4.0])), ),
    (D.Bernoulli(tj.tensor([0.1, 0.5, 0.95])), ),
    (D.OneHotCategorical(tj.tensor([0.1, 0.2, 0.7])), ),
]


@pytest.mark.parametrize("case", range(len(SAMPLED)), ids=[type(c[0]).__name__ for c in SAMPLED])
def test_sample_mean_and_variance(case):
    (d,) = SAMPLED[case]
    tj.manual_seed(case)
    n = 200_000
    x = d.sample((n,)).numpy().astype(np.float64)
    mean, var = d.mean.numpy(), d.variance.numpy()
    se = np.sqrt(var / n)
    assert (np.abs(x.mean(0) - mean) < 5 * se + 1e-12).all(), (x.mean(0), mean)
    assert (np.abs(x.var(0) - var) < 0.03 * var + 1e-12).all(), (x.var(0), var)
    lp = d.log_prob(tj.tensor(x[:10].astype(np.float32)))
    assert np.isfinite(lp.numpy()).all()


def test_categorical_and_mixture_sampling():
    tj.manual_seed(0)
    p = np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    s = D.Categorical(tj.tensor(p)).sample((100_000,)).numpy()
    for b in range(2):
        freq = np.bincount(s[:, b], minlength=3) / len(s)
        assert np.abs(freq - p[b]).max() < 0.006
    mix = D.MixtureSameFamily(D.Categorical(tj.tensor([0.3, 0.7])), D.Normal(tj.tensor([-2.0, 3.0]),
                                                                               tj.tensor([0.5, 1.0])))
    x = mix.sample((200_000,)).numpy()
    assert abs(x.mean() - float(mix.mean)) < 0.02 and abs(x.var() / float(mix.variance) - 1) < 0.02
    assert abs((x < 0).mean() - 0.3) < 0.005


def test_mixture_same_family_equals_torch():
    torch = _torch()
    logits, loc, scale = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3, 4)), _pos(2, 3, 4)
    x = RNG.standard_normal((5, 2, 4))
    res = []
    for lib in (torch, tj):
        Dist = lib.distributions
        ts = [lib.tensor(a, requires_grad=True) for a in (logits, loc, scale)]
        m = Dist.MixtureSameFamily(Dist.Categorical(logits=ts[0]), Dist.Independent(Dist.Normal(ts[1], ts[2]), 1))
        assert tuple(m.batch_shape) == (2,) and tuple(m.event_shape) == (4,)
        assert tuple(m.sample((3,)).shape) == (3, 2, 4)
        lp = m.log_prob(lib.tensor(x))
        (lp.sum() + m.mean.sum() + m.variance.square().sum()).backward()
        res.append([lp.detach().numpy(), m.mean.detach().numpy(), m.variance.detach().numpy()]
                   + [t.grad.numpy() for t in ts])
    for a, b in zip(res[1], res[0]):
        _close(a, b)


def test_rsample_is_reparameterized_and_sample_is_not():
    torch = _torch()
    for name, kw in [("Normal", dict(loc=[0.3, -1.0], scale=[2.0, 0.5])), ("Laplace", dict(loc=[0.3], scale=[2.0])),
                     ("Uniform", dict(low=[0.0, 1.0], high=[2.0, 1.5])), ("Exponential", dict(rate=[0.5, 3.0])),
                     ("LogNormal", dict(loc=[0.2], scale=[0.3]))]:
        ps = {k: tj.tensor(v, requires_grad=True) for k, v in kw.items()}
        d = getattr(D, name)(**ps)
        assert d.has_rsample == getattr(torch.distributions, name).has_rsample
        x = d.rsample((1000,))
        assert x.requires_grad and not d.sample((3,)).requires_grad
        x.sum().backward()
        for p in ps.values():
            assert p.grad is not None and np.abs(p.grad.numpy()).min() > 0
    # Normal: d(loc + eps * scale)/dscale = eps, so the scale's gradient is the sum of the noise
    tj.manual_seed(5)
    loc, scale = tj.tensor(1.0, requires_grad=True), tj.tensor(2.0, requires_grad=True)
    x = D.Normal(loc, scale).rsample((50,))
    x.sum().backward()
    _close(float(loc.grad), 50.0)
    _close(float(scale.grad), float(((x.detach() - 1.0) / 2.0).sum()), 1e-5)
    with pytest.raises(NotImplementedError):
        D.Categorical(tj.ones(3)).rsample()


# ----------------------------------------------------------------------------- validation

ERRORS = [
    "Normal(torch.tensor([0., 1.]), torch.tensor([1., -1.]))",
    "Normal(torch.tensor([0., float('nan')]), 1.)",
    "Normal(0., 1.).log_prob(torch.tensor(float('nan')))",
    "Normal(torch.zeros(3), 1.).log_prob(torch.zeros(2))",
    "Normal(torch.zeros(2), 1.).log_prob([0., 1.])",
    "Normal(torch.zeros(2), torch.ones(3))",
    "Bernoulli(torch.tensor(0.3)).log_prob(torch.tensor(0.5))",
    "Bernoulli(torch.tensor([0.3, 1.2]))",
    "Bernoulli(probs=0.2, logits=0.1)",
    "Bernoulli()",
    "Categorical(torch.tensor(0.5))",
    "Categorical(probs=torch.tensor([-1., 2.]))",
    "Categorical(torch.tensor([0.2, 0.8])).log_prob(torch.tensor(2))",
    "Categorical(torch.tensor([0.2, 0.8])).log_prob(torch.tensor(-1))",
    "Categorical(torch.tensor([0.2, 0.8])).sample(5)",
    "OneHotCategorical(torch.ones(3)).log_prob(torch.tensor([1., 1., 0.]))",
    "OneHotCategorical(torch.ones(3)).log_prob(torch.ones(4))",
    "Uniform(0., 1.).log_prob(torch.tensor(2.))",
    "Uniform(torch.tensor([0., 2.]), torch.tensor([1., 1.]))",
    "Laplace(0., -1.)",
    "Exponential(torch.tensor([-1.]))",
    "Exponential(1.).cdf(torch.tensor(-1.))",
    "LogNormal(0., 1.).log_prob(torch.tensor(-1.))",
    "Independent(Normal(torch.zeros(3), 1.), 2)",
    "MixtureSameFamily(Categorical(torch.ones(3)), Normal(torch.zeros(2), 1.))",
    "Normal(torch.zeros(2), 1.).expand((3,))",
]


@pytest.mark.parametrize("code", ERRORS)
def test_errors_as_torch(code):
    same_error(code)


def same_error(code):
    """The code (distributions and `torch` in scope) raises as PyTorch's: the same type, and for a ValueError
    the same message up to the offending values."""
    torch = _torch()
    with pytest.raises(Exception) as want:
        eval(code, {"torch": torch, **vars(torch.distributions)})
    with pytest.raises(type(want.value)) as got:
        eval(code, {"torch": tj, **vars(D)})
    w, g = str(want.value), str(got.value).replace("tracejit.", "torch.")
    if type(want.value) is ValueError:
        assert g.split("but found")[0] == w.split("but found")[0]
    else:
        assert type(got.value) is type(want.value)


def test_validate_args_off():
    d = D.Normal(tj.tensor([0.0]), tj.tensor([-1.0]), validate_args=False)
    assert np.isnan(d.log_prob(tj.tensor([0.0])).numpy()).all()
    assert float(D.Bernoulli(0.3, validate_args=False).log_prob(tj.tensor(0.5))) < 0
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)


def test_repr_as_torch():
    torch = _torch()
    for code in ["Normal(0., 1.)", "Normal(torch.zeros(2), 1.)", "Bernoulli(torch.tensor(0.3))",
                 "Exponential(torch.tensor([2.]))", "Categorical(torch.ones(3))", "OneHotCategorical(torch.ones(3))",
                 "Independent(Normal(torch.zeros(3, 2), 1.), 1)", "Uniform(0., 2.)"]:
        want = repr(eval(code, {"torch": torch, **vars(torch.distributions)}))
        got = repr(eval(code, {"torch": tj, **vars(D)})).replace("tracejit.", "torch.")
        assert got == want


# ----------------------------------------------------------------------------- traced = eager

def test_reinforce_traced_equals_eager():
    policy = tj.nn.Linear(4, 3)
    obs = tj.randn(8, 4)
    actions = tj.tensor(RNG.integers(0, 3, 8))
    adv = tj.randn(8)

    def loss_fn(obs, actions, adv):
        dist = D.Categorical(logits=policy(obs))
        return -(dist.log_prob(actions) * adv).mean() - 0.01 * dist.entropy().mean()

    loss = loss_fn(obs, actions, adv)
    loss.backward()
    want = [float(loss)] + [p.grad.numpy().copy() for p in policy.parameters()]
    # the same loss in PyTorch from the same weights
    torch = _torch()
    tp = torch.nn.Linear(4, 3)
    with torch.no_grad():
        tp.weight.copy_(torch.tensor(policy.weight.detach().numpy()))
        tp.bias.copy_(torch.tensor(policy.bias.detach().numpy()))
    td = torch.distributions.Categorical(logits=tp(torch.tensor(obs.numpy())))
    tl = -(td.log_prob(torch.tensor(actions.numpy())) * torch.tensor(adv.numpy())).mean() - 0.01 * td.entropy().mean()
    tl.backward()
    _close(float(tl.detach()), want[0], 1e-5)
    _close(tp.weight.grad.numpy(), want[1], 1e-5)
    step = tj.trace(loss_fn)
    for _ in range(2):
        policy.zero_grad()
        got = step(obs, actions, adv)
        got.backward()
        _close(float(got), want[0], 1e-5)
        for p, g in zip(policy.parameters(), want[1:]):
            _close(p.grad.numpy(), g, 1e-5)


def test_vae_rsample_traced_equals_eager():
    enc, dec = tj.nn.Linear(6, 4), tj.nn.Linear(2, 6)
    x = tj.randn(5, 6)
    prior = D.Normal(tj.zeros(5, 2), tj.ones(5, 2))

    def elbo(x):
        h = enc(x)
        q = D.Normal(h[:, :2], tj.nn.functional.softplus(h[:, 2:]) + 1e-3)
        z = q.rsample()
        recon = D.Independent(D.Normal(dec(z), 1.0), 1).log_prob(x)
        return -(recon - D.kl_divergence(q, prior).sum(-1)).mean()

    params = [*enc.parameters(), *dec.parameters()]
    tj.manual_seed(11)
    loss = elbo(x)
    loss.backward()
    want = [float(loss)] + [p.grad.numpy().copy() for p in params]
    step = tj.trace(elbo)
    for _ in range(2):
        for p in params:
            p.grad = None
        tj.manual_seed(11)
        got = step(x)
        got.backward()
        _close(float(got), want[0], 1e-5)
        for p, g in zip(params, want[1:]):
            _close(p.grad.numpy(), g, 1e-5)
    tj.manual_seed(12)                       # fresh noise: another value
    assert abs(float(step(x)) - want[0]) > 1e-6
