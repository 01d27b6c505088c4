"""Random numbers inside tracejit.trace: a traced program draws fresh numbers on every call (random ops are graph
nodes that draw when the program runs, never constants of the first call), from the same global generator and in
the same order as eager mode, so one seed gives the eager run's numbers. The rejection samplers (Gamma and what is
built on it, Poisson, Binomial) are the documented exception: traced, they run every proposal round (eagerly they
stop once every element has accepted), so they consume more numbers: their traced draws are fresh, reproducible
from a seed and follow the distribution's law, but are not the eager numbers."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit.ops.registry import OPS

D = tj.distributions

# fn(x), x a float64 tensor of 64 values in (0.1, 0.9): every draw of a case depends on the generator
SAME_AS_EAGER = {
    "rand": lambda x: x + tj.rand(64, dtype=tj.float64),
    "randn": lambda x: x * tj.randn(64, dtype=tj.float64),
    "randint": lambda x: x + tj.randint(0, 1000, (64,)),
    "randperm": lambda x: x + tj.randperm(64),
    "bernoulli": lambda x: tj.bernoulli(x),
    "bernoulli p": lambda x: x.bernoulli(0.5) + tj.bernoulli(x, 0.3),
    "multinomial": lambda x: tj.multinomial(x, 40),
    "multinomial replacement": lambda x: tj.multinomial(x.reshape(8, 8), 30, replacement=True),
    "multinomial method": lambda x: x.reshape(4, 16).multinomial(16),
    "rand_like": lambda x: tj.rand_like(x) + tj.randn_like(x) + tj.randint_like(x, 9),
    "normal tensor std": lambda x: tj.normal(x, x),
    "normal floats": lambda x: x + tj.normal(1.0, 2.0, (64,), dtype=tj.float64),
    "in-place fills": lambda x: x.clone().uniform_(-1, 1) + x.clone().normal_() + x.clone().bernoulli_(0.5),
    "dropout": lambda x: F.dropout(x, 0.5),
    "dropout2d": lambda x: F.dropout2d(x.reshape(2, 8, 2, 2), 0.3),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.4, training=True),
    "rrelu": lambda x: F.rrelu(x - 0.5, training=True),
    "gumbel_softmax": lambda x: F.gumbel_softmax(x.reshape(8, 8), tau=0.5),
    "Normal": lambda x: D.Normal(x, 2.0).sample((2,)) + D.Normal(x, x).rsample(),
    "Uniform": lambda x: D.Uniform(x, x + 1).sample() + D.Uniform(-x, x).rsample((3,)),
    "Bernoulli": lambda x: D.Bernoulli(probs=x).sample((2,)),
    "Categorical": lambda x: D.Categorical(probs=x.reshape(8, 8)).sample((5,)),
    "Categorical logits": lambda x: D.Categorical(logits=x.reshape(4, 16)).sample(),
    "OneHotCategorical": lambda x: D.OneHotCategorical(probs=x.reshape(8, 8)).sample((2,)),
    "Multinomial": lambda x: D.Multinomial(10, probs=x.reshape(4, 16)).sample(),
    "Exponential": lambda x: D.Exponential(x).rsample(),
    "Laplace": lambda x: D.Laplace(x, 1.0).rsample(),
    "Geometric": lambda x: D.Geometric(probs=x).sample(),
    "MultivariateNormal": lambda x: D.MultivariateNormal(x.reshape(16, 4), tj.eye(4, dtype=tj.float64)).rsample(),
}

# rejection samplers: fresh and reproducible when traced; their law is checked below
REJECTION = {
    "Gamma": lambda x: D.Gamma(x * 4, 2.0).sample(),
    "Gamma rsample": lambda x: D.Gamma(x, 1.0).rsample(),
    "Beta": lambda x: D.Beta(x, 1 - x).sample(),
    "Dirichlet": lambda x: D.Dirichlet(x.reshape(16, 4)).sample(),
    "Chi2": lambda x: D.Chi2(x * 3).sample(),
    "StudentT": lambda x: D.StudentT(x * 5).sample(),
    "Poisson": lambda x: D.Poisson(x * 20).sample(),
    "poisson": lambda x: tj.poisson(x * 3),
    "Binomial": lambda x: D.Binomial(30, probs=x).sample(),
    "binomial": lambda x: tj.binomial(x * 0 + 50, x),
}


def _x():
    return tj.tensor(np.linspace(0.1, 0.9, 64))


def _runs(fn, backend, calls):
    """(eager results of `calls` calls from seed 5, traced results of `calls` + 1 calls from seed 5, traced fn)."""
    f = tj.trace(fn, backend=backend)
    x = _x()
    tj.manual_seed(5)
    eager = [fn(x).numpy() for _ in range(calls)]
    tj.manual_seed(5)
    traced = [f(x).numpy() for _ in range(calls + 1)]
    return eager, traced, f


@pytest.mark.parametrize("name", sorted(SAME_AS_EAGER))
def test_traced_draws_are_fresh_and_equal_the_eager_draws(name, backend):
    eager, traced, f = _runs(SAME_AS_EAGER[name], backend, 2)
    for e, t in zip(eager, traced):
        assert t.dtype == e.dtype and t.shape == e.shape
        np.testing.assert_allclose(t, e, rtol=1e-12, atol=1e-12)
    assert not np.array_equal(traced[1], traced[2]), "the traced program repeated a draw"
    assert f.cache_info()["traces"] == 1


@pytest.mark.parametrize("name", sorted(REJECTION))
def test_traced_rejection_samplers_are_fresh_and_reproducible(name, backend):
    fn = REJECTION[name]
    _, traced, f = _runs(fn, backend, 2)
    assert not np.array_equal(traced[1], traced[2]) and not np.array_equal(traced[0], traced[1])
    tj.manual_seed(5)
    np.testing.assert_array_equal(f(_x()).numpy(), traced[0])
    assert f.cache_info()["traces"] == 1


@pytest.mark.parametrize("name, mean, var", [
    ("Gamma", lambda c: c * 4 / 2.0, lambda c: c * 4 / 4.0),
    ("Poisson", lambda c: c * 20, lambda c: c * 20),
    ("Binomial", lambda p: 30 * p, lambda p: 30 * p * (1 - p)),
    ("Beta", lambda a: a, lambda a: a * (1 - a) / 2),
])
def test_traced_rejection_samplers_follow_the_law(name, mean, var):
    """2000 traced calls of 64 elements: each element's sample mean and variance against the law's."""
    f = tj.trace(REJECTION[name])
    x = _x()
    tj.manual_seed(11)
    draws = np.stack([f(x).numpy() for _ in range(2000)])
    c = x.numpy()
    se = np.sqrt(var(c) / 2000)
    assert np.all(np.abs(draws.mean(0) - mean(c)) < 5 * se)
    np.testing.assert_allclose(draws.var(0), var(c), rtol=0.2)


def test_traced_multinomial_and_randperm_follow_the_law():
    f = tj.trace(lambda p: (tj.multinomial(p, 2), tj.randperm(5)))
    p = tj.tensor([0.1, 0.2, 0.3, 0.4])
    tj.manual_seed(2)
    pairs, perms = zip(*[(a.numpy(), b.numpy()) for a, b in (f(p) for _ in range(4000))])
    pairs, perms = np.stack(pairs), np.stack(perms)
    assert np.all(pairs[:, 0] != pairs[:, 1])                       # without replacement
    np.testing.assert_allclose(np.bincount(pairs[:, 0], minlength=4) / 4000, p.numpy(), atol=0.03)
    assert np.all(np.sort(perms, 1) == np.arange(5))
    np.testing.assert_allclose(perms.mean(0), 2.0, atol=0.1)        # every position uniform over 0..4


def test_gradients_through_traced_draws_equal_eager(backend):
    """rsample and dropout inside a traced forward and backward: from one seed, the gradients eager mode gives."""
    def loss(loc, scale):
        z = D.Normal(loc, scale).rsample((3,))
        return (F.dropout(z, 0.3) * z).sum()
    grads = []
    for run in (loss, tj.trace(lambda a, b: (lambda r: (r.backward(), r.detach())[1])(loss(a, b)), backend=backend)):
        loc = tj.tensor(np.linspace(-1, 1, 8), requires_grad=True)
        scale = tj.tensor(np.linspace(0.5, 2, 8), requires_grad=True)
        tj.manual_seed(9)
        out = []
        for _ in range(2):
            loc.grad = scale.grad = None
            r = run(loc, scale)
            if run is loss:
                r.backward()
            out.append((float(r), loc.grad.numpy().copy(), scale.grad.numpy().copy()))
        grads.append(out)
    for e, t in zip(*grads):
        for a, b in zip(e, t):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    assert not np.array_equal(grads[1][0][1], grads[1][1][1])


@pytest.mark.parametrize("probs, msg", [
    ([0.2, -0.1, 0.5], "probability tensor contains either `inf`, `nan` or element < 0"),
    ([0.0, 0.0, 0.0], "invalid multinomial distribution (sum of probabilities <= 0)"),
    ([0.2, float("nan"), 0.5], "probability tensor contains either `inf`, `nan` or element < 0"),
])
def test_traced_multinomial_checks_every_calls_probabilities_as_torch(probs, msg, backend):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        torch.multinomial(torch.tensor(probs), 1)
    f = tj.trace(lambda p: tj.multinomial(p, 2, replacement=True), backend=backend)
    assert f(tj.tensor([0.2, 0.3, 0.5])).shape == (2,)
    with pytest.raises(RuntimeError) as got:
        f(tj.tensor(probs))
    assert str(got.value) == msg


@pytest.mark.parametrize("call", [
    lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), 3),
    lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), 0),
    lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1),
    lambda lib: lib.multinomial(lib.tensor([1, 2]), 1),
    lambda lib: lib.multinomial(lib.tensor(1.0), 1),
    lambda lib: lib.randperm(-2),
])
def test_multinomial_and_randperm_argument_errors_as_torch(call):
    """Eager and traced (the shape rule raises when the trace records the op): torch's RuntimeError and message."""
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as want:
        call(torch)
    with pytest.raises(RuntimeError) as eager:
        call(tj)
    with pytest.raises(RuntimeError) as traced:
        tj.trace(lambda x: call(tj) + x)(tj.zeros(1))
    assert str(eager.value) == str(want.value) and str(want.value) in str(traced.value)


def test_multinomial_without_replacement_takes_zero_probability_categories_last_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, tj):
        lib.manual_seed(0)
        out = lib.multinomial(lib.tensor([[0.0, 0.3, 0.0, 0.7], [0.5, 0.0, 0.0, 0.0]]), 3)
        assert sorted(out[0, :2].tolist()) == [1, 3] and out[0, 2] in (0, 2)
        assert out[1, 0] == 0 and len(set(out[1].tolist())) == 3


def test_every_random_op_has_a_traced_case():
    """A new random registry op must show here that its traced draws are fresh and equal the eager ones."""
    cases = " ".join(SAME_AS_EAGER)
    missing = [n for n, op in OPS.items() if op.random and n not in cases]
    assert not missing, missing
