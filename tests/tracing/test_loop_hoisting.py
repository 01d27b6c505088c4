"""passes/loops.py: loop invariants run once before a scan, and a carry that only accumulates products of stacked
per-step values (a recurrent weight's gradient) becomes one product after the loop. The rewritten program computes
what the original computes (run by the interpreter); test_scan_loop.py checks the numba backend, which
applies the pass, against eager."""
import numpy as np
import pytest

import tracejit
from tracejit.backends.interpreter import run
from tracejit.ir.verify import verify
from tracejit.passes.loops import hoist_loops as _hoist

_rng = np.random.default_rng(11)


def hoist_loops(g):
    """The pass, its result verified: the program and every loop body (shapes and dtypes re-derived by the ops'
    rules), and the program's outputs of the original's types."""
    h = verify(_hoist(g))
    for n in _scans(h):
        verify(n.attrs["body"])
    assert [(o.shape, o.dtype) for o in h.outputs] == [(o.shape, o.dtype) for o in g.outputs]
    return h


def _scans(g):
    return [n for n in g.nodes if n.op.name == "scan"]


def _rnn_loss(w, b, h0, xs):
    # w.t() reads only captures: a loop invariant; x enters the step's sum alone, so the gradient dz_t of the sum
    # is the gradient of x_t, stacked by the backward loop: w's gradient accumulates dz_t^T @ h_t, b's dz_t.sum(0)
    h, ys = tracejit.scan(lambda h, x: ((x + h @ w.t() + b).tanh(), h * 2), h0, xs)
    return (ys ** 2).sum() + h.sum()


def _inputs(T=7):
    return [tracejit.tensor(_rng.standard_normal(s), requires_grad=True) for s in ((4, 4), (4,), (3, 4), (T, 3, 4))]


def _loss_and_grads(w, b, h0, xs):
    loss = _rnn_loss(w, b, h0, xs)
    return (loss,) + tracejit.autograd.grad(loss, [w, b, h0, xs])


def _program(ins):
    e = tracejit.trace(_loss_and_grads, backend="interpreter").graph(*ins).entry
    assert e.bwd is None            # the forward and backward loops in one program
    return e.fwd


def test_invariants_leave_the_body_and_accumulated_products_leave_the_loop():
    ins = _inputs()
    g = _program(ins)
    h = hoist_loops(g)
    fwd, bwd = _scans(g)
    hfwd, hbwd = _scans(h)
    body = hfwd.attrs["body"]
    nc, nx = hfwd.attrs["n_carry"], hfwd.attrs["n_x"]
    caps = set(body.inputs[nc + nx:]) | set(body.consts)
    # no node of the rewritten forward body reads captures and constants only; the transpose ran before the loop
    # (once), and the body reads its result as a new capture
    assert all(any(isinstance(i, tracejit.ir.graph.Value) and i not in caps for i in n.inputs) for n in body.nodes)
    assert len(body.inputs) == len(fwd.attrs["body"].inputs) + 1
    assert sum(n.op.name == "permute" for n in fwd.attrs["body"].nodes) >= 1
    assert not any(n.op.name == "permute" for n in body.nodes)
    # the backward loop carried the gradients of h, w and b; w's (sum_t dz_t^T @ h_t) is now one product after it,
    # b's (sum_t dz_t.sum(0)) one sum
    assert bwd.attrs["n_carry"] == 3 and hbwd.attrs["n_carry"] == 1
    after = h.nodes[h.nodes.index(hbwd) + 1:]
    assert any(n.op.name == "matmul" and n.outputs[0].shape == (4, 4) for n in after)
    assert any(n.op.name == "sum" and n.attrs["dims"] == (0, 1) for n in after)
    arrays = [t.detach().numpy() for t in ins]
    for a, b in zip(run(g, arrays), run(h, arrays)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("read_acc", [False, True])
def test_an_accumulating_carry_leaves_the_loop_unless_the_body_reads_it(read_acc):
    def f(w, h0, xs):
        def step(c, x):
            h, acc = c
            h2 = (h @ w + x).tanh()
            acc2 = acc + x.t() @ h2             # x_t^T @ h2_t: values the loop stacks anyway (its xs and ys)
            return (h2, acc2), (h2, acc.sum() * h2 if read_acc else h2 * 3)
        (h, acc), ys = tracejit.scan(step, (h0, tracejit.zeros(4, 4, dtype=h0.dtype)), xs)
        return h, acc, ys
    w, h0, xs = (tracejit.tensor(_rng.standard_normal(s)) for s in ((4, 4), (3, 4), (5, 3, 4)))
    g = tracejit.trace(f, backend="interpreter").graph(w, h0, xs).entry.fwd
    h = hoist_loops(g)
    assert _scans(h)[0].attrs["n_carry"] == (2 if read_acc else 1)
    arrays = [w.numpy(), h0.numpy(), xs.numpy()]
    for a, b in zip(run(g, arrays), run(h, arrays)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12)


def test_invariants_with_constants_views_read_by_kernels_and_returned_invariants():
    """An invariant reading a constant (and one reading a number) is hoisted with it; a hoisted view (w.t()) that an
    elementwise op reads is made contiguous once, before the loop; an invariant the body returns stays in it."""
    def f(w, h0, xs):
        def step(h, x):
            wt = w.t()
            h2 = (h * wt[0] + x @ ((w + tracejit.ones(4, dtype=w.dtype)) * 0.5)).tanh()
            return h2, (h2, w.sum() * 1.0)
        h, (ys, ws) = tracejit.scan(step, h0, xs)
        return h, ys, ws
    w, h0, xs = (tracejit.tensor(_rng.standard_normal(s)) for s in ((4, 4), (3, 4), (5, 3, 4)))
    g = tracejit.trace(f, backend="interpreter").graph(w, h0, xs).entry.fwd
    h = hoist_loops(g)
    (scan,) = _scans(h)
    body = scan.attrs["body"]
    before = h.nodes[:h.nodes.index(scan)]
    assert any(n.op.name == "contiguous" and n.outputs[0] in scan.inputs for n in before)
    assert any(n.op.name == "add" and any(i in h.consts for i in n.inputs) for n in before)
    assert any(n.op.name == "mul" and 0.5 in n.inputs for n in before)
    assert any(n.op.name == "sum" for n in body.nodes)          # w.sum() is returned by the step: not hoisted
    arrays = [w.numpy(), h0.numpy(), xs.numpy()]
    for a, b in zip(run(g, arrays), run(h, arrays)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12)


def test_a_sum_of_the_loop_input_with_keepdim_leaves_the_loop():
    def f(h0, xs):
        def step(c, x):
            h, tot = c
            return ((h + x).tanh(), tot + x.sum(1, keepdim=True)), h
        (h, tot), ys = tracejit.scan(step, (h0, tracejit.zeros(3, 1, dtype=h0.dtype)), xs)
        return h, tot, ys
    h0, xs = (tracejit.tensor(_rng.standard_normal(s)) for s in ((3, 4), (5, 3, 4)))
    g = tracejit.trace(f, backend="interpreter").graph(h0, xs).entry.fwd
    h = hoist_loops(g)
    assert _scans(h)[0].attrs["n_carry"] == 1
    arrays = [h0.numpy(), xs.numpy()]
    for a, b in zip(run(g, arrays), run(h, arrays)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12)
