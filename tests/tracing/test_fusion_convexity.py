"""Fusion never makes a cycle: the incremental cycle test (`fusion.Units`) against brute force, and fused
groups of random programs checked for convexity."""
import numpy as np
import pytest

import tracejit
from tracejit.backends.interpreter import run
from tracejit.ir.graph import Value
from tracejit.passes.fusion import Units, find_groups, fusion


def _acyclic(n, edges, group):
    # Kahn's algorithm on the graph with each group contracted to one vertex
    succ, indeg = {}, {}
    for u, v in edges:
        a, b = group[u], group[v]
        if a != b and b not in succ.setdefault(a, set()):
            succ[a].add(b)
            indeg[b] = indeg.get(b, 0) + 1
    todo = [r for r in set(group) if not indeg.get(r)]
    seen = 0
    while todo:
        a = todo.pop()
        seen += 1
        for b in succ.get(a, ()):
            indeg[b] -= 1
            if not indeg[b]:
                todo.append(b)
    return seen == len(set(group))


# (seed 136: a merge moves units whose ranks are not in the order of their indices: they keep their rank order)
@pytest.mark.parametrize("seed", list(range(30)) + [136])
def test_units_merge_agrees_with_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 40))
    p = rng.uniform(0.05, 0.3)
    edges = [(i, j) for j in range(n) for i in range(j) if rng.random() < p]
    succ = [set() for _ in range(n)]
    for i, j in edges:
        succ[i].add(j)
    units = Units(succ)
    if seed % 3 == 0:       # consecutive ranks: no room between them, every move spreads some out
        units.rank[:n] = range(n)
    group = list(range(n))
    for _ in range(3 * n):
        x, y = (int(v) for v in rng.integers(0, n, 2))
        trial = [group[y] if g == group[x] else g for g in group]
        ok = _acyclic(n, edges, trial)
        r = units.merge(x, y)
        assert (r is not None) == ok, (seed, x, y)
        if ok:
            group = trial
        # the ranks stay a topological order of the contracted graph
        for i, j in edges:
            a, b = units.find(i), units.find(j)
            assert a == b or units.rank[a] < units.rank[b]
        listed, u = [], units.nxt[n]          # the list holds the units, ranks increasing
        while units.nxt[u] is not None:
            listed.append(u)
            u = units.nxt[u]
        assert sorted(listed) == [i for i in range(n) if units.find(i) == i]
        assert all(units.rank[p] < units.rank[q] for p, q in zip(listed, listed[1:]))
        assert sorted(sorted(units.members[units.find(i)]) for i in range(n) if units.find(i) == i) == \
            sorted(sorted(i for i in range(n) if group[i] == g) for g in set(group))


@pytest.mark.parametrize("n", [1, 5])
def test_units_start_with_integer_ranks_increasing_from_head_to_tail(n):
    units = Units([set() for _ in range(n)])
    order, u = [n], n                       # n and n + 1: the list's head and tail
    while units.nxt[u] is not None:
        u = units.nxt[u]
        order.append(u)
    assert order == [n] + list(range(n)) + [n + 1]
    ranks = [units.rank[u] for u in order]
    assert all(type(r) is int for r in ranks) and all(p < q for p, q in zip(ranks, ranks[1:]))
    assert all(units.prv[q] == p for p, q in zip(order, order[1:])) and units.prv[n] is None


def test_units_spread_ranks_when_none_fits_between():
    # 0 -> 3 -> 4 and 1 -> 2: merging 1 and 4 moves 3 between 0 and 1, whose ranks are consecutive
    succ = [{3}, {2}, set(), {4}, set()]
    units = Units(succ)
    units.rank[:5] = range(5)
    r = units.merge(1, 4)
    assert r is not None and units.spread >= 1
    assert units.rank[0] < units.rank[3] < units.rank[r] < units.rank[2]


def _listed(units, n):
    out, u = [], units.nxt[n]
    while units.nxt[u] is not None:
        out.append(u)
        u = units.nxt[u]
    return out


def test_units_spread_only_the_tight_neighbours_evenly():
    # as above, with ranks 1000..1004 and a unit 5 ranked 64 after the first: the spread walks from 0 while the
    # span is under 4 * count**2 (1, 2, 4: spans 1, 2, 4; 5: a span of 64, not under 64) and gives the units
    # between 0 and 5 even integer ranks (a step of 64 // 4); 5 and everything after it keep theirs
    succ = [{3}, {2}, set(), {4}, set(), set()]
    units = Units(succ)
    units.rank[:6] = [1000, 1001, 1002, 1003, 1004, 1064]
    assert units.merge(1, 4) == 1 and units.spread == 1
    assert _listed(units, 6) == [0, 3, 1, 2, 5]
    assert [units.rank[u] for u in _listed(units, 6)] == [1000, 1008, 1016, 1032, 1064]
    assert all(type(r) is int for r in units.rank)
    units._spread(0)                    # (the counter the tests read counts every spread; 3 has room: no change)
    assert units.spread == 2 and [units.rank[u] for u in _listed(units, 6)] == [1000, 1008, 1016, 1032, 1064]


def test_units_insert_at_the_midpoint_when_there_is_one():
    # a gap of 2 between 0 and 1 has a midpoint: 3 takes it, nothing is spread
    succ = [{3}, {2}, set(), {4}, set(), set()]
    units = Units(succ)
    units.rank[:6] = [1000, 1002, 1004, 1006, 1008, 2000]
    assert units.merge(1, 4) == 1 and units.spread == 0
    assert [units.rank[u] for u in _listed(units, 6)] == [1000, 1001, 1002, 1004, 2000]
    assert all(type(r) is int for r in units.rank)


def test_units_spread_to_the_tail_leaves_room_before_it():
    # no gap before the tail: the units after 0 share its span evenly with one step left before the tail
    succ = [{3}, {2}, set(), {4}, set()]
    units = Units(succ)
    units.rank[:5] = [1000, 1001, 1002, 1003, 1004]
    tail = units.rank[6]
    assert units.merge(1, 4) == 1 and units.spread == 1
    step = (tail - 1000) // 5           # (1, 2 and 4 spread, then 4 left the list: the merged unit is 1)
    assert _listed(units, 5) == [0, 3, 1, 2]
    assert [units.rank[u] for u in _listed(units, 5)] == [1000, (2000 + step) // 2, 1000 + step, 1000 + 2 * step]
    assert all(type(r) is int for r in units.rank) and units.rank[6] == tail


def test_units_refuse_when_the_search_is_too_long():
    # a -> long chain -> b: merging a and b is a cycle; with a tiny budget the answer is still no
    n = 50
    succ = [{i + 1} if i < n - 1 else set() for i in range(n)]
    succ[0].add(n - 1)
    units = Units(succ)
    units.budget = 4
    assert units.merge(0, n - 1) is None
    assert units.refused == 1
    assert units.merge(0, n - 1) is None and units.refused == 2
    assert units.merge(0, 1) is not None


def test_units_answer_a_search_of_exactly_the_budget():
    # 0 -> 1 -> 2 and 3 -> 4 -> 5: merging 0 and 5 walks 1, 2 forward and 4, 3 backward, 4 units: no cycle
    succ = [{1}, {2}, set(), {4}, {5}, set()]
    units = Units(succ)
    units.budget = 4
    assert units.merge(0, 5) is not None and units.refused == 0
    units = Units(succ)
    units.budget = 3
    assert units.merge(0, 5) is None and units.refused == 1


def _random_program(rng, steps):
    ops = [lambda a, b: a * b, lambda a, b: a + b, lambda a, b: tracejit.tanh(a) - b,
           lambda a, b: a @ b, lambda a, b: a.sum(0, keepdim=True) * b, lambda a, b: tracejit.exp(a * 0.1),
           # reductions over the last dim: the row groups (rows=True) grow through Units.merge too
           lambda a, b: tracejit.softmax(a * b, -1) - a.sum(1, keepdim=True)]
    picks = [(int(rng.integers(len(ops))), int(rng.integers(1 << 30)), int(rng.integers(1 << 30)))
             for _ in range(steps)]

    def fn(x, y):
        vals = [x, y]
        for k, i, j in picks:
            vals.append(ops[k](vals[i % len(vals)], vals[j % len(vals)]))
        return vals[-1] + vals[-2], vals[len(vals) // 2]
    return fn


def _contracted_convex(g, groups):
    # every group: no path leaves it and comes back (through nodes or other groups)
    prod = {id(o): i for i, nd in enumerate(g.nodes) for o in nd.outputs}
    edges = [(prod[id(v)], j) for j, nd in enumerate(g.nodes) for v in nd.inputs
             if isinstance(v, Value) and id(v) in prod]
    group = list(range(len(g.nodes)))
    for k, (mem, _) in enumerate(groups):
        for m in mem:
            group[m] = len(g.nodes) + k
    return _acyclic(len(g.nodes), edges, group)


@pytest.mark.parametrize("seed", range(12))
def test_fused_groups_of_random_programs_are_convex(seed):
    rng = np.random.default_rng(seed)
    fn = _random_program(rng, 25)
    x, y = tracejit.randn(4, 4), tracejit.randn(4, 4)
    g = tracejit.trace(fn, backend="interpreter").graph(x, y).forward
    for rows in (False, True):
        groups, _, _ = find_groups(g, rows=rows)
        assert _contracted_convex(g, groups)
        assert any(len(m) > 1 for m, _ in groups)
    fg = fusion(g, rows=True)
    ins = [np.asarray(x.numpy()), np.asarray(y.numpy())]
    for a, b in zip(run(fg, ins), run(g, ins)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_path_through_a_matmul_blocks_the_merge():
    # b = exp(x); c = b @ w; d = b + c: b and d may not share a kernel (c needs b, d needs c); e = b * 2 may
    def fn(x, w):
        b = tracejit.exp(x)
        return b + b @ w, b * 2
    x, w = tracejit.randn(3, 3), tracejit.randn(3, 3)
    g = tracejit.trace(fn, backend="interpreter").graph(x, w).forward
    names = [nd.op.name for nd in g.nodes]
    groups, _, _ = find_groups(g)
    by_name = {names[m]: k for k, (mem, _) in enumerate(groups) for m in mem}
    assert by_name["exp"] != by_name["add"] and by_name["exp"] == by_name["mul"]
    assert _contracted_convex(g, groups)


# ----------------------------------------------------------------------------- group size caps

def _ext_inputs(g, members):
    made = {id(o) for m in members for o in g.nodes[m].outputs}
    return {id(v) for m in members for v in g.nodes[m].inputs if isinstance(v, Value) and id(v) not in made}


def test_a_long_sum_is_cut_into_groups_of_bounded_operands():
    # an unrolled RNN's weight gradient: a sum of one term per time step. numba's compile time grows faster
    # than a kernel's operands, so the chain becomes kernels of at most INPUTS_MAX operands (the same code)
    from tracejit.passes import fusion as FU
    xs = [tracejit.randn(3) for _ in range(150)]

    def f(*xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = acc + x
        return acc

    g = tracejit.trace(f, backend="interpreter").graph(*xs).forward
    groups, _, _ = find_groups(g)
    assert len(groups) >= 3
    assert all(len(_ext_inputs(g, m)) <= FU.INPUTS_MAX for m, _ in groups)
    assert max(len(_ext_inputs(g, m)) for m, _ in groups) > FU.INPUTS_MAX // 2      # (still big kernels)
    tf = tracejit.trace(f)
    np.testing.assert_allclose(tf(*xs).numpy(), f(*xs).numpy(), rtol=1e-5)
    codes = {ks.code for _, ks, _ in tf.graph(*xs).entry.fwd_fn.kernels}
    assert len(codes) < len(groups)


@pytest.mark.parametrize("scaled", [False, True])
def test_a_long_sum_fills_each_group_up_to_inputs_max_operands(scaled):
    # the operands a group reads from outside are counted exactly as it grows: values made inside it are none,
    # nor are Python number constants (x * 2.0, x * 3.0, ...: one per term), so every group but the last reads
    # INPUTS_MAX operands
    from tracejit.passes import fusion as FU
    xs = [tracejit.randn(3) for _ in range(70)]

    def f(*xs):
        acc = xs[0]
        for k, x in enumerate(xs[1:]):
            acc = acc + (x * float(k + 2) if scaled else x)
        return acc

    g = tracejit.trace(f, backend="interpreter").graph(*xs).forward
    groups, _, _ = find_groups(g)
    assert [len(_ext_inputs(g, m)) for m, _ in groups] == [FU.INPUTS_MAX, FU.INPUTS_MAX, 70 - 2 * 31]
    assert sum(len(m) for m, _ in groups) == len(g.nodes)


def test_independent_readers_of_one_operand_join_in_bounded_groups():
    from tracejit.passes import fusion as FU
    b = tracejit.randn(4)
    xs = [tracejit.randn(4) for _ in range(100)]

    def f(b, *xs):
        return [x + b for x in xs]

    g = tracejit.trace(f, backend="interpreter").graph(b, *xs).forward
    groups, _, _ = find_groups(g)
    sizes = sorted(len(m) for m, _ in groups)
    # (x + b for 31 xs reads 32 operands: INPUTS_MAX)
    assert sum(sizes) == 100 and max(sizes) == min(FU.SIBLING_MAX, FU.INPUTS_MAX - 1)


def test_readers_of_one_broadcast_operand_stay_apart():
    # a shared bias read by independent adds (an unrolled RNN's input projections): one kernel would read the
    # bias once, which is no saving (it is small and cached), and would have 2 arrays per add (its loop stops
    # vectorizing, numba compiles it slowly); each add alone is the same small kernel, compiled once
    b = tracejit.randn(4)
    xs = [tracejit.randn(3, 4) for _ in range(20)]

    def f(b, *xs):
        return [x + b for x in xs]

    g = tracejit.trace(f, backend="interpreter").graph(b, *xs).forward
    groups, _, _ = find_groups(g)
    assert sorted(len(m) for m, _ in groups) == [1] * 20
    tf = tracejit.trace(f)
    for got, x in zip(tf(b, *xs), xs):
        np.testing.assert_array_equal(got.numpy(), (x + b).numpy())
    assert len({ks.code for _, ks, _ in tf.graph(b, *xs).entry.fwd_fn.kernels}) == 1


def test_a_node_far_after_its_producers_group_is_computed_where_it_is_read():
    # a backward's `1 - s` of a forward's s = sigmoid(x): joining the forward's group would store 1 - s beside s
    # from the forward until the backward reads them; FAR ops later it joins its reader's group instead
    from tracejit.passes import fusion as FU

    def f(x, z):
        s = tracejit.sigmoid(x)
        y = s * 3
        for _ in range(70):
            z = z * 1.01 + 0.5
        return y, (1 - s) * z, s * 2, (y * y * -0.5).exp() * z

    x, z = tracejit.randn(8), tracejit.randn(8)
    g = tracejit.trace(f, backend="interpreter").graph(x, z).forward
    groups, _, _ = find_groups(g)
    group_of = {i: k for k, (m, _) in enumerate(groups) for i in m}
    names = [n.op.name for n in g.nodes]
    sig, one_minus = names.index("sigmoid"), names.index("sub")
    assert group_of[one_minus] != group_of[sig]
    assert group_of[one_minus] == group_of[one_minus + 1]       # with its reader, (1 - s) * z
    # y * y read by exp two ops on: worth storing, it joins the forward group (gelu's derivative in a GPT)
    assert group_of[names.index("exp") - 2] == group_of[sig]
    tf = tracejit.trace(f)
    for a, b in zip(tf(x, z), f(x, z)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)


@pytest.mark.parametrize("gap", [0, 1])
def test_a_producers_group_or_a_siblings_is_joined_up_to_far_nodes_after_its_last_op(gap):
    # y's group (sigmoid, * 3) ends at node 1 and a = w * 2 is node 2; b and c come FAR (+ gap) nodes after them
    from tracejit.passes import fusion as FU

    def f(x, w, z):
        y = tracejit.sigmoid(x) * 3
        a = w * 2.0
        for k in range(FU.FAR - 2 + gap):
            z = z * 1.01 if k % 2 else z + 0.5
        return y, a, z, y * 4.0, w * 5.0

    x, w, z = tracejit.randn(8), tracejit.randn(8), tracejit.randn(8)
    g = tracejit.trace(f, backend="interpreter").graph(x, w, z).forward
    groups, _, _ = find_groups(g)
    group_of = {i: k for k, (m, _) in enumerate(groups) for i in m}
    names = [n.op.name for n in g.nodes]
    b, c = len(names) - 2, len(names) - 1
    assert names[:3] == ["sigmoid", "mul", "mul"] and b - 1 == c - 2 == FU.FAR + gap
    assert (group_of[b] == group_of[0]) == (gap == 0)       # (b reads y: its producer's group)
    assert (group_of[c] == group_of[2]) == (gap == 0)       # (c reads w, as a does: a sibling's group)
    assert group_of[2] != group_of[0]


def test_the_distance_to_a_group_counts_from_its_last_op_not_from_the_one_read():
    # a = w * 2 (node 0) heads a group whose last op is near the reader: the reader joins (its producer's group,
    # 41 ops: too many to join as a sibling; or a sibling's group that d joined 58 nodes after a)
    def zs(z, n):
        for k in range(n):
            z = z * 1.01 if k % 2 else z + 0.5
        return z

    def f(w, z):
        a = w * 2.0
        t = a
        for _ in range(40):
            t = t * 1.5
        z = zs(z, 30)
        return t, z, a * 3.0                    # a * 3.0: node 71, 31 after t's, 71 after a

    def f2(w, z):
        a = w * 2.0
        z = zs(z, 57)
        d = a * 1.5                             # node 58: joins a's group
        z = zs(z, 40)
        return d, z, w * 5.0                    # w * 5.0: node 99, a sibling of a, 41 after d, 99 after a

    w, z = tracejit.randn(8), tracejit.randn(8)
    for fn, last in ((f, 71), (f2, 99)):
        g = tracejit.trace(fn, backend="interpreter").graph(w, z).forward
        groups, _, _ = find_groups(g)
        group_of = {i: k for k, (m, _) in enumerate(groups) for i in m}
        assert len(g.nodes) == last + 1 and g.nodes[0].op.name == "mul" and g.nodes[0].inputs[1] == 2.0
        assert group_of[last] == group_of[0], fn.__name__


@pytest.mark.parametrize("depth", [2, 3, 4, 5])
def test_costly_work_near_a_far_reader_counts_up_to_three_readers_on(depth):
    # a = y * 2 reads the forward group's y from far (the z chain between): it joins that group only when a
    # transcendental (exp) is a, or a fusible reader of its shape at most 3 readers on (costly_near's hops)
    def f(x, z):
        y = tracejit.sigmoid(x) * 3
        for _ in range(70):
            z = z * 1.01 + 0.5
        t = y * 2.0
        for k in range(depth - 1):
            t = t + float(k + 1) if k % 2 else t * z
        return y, tracejit.exp(t)

    x, z = tracejit.randn(8), tracejit.randn(8)
    g = tracejit.trace(f, backend="interpreter").graph(x, z).forward
    groups, _, _ = find_groups(g)
    group_of = {i: k for k, (m, _) in enumerate(groups) for i in m}
    names = [n.op.name for n in g.nodes]
    a = len(names) - depth - 1
    assert names[a] == "mul" and g.nodes[a].inputs[1] == 2.0 and names[-1] == "exp"
    assert (group_of[a] == group_of[names.index("sigmoid")]) == (depth <= 3)


def test_the_fused_graph_verifies_and_keeps_other_ops_out_of_its_bodies():
    # a body holds elementwise ops, broadcasts and a sum at its end only; each fused node's shape rule gives its
    # outputs, one or several (e is read after the group and returned)
    from tracejit.ir.verify import verify
    from tracejit.passes.fusion import can_reduce

    def fn(x, w):
        h = x @ w
        e = tracejit.exp(h) * 2 + 1
        return e, (x * 3).sum(1), tracejit.relu(e - h)
    x, w = tracejit.randn(4, 3), tracejit.randn(3, 5)
    g = tracejit.trace(fn, backend="interpreter").graph(x, w).forward
    fg = verify(fusion(g))
    fused = [n for n in fg.nodes if n.op.kind == "fused"]
    assert sorted(len(n.outputs) for n in fused) == [1, 2]         # (e and the relu; the sum)
    assert all(m.op.kind == "elementwise" or m.op.broadcasts or can_reduce(m)
               for n in fused for m in n.attrs["body"].nodes)
    assert [n.op.name for n in fg.nodes if n.op.kind != "fused"] == ["matmul"]
    ins = [np.asarray(x.numpy()), np.asarray(w.numpy())]
    for a, b in zip(run(fg, ins), run(g, ins)):
        np.testing.assert_allclose(a, b, rtol=1e-6)

    def softmax(x):                     # rows=True: one row-domain group (amax, exp, sum and the division)
        e = tracejit.exp(x - x.amax(1, keepdim=True))
        return e / e.sum(1, keepdim=True)
    g = tracejit.trace(softmax, backend="interpreter").graph(tracejit.randn(8, 16)).forward
    assert [("rows" in n.attrs) for n in fusion(g, rows=True).nodes] == [True]
    assert not any("rows" in n.attrs for n in fusion(g).nodes)
