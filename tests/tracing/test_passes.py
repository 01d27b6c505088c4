"""Each pass alone, checked against the reference interpreter and the verifier."""
import numpy as np

import tracejit as torch
from tracejit import passes as P
from tracejit.backends.interpreter import run
from tracejit.ir.verify import verify


def _graph(fn, *shapes):
    return torch.make_graph(fn, *[torch.randn(*s, dtype=torch.float64) for s in shapes])


def _same(g1, g2, *shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    for a, b in zip(run(g1, arrays), run(g2, arrays)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_simplify_removes_identities_and_folds_constants():
    def f(x):
        c = torch.ones(3, dtype=torch.float64) * 2 + 1       # foldable
        y = -(-(x * 1 + 0)) / 1
        return y.reshape(6).reshape(2, 3) * c
    g = _graph(f, (2, 3))
    s = verify(P.simplify(g))
    ops = [n.op.name for n in P.dce(s).nodes]
    assert ops == ["reshape", "mul"], ops
    _same(g, s, (2, 3))


def test_cse_merges_repeats_but_not_random_draws():
    def f(x):
        a = torch.exp(x) + torch.exp(x)
        return a + torch.rand(3, dtype=torch.float64) + torch.rand(3, dtype=torch.float64)
    g = _graph(f, (3,))
    c = verify(P.dce(P.cse(g)))
    names = [n.op.name for n in c.nodes]
    assert names.count("exp") == 1 and names.count("rand") == 2


def test_dce_drops_unused_nodes():
    def f(x):
        torch.sin(x)            # unused
        return torch.cos(x)
    g = _graph(f, (4,))
    d = verify(P.dce(g))
    assert [n.op.name for n in d.nodes] == ["cos"]
    _same(g, d, (4,))


def test_autodiff_and_partition_against_eager():
    def f(x, w):
        return (torch.tanh(x @ w) ** 2).sum(1)
    g = _graph(f, (4, 3), (3, 5))
    joint = verify(P.autodiff(g))
    fwd, bwd, n_saved = P.partition(joint, 1, 1)
    verify(fwd), verify(bwd)
    rng = np.random.default_rng(1)
    x, w, ct = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal(4)
    outs = run(fwd, [x, w])
    gx, gw = run(bwd, outs[1:] + [ct])
    xe, we = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ye = f(xe, we)
    ex, ew = torch.autograd.grad(ye, (xe, we), torch.tensor(ct))
    np.testing.assert_allclose(outs[0], ye.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx, ex.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw, ew.numpy(), rtol=1e-12)
    # the backward reads forward values only through the saved inputs
    assert len(bwd.inputs) == n_saved + 1
    assert "matmul" in bwd.text() and "digraph" in bwd.to_dot()


def test_verifier_catches_a_wrong_shape():
    g = _graph(lambda x: torch.exp(x), (2,))
    g.nodes[0].outputs[0].shape = (3,)
    try:
        verify(g)
    except RuntimeError as e:
        assert "shape rule" in str(e)
    else:
        raise AssertionError("verifier accepted a wrong shape")


def test_partition_rematerializes_cheap_elementwise_values():
    # sigmoid(h) is recomputed in the backward from h, which is saved anyway: one saved tensor, not two
    def f(x, w):
        h = x @ w
        return (torch.sigmoid(h) * h).sum()
    g = _graph(f, (4, 3), (3, 5))
    joint = P.autodiff(g, wrt=[1])
    fwd, bwd, n_saved = P.partition(joint, 1, 1)
    assert "sigmoid" in bwd.text()
    saved_types = sorted(v.type_str for v in bwd.inputs[:n_saved])
    assert saved_types == ["f64[4,3]", "f64[4,5]"], saved_types
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    outs = run(fwd, [x, w])
    (gw,) = run(bwd, outs[1:] + [np.array(1.0)])
    we = torch.tensor(w, requires_grad=True)
    (ew,) = torch.autograd.grad(f(torch.tensor(x), we), we)
    np.testing.assert_allclose(gw, ew.numpy(), rtol=1e-12)


def test_partition_recomputes_an_elementwise_chain_from_its_input():
    # a chain of 16 elementwise ops: the backward recomputes it from x instead of keeping its 7 results
    def f(x):
        for u in (torch.tanh, torch.relu, torch.abs, torch.sigmoid) * 2:
            x = u(x * 0.75 + 0.125)
        return x.sum()
    g = _graph(f, (6,))
    joint = P.autodiff(g)
    fwd, bwd, n_saved = P.partition(joint, 1, 1)
    verify(fwd), verify(bwd)
    assert n_saved == 1 and fwd.outputs[1] is fwd.inputs[0], fwd.text()
    assert [n.op.name for n in fwd.nodes].count("tanh") == 2 and "tanh" in bwd.text()
    x = np.random.default_rng(5).standard_normal(6)
    outs = run(fwd, [x])
    (gx,) = run(bwd, outs[1:] + [np.array(1.0)])
    xe = torch.tensor(x, requires_grad=True)
    f(xe).backward()
    np.testing.assert_allclose(gx, xe.grad.numpy(), rtol=1e-12)


def _grad_graph(fn, shape):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    def step(x):
        fn(x).backward()
        return x.grad
    return torch.trace(step, backend="interpreter").graph(x).traced


def test_simplify_turns_the_gradient_of_a_split_into_one_cat():
    # q, k, v = x.split(...): x's gradient is a sum of zero arrays with each part's gradient placed in them
    def whole(x):
        q, k, v = x.split(3, -1)
        return (q * q + k * k * k - v.exp()).sum()

    def part(x):                        # [1:4) and [4:6) side by side, inside a dim of 9: one placed cat
        return (x[..., 1:4] ** 2).sum() + (x[..., 4:6].exp()).sum()

    def apart(x):                       # [0:2) and [4:6) do not touch: left as they are
        return (x[..., 0:2] ** 2).sum() + (x[..., 4:6].exp()).sum()

    def gapped(x):                      # [0:2) + [4:6) first (a sum with a gap), then [2:4) fills it
        return (x[..., 0:2] * x[..., 4:6]).sum() + x[..., 2:4].exp().sum()

    def lstm_gates(x):                  # chunk(4) read out of order, as an LSTM cell reads its gates
        i, f, g, o = x[..., :8].chunk(4, -1)
        return (f.sigmoid() * g.tanh() + o.sigmoid() * i).sum()

    for fn, cats, placed in ((whole, 1, 0), (part, 1, 1), (apart, 0, 2), (gapped, 1, 1), (lstm_gates, 1, 1)):
        g = _grad_graph(fn, (4, 6, 9))
        s = verify(P.dce(P.simplify(g)))
        ops = [n.op.name for n in s.nodes]
        assert ops.count("cat") == cats and ops.count("index_backward") == placed, (fn.__name__, ops)
        _same(g, s, (4, 6, 9))

