"""Elementwise fusion: group elementwise nodes into `fused_k` nodes, each a small sub-graph (its `body`).

A group holds elementwise nodes with one output shape (their inputs may broadcast into it; Python scalar
constants and casts are inside). Groups grow vertically (a node joins the groups of its producers) and
horizontally (a node joins a group that reads the same input, so several outputs come from one loop).
Every merge keeps the group convex and the graph of groups acyclic: no path leaves the group and comes
back into it, even through other groups. A value of the group used outside it becomes an output of the
fused node (multi-output fusion).

The fused node's op is made on the fly (not registered): kind "fused", `impl` runs the body with the
reference interpreter, so a fused graph still runs on the interpreter backend.
"""
from ..ir.graph import Graph, Node, Value
from ..ops.registry import AVal, Op
from .rewrite import Rewriter

# elementwise ops no code generator handles (yet): they stay as single nodes
_NOT_FUSABLE = {"bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"}


# shape ops a kernel absorbs: the loop reads the smaller input with broadcast strides (no copy)
BROADCASTS = {"expand"}


def default_can_fuse(node):
    op = node.op
    if op.name in BROADCASTS:
        return isinstance(node.inputs[0], Value) and node.inputs[0].dtype.np.kind in "biuf"
    if op.kind != "elementwise" or op.expr is None or op.random or op.nout != 1 or op.name in _NOT_FUSABLE:
        return False
    if op.name == "round" and node.attrs.get("decimals", 0):
        return False
    if any(v.dtype.np.kind == "c" for v in node.outputs):
        return False
    return all(not isinstance(i, Value) or i.dtype.np.kind in "biuf" for i in node.inputs)


class FusedBody(Graph):
    """The sub-graph of a fused node: inputs = the fused node's inputs, outputs = its outputs."""

    def __str__(self):
        return f"<{len(self.nodes)} ops>"

    __repr__ = __str__


def _make_op(k, body, nout):
    from ..backends.interpreter import run

    def impl(*arrays, body=body):
        res = run(body, list(arrays))
        return res[0] if nout == 1 else tuple(res)

    def meta(*inputs, body=body):
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


def find_groups(g, can_fuse=default_can_fuse):
    """Lists of node indices, one per group (each list in graph order)."""
    nodes = g.nodes
    n = len(nodes)
    prod = {}
    for i, nd in enumerate(nodes):
        for o in nd.outputs:
            prod[id(o)] = i
    succ = [set() for _ in range(n)]
    consumers = {}
    for i, nd in enumerate(nodes):
        for v in nd.inputs:
            if isinstance(v, Value):
                consumers.setdefault(id(v), []).append(i)
                p = prod.get(id(v))
                if p is not None:
                    succ[p].add(i)
    fus = [can_fuse(nd) for nd in nodes]
    shape = [nd.outputs[0].shape if nd.outputs else None for nd in nodes]
    group_of = [-1] * n          # group id per node
    members = {}                 # group id -> set of node indices

    def convex(S, upto):
        # a path from S through a node outside S (or through another group, contracted) back into S?
        seen = set()
        stack = [j for m in S for j in succ[m] if j not in S]
        while stack:
            j = stack.pop()
            if j in seen or j >= upto:
                continue
            seen.add(j)
            if j in S:
                return False
            nxt = [j] if group_of[j] < 0 else members[group_of[j]]
            for m in nxt:
                for s in succ[m]:
                    if s in S:
                        return False
                    if s not in seen:
                        stack.append(s)
        return True

    for i, nd in enumerate(nodes):
        if not fus[i]:
            continue
        cands = []
        for v in nd.inputs:
            if isinstance(v, Value):
                p = prod.get(id(v))
                if p is not None and fus[p] and shape[p] == shape[i]:
                    cands.append(group_of[p])
        for v in nd.inputs:
            if isinstance(v, Value):
                for c in consumers.get(id(v), ()):
                    if c < i and fus[c] and shape[c] == shape[i]:
                        cands.append(group_of[c])
        cur = {i}
        merged = []
        for gid in dict.fromkeys(cands):
            if gid in merged:
                continue
            trial = cur | members[gid]
            if convex(trial, i + 1):
                cur = trial
                merged.append(gid)
        gid = i
        for old in merged:
            del members[old]
        members[gid] = cur
        for m in cur:
            group_of[m] = gid
    # reduction epilogues: a float `sum` whose input is made in a group and read nowhere else joins it
    outputs = set(id(v) for v in g.outputs if isinstance(v, Value))
    for gid in list(members):
        for m in sorted(members[gid]):
            o = nodes[m].outputs[0]
            cons = consumers.get(id(o), ())
            if len(cons) != 1 or id(o) in outputs or nodes[m].op.name in BROADCASTS:
                continue
            j = cons[0]
            r = nodes[j]
            if not (can_reduce(r) and r.inputs[0] is o and group_of[j] < 0):
                continue
            trial = members[gid] | {j}
            if convex(trial, n):
                members[gid] = trial
                group_of[j] = gid
    groups = [sorted(s) for _, s in sorted(members.items(), key=lambda kv: min(kv[1]))]
    # a group of broadcasts alone would only materialize them: leave those as views
    groups = [m for m in groups if any(nodes[i].op.name not in BROADCASTS for i in m)]
    return groups, group_of, prod


def fusion(g, can_fuse=default_can_fuse):
    groups, group_of, prod = find_groups(g, can_fuse)
    nodes = g.nodes
    # units: a group, or a single node; emit them in a topological order of the contracted graph
    unit_of = {}
    units = []
    for gi, mem in enumerate(groups):
        for m in mem:
            unit_of[m] = len(units)
        units.append(("group", mem))
    for i in range(len(nodes)):
        if i not in unit_of:
            unit_of[i] = len(units)
            units.append(("node", [i]))
    deps = []
    for kind, mem in units:
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
    r = Rewriter(g)
    k = 0
    for u in order:
        kind, mem = units[u]
        if kind == "node":
            r.copy(nodes[mem[0]])
            continue
        inside = set(id(o) for m in mem for o in nodes[m].outputs)
        memset = set(mem)
        ext = []
        for m in mem:
            for v in nodes[m].inputs:
                if isinstance(v, Value) and id(v) not in inside and all(v is not e for e in ext):
                    ext.append(v)
        outs = []
        for m in mem:
            o = nodes[m].outputs[0]
            if id(o) in used_outside or any(c not in memset for c in _consumers(g, o, r)):
                outs.append(o)
        body = FusedBody()
        op = _make_op(k, body, len(outs))
        k += 1
        new_outs = r.g.add_node(op, [r.get(v) for v in ext], {"body": body}, [AVal(o.shape, o.dtype) for o in outs])
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


def _consumers(g, v, r):
    # node indices consuming v (cached per graph on the rewriter)
    cache = getattr(r, "_cons", None)
    if cache is None:
        cache = {}
        for i, nd in enumerate(g.nodes):
            for x in nd.inputs:
                if isinstance(x, Value):
                    cache.setdefault(id(x), []).append(i)
        r._cons = cache
    return cache.get(id(v), ())


def fused_nodes(g):
    return [n for n in g.nodes if n.op.kind == "fused"]
