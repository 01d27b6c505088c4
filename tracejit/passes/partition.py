"""Forward/backward partition of a joint graph: which forward values the backward needs (saved)."""
from ..ir.graph import Graph, Value
from .dce import live_nodes


def partition(joint, n_fwd_out, n_ct):
    """joint: inputs = forward inputs + `n_ct` cotangents (last); outputs = `n_fwd_out` forward outputs, then
    gradients. Returns (fwd, bwd, n_saved): fwd returns its outputs then the saved values; bwd takes the
    saved values then the cotangents and returns the gradients."""
    cts = joint.inputs[len(joint.inputs) - n_ct:]
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
        if isinstance(v, Value) and v in fwd_defined and v not in seen:
            seen.add(v)
            saved.append(v)
    for n in bwd_nodes:
        for i in n.inputs:
            need(i)
    for o in joint.outputs[n_fwd_out:]:
        need(o)
    bwd_nodes, saved = rematerialize(joint, bwd_nodes, saved, set(joint.inputs[:len(joint.inputs) - n_ct]))

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
    _copy(joint, bwd, bwd_nodes, mb)
    bwd.outputs = [mb[o] if isinstance(o, Value) else o for o in joint.outputs[n_fwd_out:]]
    bwd.output_names = list(joint.output_names[n_fwd_out:])
    return fwd, bwd, len(saved)


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


def rematerialize(joint, bwd_nodes, saved, free):
    """Recompute cheap elementwise values in the backward instead of saving them, when everything they
    are computed from is saved anyway or is a forward input (held by the caller): fewer bytes kept alive
    between forward and backward, one more pass of elementwise work (which fusion absorbs)."""
    order = {id(n): k for k, n in enumerate(joint.nodes)}
    saved = list(saved)
    bwd = list(bwd_nodes)
    changed = True
    while changed:
        changed = False
        have = set(saved) | free | set(joint.consts)
        for v in list(saved):
            n = v.producer
            if n is None or n.op.kind != "elementwise" or n.op.random or n.op.nout != 1:
                continue
            ins = [i for i in n.inputs if isinstance(i, Value)]
            extra = [i for i in ins if i not in saved and i not in joint.consts]
            if all(i in have for i in ins) and _nbytes(v) > sum(_nbytes(i) for i in extra if i not in free):
                saved.remove(v)
                saved.extend(i for i in extra if i not in saved)
                bwd.append(n)
                changed = True
    bwd.sort(key=lambda n: order[id(n)])
    return bwd, saved
