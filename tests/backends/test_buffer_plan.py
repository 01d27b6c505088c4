"""The buffer plan (passes/buffers.py) as the CPU executor uses it: intermediates share memory only when no
value living in it is read again, views included, and the numbers do not change."""
import numpy as np
import pytest

import tracejit
import tracejit.nn as nn
import tracejit.nn.functional as F
from tracejit import config
from tracejit.backends.numba_cpu.executor import CompiledGraph, _distinct_memory
from tracejit.ir.graph import Value
from tracejit.passes import buffers
from tracejit.passes.fusion import fusion


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tjcache"))


def run_checked(cg, arrays):
    """Run a CompiledGraph node by node; before each node, every value it reads must still hold what its
    producer wrote (a buffer shared too early fails here, whatever the plan believes about aliasing)."""
    slot, g = cg._slot, cg.graph
    env = cg._template + cg._alloc()
    for s, a in zip(cg._in_slots, arrays):
        env[s] = a
    if cg._ok_slot is not None:
        env[cg._ok_slot] = _distinct_memory(arrays)
    written = {id(v): np.array(a, copy=True) for v, a in zip(g.inputs, arrays)}

    def check(v, where):
        if isinstance(v, Value) and id(v) in written:
            np.testing.assert_array_equal(np.asarray(env[slot[id(v)]]), written[id(v)],
                                          err_msg=f"{v} was overwritten before {where}")

    for n, step in zip(g.nodes, cg._steps):
        for i in n.inputs:
            check(i, n.op.name)
        step(env)
        for o in n.outputs:
            written[id(o)] = np.array(env[slot[id(o)]], copy=True)
    for v in g.outputs:
        check(v, "the end")
    return [env[slot[id(v)]] for v in g.outputs]


def compiled(fn, *args):
    g = tracejit.trace(fn, backend="interpreter").graph(*args).forward
    return CompiledGraph(fusion(g, rows=True))


def test_a_view_keeps_its_base_buffer_alive():
    # %a's only direct reader is the transpose; the transposed view is read by the last kernel, after fused_1
    # wrote a buffer of the same size and dtype: fused_1 must not reuse %a's memory
    def f(x, w):
        b = tracejit.tanh(x * 2).t()
        d = tracejit.tanh(x @ w) + 1
        return (b.t() * (d @ w)).sum()

    x, w = tracejit.randn(6, 6), tracejit.randn(6, 6)
    cg = compiled(f, x, w)
    kernel_outs = [j for j, spec in enumerate(cg._buf_specs) if spec[2] is not None]
    assert len(kernel_outs) == 2
    a, d = (cg.plan.where[j] for j in kernel_outs)
    assert a != d
    want = f(x, w).item()
    got, = run_checked(cg, [x.numpy(), w.numpy()])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(cg([x.numpy(), w.numpy()])[0], want, rtol=1e-5)


def test_buffers_with_disjoint_lifetimes_share_an_arena():
    def f(x, w):
        for _ in range(4):
            x = tracejit.tanh(x @ w) * 0.5 + x
        return x.sum()

    x, w = tracejit.randn(8, 8), tracejit.randn(8, 8)
    cg = compiled(f, x, w)
    assert len(cg._buf_specs) >= 4
    assert len(cg.plan.arenas) < len(cg._buf_specs)
    unshared = sum(dt.itemsize * int(np.prod(shape)) for dt, shape, *_ in cg._buf_specs)
    assert cg.plan.requested == unshared and cg.plan.nbytes() < unshared
    got, = run_checked(cg, [x.numpy(), w.numpy()])
    np.testing.assert_allclose(got, f(x, w).item(), rtol=1e-5)


def test_a_returned_view_of_an_intermediate_survives_later_kernels():
    def f(x, w):
        a = tracejit.tanh(x * 3)
        v = a.reshape(-1)[:5]            # returned: a view of a's buffer
        y = tracejit.exp(x @ w) - 1      # a later kernel of the same size
        return v, (y @ w).sum()

    x, w = tracejit.randn(4, 4), tracejit.randn(4, 4)
    cg = compiled(f, x, w)
    run_checked(cg, [x.numpy(), w.numpy()])
    v, s = cg([x.numpy(), w.numpy()])
    wv, ws = f(x, w)
    np.testing.assert_allclose(v, wv.numpy(), rtol=1e-6)
    np.testing.assert_allclose(s, ws.item(), rtol=1e-5)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)

    def forward(self, x):
        return self.l3(F.gelu(self.l2(tracejit.tanh(self.l1(x)))))


@pytest.mark.parametrize("share", [True, False])
def test_a_training_step_is_the_same_with_and_without_sharing(share, monkeypatch):
    monkeypatch.setattr(config, "share_buffers", share)
    tracejit.manual_seed(0)
    model = MLP()
    opt = tracejit.optim.Adam(model.parameters(), lr=1e-2)
    x, y = tracejit.randn(64, 16), tracejit.randint(0, 4, (64,))

    @tracejit.trace
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    tracejit.manual_seed(0)
    ref = MLP()
    ropt = tracejit.optim.Adam(ref.parameters(), lr=1e-2)
    for _ in range(3):
        ropt.zero_grad()
        want = F.cross_entropy(ref(x), y)
        want.backward()
        ropt.step()
        got = step(x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    cg = step.graph(x, y).entry.fwd_fn          # (the whole step is one program)
    assert isinstance(cg, CompiledGraph)
    n = len(cg._buf_specs)
    assert n >= 4 and (len(cg.plan.arenas) < n) == share
    assert (cg.plan.nbytes() == cg.plan.requested) != share
    assert cg.plan.summary().startswith(f"{n} in {len(cg.plan.arenas)} arenas")


def test_plan_keeps_dtypes_apart_and_scratch_to_its_node():
    x = tracejit.randn(5)
    g = tracejit.trace(lambda x: (x * 2).sum(), backend="interpreter").graph(x).forward
    f32, f64 = np.dtype("float32"), np.dtype("float64")
    # scratch of node 0 and of node 0 again overlap; scratch of node 0 and of node 1 do not
    p = buffers.plan(g, [(f32, (10,), None, 0), (f32, (4,), None, 0), (f32, (2, 4), None, 1), (f64, (8,), None, 1)])
    assert p.where[0] != p.where[1]
    assert p.where[2] == p.where[0]                  # best fit: the free arena of 10 elements, not the 4
    assert p.arenas[p.where[3]][0] == f64 and p.where[3] not in p.where[:3]
    assert p.nbytes() == 4 * (10 + 4) + 8 * 8


def test_plan_sizes_print_in_bytes_kib_and_mib():
    from tracejit.passes.buffers import _size
    sizes = (0, 1023, 1024, 1536, 2**20 - 1, 2**20, 3 * 2**19)
    assert [_size(n) for n in sizes] == ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "1024.0 KiB", "1.0 MiB", "1.5 MiB"]


def test_plan_grows_the_largest_free_arena_and_ends_an_unread_value_at_its_writer():
    x = tracejit.randn(5)
    g = tracejit.trace(lambda x: (x * 2).sum(), backend="interpreter").graph(x).forward
    f32 = np.dtype("float32")
    # node 0's scratch of 4 is free at node 1, too small for 8: that arena grows to 8 (no second arena)
    p = buffers.plan(g, [(f32, (4,), None, 0), (f32, (8,), None, 1)])
    assert p.where == [0, 0] and p.arenas == [(f32, 8)]
    # a value no node reads (from another graph here) lives until its writer only: node 1 reuses its arena
    other = tracejit.trace(lambda x: x + 1, backend="interpreter").graph(x).forward.nodes[0].outputs[0]
    p = buffers.plan(g, [(f32, (5,), other, 0), (f32, (5,), None, 1)])
    assert p.where == [0, 0]


def _named(g):
    names = {id(v): f"in{k}" for k, v in enumerate(g.inputs)}
    names.update({id(o): f"n{k}" for k, n in enumerate(g.nodes) for o in n.outputs})
    return names


def test_lifetimes_end_at_the_last_read_through_any_view_and_returned_values_live_to_the_end():
    def f(x, w):
        a = tracejit.exp(x)                # n0
        v = a.t()                          # n1: a view of a
        b = x * 2.0                        # n2
        c = v @ w                          # n3: the last read of a, through v
        d = b + c                          # n4
        r = d.reshape(-1)                  # n5: a view of d, returned: d lives to the end
        u = v.reshape(-1)[:3]              # n6, n7: views of a view (of a), read by n9
        return r, b * 3.0, u * 2.0         # n8, n9
    x, w = tracejit.randn(4, 4), tracejit.randn(4, 4)
    g = tracejit.trace(f, backend="interpreter").graph(x, w).forward
    assert [n.op.name for n in g.nodes] == ["exp", "permute", "mul", "matmul", "add", "view", "reshape",
                                            "slice", "mul", "mul"]
    last, roots = buffers.lifetimes(g)
    names = _named(g)
    assert {names[k]: v for k, v in last.items()} == {
        "in0": 2, "in1": 3, "n0": 9, "n1": 9, "n2": 8, "n3": 4, "n4": 10, "n5": 10, "n6": 9, "n7": 9, "n8": 10,
        "n9": 10}
    assert {names[k]: sorted(names[r] for r in v) for k, v in roots.items()} == {
        "n1": ["n0", "n1"], "n5": ["n4", "n5"], "n6": ["n0", "n1", "n6"], "n7": ["n0", "n1", "n6", "n7"]}


def test_plan_orders_by_writer_bigger_first_frees_after_the_last_read_and_fits_best():
    def f(x, w):
        a = tracejit.exp(x)
        v = a.t()
        b = x * 2.0
        c = v @ w
        d = b + c
        r = d.reshape(-1)
        u = v.reshape(-1)[:3]
        return r, b * 3.0, u * 2.0
    x, w = tracejit.randn(4, 4), tracejit.randn(4, 4)
    g = tracejit.trace(f, backend="interpreter").graph(x, w).forward
    c, b = g.nodes[3].outputs[0], g.nodes[2].outputs[0]          # read last at nodes 4 and 8
    other = tracejit.trace(lambda x: x + 1, backend="interpreter").graph(x).forward.nodes[0].outputs[0]
    f32, f64 = np.dtype("float32"), np.dtype("float64")
    reqs = [(f32, (4, 4), c, 3), (f32, (16,), b, 2), (f32, (8,), None, 4), (f32, (2, 8), None, 4),
            (f64, (4,), None, 4), (f32, (10,), None, 5), (f32, (), None, 9), (f32, (16,), other, 6),
            (f32, (16,), None, 9)]
    p = buffers.plan(g, reqs)
    # b's arena (0) is busy to node 8; c's (1) is read at node 4, so node 4's buffers take new ones (2, 3, and 4
    # for float64); node 5's 10 elements take the smallest free float32 arena that fits (1: 16, before 2: 16;
    # 3 holds 8), so does the unread value of node 6 (1 again); at node 9 the 16 elements come first and take
    # the first arena of 16 (0, free again), the one element takes 3
    assert p.where == [1, 0, 3, 2, 4, 1, 3, 1, 0]
    assert p.arenas == [(f32, 16), (f32, 16), (f32, 16), (f32, 8), (f64, 4)]
    assert p.requested == 4 * (16 + 16 + 8 + 16 + 10 + 1 + 16 + 16) + 8 * 4
    assert p.nbytes() == 4 * (3 * 16 + 8) + 8 * 4
    assert p.summary() == "9 in 5 arenas: 256 B (428 B with one each)"
    p = buffers.plan(g, reqs, share=False)
    assert p.where == list(range(9)) and p.arenas == [(f32, 16), (f32, 16), (f32, 8), (f32, 16), (f64, 4),
                                                      (f32, 10), (f32, 1), (f32, 16), (f32, 16)]
    assert p.requested == 428 and p.nbytes() == 428
