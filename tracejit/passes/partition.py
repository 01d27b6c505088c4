"""Forward/backward partition of a joint graph: which forward values the backward needs (saved)."""
from ..ir.graph import Graph, Value
from .dce import live_nodes


def partition(joint, n_fwd_out, n_ct, shared=(), recompute=False):
    """joint: inputs = forward inputs + `n_ct` cotangents (last); outputs = `n_fwd_out` forward outputs, then
    gradients. Returns (fwd, bwd, n_saved): fwd returns its outputs then the saved values; bwd takes the
    saved values, the cotangents, then the `shared` forward inputs (which the backward is given as they are,
    never saved: a loop body's captures and per-step inputs), and returns the gradients. `recompute` (a loop's
    step): recompute every elementwise value the backward can (see rematerialize), whatever the bytes, and count
    only the shared inputs as free."""
    cts = joint.inputs[len(joint.inputs) - n_ct:]
    shared = list(shared)
    is_shared = set(shared)
    keep_f, _ = live_nodes(joint, joint.outputs[:n_fwd_out])
    keep_b, _ = live_nodes(joint, joint.outputs[n_fwd_out:])
    # random draws needed by the backward are made once, in the forward
    for n in joint.nodes:
        if id(n) in keep_b and n.op.random:
            keep_f.add(id(n))
    fwd_nodes = [n for n in joint.nodes if id(n) in keep_f]
    bwd_nodes = [n for n in joint.nodes if id(n) in keep_b and id(n) not in keep_f]
    fwd_defined = set(joint.inputs[:len(joint.inputs) - n_ct]) | {o for n in fwd_nodes for o in n.outputs}
    saved, seen = [], set()

    def need(v):
        if isinstance(v, Value) and v in fwd_defined and v not in seen and v not in is_shared:
            seen.add(v)
            saved.append(v)
    for n in bwd_nodes:
        for i in n.inputs:
            need(i)
    for o in joint.outputs[n_fwd_out:]:
        need(o)
    # what the backward has without a save: the caller holds the forward's inputs and outputs (in a loop, only the
    # shared inputs: a step's carries and outputs would be saved per step too)
    free = is_shared if recompute else \
        set(joint.inputs[:len(joint.inputs) - n_ct]) | {o for o in joint.outputs[:n_fwd_out] if isinstance(o, Value)}
    bwd_nodes, saved = rematerialize(joint, bwd_nodes, saved, free, recompute)
    if shared:
        bwd_nodes, saved = _recompute_shared(joint, bwd_nodes, saved, shared)

    fwd = Graph()
    m = {}
    for v, nm in zip(joint.inputs[:len(joint.inputs) - n_ct], joint.input_names):
        m[v] = fwd.add_input(v.shape, v.dtype, nm)
    _copy(joint, fwd, fwd_nodes, m)
    fwd.outputs = [m[o] if isinstance(o, Value) else o for o in joint.outputs[:n_fwd_out]] + [m[v] for v in saved]
    fwd.output_names = list(joint.output_names[:n_fwd_out]) + [f"saved{k}" for k in range(len(saved))]

    bwd = Graph()
    mb = {}
    for k, v in enumerate(saved):
        mb[v] = bwd.add_input(v.shape, v.dtype, f"saved{k}")
    for v, nm in zip(cts, joint.input_names[len(joint.inputs) - n_ct:]):
        mb[v] = bwd.add_input(v.shape, v.dtype, nm)
    for v in shared:
        mb[v] = bwd.add_input(v.shape, v.dtype, joint.input_names[joint.inputs.index(v)])
    _copy(joint, bwd, bwd_nodes, mb)
    bwd.outputs = [mb[o] if isinstance(o, Value) else o for o in joint.outputs[n_fwd_out:]]
    bwd.output_names = list(joint.output_names[n_fwd_out:])
    return fwd, bwd, len(saved)


def _recompute_shared(joint, bwd_nodes, saved, shared):
    """Values computed from the shared inputs alone (a loop's weight transposed) are computed by the backward
    from its own copy of them, not saved (per step, in a loop); shared inputs themselves are given, not saved."""
    inv = set(shared) | set(joint.consts)
    for n in joint.nodes:
        if not n.op.random and all(not isinstance(i, Value) or i in inv for i in n.inputs):
            inv.update(n.outputs)
    order = {id(n): k for k, n in enumerate(joint.nodes)}
    bwd_nodes = list(bwd_nodes)
    have = {id(n) for n in bwd_nodes}
    stack = [v for v in saved if v in inv and v.producer is not None]
    while stack:
        n = stack.pop().producer
        if id(n) not in have:
            have.add(id(n))
            bwd_nodes.append(n)
            stack += [i for i in n.inputs if isinstance(i, Value) and i.producer is not None]
    bwd_nodes.sort(key=lambda n: order[id(n)])
    return bwd_nodes, [v for v in saved if v not in inv]


def _copy(joint, g, nodes, m):
    for n in nodes:
        ins = []
        for i in n.inputs:
            if isinstance(i, Value) and i not in m and i in joint.consts:
                m[i] = g.add_const(joint.consts[i])
            ins.append(m[i] if isinstance(i, Value) else i)
        outs = g.add_node(n.op, ins, n.attrs, n.outputs)
        m.update(zip(n.outputs, outs))
    for v, a in joint.consts.items():   # constants that are outputs themselves
        if v not in m and any(o is v for o in joint.outputs):
            m[v] = g.add_const(a)


def _nbytes(v):
    n = v.dtype.itemsize
    for s in v.shape:
        n *= s
    return n


MAX_RECOMPUTE = 64     # forward nodes recomputed in the backward for one saved value, at most


def _recomputable(n, views=False):
    return n is not None and (n.op.kind == "elementwise" or views and n.op.view) and not n.op.random and n.op.nout == 1


def _no_smaller(v, free, consts, views):
    """v's producer reads values that only a save could give the backward, of at least v's bytes: recomputing v
    would save them instead of v (x + h @ W: the sum rather than the product)."""
    ins = [u for u in v.producer.inputs if isinstance(u, Value) and u not in free and u not in consts]
    return bool(ins) and not any(_recomputable(u.producer, views) for u in ins) and \
        sum(_nbytes(u) for u in ins) >= _nbytes(v)


def rematerialize(joint, bwd_nodes, saved, free, always=False):
    """Recompute cheap elementwise values in the backward instead of saving them, when that keeps fewer bytes
    alive between forward and backward (and makes the forward write fewer, the backward read fewer).

    For a saved value v, its cone is the elementwise nodes it is computed from, walked back until values the
    backward has anyway: saved ones, `free` ones (forward inputs and outputs: held by the caller, written
    anyway), constants, values already recomputed. Where the walk meets a value made by any other op
    (matmul, a reduction, a random draw), that value must be saved instead: v is recomputed when those new
    values are fewer bytes than v. One pass of extra elementwise work, which fusion absorbs into the
    backward's kernels (a 30-op chain saves its input alone, not its 8 intermediate results). `always`: recompute
    whatever the bytes, views too (a loop's step: each saved value is one more array to store per step, and the
    elementwise values of a step, an LSTM cell's gates, share the input they are recomputed from)."""
    order = {id(n): k for k, n in enumerate(joint.nodes)}
    saved = list(saved)
    is_saved = set(saved)

    def worth(u):           # u could be recomputed instead of saved
        return u not in free and _recomputable(u.producer, always) and \
            not (always and _no_smaller(u, free, joint.consts, always))
    bwd = list(bwd_nodes)
    recomputed = set()      # values the backward computes itself
    for n in bwd:
        recomputed.update(n.outputs)
    changed = True
    while changed:
        changed = False
        # in the forward's order: a value's cone then stops at the values before it, recomputed already (in
        # reverse order each cone of a long chain would walk back to MAX_RECOMPUTE and fail, one pass per few)
        cands = [u for u in saved if u in is_saved and worth(u)]
        for v in sorted(cands, key=lambda u: order[id(u.producer)]):
            cone, extra, stack, seen = [], [], [v], {v}
            while stack and len(cone) <= MAX_RECOMPUTE:
                u = stack.pop()
                cone.append(u.producer)
                for i in u.producer.inputs:     # (the backward has the saved values other than v, and recomputed)
                    if not isinstance(i, Value) or i in seen or i in is_saved or i in recomputed or i in joint.consts:
                        continue
                    seen.add(i)
                    (stack if worth(i) else extra).append(i)
            if stack or len(cone) > MAX_RECOMPUTE or \
                    not always and _nbytes(v) <= sum(_nbytes(i) for i in extra if i not in free):
                continue
            is_saved.discard(v)
            saved.extend(extra)
            is_saved.update(extra)
            bwd.extend(cone)
            for n in cone:
                recomputed.update(n.outputs)
            changed = True
    saved = [v for v in saved if v in is_saved]
    bwd.sort(key=lambda n: order[id(n)])
    return bwd, saved
