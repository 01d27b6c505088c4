"""Symbolic autodiff: the backward graph is built by running the autograd engine on tracers, so every
derivative comes from the op's registry VJP rule (nothing is written twice) and lands as IR nodes."""
from .._state import STATE


def differentiate(outputs, inputs):
    """Inside an active trace: add one cotangent input per output and return (cotangents, grads).
    Missing gradients become zero constants."""
    from ..autograd.engine import run_backward
    from ..creation import zeros
    ctx = STATE.tracer
    cts = [ctx.tracer(ctx.graph.add_input(o.shape, o.dtype, f"grad_out{k}")) for k, o in enumerate(outputs)]
    grads = run_backward(outputs, cts, retain_graph=True, create_graph=False, inputs=inputs, accumulate=False)
    grads = [g if g is not None else zeros(tuple(x.shape), dtype=x.dtype) for g, x in zip(grads, inputs)]
    return cts, grads


def autodiff(g, wrt=None):
    """Graph -> joint graph: g's outputs, then d(outputs . cotangents)/d(inputs[wrt]); the cotangents are
    new inputs appended after g's inputs (one per floating-point output)."""
    from ..backends.interpreter import replay
    from ..tracing.tracer import TraceContext
    from ..autograd.grad_mode import enable_grad
    wrt = [i for i, v in enumerate(g.inputs) if v.dtype.is_floating_point] if wrt is None else list(wrt)
    with TraceContext() as ctx:
        ins = [ctx.tracer(ctx.graph.add_input(v.shape, v.dtype, nm)) for v, nm in zip(g.inputs, g.input_names)]
        for i in wrt:
            ins[i]._requires_grad = True
        with enable_grad():
            outs = replay(g, ins)
        diff = [o for o in outs if o._requires_grad]
        cts, grads = differentiate(diff, [ins[i] for i in wrt])
        ctx.graph.outputs = [ctx.value_of(o) for o in outs] + [ctx.value_of(x) for x in grads]
        ctx.graph.output_names = [f"out{k}" for k in range(len(outs))] + [f"grad{i}" for i in wrt]
    return ctx.graph
