"""Elementwise fusion: group elementwise nodes into `fused_k` nodes, each a small sub-graph (its `body`).

A group holds elementwise nodes with one output shape (their inputs may broadcast into it; Python scalar
constants and casts are inside). Groups grow vertically (a node joins the groups of its producers) and
horizontally (a node joins a group that reads the same input, so several outputs come from one loop).
Every merge keeps the group convex and the graph of groups acyclic: no path leaves the group and comes
back into it, even through other groups. A value of the group used outside it becomes an output of the
fused node (multi-output fusion).

With `rows=True` (the numba CPU backend), row groups are formed first: a reduction with the `row_reduce` trait
(sum, mean, amax, amin, var, logsumexp, softmax, log_softmax) whose kept dims form one block of its input (the last dims reduced:
softmax, layer norm; or the dims around them: batch norm's (0, 2, 3)) seeds a group that takes in the
elementwise nodes around it whose values are per element or per row of that reduction's domain, and other
reductions over the same rows (softmax, layer norm and their backward each become one group). The
fused node carries `rows=(lead, kept, trail)` shapes; `backends/numba_cpu/rowgen.py` generates its kernel.

The fused node's op is made on the fly (not registered): kind "fused", `impl` runs the body with the
reference interpreter, so a fused graph still runs on the interpreter backend.
"""
import bisect
import re

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ops.registry import AVal, Op
from .rewrite import Rewriter

def default_can_fuse(node):
    op = node.op
    if op.broadcasts:       # a shape op the loop absorbs: it reads the smaller input with broadcast strides (no copy)
        return isinstance(node.inputs[0], Value) and node.inputs[0].dtype.np.kind in "biuf"
    if op.kind != "elementwise" or op.expr is None or op.random or op.nout != 1 or not op.fusible:
        return False
    if op.name == "round" and node.attrs.get("decimals", 0):
        return False
    if any(v.dtype.np.kind == "c" for v in node.outputs):
        return False
    return all(not isinstance(i, Value) or i.dtype.np.kind in "biuf" for i in node.inputs)


def is_window(node):
    """A view (op.window) that reads a strict part of its input: a CPU loop kernel reads it in place. (Strict:
    the input has more elements than any value computed in the loop, so it is never made in the same kernel.)"""
    w = node.op.window
    return w is not None and isinstance(node.inputs[0], Value) and node.inputs[0].dtype.np.kind in "biuf" and \
        int(np.prod(node.inputs[0].shape)) > int(np.prod(node.outputs[0].shape)) and w(node) is not None


def is_placing(node):
    """An op that places operands of one shape at windows of its output (op.places): a CPU loop kernel over the
    operands' shape stores each one where it lands."""
    o = node.outputs[0]
    return node.op.places is not None and len(node.inputs) >= 2 and o.dtype.np.kind in "biuf" and all(
        isinstance(x, Value) and tuple(x.shape) == tuple(node.inputs[0].shape) and x.dtype is o.dtype
        for x in node.inputs)


def can_fuse_windows(node):
    """default_can_fuse, windows and placing ops (the CPU loop kernels' can_fuse)."""
    return default_can_fuse(node) or is_window(node) or is_placing(node)


class FusedBody(Graph):
    """The sub-graph of a fused node: inputs = the fused node's inputs, outputs = its outputs."""

    def __str__(self):
        return f"<{len(self.nodes)} ops>"

    __repr__ = __str__


def _make_op(k, body, nout):
    from ..backends.interpreter import run

    def impl(*arrays, body=body, rows=None):
        res = run(body, list(arrays))
        return res[0] if nout == 1 else tuple(res)

    def meta(*inputs, body=body, rows=None):
        avals = tuple(AVal(o.shape, o.dtype) for o in body.outputs)
        return avals[0] if nout == 1 else avals

    return Op(f"fused_{k}", impl, meta, None, kind="fused", nout=nout)


def can_reduce(node):
    """A reduction the code generator can put at the end of a fused loop (an accumulation)."""
    if node.op.name != "sum" or len(node.inputs) != 1 or not isinstance(node.inputs[0], Value):
        return False
    if node.attrs.get("dtype") is not None or node.inputs[0].ndim == 0:
        return False
    return node.inputs[0].dtype.is_floating_point and node.outputs[0].dtype.is_floating_point


ROW_MAX = 1 << 16                # elements per row of a row kernel (its scratch rows stay in L2)


def row_domain(node):
    """(lead, kept, trail) shapes of a reduction of a float32/64 input whose kept dims form one block, else None.

    A row kernel has one row per position of the kept dims (the outer loop, in parallel); a row's elements
    are `lead` segments of `trail` contiguous elements (softmax or layer norm over the last dims: no lead;
    batch norm over (0, 2, 3): lead N, kept C, trail H*W). Elementwise work before and after the reduction
    joins it."""
    op = node.op        # the reductions a row kernel computes, and their attributes: the `row_reduce` trait
    if op.row_reduce is None or not set(node.attrs) <= op.row_reduce:
        return None
    x = node.inputs[0] if node.inputs else None
    if not isinstance(x, Value) or x.ndim == 0 or x.dtype.np.name not in ("float32", "float64"):
        return None
    if node.attrs.get("dtype") is not None or node.outputs[0].dtype.np != x.dtype.np:
        return None
    dims = (node.attrs["dim"],) if "dim" in node.attrs else tuple(node.attrs["dims"])
    kept = [d for d in range(x.ndim) if d not in dims]
    a, b = (kept[0], kept[-1] + 1) if kept else (0, 0)
    if kept != list(range(a, b)) or (a and "dim" in node.attrs):
        return None
    dom = tuple(x.shape[:a]), tuple(x.shape[a:b]), tuple(x.shape[b:])
    lead, rows, trail = (int(np.prod(d)) for d in dom)
    if trail < 2 or rows < 1:       # a trail of 1 walks memory with a stride: the sum epilogue does better
        return None
    if lead * trail > ROW_MAX:      # a row's scratch must stay small (a bigger full sum: codegen's chunks)
        return None
    return dom


def row_class(shape, dom):
    """How a value of `shape` is indexed in the row kernel of domain `dom` (numpy broadcasting, right-aligned):
    "full" (every element), "scalar" (one element), "row" (one per row: the kept dims), "inner" (one per
    position of the reduced dims, the same in every row), "bcast" (reductions over the trailing dims: whole rows,
    broadcast over some kept dims, as a causal mask [1, 1, T, T] beside attention scores [B, H, T, T])."""
    lead, kept, trail = dom
    full = lead + kept + trail
    shape = tuple(shape)
    if shape == full:
        return "full"
    if len(shape) > len(full):
        return None
    ps = (1,) * (len(full) - len(shape)) + shape
    a, b = len(lead), len(lead) + len(kept)
    ones = lambda t: all(d == 1 for d in t)  # noqa: E731
    if ones(ps):
        return "scalar"
    if ps[a:b] == kept and ones(ps[:a]) and ones(ps[b:]):
        return "row"
    if ps[:a] == lead and ps[b:] == trail and ones(ps[a:b]):
        return "inner"
    if not lead and ps[b:] == trail and all(p in (1, k) for p, k in zip(ps[a:b], kept)):
        return "bcast"
    return None


class Units:
    """The graph of units (a fused group contracted to one vertex, every other node alone), kept acyclic as
    units merge: two units may merge only if no path leads from one to the other through a third unit.

    The units are kept in a list in a topological order, each with an integer rank increasing along the list
    (an order-maintenance list: a unit moved between two neighbours takes a rank between theirs, and when
    there is none, a few neighbours are spread out). The path search between units a and b (a first) walks
    only units ranked between them, forward from a and backward from b in turns, and stops when the two walks
    meet (a cycle) or either is complete (no cycle), so a merge costs about the smaller walk, not the graph.
    The complete walk is what moves: what leads to b goes just before the merged unit at a's place, or what
    comes from a just after it at b's place. A search past `budget` units answers no: a fusion missed, never
    a cycle."""

    budget = 4096
    GAP = 1 << 32

    def __init__(self, succ):
        n = len(succ)
        self.parent = list(range(n))
        self.out = [set(s) for s in succ]           # edges between representatives
        self.inn = [set() for _ in range(n)]
        for i, s in enumerate(succ):
            for j in s:
                self.inn[j].add(i)
        self.members = [[i] for i in range(n)]
        # the list: node order is a topological order; n and n + 1 are its head and tail
        self.rank = [i * self.GAP for i in range(n)] + [-self.GAP, (n + 1) * self.GAP << 64]
        order = [n] + list(range(n)) + [n + 1]
        self.nxt, self.prv = [None] * (n + 2), [None] * (n + 2)
        for p, q in zip(order, order[1:]):
            self.nxt[p], self.prv[q] = q, p
        self.refused = self.spread = 0      # searches past the budget, rank spreads (the tests read them)

    def find(self, x):
        parent = self.parent
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def merge(self, x, y):
        """Merge the units of nodes x and y unless that makes a cycle: the merged unit's representative, or None."""
        a, b = self.find(x), self.find(y)
        if a == b:
            return a
        rank, out, inn = self.rank, self.out, self.inn
        if rank[a] > rank[b]:
            a, b = b, a
        lo, hi = rank[a], rank[b]
        # fwd: reachable from a, ranked below b; bwd: reaching b, ranked above a. A cycle iff they meet.
        # Neighbours in the list have no unit between them: nothing to search (a chain growing one node at a
        # time; the filters below would read all of a big group's edges at every merge)
        fwd, bwd = set(), set()
        if self.nxt[a] != b:
            fwd = {s for s in out[a] if rank[s] < hi}
            bwd = {p for p in inn[b] if rank[p] > lo}
        if not fwd.isdisjoint(bwd):
            return None
        fstack, bstack = list(fwd), list(bwd)
        budget = self.budget
        while fstack and bstack:
            for s in out[fstack.pop()]:
                if rank[s] < hi and s not in fwd:
                    if s in bwd:
                        return None
                    fwd.add(s)
                    fstack.append(s)
            for p in inn[bstack.pop()]:
                if rank[p] > lo and p not in bwd:
                    if p in fwd:
                        return None
                    bwd.add(p)
                    bstack.append(p)
            if len(fwd) + len(bwd) > budget:
                self.refused += 1
                return None
        # no cycle: move the complete walk's units next to the merged unit's place
        if not bstack and (fstack or len(bwd) <= len(fwd)):
            keep, gone = a, b
            for u in sorted(bwd, key=rank.__getitem__):     # just before a, in their order
                self._unlink(u)
                self._insert(u, self.prv[a], a)
        else:
            keep, gone = b, a
            at = b
            for u in sorted(fwd, key=rank.__getitem__):     # just after b, in their order
                self._unlink(u)
                self._insert(u, at, self.nxt[at])
                at = u
        self._unlink(gone)
        r = self._join(a, b)
        if r != keep:                                       # the representative takes the kept place
            p, q = self.prv[keep], self.nxt[keep]
            self.prv[r], self.nxt[r], rank[r] = p, q, rank[keep]
            self.nxt[p] = self.prv[q] = r
        return r

    def _unlink(self, u):
        p, q = self.prv[u], self.nxt[u]
        self.nxt[p], self.prv[q] = q, p

    def _insert(self, u, p, q):
        rank = self.rank
        if rank[q] - rank[p] < 2:
            self._spread(p)
            q = self.nxt[p]
        rank[u] = (rank[p] + rank[q]) // 2
        self.nxt[p], self.prv[u], self.nxt[u], self.prv[q] = u, p, q, u

    def _spread(self, p):
        # relabel p's successors evenly over a span that grows faster than their number
        self.spread += 1
        rank, nxt = self.rank, self.nxt
        count, q = 1, nxt[p]
        while nxt[q] is not None and rank[q] - rank[p] < 4 * count * count:
            q = nxt[q]
            count += 1
        step = (rank[q] - rank[p]) // (count + 1) if nxt[q] is None else (rank[q] - rank[p]) // count
        u, k = nxt[p], 1
        while u != q:
            rank[u] = rank[p] + k * step
            u, k = nxt[u], k + 1

    def _join(self, a, b):
        out, inn = self.out, self.inn
        if len(out[a]) + len(inn[a]) < len(out[b]) + len(inn[b]):
            a, b = b, a
        for s in out[b]:
            inn[s].discard(b)
            if s != a:
                inn[s].add(a)
                out[a].add(s)
        for p in inn[b]:
            out[p].discard(b)
            if p != a:
                out[p].add(a)
                inn[a].add(p)
        out[a].discard(b)
        inn[a].discard(b)
        out[b] = inn[b] = None
        ma, mb = self.members[a], self.members[b]
        if len(ma) < len(mb):
            ma, mb = mb, ma
        ma.extend(mb)
        self.members[a], self.members[b] = ma, None
        self.parent[b] = a
        return a


SIBLINGS = 8        # a node tries to join the groups of at most this many earlier readers of each of its inputs
# numba's compile time grows faster than a kernel's arguments (a sum of 128 values: 3.3 s, of 256: 13.7 s, as an
# unrolled RNN's weight gradients; 128 independent adds sharing one operand: 15 s), and kernels of the same code
# compile once: a group (a row group too) stops growing at GROUP_MAX ops or INPUTS_MAX operands, and at SIBLING_MAX
# ops when the merge would only join readers of a common operand. (A chain of 1,000 elementwise ops, first traced
# call from an empty cache: 22.5 s with groups of up to 512 ops, 9.3 s with 128, steady call the same 0.17 ms; the
# GPT's and the LSTM's groups have at most 18 and 64 ops.)
GROUP_MAX = 128
INPUTS_MAX = 32
SIBLING_MAX = 32
_CALL = re.compile(r"[A-Za-z_]\w*\(")
FAR = 64            # nodes: a node joins a producer's group only when the group's last op is at most this far back


def find_groups(g, can_fuse=default_can_fuse, rows=False):
    """Lists of node indices, one per group (each list in graph order), and the row domain of each group
    (None for an elementwise group). With `rows`, row groups (see `row_domain`) are formed first."""
    gr = _Grouping(g, can_fuse)
    if rows:
        gr.row_groups()
    gr.elementwise_groups()
    gr.epilogues()
    return gr.groups(), gr.units, gr.prod


class _Grouping:
    """The state of find_groups: the graph's producer/consumer maps (node indices), which nodes may fuse, the
    units (groups being merged under the convexity rule) and which nodes are in a group."""

    def __init__(self, g, can_fuse):
        self.nodes = nodes = g.nodes
        self.n = n = len(nodes)
        self.prod = prod = {}
        for i, nd in enumerate(nodes):
            for o in nd.outputs:
                prod[id(o)] = i
        succ = [set() for _ in range(n)]
        self.consumers = consumers = {}
        for i, nd in enumerate(nodes):
            for v in nd.inputs:
                if isinstance(v, Value):
                    cs = consumers.setdefault(id(v), [])
                    if not cs or cs[-1] != i:
                        cs.append(i)
                    p = prod.get(id(v))
                    if p is not None:
                        succ[p].add(i)
        self.fus = [can_fuse(nd) for nd in nodes]
        # windows join their readers' groups only (never their input's, never siblings')
        self.win = [f and nd.op.window is not None for f, nd in zip(self.fus, nodes)]
        # placing ops (cat) join the groups of their operands' shape, which is their loop's
        self.place = [f and nd.op.places is not None for f, nd in zip(self.fus, nodes)]
        self.shape = [nd.outputs[0].shape if nd.outputs else None for nd in nodes]
        for i, nd in enumerate(nodes):
            if self.fus[i] and nd.op.places is not None:
                self.shape[i] = nd.inputs[0].shape
        self.units = Units(succ)
        self.grouped = [False] * n   # in a group (a node alone outside every group is not)
        self.seeds = {}              # first node of each row group -> its row domain
        self._ext = {}               # representative -> ext(r)

    def row_ok(self, j, dom, seed):
        nodes, prod, find = self.nodes, self.prod, self.units.find
        nd = nodes[j]
        if self.win[j] or self.place[j]:
            return False
        d = row_domain(nd)
        # elementwise work per element or per row (with a single row, a scalar is per row: a loss's mean)
        one_row = int(np.prod(dom[1])) == 1
        if d is None and not (self.fus[j] and row_class(nd.outputs[0].shape, dom) in
                              (("full", "row", "scalar") if one_row else ("full", "row"))):
            return False
        if d is not None and d != dom:
            return False
        for v in nd.inputs:
            if isinstance(v, Value) and row_class(v.shape, dom) is None:
                return False
        # a value made in the group is a per-element or a per-row variable there: it must be read as such
        gid = find(seed)
        for v, p, c in [(v, prod.get(id(v)), j) for v in nd.inputs if isinstance(v, Value)] + \
                [(o, j, c) for o in nd.outputs for c in self.consumers.get(id(o), ())]:
            if p is None or (find(p) != gid and p != j) or (find(c) != gid and c != j):
                continue
            # (a row reduction's output is per row unless it has its input's shape: softmax's family)
            per_row = (nodes[p].outputs[0].shape != nodes[p].inputs[0].shape if row_domain(nodes[p])
                       else row_class(nodes[p].outputs[0].shape, dom) != "full")
            cls = row_class(v.shape, dom)
            if cls != ("row" if per_row else "full") and not (per_row and one_row and cls == "scalar"):
                return False
        return True

    def row_groups(self):
        """Each row reduction not yet grouped seeds a row group, grown over its neighbours while row_ok."""
        nodes, prod, consumers, grouped = self.nodes, self.prod, self.consumers, self.grouped
        for i, nd in enumerate(nodes):
            dom = row_domain(nd)
            if dom is None or grouped[i]:
                continue
            self.seeds[i] = dom
            S = {i}
            grouped[i] = True
            new, tried = [i], set()     # members added in the last round; neighbours refused so far
            while new and len(S) < GROUP_MAX:
                near = set(tried)       # (a refused neighbour may fit the grown group: tried again)
                for m in new:
                    near.update(prod[id(v)] for v in nodes[m].inputs if isinstance(v, Value) and id(v) in prod)
                    near.update(c for o in nodes[m].outputs for c in consumers.get(id(o), ()))
                    # sibling reductions of the same rows (batch norm's mean and variance of one input): one pass
                    near.update(c for v in nodes[m].inputs if isinstance(v, Value) for c in consumers.get(id(v), ())
                                if c not in S and row_domain(nodes[c]) == dom)
                new, tried = [], set()
                for j in sorted(near - S):
                    if grouped[j]:
                        continue
                    if len(S) < GROUP_MAX and self.row_ok(j, dom, i) and self.units.merge(i, j) is not None:
                        S.add(j)
                        grouped[j] = True
                        new.append(j)
                    else:
                        tried.add(j)
            for m in S:
                self.fus[m] = False

    def elementwise_groups(self):
        """Each fusible node merges with the fusible producers of its operands and its recent siblings (readers
        of the same operand) of its shape."""
        nodes, prod, consumers, fus, shape, find, members = \
            self.nodes, self.prod, self.consumers, self.fus, self.shape, self.units.find, self.units.members
        latest = {}                     # representative -> the group's last node (its own index if alone)
        for i, nd in enumerate(nodes):
            if not fus[i] or self.win[i]:
                self.grouped[i] = self.grouped[i] or fus[i]
                continue
            cands = {}                  # representative -> the most ops the merged group may have
            for v in nd.inputs:
                if isinstance(v, Value):
                    p = prod.get(id(v))
                    # (not into a group that ended FAR nodes ago, nor a sibling's, unless costly work is near: a
                    # backward's `1 - s` of a forward's s would be computed and stored there, beside s, until the
                    # backward reads both; gelu's derivative, exp(-x*x/2), is worth storing)
                    if p is not None and fus[p] and shape[p] == shape[i] and \
                            (i - latest.get(find(p), p) <= FAR or self.costly_near(i)):
                        cands[find(p)] = GROUP_MAX
            for v in nd.inputs:
                # (siblings share a pass over a full-size operand; a broadcast one (a bias) is read from cache)
                if isinstance(v, Value) and tuple(v.shape) == tuple(shape[i]):
                    cs = consumers.get(id(v), ())
                    k = bisect.bisect_left(cs, i)
                    for c in cs[max(0, k - SIBLINGS):k]:
                        if fus[c] and shape[c] == shape[i] and not self.win[c] and \
                                (i - latest.get(find(c), c) <= FAR or self.costly_near(i)):
                            cands.setdefault(find(c), SIBLING_MAX)
            self.grouped[i] = True
            for r, most in cands.items():
                a, b = find(r), find(i)
                if a != b and len(members[a]) + len(members[b]) <= most:
                    ext = {v for v in self.ext(a) | self.ext(b) if self.unit_of(v) not in (a, b)}
                    if len(ext) <= INPUTS_MAX and self.units.merge(i, r) is not None:
                        self._ext[find(i)] = ext
                        latest[find(i)] = i

    def costly_near(self, i, hops=3):
        """Node i, or a fusible reader of its shape at most `hops` readers on, calls a function in its scalar code
        (a transcendental: recomputing it costs more than storing the value)."""
        nd = self.nodes[i]
        if nd.op.expr is not None and _CALL.search(nd.op.expr):
            return True
        return hops > 0 and any(self.fus[c] and self.shape[c] == self.shape[i] and self.costly_near(c, hops - 1)
                                for o in nd.outputs for c in self.consumers.get(id(o), ()))

    def unit_of(self, vid):
        p = self.prod.get(vid)
        return None if p is None else self.units.find(p)

    def ext(self, r):
        """ids of the values unit r reads from outside itself (kept for elementwise groups as they merge)."""
        e = self._ext.get(r)
        if e is None:
            e = self._ext[r] = {id(v) for m in self.units.members[r] for v in self.nodes[m].inputs
                                if isinstance(v, Value) and self.unit_of(id(v)) != r}
        return e

    def epilogues(self):
        """Reduction epilogues: a float `sum` of a value made in a group joins it (the loop accumulates the value
        where it is computed; the value is still stored if anything else reads it)."""
        nodes, units, grouped, find = self.nodes, self.units, self.grouped, self.units.find
        elementwise = sorted({find(i) for i in range(self.n) if grouped[i] and self.fus[i]},
                             key=lambda r: max(units.members[r]))
        for r in elementwise:
            for m in sorted(units.members[find(r)]):
                o = nodes[m].outputs[0]
                if nodes[m].op.broadcasts or self.place[m]:
                    continue
                for j in self.consumers.get(id(o), ()):
                    red = nodes[j]
                    if can_reduce(red) and red.inputs[0] is o and not grouped[j]:
                        if units.merge(m, j) is not None:
                            grouped[j] = True

    def groups(self):
        find = self.units.find
        domains = {find(s): dom for s, dom in self.seeds.items()}
        reps = dict.fromkeys(find(i) for i in range(self.n) if self.grouped[i])
        groups = []
        for r in reps:
            mem = set(self.units.members[r])
            # a window read outside the group stays a view (its input is made before the group: no cycle)
            mem -= {i for i in mem if self.win[i] and
                    any(c not in mem for c in self.consumers.get(id(self.nodes[i].outputs[0]), ()))}
            if mem:
                groups.append((sorted(mem), domains.get(r)))
        groups.sort(key=lambda md: md[0])
        # a group of broadcasts, windows and placing ops alone would only copy, and a sum epilogue left alone by
        # its window (read outside too) has no loop of its own: leave those as they are
        return [(m, d) for m, d in groups
                if any(not (self.nodes[i].op.broadcasts or self.win[i] or self.place[i] or
                            (d is None and can_reduce(self.nodes[i]))) for i in m)]


def fusion(g, can_fuse=default_can_fuse, rows=False):
    groups, _, prod = find_groups(g, can_fuse, rows)
    nodes = g.nodes
    # units: a group, or a single node; emit them in a topological order of the contracted graph
    unit_of = {}
    units = []
    for mem, dom in groups:
        for m in mem:
            unit_of[m] = len(units)
        units.append(("group", mem, dom))
    for i in range(len(nodes)):
        if i not in unit_of:
            unit_of[i] = len(units)
            units.append(("node", [i], None))
    deps = []
    for kind, mem, _ in units:
        d = set()
        for m in mem:
            for v in nodes[m].inputs:
                if isinstance(v, Value) and id(v) in prod:
                    u = unit_of[prod[id(v)]]
                    d.add(u)
        d.discard(unit_of[mem[0]])
        deps.append(sorted(d))
    order, state = [], [0] * len(units)
    for start in sorted(range(len(units)), key=lambda u: units[u][1][0]):
        if state[start]:
            continue
        stack = [(start, iter(deps[start]))]
        state[start] = 1
        while stack:
            u, it = stack[-1]
            for d in it:
                if state[d] == 0:
                    state[d] = 1
                    stack.append((d, iter(deps[d])))
                    break
                if state[d] == 1:
                    raise RuntimeError("fusion: cycle between fused groups (a bug in the convexity check)")
            else:
                state[u] = 2
                order.append(u)
                stack.pop()

    used_outside = set(id(v) for v in g.outputs if isinstance(v, Value))
    users = g.users()
    r = Rewriter(g)
    k = 0
    for u in order:
        kind, mem, dom = units[u]
        if kind == "node":
            r.copy(nodes[mem[0]])
            continue
        inside = set(id(o) for m in mem for o in nodes[m].outputs)
        memset = set(id(nodes[m]) for m in mem)
        ext = {}
        for m in mem:
            for v in nodes[m].inputs:
                if isinstance(v, Value) and id(v) not in inside:
                    ext.setdefault(id(v), v)
        ext = list(ext.values())
        outs = []
        for m in mem:
            o = nodes[m].outputs[0]
            if id(o) in used_outside or any(id(c) not in memset for c in users.get(id(o), ())):
                outs.append(o)
        body = FusedBody()
        op = _make_op(k, body, len(outs))
        k += 1
        attrs = {"body": body} if dom is None else {"body": body, "rows": dom}
        new_outs = r.g.add_node(op, [r.get(v) for v in ext], attrs, [AVal(o.shape, o.dtype) for o in outs])
        local = {id(v): r.get(v) for v in ext}
        for o, no in zip(outs, new_outs):
            local[id(o)] = no
        for m in mem:
            nd = nodes[m]
            ins = [local[id(v)] if isinstance(v, Value) else v for v in nd.inputs]
            o = nd.outputs[0]
            if id(o) not in local:
                local[id(o)] = r.g.new_value(o.shape, o.dtype)
            body.nodes.append(Node(nd.op, ins, dict(nd.attrs), [local[id(o)]]))
        body.inputs = [r.get(v) for v in ext]
        body.input_names = [""] * len(ext)
        body.outputs = list(new_outs)
        body.output_names = [""] * len(outs)
        for o, no in zip(outs, new_outs):
            r.alias(o, no)
    return r.finish()


def fused_nodes(g):
    return [n for n in g.nodes if n.op.kind == "fused"]
