"""tracejit.scan inside @trace is one loop node of the program (ops/control.py), not an unrolled copy per step:
the graph does not grow with the sequence, the body and its derivative are compiled once, and the numbers equal
the eager Python loop's, forward and backward, on the numba backend and the interpreter."""
import numpy as np
import pytest

import tracejit
from tracejit.ops.control import backward_body, split_body

_rng = np.random.default_rng(7)


def _count(graph, name):
    return sum(n.op.name == name for n in graph.nodes)


def _rnn_loss(w, b, h0, xs):
    h, ys = tracejit.scan(lambda h, x: ((h @ w + x + b).tanh(), (h * x).sum(-1)), h0, xs)
    return (ys ** 2).sum() + h.sum()


def _inputs(T, dtype=np.float64):
    return [tracejit.tensor(_rng.standard_normal(s).astype(dtype), requires_grad=True)
            for s in ((4, 4), (4,), (3, 4), (T, 3, 4))]


def test_graph_size_does_not_grow_with_the_sequence():
    sizes = []
    for T in (4, 64):
        ins = _inputs(T)
        e = tracejit.trace(_rnn_loss, backend="interpreter").graph(*ins).entry
        assert _count(e.fwd, "scan") == 1 and _count(e.bwd, "scan") == 1
        sizes.append((len(e.fwd.nodes), len(e.bwd.nodes)))
    assert sizes[0] == sizes[1]


def _traced_equals_eager(traced, ins, eager=_rnn_loss):
    """traced(*ins) and its gradients equal the eager Python loop's."""
    twins = [t.detach().clone().requires_grad_() for t in ins]
    le = eager(*ins)
    ge = tracejit.autograd.grad(le, ins)
    lt = traced(*twins)
    gt = tracejit.autograd.grad(lt, twins)
    np.testing.assert_allclose(lt.item(), le.item(), rtol=1e-12)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", ["numba", "interpreter"])
def test_traced_loop_equals_eager_loop_with_gradients(backend):
    _traced_equals_eager(tracejit.trace(_rnn_loss, backend=backend), _inputs(9))


def test_loop_invariants_and_accumulations_moved_out_by_the_numba_backend_equal_eager():
    def f(w, b, h0, xs):    # w.t(): an invariant; w's and b's gradients: accumulations (passes/loops.py)
        h, ys = tracejit.scan(lambda h, x: ((x + h @ w.t() + b).tanh(), h * 2), h0, xs)
        return (ys ** 2).sum() + h.sum()
    _traced_equals_eager(tracejit.trace(f, backend="numba"), _inputs(12), f)


def test_as_op_eagerly_equals_the_python_loop_and_keeps_one_node():
    w, b, h0, xs = _inputs(6)
    h1, y1 = tracejit.scan(lambda h, x: ((h @ w + x + b).tanh(), h * 2), h0, xs, dim=0, reverse=True)
    h2, y2 = tracejit.scan(lambda h, x: ((h @ w + x + b).tanh(), h * 2), h0, xs, dim=0, reverse=True, as_op=True)
    assert type(h2.grad_fn).__name__ == "ScanBackward0" and h2.grad_fn is y2.grad_fn
    np.testing.assert_allclose(h2.detach().numpy(), h1.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(y2.detach().numpy(), y1.detach().numpy(), rtol=1e-12)
    g1 = tracejit.autograd.grad(h1.sum() + y1.sum(), (w, b, h0, xs))
    g2 = tracejit.autograd.grad(h2.sum() + y2.sum(), (w, b, h0, xs))
    for a, c in zip(g1, g2):
        np.testing.assert_allclose(c.numpy(), a.numpy(), rtol=1e-10, atol=1e-12)


def test_pytrees_dim_integer_carries_and_unused_outputs_traced():
    def f(xs, v):
        def step(c, x):
            k, acc = c
            return (k + 1, acc * 0.5 + x[0] * k), (x[1].exp() * acc, k.expand(2))
        (k, acc), (ys, ks) = tracejit.scan(step, (tracejit.tensor(0), v), (xs, xs * 2), dim=1)
        return acc.sum() + ys.sum() + ks.sum()
    xs = tracejit.tensor(_rng.standard_normal((3, 5)), requires_grad=True)
    v = tracejit.tensor(_rng.standard_normal(3), requires_grad=True)
    le = f(xs, v)
    ge = tracejit.autograd.grad(le, (xs, v))
    tf = tracejit.trace(f)
    xt, vt = xs.detach().clone().requires_grad_(), v.detach().clone().requires_grad_()
    lt = tf(xt, vt)
    gt = tracejit.autograd.grad(lt, (xt, vt))
    np.testing.assert_allclose(lt.item(), le.item(), rtol=1e-12)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10)
    assert _count(tf.graph(xt, vt).entry.fwd, "scan") == 1


def test_nested_scans_traced():
    def f(xs, w):
        def outer(c, row):
            inner, _ = tracejit.scan(lambda a, x: ((a * w + x).sin(), a), c, row)
            return inner, inner.sum()
        c, ys = tracejit.scan(outer, tracejit.zeros(2, dtype=tracejit.float64), xs)
        return c.sum() + (ys * ys).sum()
    xs = tracejit.tensor(_rng.standard_normal((3, 4, 2)), requires_grad=True)
    w = tracejit.tensor(_rng.standard_normal(2), requires_grad=True)
    le = f(xs, w)
    ge = tracejit.autograd.grad(le, (xs, w))
    xt, wt = xs.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    lt = tracejit.trace(f)(xt, wt)
    gt = tracejit.autograd.grad(lt, (xt, wt))
    np.testing.assert_allclose(lt.item(), le.item(), rtol=1e-12)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10)


def test_lstm_training_step_traced_equals_eager_and_compiles_one_loop():
    def run(traced):
        tracejit.manual_seed(0)
        rnn, head = tracejit.nn.LSTM(5, 8, num_layers=2), tracejit.nn.Linear(8, 3)
        params = list(rnn.parameters()) + list(head.parameters())
        opt = tracejit.optim.SGD(params, lr=0.5, momentum=0.9)
        x = tracejit.tensor(np.random.default_rng(3).standard_normal((40, 4, 5)).astype(np.float32))
        y = tracejit.tensor([0, 2, 1, 2])

        def step(x, y):
            opt.zero_grad()
            out, _ = rnn(x)
            loss = tracejit.nn.functional.cross_entropy(head(out[-1]), y)
            loss.backward()
            opt.step()
            return loss
        fn = tracejit.trace(step) if traced else step
        losses = [fn(x, y).item() for _ in range(4)]
        return losses, [p.detach().numpy().copy() for p in params], fn, (x, y)
    le, pe, _, _ = run(False)
    lt, pt, fn, args = run(True)
    np.testing.assert_allclose(lt, le, rtol=1e-5)
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
    g = fn.graph(*args).entry.fwd
    assert _count(g, "scan") == 4          # two layers, forward and backward loops, in one program
    assert len(g.nodes) < 200


def test_the_loop_is_split_once_per_body_and_its_backward_reads_residuals():
    w, b, h0, xs = _inputs(5)
    e = tracejit.trace(_rnn_loss, backend="interpreter").graph(w, b, h0, xs).entry
    (node,) = [n for n in e.fwd.nodes if n.op.name == "scan"]
    fwd, bwd, ns = node.attrs["body"], node.attrs["grad"], node.attrs["saved"]
    # the forward part returns the step's carry and y, then the residuals: the carry the step started from (first),
    # and h @ w + x (the backward recomputes the bias add and tanh from it, elementwise work its kernel absorbs,
    # but not the matmul)
    s = fwd.outputs[3].producer
    assert ns == 2 and fwd.outputs[2] is fwd.inputs[0] and s.op.name == "add" and \
        sorted(i.producer.op.name if i.producer else "input" for i in s.inputs) == ["input", "matmul"]
    assert bwd.input_names == ["carry0.grad", "capture0.grad", "capture1.grad", "saved0", "saved1", "x0", "y0.grad",
                               "capture0", "capture1"]
    assert sum(n.op.name == "matmul" for n in bwd.nodes) == 2 and any(n.op.name == "tanh" for n in bwd.nodes)
    assert not any(n.op.name == "matmul" and n.inputs[0] is bwd.inputs[3] and n.inputs[1] is bwd.inputs[-2]
                   for n in bwd.nodes)      # (h @ w, the forward's product, is not in it)
    (rev,) = [n for n in e.bwd.nodes if n.op.name == "scan"]
    assert rev.attrs["body"] is bwd and rev.attrs["reverse"] and rev.attrs["saved"] == 0
    assert split_body(fwd, 1, 1) is split_body(fwd, 1, 1)
    # checkpointing: the residuals are the carries, and the backward step recomputes the forward step
    cf, cb, cn = split_body(fwd, 1, 1, checkpoint=True)
    assert cn == 1 and cb is backward_body(fwd, 1, 1) and cf.outputs[-1] is cf.inputs[0]
    assert cf.output_names == list(fwd.output_names) + ["saved0"] and len(fwd.output_names) == len(fwd.outputs)
    assert cb.output_names == [f"out{k}" for k in range(len(cb.outputs))]
    assert split_body(fwd, 1, 1) is not split_body(fwd, 1, 1, checkpoint=True)      # (the default saves residuals)
    assert any(n.op.name == "matmul" and n.inputs[0] is cb.inputs[3] for n in cb.nodes)
    assert cb.input_names == ["carry0.grad", "capture0.grad", "capture1.grad", "carry0", "x0", "y0.grad", "y1.grad",
                              "y2.grad", "capture0", "capture1"]


@pytest.mark.parametrize("checkpoint", [False, True])
def test_checkpointed_loop_equals_the_saving_loop(checkpoint):
    ins = _inputs(6)

    def f(w, b, h0, xs):
        h, ys = tracejit.scan(lambda h, x: ((h @ w + x + b).tanh(), (h * x).sum(-1)), h0, xs, checkpoint=checkpoint)
        return (ys ** 2).sum() + h.sum()
    _traced_equals_eager(tracejit.trace(f, backend="numba"), ins)
    # the loop keeps the carry alone with checkpoint=True (its backward recomputes the step), else the carry and
    # h @ w + x
    e = tracejit.trace(f, backend="interpreter").graph(*ins).entry
    (node,) = [n for n in e.fwd.nodes if n.op.name == "scan"]
    assert node.attrs["saved"] == (1 if checkpoint else 2)


def test_in_place_update_of_an_outside_tensor_is_an_error():
    w = tracejit.ones(3)

    def f(h0, xs):
        return tracejit.scan(lambda h, x: (h + w.mul_(2), x), h0, xs)[0]
    with pytest.raises(RuntimeError, match="updated a tensor from outside it in place"):
        tracejit.trace(f)(tracejit.zeros(3), tracejit.ones(4, 3))
    with pytest.raises(RuntimeError, match="updated a tensor from outside it in place"):
        tracejit.scan(lambda h, x: (h + w.mul_(2), x), tracejit.zeros(3), tracejit.ones(4, 3), as_op=True)
    np.testing.assert_array_equal(w.numpy(), np.ones(3))


def test_a_module_called_only_inside_the_body_guards_the_program():
    cell = tracejit.nn.Sequential(tracejit.nn.Linear(3, 3), tracejit.nn.Dropout(0.5))

    def f(h0, xs):
        return tracejit.scan(lambda h, x: (cell(h + x).tanh(), h), h0, xs)[0]
    tf = tracejit.trace(f)
    h0, xs = tracejit.zeros(2, 3), tracejit.ones(5, 2, 3)
    cell.eval()
    a = tf(h0, xs)
    np.testing.assert_allclose(a.detach().numpy(), f(h0, xs).detach().numpy(), rtol=1e-6)
    cell.train()                # dropout on: the program traced in eval mode must not run again
    tf(h0, xs)
    assert len([e for es in tf.cache.values() for e in es]) == 2


def test_two_carries_two_outputs_no_carry_and_unused_carry_gradients():
    from tracejit.autograd import gradcheck, gradgradcheck
    xs = tracejit.tensor(_rng.standard_normal((4, 3)), requires_grad=True)
    a0 = tracejit.tensor(_rng.standard_normal(3), requires_grad=True)
    b0 = tracejit.tensor(_rng.standard_normal(3), requires_grad=True)

    def two(a0, b0, xs):        # pytrees of two carries and two floating outputs, as one op and as the loop
        def step(c, x):
            a, b = c
            return (a * x + b, (b * x).sin()), (a.exp(), b * 3)
        (a, b), (ya, yb) = tracejit.scan(step, (a0, b0), xs, as_op=True)
        return a + 2 * b + ya.sum(0) + 5 * yb.sum(0)
    assert gradcheck(two, (a0, b0, xs))
    assert gradgradcheck(two, (a0, b0, xs))

    def no_carry(xs):           # a map: no carry, one output
        return tracejit.scan(lambda c, x: (c, x.tanh() * 2), (), xs, as_op=True)[1]
    assert gradcheck(no_carry, (xs,))
    # a final carry that does not depend on init: its gradient is zero, as in the Python loop
    (g_op,) = tracejit.autograd.grad(tracejit.scan(lambda c, x: (x * 2, x), a0, xs, as_op=True)[0].sum(), (a0,),
                                     allow_unused=True)
    assert g_op is None or (g_op.dtype == a0.dtype and not np.any(g_op.numpy()))
    # a step whose outputs read none of its operands: zero gradients (the step's derivative has no path at all)
    c, ys = tracejit.scan(lambda c, x: (tracejit.ones(3, dtype=tracejit.float64),
                                        tracejit.zeros(3, dtype=tracejit.float64)), a0, xs, as_op=True)
    g_a, g_x = tracejit.autograd.grad(c.sum() + ys.sum(), (a0, xs), allow_unused=True)
    for gr, t in ((g_a, a0), (g_x, xs)):
        assert gr is None or (gr.dtype == t.dtype and tuple(gr.shape) == tuple(t.shape) and not np.any(gr.numpy()))


def test_an_unused_output_after_an_integer_carry_gets_zero_gradients_of_its_own_shape():
    # carries (h, a step counter k), outputs y0 [3] and y1 [4], of shapes and dtypes unlike the last carry's; the
    # loss reads h and y0 only: y1's cotangent is zeros of y1's stacked shape and dtype
    xs = tracejit.tensor(_rng.standard_normal((5, 3, 4)), requires_grad=True)
    w = tracejit.tensor(_rng.standard_normal((4, 4)), requires_grad=True)

    def f(xs, w, as_op):
        def step(c, x):
            h, k = c
            h = (h @ w + x).tanh()
            return (h, k + 1), (h.sum(-1), h.sum(0))
        (h, k), (y0, y1) = tracejit.scan(step, (tracejit.zeros(3, 4, dtype=tracejit.float64),
                                                tracejit.tensor(0)), xs, as_op=as_op)
        assert k.item() == 5 and tuple(y1.shape) == (5, 4)
        return (y0 ** 2).sum() + h.sum()
    want = tracejit.autograd.grad(f(xs, w, False), (xs, w))
    got = tracejit.autograd.grad(f(xs, w, True), (xs, w))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_op_shape_rule_names_the_mismatched_operand():
    from tracejit.ops.registry import call
    w, b, h0, xs = _inputs(5)
    g = tracejit.trace(_rnn_loss, backend="interpreter").graph(w, b, h0, xs).entry.fwd
    (node,) = [n for n in g.nodes if n.op.name == "scan"]
    attrs = dict(node.attrs)
    args = [h0, xs, w, b]
    out = call("scan", *args, **attrs)          # the carry, the ys, then the residuals of each step
    assert [tuple(o.shape) for o in out] == [(3, 4), (5, 3), (5, 3, 4), (5, 3, 4)]
    with pytest.raises(RuntimeError, match=r"operand 1 \(xs\) is float64\[6, 3, 4\], the body expects "
                                           r"float64\[5, 3, 4\]"):
        call("scan", h0, tracejit.cat([xs, xs[:1]]), w, b, **attrs)
    with pytest.raises(RuntimeError, match=r"operand 2 \(captured tensor\) is float32"):
        call("scan", h0, xs, w.float(), b, **attrs)
    with pytest.raises(RuntimeError, match=r"operand 0 \(init\)"):
        call("scan", h0[:2], xs, w, b, **attrs)
    with pytest.raises(RuntimeError, match="the body takes 4 operands, got 3"):
        call("scan", h0, xs, w, **attrs)


def test_eager_scan_is_the_python_loop_and_as_op_traces_once():
    calls = []

    def step(c, x):
        calls.append(1)
        return c + x, c * 2
    xs = tracejit.ones(6, 2)
    c, _ = tracejit.scan(step, tracejit.zeros(2, requires_grad=True), xs)
    assert len(calls) == 6 and type(c.grad_fn).__name__ != "ScanBackward0"
    calls.clear()
    c, _ = tracejit.scan(step, tracejit.zeros(2, requires_grad=True), xs, as_op=True)
    assert len(calls) == 1 and type(c.grad_fn).__name__ == "ScanBackward0"


def test_traced_scan_along_dim_1_and_negative_dims():
    xs = tracejit.tensor(_rng.standard_normal((3, 5, 2)))

    def f(xs, dim):
        c, (ys, zs) = tracejit.scan(lambda c, x: (c + x, (c * x, x.exp())), tracejit.zeros(3, 2, dtype=tracejit.float64), xs,
                                        dim=dim)
        return c, ys, zs
    for dim in (1, -2):
        for a, b in zip(f(xs, dim), tracejit.trace(f, static_argnums=(1,))(xs, dim)):
            assert tuple(a.shape) == tuple(b.shape)
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-12)


def test_captured_tensors_are_inputs_of_the_body_once_each():
    w = tracejit.tensor(_rng.standard_normal((3, 3)))

    def f(h0, xs):
        return tracejit.scan(lambda h, x: ((h @ w + x @ w).tanh() * w.sum(), h), h0, xs)[0]
    g = tracejit.trace(f).graph(tracejit.zeros(2, 3, dtype=tracejit.float64),
                                tracejit.ones(4, 2, 3, dtype=tracejit.float64)).entry.fwd
    (node,) = [n for n in g.nodes if n.op.name == "scan"]
    body = node.attrs["body"]
    assert len(body.inputs) == 3 and len(node.inputs) == 3
    assert "(capture0)" in g.text()


def test_bad_scans_raise_pytorch_kind_errors():
    with pytest.raises(ValueError, match="xs must hold at least one tensor"):
        tracejit.scan(lambda c, x: (c, x), tracejit.zeros(2), ())
    with pytest.raises(RuntimeError, match="needs the scanned dimension; got a 0-d tensor"):
        tracejit.scan(lambda c, x: (c, x), tracejit.zeros(2), tracejit.tensor(1.0))
    with pytest.raises(RuntimeError, match="xs is empty along the scanned dimension"):
        tracejit.scan(lambda c, x: (c, x), tracejit.zeros(2), tracejit.zeros(0, 2))
    with pytest.raises(RuntimeError, match="must return a pair"):
        tracejit.trace(lambda h, xs: tracejit.scan(lambda c, x: c, h, xs)[0])(tracejit.zeros(2), tracejit.ones(3, 2))
    with pytest.raises(RuntimeError, match="structure, shapes and dtypes of init"):
        tracejit.scan(lambda c, x: (c.double(), x), tracejit.zeros(2), tracejit.zeros(3, 2), as_op=True)
