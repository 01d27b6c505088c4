"""Lowering by decomposition: a node whose op `fuses_in_parts` becomes the registry ops of its `decompose` rule.

A backend lowering after autodiff (the derivative came from the op's own VJP, e.g. batch_norm's two-sum
backward), so a backend that fuses reductions with the elementwise work around them (row kernels) sees the
parts; the interpreter backend keeps the op and runs its numpy `impl` as the reference. The result is CSE'd: a
part the VJP wrote too (gelu's erf) is computed once.
"""
from ..ir.graph import Value
from .cse import cse
from .rewrite import Rewriter


def decompose(g):
    if not any(n.op.fuses_in_parts for n in g.nodes):
        return g
    from ..autograd.grad_mode import no_grad
    from ..tracing.tracer import TraceContext
    rw = Rewriter(g)
    done = {}           # the parts of an op on operands of these shapes and dtypes, with these attributes
    for n in g.nodes:
        if not n.op.fuses_in_parts:
            rw.copy(n)
            continue
        key = (n.op.name, tuple((v.shape, v.dtype) if isinstance(v, Value) else ("arg", repr(v)) for v in n.inputs),
               repr(sorted(n.attrs.items())))
        if key not in done:         # (an unrolled loop's nn.Linear: hundreds of addmm nodes, one decomposition)
            with TraceContext() as ctx, no_grad():
                args = [ctx.tracer(ctx.graph.add_input(v.shape, v.dtype)) if isinstance(v, Value) else v
                        for v in n.inputs]
                res = n.op.decompose(*args, **n.attrs)
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                done[key] = ctx.graph, [ctx.value_of(r) for r in res]
        sub, outs = done[key]
        m = {sv: rw.get(v) for sv, v in zip(sub.inputs, [v for v in n.inputs if isinstance(v, Value)])}
        for sv, arr in sub.consts.items():
            m[sv] = rw.g.add_const(arr)
        for sn in sub.nodes:
            new = rw.g.add_node(sn.op, [m[i] if isinstance(i, Value) else i for i in sn.inputs], sn.attrs,
                                list(sn.outputs))
            m.update(zip(sn.outputs, new))
        for o, so in zip(n.outputs, outs):
            rw.alias(o, m[so])
    return cse(rw.finish())
