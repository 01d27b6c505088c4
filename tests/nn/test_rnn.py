"""tracejit.scan and nn.RNN / nn.LSTM / nn.GRU: a float64 gradient check and a numpy reference without torch;
traced = eager = PyTorch 2.13 with torch."""
import numpy as np
import pytest

import tracejit
from tracejit.autograd.gradcheck import gradcheck


def test_scan_cumulative_product_and_reverse_match_numpy():
    xs = np.random.default_rng(0).uniform(0.5, 1.5, (5, 3))

    def f(c, x):
        c = c * x
        return c, c + 1
    c, ys = tracejit.scan(f, tracejit.ones(3, dtype=tracejit.float64), tracejit.tensor(xs))
    np.testing.assert_allclose(c.numpy(), xs.prod(0))
    np.testing.assert_allclose(ys.numpy(), np.cumprod(xs, 0) + 1)
    c, ys = tracejit.scan(f, tracejit.ones(3, dtype=tracejit.float64), tracejit.tensor(xs), reverse=True)
    np.testing.assert_allclose(ys.numpy(), np.cumprod(xs[::-1], 0)[::-1] + 1)
    # pytrees: a pair of carries, two sequences along dim 1, two outputs
    (a, b), (p, q) = tracejit.scan(lambda c, x: ((c[0] + x[0], c[1] * 2), (c[0], x[1] * c[1])),
                                   (tracejit.zeros(2), tracejit.ones(2)),
                                   (tracejit.ones(2, 4), tracejit.full((2, 4), 3.0)), dim=1)
    np.testing.assert_allclose(a.numpy(), [4, 4])
    np.testing.assert_allclose(b.numpy(), [16, 16])
    np.testing.assert_allclose(p.numpy(), np.tile([0, 1, 2, 3], (2, 1)))
    np.testing.assert_allclose(q.numpy(), np.tile([3, 6, 12, 24], (2, 1)))


def test_scan_errors():
    with pytest.raises(RuntimeError, match="structure, shapes and dtypes of init"):
        tracejit.scan(lambda c, x: (c.sum(), x), tracejit.zeros(2), tracejit.zeros(3, 2))
    with pytest.raises(RuntimeError, match="differ in size"):
        tracejit.scan(lambda c, x: (c, x), tracejit.zeros(2), (tracejit.zeros(3, 2), tracejit.zeros(4, 2)))
    with pytest.raises(RuntimeError, match="pair"):
        tracejit.scan(lambda c, x: c, tracejit.zeros(2), tracejit.zeros(3, 2))


def test_scan_gradcheck_float64_eager_and_traced():
    rng = np.random.default_rng(1)
    w = tracejit.tensor(rng.standard_normal((3, 3)) * 0.5, requires_grad=True)
    h0 = tracejit.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    xs = tracejit.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)

    def f(w, h0, xs):
        h, ys = tracejit.scan(lambda h, x: ((h @ w + x).tanh(),) * 2, h0, xs)
        return (ys * ys).sum() + h.sum()
    assert gradcheck(f, (w, h0, xs))
    grads = tracejit.autograd.grad(f(w, h0, xs), (w, h0, xs))
    tgrads = tracejit.autograd.grad(tracejit.trace(f)(w, h0, xs), (w, h0, xs))
    for a, b in zip(grads, tgrads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)


def _np_lstm(x, h, c, wih, whh, bih, bhh):
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    out = []
    for t in range(x.shape[0]):
        i, f, g, o = np.split(x[t] @ wih.T + bih + h @ whh.T + bhh, 4, -1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        out.append(h)
    return np.stack(out), h, c


def test_lstm_matches_numpy_and_state_dict_keys():
    tracejit.manual_seed(0)
    m = tracejit.nn.LSTM(3, 5, dtype=tracejit.float64)
    assert list(m.state_dict()) == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    x = np.random.default_rng(2).standard_normal((6, 2, 3))
    out, (h, c) = m(tracejit.tensor(x))
    p = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    ro, rh, rc = _np_lstm(x, np.zeros((2, 5)), np.zeros((2, 5)), *p.values())
    np.testing.assert_allclose(out.detach().numpy(), ro, rtol=1e-10)
    np.testing.assert_allclose(h.detach().numpy()[0], rh, rtol=1e-10)
    np.testing.assert_allclose(c.detach().numpy()[0], rc, rtol=1e-10)
    m2 = tracejit.nn.GRU(3, 4, num_layers=2, bidirectional=True, bias=False)
    assert list(m2.state_dict()) == ["weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse",
                                     "weight_ih_l1", "weight_hh_l1", "weight_ih_l1_reverse", "weight_hh_l1_reverse"]
    assert tuple(m2.weight_ih_l1.shape) == (12, 8)


def test_lstm_gradcheck_float64():
    tracejit.manual_seed(0)
    m = tracejit.nn.LSTM(2, 3, num_layers=2, bidirectional=True, dtype=tracejit.float64)
    names = ["weight_hh_l0_reverse", "weight_ih_l1", "bias_hh_l1"]
    x = tracejit.randn(4, 2, 2, dtype=tracejit.float64, requires_grad=True)
    ws = [getattr(m, n).detach().clone().requires_grad_() for n in names]

    def f(x, *ws):
        m._parameters.update(zip(names, ws))        # the module computes with the checked tensors
        out, (h, c) = m(x)
        return out.sum() + (h * c).sum()
    assert gradcheck(f, (x, *ws))


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


CASES = [("RNN", dict()), ("RNN", dict(nonlinearity="relu", batch_first=True)),
         ("LSTM", dict()), ("LSTM", dict(batch_first=True, num_layers=2)),
         ("LSTM", dict(bidirectional=True, num_layers=2)), ("GRU", dict()),
         ("GRU", dict(batch_first=True, bidirectional=True, num_layers=2))]


@pytest.mark.parametrize("kind,kw", CASES)
def test_rnn_modules_eager_traced_and_torch_agree(torch, kind, kw):
    tracejit.manual_seed(0)
    ours = getattr(tracejit.nn, kind)(4, 6, **kw)
    theirs = getattr(torch.nn, kind)(4, 6, **kw)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(3)
    shape = (3, 5, 4) if kw.get("batch_first") else (5, 3, 4)
    xn = rng.standard_normal(shape).astype(np.float32)
    D = (2 if kw.get("bidirectional") else 1) * kw.get("num_layers", 1)
    h0 = rng.standard_normal((D, 3, 6)).astype(np.float32)
    lstm = kind == "LSTM"

    def run(lib, m, x, h):
        out, hn = m(x, (h, h * 0.5) if lstm else h)
        hn = hn[0] * 2 + hn[1] if lstm else hn
        loss = (out * out).sum() + hn.sum()
        return loss

    def grads(lib, m, fn):
        x = lib.tensor(xn, requires_grad=True)
        h = lib.tensor(h0, requires_grad=True)
        for p in m.parameters():
            p.grad = None
        loss = fn(x, h)
        loss.backward()
        return [loss.detach().numpy(), x.grad.numpy(), h.grad.numpy()] + [p.grad.numpy() for p in m.parameters()]

    want = grads(torch, theirs, lambda x, h: run(torch, theirs, x, h))
    eager = grads(tracejit, ours, lambda x, h: run(tracejit, ours, x, h))
    # (the numba backend for one case: the others check tracing and autodiff, and compile in no time)
    backend = "numba" if (kind, kw) == CASES[2] else "interpreter"
    traced = grads(tracejit, ours, tracejit.trace(lambda x, h: run(tracejit, ours, x, h), backend=backend))
    for a, b, c in zip(want, eager, traced):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(c, a, rtol=2e-4, atol=2e-5)


def test_unbatched_input_and_bad_sizes(torch):
    m = tracejit.nn.GRU(2, 3)
    t = torch.nn.GRU(2, 3)
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    x = np.random.default_rng(4).standard_normal((5, 2)).astype(np.float32)
    out, h = m(tracejit.tensor(x))
    tout, th = t(torch.tensor(x))
    assert tuple(out.shape) == tuple(tout.shape) and tuple(h.shape) == tuple(th.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="input_size"):
        m(tracejit.randn(5, 1, 3))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        m(tracejit.randn(5, 1, 2), tracejit.zeros(2, 1, 3))
