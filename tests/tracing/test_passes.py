"""Each pass alone, checked against the reference interpreter and the verifier."""
import numpy as np
import pytest

import tracejit as torch
from tracejit import passes as P
from tracejit.backends.interpreter import run
from tracejit.ir.graph import Graph, Value
from tracejit.passes.dce import live_nodes
from tracejit.ir.verify import verify
from tracejit.ops.registry import OPS, AVal


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


def test_verifier_catches_a_wrong_number_of_outputs():
    g = Graph()
    x = g.add_input((3, 4), torch.float64, "x")
    (v,) = g.add_node(OPS["max_dim"], [x], {"dim": 1, "keepdim": False}, [AVal((3,), torch.float64)])  # 1 of 2
    g.outputs, g.output_names = [v], ["v"]
    with pytest.raises(RuntimeError, match="gives 2 values for 1 outputs"):
        verify(g)


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

    def middle(x):                      # an Ellipsis after a leading slice: [:, ..., 0:4] and [:, ..., 4:9]
        return (x[:, ..., 0:4] ** 2).sum() + x[:, ..., 4:9].exp().sum()

    def rows(x):                        # along dim 0 of three: the cat's shape keeps the dims after it
        return (x[0:1] ** 2).sum() + x[1:4].exp().sum()

    def strided(x):                     # a step-2 slice is no placement, though its range [0:4) touches [4:9)
        return (x[..., 0:4:2] ** 2).sum() + x[..., 4:9].exp().sum()

    def integers(x):                    # integer indices are no placements
        return x[0].sum() + (x[1] ** 2).sum() + x[2:4].exp().sum()     # (x[0]'s gradient: a constant)

    for fn, cats, placed in ((whole, 1, 0), (part, 1, 1), (apart, 0, 2), (gapped, 1, 1), (lstm_gates, 1, 1),
                             (middle, 1, 0), (rows, 1, 0), (strided, 0, 2), (integers, 0, 2)):
        g = _grad_graph(fn, (4, 6, 9))
        s = verify(P.dce(P.simplify(g)))
        ops = [n.op.name for n in s.nodes]
        assert ops.count("cat") == cats and ops.count("index_backward") == placed, (fn.__name__, ops)
        _same(g, s, (4, 6, 9))



# ---------------------------------------------------------------------------- hand-built graphs
F64 = torch.float64


def _node(g, op, ins, attrs=None, shape=None, dtype=F64):
    shape = shape if shape is not None else next(i.shape for i in ins if isinstance(i, Value))
    (v,) = g.add_node(OPS[op], ins, attrs or {}, [AVal(shape, dtype)])
    return v


def _finish(g, outs):
    g.outputs = list(outs)
    g.output_names = [f"out{k}" for k in range(len(outs))]
    return verify(g)


def _run_same(g1, g2, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(v.shape) for v in g1.inputs]
    for a, b in zip(run(g1, arrays), run(g2, arrays)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
        assert np.asarray(a).shape == np.asarray(b).shape


def test_simplify_drops_units_on_either_side_and_identity_permutes_only():
    g = Graph()
    x = g.add_input((2, 3), F64, "x")
    left_one = _node(g, "mul", [1.0, x])            # 1 * x (commutative: the unit on the left goes too)
    left_zero = _node(g, "add", [0.0, x])           # 0 + x
    zero_minus = _node(g, "sub", [0.0, x])          # 0 - x is not x: sub is not commutative
    same = _node(g, "permute", [x], {"dims": (0, 1)})
    swapped = _node(g, "permute", [x], {"dims": (1, 0)}, shape=(3, 2))
    after = _node(g, "mul", [left_one, 2.0])        # (nodes after a dropped one are still copied)
    g = _finish(g, [left_one, left_zero, zero_minus, same, swapped, after])
    s = verify(P.dce(P.simplify(g)))
    assert s.outputs[0] is s.inputs[0] and s.outputs[1] is s.inputs[0] and s.outputs[3] is s.inputs[0], s.text()
    assert sorted(n.op.name for n in s.nodes) == ["mul", "permute", "sub"], s.text()
    _run_same(g, s)


def test_simplify_folds_constants_up_to_4096_values_and_every_output_of_a_multi_output_op():
    g = Graph()
    x = g.add_input((3,), F64, "x")
    small = g.add_const(np.linspace(0.0, 1.0, 4096))
    big = g.add_const(np.linspace(0.0, 1.0, 4097))
    m = g.add_const(np.arange(12.0).reshape(3, 4)[:, ::-1] % 5)
    e_small = _node(g, "exp", [small])
    e_big = _node(g, "exp", [big])
    vals, idx = g.add_node(OPS["max_dim"], [m], {"dim": 1, "keepdim": False},
                           [AVal((3,), F64), AVal((3,), torch.int64)])
    g = _finish(g, [e_small, e_big, _node(g, "add", [x, vals]), idx])
    s = verify(P.dce(P.simplify(g)))
    assert [n.op.name for n in s.nodes] == ["exp", "add"], s.text()       # 4096 values folded, 4097 not
    assert s.nodes[0].outputs[0].shape == (4097,)
    assert s.outputs[0] in s.consts and s.outputs[3] in s.consts
    _run_same(g, s)


def _collective_graph():
    # two identical all-reduces, one waited on, one not: both are messages the other ranks wait for
    g = Graph()
    x = g.add_input((3,), F64, "x")
    c = g.add_const(np.ones(3))
    s1 = _node(g, "all_reduce_start", [x], {"reduce_op": "sum", "group": 0})
    s2 = _node(g, "all_reduce_start", [x], {"reduce_op": "sum", "group": 0})
    s3 = _node(g, "all_reduce_start", [c], {"reduce_op": "sum", "group": 0})   # of a constant: not folded
    w1 = _node(g, "comm_wait", [s1])
    return _finish(g, [_node(g, "mul", [w1, 2.0])]), (s2, s3)


def test_cse_dce_and_simplify_keep_every_collective():
    g, _ = _collective_graph()
    for p in (P.cse, P.dce, P.simplify):
        out = verify(p(g))
        names = [n.op.name for n in out.nodes]
        assert names.count("all_reduce_start") == 3 and names.count("comm_wait") == 1, (p.__name__, names)


def test_cse_tells_true_from_1_and_live_nodes_defaults_to_the_outputs():
    # b * True is bool, b * 1 is int64: equal as Python keys (True == 1), different nodes
    g = torch.make_graph(lambda b: (b * True, b * 1), torch.tensor([True, False]))
    c = verify(P.cse(g))
    assert [o.type_str for o in c.outputs] == ["b8[2]", "i64[2]"] and len(c.nodes) == 2
    g = _graph(lambda x: torch.cos(x) + 0 * torch.sin(x).sum(), (4,))
    assert live_nodes(g) == live_nodes(g, g.outputs)


def test_simplify_sums_of_placements_it_must_leave_alone():
    # index_backward of slices (placements) added to other values, along other dims, or with other ops
    g = Graph()
    top, bottom = g.add_input((2, 3), F64, "top"), g.add_input((2, 3), F64, "bottom")
    col, y = g.add_input((4, 1), F64, "col"), g.add_input((4, 3), F64, "y")

    def place(v, spec):
        return _node(g, "index_backward", [v], {"shape": (4, 3), "spec": spec}, shape=(4, 3))
    p_top, p_bottom = place(top, (slice(0, 2),)), place(bottom, (slice(2, 4),))
    p_col = place(col, (slice(None), slice(2, 3)))         # touches [0:2) of dim 0 as a range, but on dim 1
    outs = [_node(g, "add", [p_top, y]), _node(g, "add", [y, p_top]),
            _node(g, "add", [p_top, p_col]),
            _node(g, "add", [_node(g, "add", [p_top, y]), p_bottom]),
            _node(g, "add", [_node(g, "add", [p_top, 2.0]), p_bottom]),
            _node(g, "mul", [p_top, p_bottom]),
            _node(g, "add", [p_bottom, p_top])]                # the one sum that is a cat
    g = _finish(g, outs)
    s = verify(P.dce(P.simplify(g)))
    assert [n.op.name for n in s.nodes].count("cat") == 1, s.text()
    _run_same(g, s)


def _joint():
    """A joint forward+backward graph by hand: inputs x, w and the cotangent ct; outputs y and a Python number
    (forward), then the gradients: ct * r (r a random draw the forward does not use), ct * y + y (y read twice),
    z (a forward value no backward node reads), the constant c, and a Python number. y = x * c + z,
    z = cumsum(w * c2)."""
    g = Graph()
    x, w, ct = g.add_input((4,), F64, "x"), g.add_input((4,), F64, "w"), g.add_input((4,), F64, "ct")
    c, c2 = g.add_const(np.full(4, 3.0)), g.add_const(np.full(4, 2.0))
    z = _node(g, "cumsum", [_node(g, "mul", [w, c2])], {"dim": 0})      # (not recomputable: saved)
    y = _node(g, "add", [_node(g, "mul", [x, c]), z])
    r = _node(g, "rand", [], {"shape": (4,), "dtype": F64}, shape=(4,))
    return g, _finish(g, [y, 0.25, _node(g, "mul", [ct, r]), _node(g, "add", [_node(g, "mul", [ct, y]), y]), z, c,
                          0.5])


def test_partition_of_a_hand_built_joint_graph():
    g, joint = _joint()
    fwd, bwd, n_saved = P.partition(joint, 2, 1)
    verify(fwd), verify(bwd)
    assert [n.op.name for n in fwd.nodes].count("rand") == 1 and "rand" not in [n.op.name for n in bwd.nodes]
    assert len(set(map(id, fwd.outputs[2:]))) == n_saved == 3      # r, y (once) and z
    assert fwd.input_names == ["x", "w"] and bwd.input_names == ["saved0", "saved1", "saved2", "ct"]
    assert len(fwd.consts) == 2 and len(bwd.consts) == 1 and bwd.outputs[-2] in bwd.consts
    assert fwd.outputs[1] == 0.25 and bwd.outputs[-1] == 0.5
    rng = np.random.default_rng(3)
    x, w, ct = (rng.standard_normal(4) for _ in range(3))
    outs = run(fwd, [x, w])
    grads = run(bwd, outs[2:] + [ct])
    r = outs[2 + [v.producer.op.name if v.producer else "" for v in fwd.outputs[2:]].index("rand")]
    y = 3 * x + np.cumsum(2 * w)
    np.testing.assert_allclose(outs[0], y, rtol=1e-12)
    for got, want in zip(grads, [ct * r, ct * y + y, np.cumsum(2 * w), np.full(4, 3.0), 0.5]):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_partition_recomputes_a_value_when_what_it_needs_is_fewer_bytes():
    # v = x + b (4x8) from the input x and b = y.sum(0) (8 values): the backward recomputes v from x and b
    # (b, 64 bytes, is saved instead of v, 256 bytes). u = exp(b), before v, would need b, as many bytes as
    # itself: not recomputed in the first pass; once v has b saved, the second pass recomputes u too.
    # p = exp(q), q = y.sum(1) (5 values each): recomputing p would save q instead, no fewer bytes: p is saved
    g = Graph()
    x, y, ct = g.add_input((4, 8), F64, "x"), g.add_input((5, 8), F64, "y"), g.add_input((4, 8), F64, "ct")
    b = _node(g, "sum", [y], {"dims": (0,), "keepdim": False}, shape=(8,))
    u = _node(g, "exp", [b])
    v = _node(g, "add", [x, b], shape=(4, 8))
    p = _node(g, "exp", [_node(g, "sum", [y], {"dims": (1,), "keepdim": False}, shape=(5,))])
    total = _node(g, "add", [_node(g, "sum", [v], {"dims": (0, 1), "keepdim": False}, shape=()),
                             _node(g, "sum", [u], {"dims": (0,), "keepdim": False}, shape=())])
    total = _node(g, "add", [total, _node(g, "sum", [p], {"dims": (0,), "keepdim": False}, shape=())])
    joint = _finish(g, [total, _node(g, "mul", [v, ct]), _node(g, "mul", [u, ct], shape=(4, 8)),
                        _node(g, "mul", [p, 2.0])])
    fwd, bwd, n_saved = P.partition(joint, 1, 1)
    verify(fwd), verify(bwd)
    saved = sorted((v.producer.op.name if v.producer else "input", v.type_str) for v in fwd.outputs[1:])
    assert n_saved == 3 and saved == [("exp", "f64[5]"), ("input", "f64[4,8]"), ("sum", "f64[8]")], fwd.text()
    assert [n.op.name for n in bwd.nodes] == ["exp", "add", "mul", "mul", "mul"], bwd.text()
    rng = np.random.default_rng(4)
    xa, ya, cta = rng.standard_normal((4, 8)), rng.standard_normal((5, 8)), rng.standard_normal((4, 8))
    outs = run(fwd, [xa, ya])
    gv, gu, gp = run(bwd, outs[1:] + [cta])
    np.testing.assert_allclose(gv, (xa + ya.sum(0)) * cta, rtol=1e-12)
    np.testing.assert_allclose(gu, np.exp(ya.sum(0)) * cta, rtol=1e-12)
    np.testing.assert_allclose(gp, np.exp(ya.sum(1)) * 2, rtol=1e-12)


def test_autodiff_names_its_inputs_and_outputs_and_gives_zeros_for_an_unused_input():
    # w does not reach the output: its gradient is zeros of its own shape and dtype (not None, not float32)
    g = torch.make_graph(lambda x, w: (x * x).sum(), torch.randn(2, 3, dtype=torch.float64),
                         torch.randn(4, dtype=torch.float64))
    joint = verify(P.autodiff(g))
    assert joint.input_names == ["arg0", "arg1", "grad_out0"] and "(grad_out0)" in joint.text()
    assert joint.output_names == ["out0", "grad0", "grad1"]
    x = np.random.default_rng(0).standard_normal((2, 3))
    out, gx, gw = run(joint, [x, np.ones(4), np.array(0.5)])
    np.testing.assert_allclose(out, (x * x).sum(), rtol=1e-12)
    np.testing.assert_allclose(gx, x, rtol=1e-12)
    assert gw.shape == (4,) and gw.dtype == np.float64 and not gw.any()


def test_autodiff_of_attention_uses_its_one_backward_op():
    # the derivation runs without create_graph: attention's VJP is its sdpa_backward node, not the rule through ops
    q = torch.randn(2, 4, 8, dtype=torch.float64)
    g = torch.make_graph(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v), q, q, q)
    names = [n.op.name for n in P.autodiff(g).nodes]
    assert names.count("sdpa_backward") == 1 and "softmax" not in names, names


@pytest.fixture
def shifted():
    # an op whose decomposition reads a constant array (the lowering copies the parts' constants)
    from tracejit.ops.registry import defop
    shift = np.array([1.0, -2.0, 0.5, 0.0, 3.0])
    op = defop("shift_for_decompose_test", lambda x: x + shift, lambda x: AVal(x.shape, x.dtype), None,
               decompose=lambda x: x + torch.tensor(shift, dtype=x.dtype), fuses_in_parts=True)
    yield op, shift
    del OPS["shift_for_decompose_test"]


def test_decompose_lowers_to_the_parts_with_none_inputs_and_constants_and_keeps_the_values(shifted):
    from tracejit.ops.registry import apply
    from tracejit.passes.decompose import decompose
    op, shift = shifted
    F = torch.nn.functional

    def f(x, m, v):
        y, _, _ = apply(OPS["batch_norm"], x, None, None, training=True, eps=1e-5)   # weight, bias: None inputs
        return F.gelu(y), apply(op, y) * 2, m @ v

    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s) for s in ((4, 3, 5), (3, 5), (5,))]
    g = torch.make_graph(f, *map(torch.tensor, args))
    h = verify(decompose(g))
    names = [n.op.name for n in h.nodes]
    assert not any(n.op.fuses_in_parts for n in h.nodes), names
    assert "var" in names and "erf" in names and len(h.consts) == 1, names
    assert h.input_names == g.input_names == ["arg0", "arg1", "arg2"]
    for a, b in zip(run(h, args), run(g, args)):
        np.testing.assert_allclose(a, b, rtol=1e-12)



def _parts_equal_the_op(name, a, **attrs):
    from tracejit.ops.registry import call
    x = torch.tensor(a)
    got, want = OPS[name].decompose(x, **attrs), call(name, x, **attrs)
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), (name, attrs)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6 if a.dtype == np.float32 else 1e-12,
                               atol=1e-6 if a.dtype == np.float32 else 1e-12, equal_nan=True, err_msg=str((name, attrs)))


def test_reduction_decompositions_compute_what_the_op_computes():
    # var, std, logsumexp and vector_norm written with other ops (what a backend without their kernels runs, the
    # CUDA one): every dims/keepdim/correction/order, infinite, NaN and empty rows, 0-d inputs, float32 and 64
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4, 5))
    a[0, 1, 2] = 0.0
    for x in (a, a.astype(np.float32)):
        for dims in ((1,), (0, 2), (0, 1, 2)):
            for keepdim in (False, True):
                for corr in (0, 1, 2):
                    _parts_equal_the_op("var", x, dims=dims, keepdim=keepdim, correction=corr)
                    _parts_equal_the_op("std", x, dims=dims, keepdim=keepdim, correction=corr)
                _parts_equal_the_op("logsumexp", x, dims=dims, keepdim=keepdim)
                for ord in (2.0, 1.0, 3.0, 0.5, float("inf"), float("-inf"), 0.0):
                    _parts_equal_the_op("vector_norm", x, dims=dims, keepdim=keepdim, ord=ord)
    rows = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 2.0], [0.5, -1.0, 3.0], [np.nan, 0.0, 1.0]])
    for keepdim in (False, True):
        _parts_equal_the_op("logsumexp", rows, dims=(1,), keepdim=keepdim)
        _parts_equal_the_op("logsumexp", np.zeros((2, 0)), dims=(1,), keepdim=keepdim)
        _parts_equal_the_op("var", np.array([[2.5], [1.0]]), dims=(1,), keepdim=keepdim, correction=1)
        _parts_equal_the_op("var", np.array([[2.5], [1.0]]), dims=(1,), keepdim=keepdim, correction=2)
        _parts_equal_the_op("logsumexp", rows[2], dims=(0,), keepdim=keepdim)        # (a 1-d input)
        for ord in (2.0, 3.0, float("inf"), 0.0):
            _parts_equal_the_op("vector_norm", rows[1:], dims=(1,), keepdim=keepdim, ord=ord)
            _parts_equal_the_op("vector_norm", np.zeros((2, 3)), dims=(1,), keepdim=keepdim, ord=ord)
    _parts_equal_the_op("logsumexp", np.array(2.5), dims=(), keepdim=False)
    _parts_equal_the_op("vector_norm", np.array(-2.5), dims=(), keepdim=False, ord=2.0)
    _parts_equal_the_op("var", np.array(2.5), dims=(), keepdim=False, correction=0)
