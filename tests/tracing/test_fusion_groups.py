"""The groups the numba CPU backend's fusion pass forms (`fusion(..., can_fuse_windows, rows=True)` after the
backend's other passes), checked by their structure and by running the fused graph on the reference interpreter
against the graph before fusion. Nothing is compiled: these tests take a few seconds and bite on the grouping
rules of passes/fusion.py (row domains, which nodes join a row group, epilogues, outputs of a fused node)."""
import numpy as np
import pytest

import tracejit
import tracejit.nn.functional as F
from tracejit.backends.interpreter import run
from tracejit.backends.numba_cpu.convcols import shared_columns
from tracejit.backends.numba_cpu.gemm import gemm_updates, product_sums
from tracejit.ir.graph import Node, Value
from tracejit.ir.verify import verify
from tracejit.passes import fusion as FU
from tracejit.passes.decompose import decompose
from tracejit.passes.fusion import Units, can_fuse_windows, fusion, row_domain


def _program(f, *xs):
    """f traced (forward, and backward where f calls it), after the numba backend's passes before fusion."""
    g = tracejit.trace(f, backend="interpreter").graph(*xs).forward
    return shared_columns(product_sums(gemm_updates(decompose(g))))


def _fused(f, *xs, g=None):
    """The fused program of f, verified and checked to compute what the program before fusion computes."""
    g = _program(f, *xs) if g is None else g
    fg = verify(fusion(g, can_fuse_windows, rows=True))
    for n in fg.nodes:
        if n.op.kind == "fused":        # its shape rule: one value, or a tuple of several, as the op's outputs
            want = n.op.meta(*n.inputs, **n.attrs)
            want = (want,) if len(n.outputs) == 1 else want
            assert [(tuple(w.shape), w.dtype) for w in want] == [(tuple(o.shape), o.dtype) for o in n.outputs]
    ins = [np.asarray(x.numpy()) for x in xs]
    want = run(g, ins)
    got = run(fg, ins)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
    return fg


def _layout(fg):
    """Each node of the fused program in order: (rows or None, body op names) for a fused node, else its op name."""
    return [(n.attrs.get("rows"), [m.op.name for m in n.attrs["body"].nodes]) if n.op.kind == "fused"
            else n.op.name for n in fg.nodes]


def _node(f, *xs, name):
    g = tracejit.trace(f, backend="interpreter").graph(*xs).forward
    (n,) = [n for n in g.nodes if n.op.name == name]
    return n


# ----------------------------------------------------------------------------- row_domain

def test_row_domain_of_the_reductions_a_row_kernel_computes():
    x = tracejit.randn(3, 7)
    assert row_domain(_node(lambda x: x.sum(-1), x, name="sum")) == ((), (3,), (7,))
    assert row_domain(_node(lambda x: F.softmax(x, -1), x, name="softmax")) == ((), (3,), (7,))
    assert row_domain(_node(lambda x: x.var(-1, correction=0), x, name="var")) == ((), (3,), (7,))
    assert row_domain(_node(lambda x: x.sum(), x, name="sum")) == ((), (), (3, 7))      # one row: a full sum
    x4 = tracejit.randn(2, 3, 4, 5)
    assert row_domain(_node(lambda x: x.amax((0, 2, 3)), x4, name="amax")) == ((2,), (3,), (4, 5))
    assert row_domain(_node(lambda x: x.mean((2, 3)), x4, name="mean")) == ((), (2, 3), (4, 5))
    assert row_domain(_node(lambda x: x.amin((0, 1, 3)), x4, name="amin")) == ((2, 3), (4,), (5,))
    assert row_domain(_node(lambda x: x.sum(), tracejit.randn(7), name="sum")) == ((), (), (7,))
    assert row_domain(_node(lambda x: x.sum(-1), tracejit.randn(3, 7, dtype=tracejit.float64), name="sum")) == \
        ((), (3,), (7,))


def test_row_domain_refuses_what_a_row_kernel_cannot_compute():
    x = tracejit.randn(3, 7)
    assert row_domain(_node(lambda x: tracejit.exp(x), x, name="exp")) is None           # not a reduction
    assert row_domain(_node(lambda x: x.sum(-1, dtype=tracejit.float64), x, name="sum")) is None
    assert row_domain(_node(lambda x: x.sum(-1, dtype=tracejit.float32), x, name="sum")) is None    # (any dtype=)
    assert row_domain(_node(lambda x: x.amax(-1), x.to(tracejit.float16), name="amax")) is None
    assert row_domain(_node(lambda x: x.amax(-1), tracejit.arange(21).reshape(3, 7), name="amax")) is None
    assert row_domain(_node(lambda x: x.sum(), tracejit.randn(()), name="sum")) is None   # a 0-d input
    # a softmax over a dim that is not the last (its kept dims trail)
    assert row_domain(_node(lambda x: F.softmax(x, 0), x, name="softmax")) is None
    # kept dims that are not one block (dims 0 and 2 of 4)
    assert row_domain(_node(lambda x: x.sum((1, 3)), tracejit.randn(2, 3, 4, 5), name="sum")) is None
    # a trail of 1 (a row of one element read with a stride), and no rows at all
    assert row_domain(_node(lambda x: x.sum(-1), tracejit.randn(3, 1), name="sum")) is None
    assert row_domain(_node(lambda x: x.sum(-1), tracejit.randn(0, 7), name="sum")) is None
    # an attribute outside the op's row_reduce trait
    n = _node(lambda x: x.sum(-1), x, name="sum")
    assert row_domain(Node(n.op, n.inputs, dict(n.attrs, extra=1), n.outputs)) is None
    assert row_domain(Node(n.op, n.inputs, dict(n.attrs), n.outputs)) == ((), (3,), (7,))
    # an output of another dtype than the input's
    out = Value(0, n.outputs[0].shape, tracejit.float64)
    assert row_domain(Node(n.op, n.inputs, dict(n.attrs), [out])) is None
    # no input
    assert row_domain(Node(n.op, [], dict(n.attrs), n.outputs)) is None


def test_row_domain_bounds_a_rows_elements_by_row_max():
    m = FU.ROW_MAX
    assert row_domain(_node(lambda x: x.sum(-1), tracejit.zeros(2, m), name="sum")) == ((), (2,), (m,))
    assert row_domain(_node(lambda x: x.sum(-1), tracejit.zeros(2, m + 1), name="sum")) is None
    # (lead * trail elements a row, around the kept dim)
    s = (lambda x: x.sum((0, 2)))
    assert row_domain(_node(s, tracejit.zeros(2, 3, m // 2), name="sum")) == ((2,), (3,), (m // 2,))
    assert row_domain(_node(s, tracejit.zeros(2, 3, m // 2 + 1), name="sum")) is None
    # a trail of 2 is the shortest row
    assert row_domain(_node(lambda x: x.sum(-1), tracejit.zeros(3, 2), name="sum")) == ((), (3,), (2,))


# ----------------------------------------------------------------------------- what joins a row group

def test_a_scalar_joins_a_row_group_of_one_row_only():
    # one row (a loss's mean): the scalar work after it is per row, the same kernel
    x = tracejit.randn(4, 7)
    fg = _fused(lambda x: (x * x).mean() * 2.0 + 1.0, x)
    assert _layout(fg) == [(((), (), (4, 7)), ["mul", "mean", "mul", "add"])]
    y = tracejit.randn(1, 7)
    fg = _fused(lambda y: F.softmax(y, -1) * (y.sum() * 2.0), y)
    assert _layout(fg) == [(((), (), (1, 7)), ["sum"]), (((), (1,), (7,)), ["softmax", "mul", "mul"])]
    # several rows: a scalar computed beside them is no per-row value; it stays out (its own kernel)
    a = tracejit.randn(())
    fg = _fused(lambda x, a: F.softmax(x, -1) * (a * 2.0), x, a)
    assert _layout(fg) == [(None, ["mul"]), (((), (4,), (7,)), ["softmax", "mul"])]


def test_windows_and_placing_ops_stay_out_of_row_groups():
    # a window that is per row (x[:, :1] of a full x) and a cat of per-row operands: neither is a row kernel's
    x = tracejit.randn(4, 7)
    fg = _fused(lambda x: F.softmax(x, -1) * x[:, :1], x)
    assert _layout(fg) == ["slice", (((), (4,), (7,)), ["softmax", "mul"])]
    a, b = tracejit.randn(4, 1), tracejit.randn(4, 1)
    fg = _fused(lambda a, b: F.softmax(tracejit.cat([a * 2.0, b + 1.0], 1), -1), a, b)
    assert _layout(fg) == [(None, ["mul", "add", "cat"]), (((), (4,), (2,)), ["softmax"])]


def test_a_value_made_in_a_row_group_is_read_there_only_as_what_it_is():
    # x.amax(-1) of a [7, 7] x is one value per row, but broadcast against [7, 7] it is read per column (numpy
    # aligns it with the last dim): its reader stays out of the row group, in either order of growing
    x, w = tracejit.randn(7, 7), tracejit.randn(7, 7)
    dom = ((), (7,), (7,))
    # (the reader is tried after amax joined: its input is checked; w, read from outside, comes first)
    fg = _fused(lambda x, w: F.softmax(x, -1) * (w + x.amax(-1)), x, w)
    assert _layout(fg) == [(dom, ["softmax", "amax"]), (None, ["add", "mul"])]
    fg = _fused(lambda x: F.softmax(x, -1) + x.amax(-1), x)
    assert _layout(fg) == [(dom, ["softmax", "amax"]), (None, ["add"])]
    # (the reader joined first: amax, tried next, is refused for its output)
    fg = _fused(lambda x: F.softmax(x, -1) + (x * 2.0).amax(-1), x)
    assert _layout(fg) == [(dom, ["mul", "amax"]), (dom, ["softmax", "add"])]
    # a value made outside the group is read as numpy broadcasts it: x.sum(0) per column, beside softmax's rows
    x = tracejit.randn(4, 7)
    fg = _fused(lambda x: F.softmax(x, -1) * x.sum(0), x)
    assert _layout(fg) == ["sum", (((), (4,), (7,)), ["softmax", "mul"])]


def test_a_sum_epilogue_only_for_a_float_sum_without_dtype_of_a_non_0d_value():
    x = tracejit.randn(4, 7)
    fg = _fused(lambda x: (x * 2.0).sum(0) + 1.0, x)
    assert _layout(fg) == [(None, ["mul", "sum"]), (None, ["add"])]
    fg = _fused(lambda x: (x * 2.0).sum(0, dtype=tracejit.float64) + 1.0, x)
    assert _layout(fg) == [(None, ["mul"]), "sum", (None, ["add"])]
    fg = _fused(lambda s: (s * 2.0).sum() + 1.0, tracejit.randn(()))
    assert _layout(fg) == [(None, ["mul"]), "sum", (None, ["add"])]
    n = tracejit.arange(28).reshape(4, 7)
    fg = _fused(lambda n: (n * 2).sum(0) + 1, n)
    assert _layout(fg) == [(None, ["mul"]), "sum", (None, ["add"])]


def test_a_cat_is_placed_by_its_operands_loop_only_for_operands_of_one_shape_and_dtype():
    a, b = tracejit.randn(4, 1), tracejit.randn(4, 1)
    fg = _fused(lambda a, b: tracejit.cat([a * 2.0, b + 1.0], 1) * 3.0, a, b)
    assert _layout(fg) == [(None, ["mul", "add", "cat"]), (None, ["mul"])]
    b = tracejit.randn(4, 2)
    fg = _fused(lambda a, b: tracejit.cat([a * 2.0, b + 1.0], 1) * 3.0, a, b)
    assert _layout(fg) == [(None, ["mul"]), (None, ["add"]), "cat", (None, ["mul"])]
    b = tracejit.randn(4, 1, dtype=tracejit.float64)
    fg = _fused(lambda a, b: tracejit.cat([a * 2.0, b + 1.0], 1) * 3.0, a, b)
    assert "cat" in _layout(fg)


def test_default_can_fuse_takes_elementwise_ops_with_a_scalar_expression_only():
    from tracejit.ops.registry import Op
    from tracejit.passes.fusion import default_can_fuse
    x, m = tracejit.randn(4, 7), tracejit.randn(4, 7) > 0
    n = tracejit.arange(28).reshape(4, 7)

    def nodes(f, *xs):
        return {nd.op.name: nd for nd in tracejit.trace(f, backend="interpreter").graph(*xs).forward.nodes}
    got = nodes(lambda x, n, m: (x * 2.0, x.round(), x.round(decimals=2), n & 3, ~n, x.expand(3, 4, 7),
                                 x.sum(0), F.binary_cross_entropy(x.sigmoid(), (x > 0).float())), x, n, m)
    want = {"mul": True, "round": False, "bitwise_and": False, "bitwise_not": False, "expand": True, "sum": False,
            "binary_cross_entropy": False}
    assert {k: default_can_fuse(got[k]) for k in want} == want
    rounds = [nd for nd in tracejit.trace(lambda x: (x.round(), x.round(decimals=2)),
                                          backend="interpreter").graph(x).forward.nodes]
    assert [default_can_fuse(nd) for nd in rounds] == [True, False]      # round with decimals has no expression
    # an elementwise op that draws random numbers (made here: none is registered) is not fused
    nd = got["mul"]
    rnd = Op("random_mul", nd.op.impl, nd.op.meta, None, kind="elementwise", expr=nd.op.expr, random=True)
    assert not default_can_fuse(Node(rnd, nd.inputs, {}, nd.outputs))
    assert default_can_fuse(Node(Op("plain_mul", nd.op.impl, nd.op.meta, None, kind="elementwise", expr=nd.op.expr),
                                 nd.inputs, {}, nd.outputs))


def test_a_row_group_stops_at_group_max_ops():
    def chain(x):
        y = F.softmax(x, -1)
        for k in range(200):
            y = y * 1.01 if k % 2 else y + 0.5
        return y
    fg = _fused(chain, tracejit.randn(4, 7))
    assert [(n.attrs.get("rows"), len(n.attrs["body"].nodes)) for n in fg.nodes] == \
        [(((), (4,), (7,)), FU.GROUP_MAX), (None, 201 - FU.GROUP_MAX)]

    def fork(x):                        # (two readers in the round that fills the group: one joins)
        y = F.softmax(x, -1)
        for k in range(FU.GROUP_MAX - 2):
            y = y * 1.01 if k % 2 else y + 0.5
        return y * 2.0, y + 3.0
    fg = _fused(fork, tracejit.randn(4, 7))
    assert [(n.attrs.get("rows"), len(n.attrs["body"].nodes)) for n in fg.nodes] == \
        [(((), (4,), (7,)), FU.GROUP_MAX), (None, 1)]


def test_a_row_group_takes_sibling_reductions_not_other_readers_of_its_input():
    x = tracejit.randn(4, 7)
    fg = _fused(lambda x: (F.softmax(x, -1), x * 2.0), x)
    assert _layout(fg) == [(((), (4,), (7,)), ["softmax"]), (None, ["mul"])]
    fg = _fused(lambda x: (F.softmax(x, -1), x.amax(-1)), x)
    assert _layout(fg) == [(((), (4,), (7,)), ["softmax", "amax"])]


def test_the_fused_program_keeps_the_graphs_order_where_no_read_forces_another():
    x, w = tracejit.randn(4, 7), tracejit.randn(7, 3)
    assert _layout(_fused(lambda x, w: (x @ w, tracejit.exp(x)), x, w)) == ["matmul", (None, ["exp"])]
    assert _layout(_fused(lambda x, w: (tracejit.exp(x), x @ w), x, w)) == [(None, ["exp"]), "matmul"]


def test_a_fused_body_has_unnamed_inputs_and_outputs():
    from tracejit.ir.graph import format_graph
    x = tracejit.randn(4, 7)
    (n,) = _fused(lambda x: tracejit.exp(x) * 2.0 + x, x).nodes
    body = n.attrs["body"]
    text = format_graph(body).splitlines()
    assert text[0] == f"graph(%{body.inputs[0].id}:f32[4,7]) {{" and text[-2] == f"  return %{body.outputs[0].id}"


def test_a_grouping_with_a_cycle_is_refused(monkeypatch):
    # the cycle guard behind the convexity check: exp and add in one group with the matmul between them
    def f(x, w):
        y = tracejit.exp(x)
        return y @ w + y
    x, w = tracejit.randn(4, 4), tracejit.randn(4, 4)
    g = _program(f, x, w)
    assert [n.op.name for n in g.nodes] == ["exp", "matmul", "add"]
    real = FU.find_groups
    monkeypatch.setattr(FU, "find_groups", lambda g, *a: ([([0, 2], None)],) + real(g, *a)[1:])
    with pytest.raises(RuntimeError, match=r"^fusion: cycle between fused groups \(a bug in the convexity check\)$"):
        fusion(g, can_fuse_windows, rows=True)


def test_elementwise_groups_take_a_first_sibling_and_stop_at_group_max_ops():
    x = tracejit.randn(4, 7)
    assert _layout(_fused(lambda x: (x * 2.0, x * 3.0), x)) == [(None, ["mul", "mul"])]

    def chain(x):
        for k in range(200):
            x = x * 1.01 if k % 2 else x + 0.5
        return x
    fg = _fused(chain, x)
    assert [len(n.attrs["body"].nodes) for n in fg.nodes] == [FU.GROUP_MAX, 200 - FU.GROUP_MAX]


def test_a_sum_epilogue_reads_a_value_computed_in_the_loop_not_a_broadcast_or_a_placed_one():
    x, y = tracejit.randn(7), tracejit.randn(3, 7)
    # (the expand comes first in the group: the sum of the product after it still joins)
    assert _layout(_fused(lambda x, y: (x.expand(3, 7) * y).sum(0), x, y)) == [(None, ["expand", "mul", "sum"])]
    assert _layout(_fused(lambda x, y: (x.expand(3, 7) * y, x.expand(3, 7).sum(0)), x, y)) == \
        [(None, ["expand", "mul"]), "sum"]
    a, b = tracejit.randn(4, 1), tracejit.randn(4, 1)
    assert _layout(_fused(lambda a, b: tracejit.cat([a * 2.0, b + 1.0], 1).sum(0), a, b)) == \
        [(None, ["mul", "add", "cat"]), "sum"]


def test_find_groups_forms_row_groups_only_when_asked():
    g = _program(lambda x: F.softmax(x, -1) * 2.0, tracejit.randn(4, 7))
    groups = FU.find_groups(g, can_fuse_windows)[0]
    assert [d for _, d in groups] == [None] and [g.nodes[i].op.name for i in groups[0][0]] == ["mul"]
    assert [d for _, d in FU.find_groups(g, can_fuse_windows, rows=True)[0]] == [((), (4,), (7,))]


def test_views_broadcasts_and_cats_alone_are_no_kernels_and_a_window_read_outside_stays_a_view():
    x, w = tracejit.randn(4, 7), tracejit.randn(3, 5)
    assert _layout(_fused(lambda x, w: x[:, :3] @ w, x, w)) == ["slice", "matmul"]
    v = tracejit.randn(7)
    assert _layout(_fused(lambda v, w: v.expand(3, 7).t() @ w, v, w)) == ["expand", "permute", "matmul"]
    a, b = tracejit.randn(2, 3), tracejit.randn(2, 3)
    assert _layout(_fused(lambda a, b, w: tracejit.cat([a, b], 0) @ w, a, b, w)) == ["cat", "matmul"]
    # one slice read by a kernel and by a matmul: the kernel reads the view in place, the slice stays a node (a
    # slice read by the kernel alone is in its group)
    def f(x, w):
        s = x[:, :3]
        return s * 2.0, s @ w
    assert _layout(_fused(f, x, w)) == ["slice", (None, ["mul"]), "matmul"]
    assert _layout(_fused(lambda x, w: (x[:, :3] * 2.0, x[:, :3] @ w), x, w)) == \
        [(None, ["slice", "mul"]), "slice", "matmul"]
