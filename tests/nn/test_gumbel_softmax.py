"""F.gumbel_softmax: with the same Gumbel noise fed to both libraries, soft and hard samples and their gradients equal
PyTorch's; hard samples are one-hot and pass the soft sample's gradient (straight-through); argmax frequencies over
many draws follow softmax(logits); traced = eager with the same seed."""
import numpy as np
import pytest

import tracejit as tj

F = tj.nn.functional
RNG = np.random.default_rng(0)


def _torch():
    return pytest.importorskip("torch")


def _close(a, b, tol):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _with_noise(monkeypatch, g):
    """Both libraries draw the Gumbel noise g: tracejit's noise helper returns it, torch's exponential_ fills
    exp(-g) (PyTorch's noise is -log of an Exponential(1) draw)."""
    torch = _torch()
    monkeypatch.setattr(F, "_gumbel_noise", lambda logits: tj.tensor(g))
    monkeypatch.setattr(torch.Tensor, "exponential_", lambda self, *a, **k: self.copy_(torch.tensor(np.exp(-g))))


CASES = [((5, 4), -1, 1.0), ((5, 4), 0, 0.5), ((2, 3, 6), 1, 2.0), ((7,), -1, 0.1), ((3, 2, 5), -1, 10.0)]


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("shape, dim, tau", CASES)
def test_same_as_torch_for_the_same_noise(monkeypatch, shape, dim, tau, hard):
    torch = _torch()
    logits, g = RNG.standard_normal(shape), RNG.gumbel(size=shape)
    w = RNG.standard_normal(shape)
    _with_noise(monkeypatch, g)
    res = []
    for lib in (torch, tj):
        x = lib.tensor(logits, requires_grad=True)
        y = lib.nn.functional.gumbel_softmax(x, tau=tau, hard=hard, dim=dim)
        (y * lib.tensor(w)).square().sum().backward()
        res.append((y.detach().numpy(), x.grad.numpy()))
    _close(res[1][0], res[0][0], 1e-12)
    _close(res[1][1], res[0][1], 1e-10)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_hard_is_one_hot_with_the_soft_gradient(monkeypatch, dim):
    logits, g, w = RNG.standard_normal((4, 6)), RNG.gumbel(size=(4, 6)), RNG.standard_normal((4, 6))
    monkeypatch.setattr(F, "_gumbel_noise", lambda x: tj.tensor(g))
    out = {}
    for hard in (False, True):
        x = tj.tensor(logits, requires_grad=True)
        y = F.gumbel_softmax(x, tau=0.7, hard=hard, dim=dim)
        (y * tj.tensor(w)).sum().backward()
        out[hard] = (y.detach().numpy(), x.grad.numpy())
    soft, hard = out[False][0], out[True][0]
    assert set(np.unique(hard)) <= {0.0, 1.0} and (hard.sum(dim) == 1).all()
    assert (hard.argmax(dim) == soft.argmax(dim)).all()
    assert (np.take_along_axis(hard, np.expand_dims(((logits + g) / 0.7).argmax(dim), dim), dim) == 1).all()
    _close(out[True][1], out[False][1], 1e-12)              # straight-through: the soft sample's gradient
    assert np.abs(out[True][1]).max() > 1e-3


def test_argmax_frequencies_follow_softmax():
    tj.manual_seed(0)
    logits = np.array([1.5, 0.2, -1.0, 0.7, -3.0])
    p = np.exp(logits) / np.exp(logits).sum()
    n = 40000
    x = tj.tensor(np.tile(logits, (n, 1)).astype(np.float32))
    for tau, hard in [(1.0, True), (0.3, False), (5.0, True)]:     # the argmax of the sample is Categorical(p)
        y = F.gumbel_softmax(x, tau=tau, hard=hard).numpy()
        freq = np.bincount(y.argmax(1), minlength=5) / n
        assert np.abs(freq - p).max() < 4 * np.sqrt(p * (1 - p) / n).max()
    soft = F.gumbel_softmax(x, tau=1.0).numpy()
    _close(soft.sum(1), np.ones(n), 1e-5)
    assert (soft > 0).all() and soft.std(0).min() > 0.01      # fresh noise per row
    cold = F.gumbel_softmax(x, tau=0.01).numpy()
    assert (cold.max(1) > 0.9).mean() > 0.97                  # a low temperature is nearly one-hot


def test_scalar_eps_warning_and_dtype():
    torch = _torch()
    y = F.gumbel_softmax(tj.randn(()), hard=True)
    assert float(y) == float(torch.nn.functional.gumbel_softmax(torch.randn(()), hard=True)) == 1.0
    with pytest.warns(UserWarning, match="deprecated"):
        F.gumbel_softmax(tj.randn(3), eps=1e-5)
    assert F.gumbel_softmax(tj.randn(3, dtype=tj.float64), hard=True).dtype == tj.float64
    assert np.isfinite(F.gumbel_softmax(tj.zeros(200000), tau=0.05).numpy()).all()


def test_traced_equals_eager():
    x = tj.randn(6, 5, requires_grad=True)
    w = tj.randn(6, 5)

    def f(x):
        return (F.gumbel_softmax(x, tau=0.5, hard=True) * w).sum() + (F.gumbel_softmax(x, dim=0) * w).square().sum()

    tj.manual_seed(3)
    eager = f(x)
    eager.backward()
    want, want_grad = float(eager), x.grad.numpy().copy()
    step = tj.trace(f)
    for _ in range(2):
        tj.manual_seed(3)
        x.grad = None
        out = step(x)
        out.backward()
        _close(float(out), want, 1e-5)
        _close(x.grad.numpy(), want_grad, 1e-5)
