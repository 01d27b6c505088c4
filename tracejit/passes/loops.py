"""Work moved out of loops (the `scan` op's bodies, ops/control.py), for a backend that runs the loop step by step.

- **Loop invariants**: body nodes computed from the captures and constants alone (a weight's transpose) run once
  before the loop; what the body reads of them becomes new captures.
- **Accumulations**: a carry that only accumulates `acc + P_t^T @ Q_t`, where `P_t` and `Q_t` are per-step slices
  the loop stacks anyway (its xs or its ys), is one product after the loop: `acc + P^T @ Q` with `P`, `Q` the
  stacks seen as [steps * rows, columns]; one that accumulates a sum of such a slice, `acc + Y_t.sum(dims)`, is one
  sum of the stack. That is how a recurrent layer's weight and bias gradients accumulate in its backward loop: one
  large product or sum instead of one small one and one add per step.

A carry that is also returned otherwise (as a residual for the loop's derivative, say) stays a carry.
"""
from ..ir.graph import Graph, Value
from ..ops.registry import AVal, OPS
from .dce import dce
from .rewrite import Rewriter


def hoist_loops(g):
    if not any(n.op.name == "scan" and isinstance(n.attrs["body"], Graph) for n in g.nodes):
        return g
    r = Rewriter(g)
    for n in g.nodes:
        if n.op.name != "scan" or not isinstance(n.attrs["body"], Graph):
            r.copy(n)
            continue
        ins, attrs = [r.get(i) for i in n.inputs], dict(n.attrs)
        ins, attrs = _invariants(r.g, ins, attrs)
        outs, finish = _accumulations(r.g, ins, attrs, n.outputs)
        for o, v in zip(n.outputs, finish(outs)):
            r.alias(o, v)
    return r.finish()


def _rebuild(body, inputs, outputs, names):
    """A new body graph: `inputs` (inputs of `body`, or values it computes, which become inputs: their nodes are
    dropped), the nodes of `body` that `outputs` need, `outputs`."""
    new = Graph()
    m = {}
    for k, v in enumerate(inputs):
        name = body.input_names[body.inputs.index(v)] if v in body.inputs else f"hoisted{k}"
        m[v] = new.add_input(v.shape, v.dtype, name)
    for v, a in body.consts.items():
        m[v] = new.add_const(a)
    for nd in body.nodes:
        if any(o in m for o in nd.outputs):
            continue
        if all(not isinstance(i, Value) or i in m for i in nd.inputs):
            outs = new.add_node(nd.op, [m[i] if isinstance(i, Value) else i for i in nd.inputs], nd.attrs,
                                nd.outputs)
            m.update(zip(nd.outputs, outs))
    new.outputs = [m[o] for o in outputs]
    new.output_names = list(names)
    return dce(new)


def _invariants(outer, ins, attrs):
    """Body nodes that read only captures and constants (and each other) run in `outer` before the loop."""
    body = attrs["body"]
    nc, nx = attrs["n_carry"], attrs["n_x"]
    caps = body.inputs[nc + nx:]
    outer_of = dict(zip(caps, ins[nc + nx:]))           # body value -> the outer value it equals
    inv = set(caps) | set(body.consts)
    returned = {id(o) for o in body.outputs}
    hoisted = []
    for nd in body.nodes:
        if nd.op.random or nd.op.kind == "collective" or "body" in nd.attrs or \
                any(id(o) in returned for o in nd.outputs) or \
                not all(not isinstance(i, Value) or i in inv for i in nd.inputs):
            continue
        hoisted.append(nd)
        inv.update(nd.outputs)
    if not hoisted:
        return ins, attrs
    moved = {id(o) for nd in hoisted for o in nd.outputs}
    for nd in hoisted:
        args = []
        for i in nd.inputs:
            if isinstance(i, Value) and i not in outer_of:              # a constant of the body
                outer_of[i] = outer.add_const(body.consts[i])
            args.append(outer_of[i] if isinstance(i, Value) else i)
        outs = outer.add_node(nd.op, args, nd.attrs, nd.outputs)
        outer_of.update(zip(nd.outputs, outs))
    # the hoisted values the rest of the body reads: new captures (made contiguous once where a reader is not a
    # matrix product, which reads any strides: a kernel would copy a view on every step)
    read, strided = [], set()
    for nd in body.nodes:
        if id(nd.outputs[0]) in moved:
            continue
        for i in nd.inputs:
            if isinstance(i, Value) and id(i) in moved:
                if i not in read:
                    read.append(i)
                if nd.op.kind != "matmul":
                    strided.add(id(i))
    new_ins = list(ins)
    for v in read:
        o = outer_of[v]
        if id(v) in strided and o.producer is not None and o.producer.op.may_alias:
            o = outer.add_node(OPS["contiguous"], [o], {}, AVal(o.shape, o.dtype))[0]
        new_ins.append(o)
    new_body = _rebuild(body, list(body.inputs) + read, body.outputs, body.output_names)
    return new_ins, dict(attrs, body=new_body)


def _accumulations(outer, ins, attrs, old_outs):
    """Carries that accumulate `acc + P_t^T @ Q_t` or `acc + Y_t.sum(dims)` over stacked per-step values leave the
    loop: returns the scan's new outputs emitted in `outer`, and `finish(outs)` that maps them to the old node's
    outputs."""
    body = attrs["body"]
    nc, nx = attrs["n_carry"], attrs["n_x"]
    n_out = len(old_outs)
    users = body.users()
    returned = {id(o) for o in body.outputs}
    ys_at = {}
    for j, o in enumerate(body.outputs[nc:]):
        ys_at.setdefault(id(o), j)

    def stack_of(v):
        """('x', i) or ('y', j): where the loop stacks v's per-step values, or None."""
        if v in body.inputs[nc:nc + nx]:
            return ("x", body.inputs.index(v))
        return ("y", ys_at[id(v)]) if id(v) in ys_at else None

    def only_read(v):                   # v is computed in the step and read once, by the accumulation
        return isinstance(v, Value) and v.producer is not None and len(users.get(id(v), ())) == 1 and \
            id(v) not in returned

    moved = {}              # carry index -> ("product", P's stack, Q's stack) or ("total", Y's stack, dims)
    for k in range(nc):
        acc, out = body.inputs[k], body.outputs[k]
        p = out.producer
        if p is None or p.op.name != "add" or len(users.get(id(acc), ())) != 1 or id(acc) in returned or \
                sum(o is out for o in body.outputs) != 1:
            continue
        others = [i for i in p.inputs if i is not acc]
        if len(others) != 1 or not only_read(others[0]) or tuple(others[0].shape) != tuple(acc.shape):
            continue
        term = others[0].producer
        if term.op.reshapes and only_read(term.inputs[0]):
            term = term.inputs[0].producer             # a sum's keepdim dims dropped: the same numbers
        if term.op.name == "sum" and not term.attrs.get("dtype"):
            sy = stack_of(term.inputs[0])
            dims = term.attrs["dims"]
            dims = tuple(range(term.inputs[0].ndim)) if dims is None else tuple(d % term.inputs[0].ndim for d in dims)
            if sy is not None and term.inputs[0].dtype is acc.dtype:
                moved[k] = ("total", sy, dims)
            continue
        if term.op.name != "matmul":
            continue
        a, b = term.inputs
        if a.producer is None or a.producer.op.name != "permute" or tuple(a.producer.attrs["dims"]) != (1, 0):
            continue
        sp, sq = stack_of(a.producer.inputs[0]), stack_of(b)
        if sp is None or sq is None or b.ndim != 2:
            continue
        moved[k] = ("product", sp, sq)
    if not moved:
        return _emit(outer, ins, attrs, old_outs), lambda outs: outs
    keep = [k for k in range(nc) if k not in moved]
    new_inputs = [body.inputs[k] for k in keep] + body.inputs[nc:]
    new_outputs = [body.outputs[k] for k in keep] + body.outputs[nc:]
    names = [body.output_names[k] for k in keep] + body.output_names[nc:]
    new_body = _rebuild(body, new_inputs, new_outputs, names)
    new_attrs = dict(attrs, body=new_body, n_carry=len(keep))
    new_ins = [ins[k] for k in keep] + ins[nc:]
    kept_outs = [old_outs[k] for k in keep] + old_outs[nc:]
    outs = _emit(outer, new_ins, new_attrs, kept_outs)

    def finish(outs):
        res = [None] * n_out
        for j, k in enumerate(keep):
            res[k] = outs[j]
        rest = outs[len(keep):]
        res[nc:] = rest

        def stacked(s):
            kind, i = s
            v = ins[i] if kind == "x" else rest[i]
            rows = v.shape[0] * v.shape[1]
            return outer.add_node(OPS["view"], [v], {"shape": (rows, v.shape[2])},
                                  AVal((rows, v.shape[2]), v.dtype))[0]
        for k, (kind, s1, s2) in moved.items():
            acc = ins[k]
            if kind == "product":
                p, q = stacked(s1), stacked(s2)
                pt = outer.add_node(OPS["permute"], [p], {"dims": (1, 0)}, AVal((p.shape[1], p.shape[0]), p.dtype))[0]
                total = outer.add_node(OPS["matmul"], [pt, q], {}, AVal((pt.shape[0], q.shape[1]), q.dtype))[0]
            else:           # the per-step sums summed over the steps too: one sum of the stack
                y = ins[s1[1]] if s1[0] == "x" else rest[s1[1]]
                dims = (0,) + tuple(d + 1 for d in s2)
                kept = tuple(n for d, n in enumerate(y.shape) if d not in dims)
                total = outer.add_node(OPS["sum"], [y], {"dims": dims, "keepdim": False}, AVal(kept, y.dtype))[0]
                if kept != tuple(acc.shape):
                    total = outer.add_node(OPS["view"], [total], {"shape": tuple(acc.shape)},
                                           AVal(acc.shape, acc.dtype))[0]
            res[k] = outer.add_node(OPS["add"], [acc, total], {}, AVal(acc.shape, acc.dtype))[0]
        return res
    return outs, finish


def _emit(outer, ins, attrs, like):
    return outer.add_node(OPS["scan"], ins, attrs, [AVal(o.shape, o.dtype) for o in like])
