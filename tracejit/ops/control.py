"""`scan` as one op: a loop over the leading dimension of its `xs` that carries state, its body an IR graph.

    scan(*init, *xs, *captures, body=G, n_carry=nc, n_x=nx, length=T, reverse=False, saved=0, grad=None)
        -> (*final_carry, *ys)

`G` maps (carry..., x_t..., captures...) to (next_carry..., y_t...): traced once (tracejit.scan traces the user's
combine_fn into it), it runs T times, compiled once, whatever T is. `captures` are the tensors the body reads
from outside (module parameters): operands like any other, so their gradients flow. ys stack the y_t along a new
leading dim, in the order of xs (also with reverse=True, which runs t = T-1 .. 0).

Where a gradient will be asked, the loop's body is the forward part of the step's derivative (`split_body`): its
last `saved` ys are what the backward step reads of the forward step (residuals, stacked per step, as PyTorch's
autograd saves them per op: gate pre-activations, say, from which the backward recomputes the cheap elementwise
values), and `grad` is the backward step. The derivative is a scan too: the reverse loop of `grad` over the
residuals; its carries are the carries' cotangents and the captures' gradients summed over steps; its ys are the
xs' gradients. With `checkpoint=True` (tracejit.scan's option) the residuals are the carries alone and the
backward step recomputes the forward step from its carry (less memory, more work). So gradients of scan are
traced as one loop again, and differentiate again (a second derivative differentiates the loop of the forward
part, residuals being ys like any other).

`body` is an IR graph, or a backend's compiled form of one (an object with `.graph` and a call taking and
returning lists of arrays): the numpy `impl` interprets a graph, a backend that compiles passes its callable.
"""
import numpy as np

from .._state import STATE
from ..ir.graph import Graph
from .registry import AVal, apply, aval_of, defop, OPS


def body_graph(body):
    return body if isinstance(body, Graph) else body.graph


def _runner(body):
    if isinstance(body, Graph):
        from ..backends.interpreter import run
        return lambda arrays: run(body, arrays)
    return body


def _meta(*vals, body, n_carry, n_x, length, reverse, saved=0, grad=None):
    g = body_graph(body)
    if len(vals) != len(g.inputs):
        raise RuntimeError(f"scan: the body takes {len(g.inputs)} operands, got {len(vals)}")
    for i, (v, b) in enumerate(zip(vals, g.inputs)):
        want = (length,) + b.shape if n_carry <= i < n_carry + n_x else b.shape
        if tuple(v.shape) != want or v.dtype is not b.dtype:
            what = "init" if i < n_carry else "xs" if i < n_carry + n_x else "captured tensor"
            raise RuntimeError(f"scan: operand {i} ({what}) is {v.dtype.name}{list(v.shape)}, the body expects "
                               f"{b.dtype.name}{list(want)}")
    outs = [AVal(o.shape, o.dtype) for o in g.outputs[:n_carry]]
    outs += [AVal((length,) + tuple(o.shape), o.dtype) for o in g.outputs[n_carry:]]
    return outs


def _impl(*arrays, body, n_carry, n_x, length, reverse, saved=0, grad=None):
    _meta(*map(aval_of, arrays), body=body, n_carry=n_carry, n_x=n_x, length=length, reverse=reverse)
    g = body_graph(body)
    run = _runner(body)
    carry = list(arrays[:n_carry])
    xs = arrays[n_carry:n_carry + n_x]
    caps = list(arrays[n_carry + n_x:])
    ys = [np.empty((length,) + o.shape, o.dtype.np) for o in g.outputs[n_carry:]]
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = run(carry + [x[t] for x in xs] + caps)
        carry = [np.asarray(c) for c in outs[:n_carry]]
        for y, v in zip(ys, outs[n_carry:]):
            y[t] = v
    # a carry the body passes through unchanged is an operand's array: the op's outputs are its own
    carry = [c.copy() if any(np.may_share_memory(c, a) for a in arrays) else c for c in carry]
    return tuple(carry + ys)


def _floating(vals):
    return [i for i, v in enumerate(vals) if v.dtype.is_floating_point]


def _derivative(g, n_carry, n_x, joint):
    """The step's derivative as a graph, traced by the autograd machinery on tracers. `joint=False`: inputs
    (cotangents of the floating carries, the captures' gradients so far, then per step the carry the forward step
    started from, x_t, the cotangents of the floating y_t, then the captures), outputs (the cotangents of the step's
    carries, the captures' gradients with this step's added, then the gradients of the floating x_t): the forward
    step is recomputed. `joint=True`: inputs (carries, x_t, captures, then those cotangents and gradients so far),
    outputs (the forward step's, then the derivative's): the graph `split_body` partitions."""
    from ..autograd.engine import run_backward
    from ..autograd.grad_mode import enable_grad
    from ..backends.interpreter import replay
    from ..creation import zeros
    from ..tracing.tracer import TraceContext
    from ..tracing.trace import run_passes
    ins_g = g.inputs
    fc = _floating(ins_g[:n_carry])
    fx = [n_carry + i for i in _floating(ins_g[n_carry:n_carry + n_x])]
    fcap = [n_carry + n_x + i for i in _floating(ins_g[n_carry + n_x:])]
    fy = [n_carry + i for i in _floating(g.outputs[n_carry:])]
    with TraceContext() as ctx:
        G = ctx.graph

        def inp(v, name):
            return ctx.tracer(G.add_input(v.shape, v.dtype, name))

        def cotangents():
            return ([inp(ins_g[i], f"carry{i}.grad") for i in fc],
                    [inp(ins_g[i], f"capture{i - n_carry - n_x}.grad") for i in fcap])
        if not joint:
            g_carry, g_acc = cotangents()
        ins = [inp(v, f"carry{i}") for i, v in enumerate(ins_g[:n_carry])]
        ins += [inp(v, f"x{i}") for i, v in enumerate(ins_g[n_carry:n_carry + n_x])]
        if joint:
            ins += [inp(v, f"capture{i}") for i, v in enumerate(ins_g[n_carry + n_x:])]
            g_carry, g_acc = cotangents()
        g_y = [inp(g.outputs[k], f"y{k - n_carry}.grad") for k in fy]
        if not joint:
            ins += [inp(v, f"capture{i}") for i, v in enumerate(ins_g[n_carry + n_x:])]
        wrt = fc + fx + fcap
        for i in wrt:
            ins[i]._requires_grad = True
        with enable_grad():
            outs = replay(g, ins)
        pairs = [(outs[k], ct) for k, ct in zip(fc + fy, g_carry + g_y) if outs[k]._requires_grad]
        grads = [None] * len(wrt)
        if pairs:
            grads = run_backward([o for o, _ in pairs], [ct for _, ct in pairs], retain_graph=True,
                                 create_graph=False, inputs=[ins[i] for i in wrt], accumulate=False)
        grads = [gr if gr is not None else zeros(tuple(ins[i].shape), dtype=ins[i].dtype)
                 for gr, i in zip(grads, wrt)]
        n1, n2 = len(fc), len(fc) + len(fx)
        new = grads[:n1] + [a + b for a, b in zip(g_acc, grads[n2:])] + grads[n1:n2]
        G.outputs = [ctx.value_of(t) for t in (list(outs) if joint else []) + new]
        G.output_names = (list(g.output_names) if joint else []) + [f"out{k}" for k in range(len(new))]
    return run_passes(G), len(fc) + len(fcap) + len(fy)


def backward_body(g, n_carry, n_x):
    """The body of the reverse loop that recomputes each forward step from its carry (cached on `g`): see
    `_derivative` (joint=False) for its inputs and outputs."""
    cache = g.__dict__.setdefault("_scan_backward", {})
    key = (n_carry, n_x)
    if key not in cache:
        cache[key] = _derivative(g, n_carry, n_x, False)[0]
    return cache[key]


def split_body(g, n_carry, n_x, checkpoint=False):
    """(forward, backward, n_saved) for a loop that will be differentiated (cached on `g`). `forward` is `g` with
    `n_saved` more outputs, the residuals its derivative reads, the carries first (so that a second derivative can
    recompute the steps); `backward` is the reverse loop's body: inputs (cotangents of the floating carries, the
    captures' gradients so far, the residuals, x_t, the cotangents of the floating y_t, the captures), outputs
    those of `backward_body`. The residuals are chosen by the forward/backward partition of the compiled programs
    (passes/partition.py) in its mode for a loop's step: what the backward reads of the forward, less the
    elementwise values and views it can recompute from the others (an LSTM step keeps h, c and the gates'
    pre-activations); with `checkpoint` they are the carries alone and the backward recomputes the step."""
    from ..passes import dce, partition
    cache = g.__dict__.setdefault("_scan_split", {})
    key = (n_carry, n_x, checkpoint)
    if key in cache:
        return cache[key]
    carries, xs, caps = g.inputs[:n_carry], g.inputs[n_carry:n_carry + n_x], g.inputs[n_carry + n_x:]
    if checkpoint:
        bwd = backward_body(g, n_carry, n_x)
        fwd, saved = _with_outputs(g, carries), n_carry
    else:
        joint, n_ct = _derivative(g, n_carry, n_x, True)
        ng = len(g.inputs)
        fwd, bwd, saved = partition(joint, len(g.outputs), n_ct, shared=joint.inputs[n_carry:ng], recompute=True)
        fwd, bwd = dce(fwd), dce(bwd)
        # the residuals: the carries first (as the checkpointing backward reads them; one it does not read is an
        # input it ignores), then the others; the backward's inputs in the reverse loop's order
        names = dict(zip(map(id, bwd.inputs), bwd.input_names))
        read_as = {id(v): u for v, u in zip(fwd.outputs[len(g.outputs):], bwd.inputs[:saved])}
        cts, shared = bwd.inputs[saved:saved + n_ct], bwd.inputs[saved + n_ct:]
        res = fwd.inputs[:n_carry]
        res += [v for v in fwd.outputs[len(g.outputs):] if not any(v is c for c in res[:n_carry])]
        res_in = [read_as[id(v)] if id(v) in read_as else bwd.add_input(v.shape, v.dtype) for v in res]
        fwd.outputs = fwd.outputs[:len(g.outputs)] + res
        fwd.output_names = list(g.output_names) + [f"saved{k}" for k in range(len(res))]
        names.update((id(v), f"saved{k}") for k, v in enumerate(res_in))
        n = len(_floating(carries)) + len(_floating(caps))
        bwd.inputs = cts[:n] + res_in + shared[:len(xs)] + cts[n:] + shared[len(xs):]
        bwd.input_names = [names[id(v)] for v in bwd.inputs]
        saved = len(res)
    cache[key] = fwd, bwd, saved
    return cache[key]


def _with_outputs(g, extra):
    """A copy of `g` that also returns `extra` (its values)."""
    from ..passes.rewrite import Rewriter
    r = Rewriter(g)
    for n in g.nodes:
        r.copy(n)
    out = r.finish()
    out.outputs += [r.get(v) for v in extra]
    out.output_names += [f"saved{k}" for k in range(len(extra))]
    return out


def _vjp(c, *gs):
    from ..creation import zeros
    a = c.attrs
    g = body_graph(a["body"])
    nc, nx, T = a["n_carry"], a["n_x"], a["length"]
    ins = c.inputs
    xs, caps = list(ins[nc:nc + nx]), list(ins[nc + nx:])
    ns, bwd = a["saved"], a["grad"]
    ny = len(g.outputs) - nc - ns
    outs = c.out if isinstance(c.out, tuple) else (c.out,)
    if bwd is None:     # recorded where no gradient was expected (a scan in a body being differentiated): again
        g, bwd, ns = split_body(g, nc, nx)
        outs = apply(OPS["scan"], *ins, **dict(a, body=g, saved=ns, grad=bwd))
        gs = gs + (None,) * ns
    residuals = list(outs[nc + ny:])
    if any(gr is not None for gr in gs[nc + ny:]):
        # a second derivative: the residuals were read by the first one, so they have cotangents. Differentiate
        # the loop of the forward part as any loop, its residuals being ys, recomputing each step from its carry
        bwd, ny, residuals = backward_body(g, nc, nx), ny + ns, residuals[:nc]
    fc = _floating(g.inputs[:nc])
    fx = _floating(g.inputs[nc:nc + nx])
    fcap = [nc + nx + i for i in _floating(g.inputs[nc + nx:])]
    fy = _floating(g.outputs[nc:nc + ny])

    def grad_or_zeros(k, like_shape, dtype):
        return gs[k] if gs[k] is not None else zeros(like_shape, dtype=dtype)
    g_final = [grad_or_zeros(i, g.outputs[i].shape, g.outputs[i].dtype) for i in fc]
    g_caps = [zeros(tuple(ins[i].shape), dtype=ins[i].dtype) for i in fcap]
    g_ys = [grad_or_zeros(nc + k, (T,) + tuple(g.outputs[nc + k].shape), g.outputs[nc + k].dtype) for k in fy]
    res = run_scan(bwd, g_final + g_caps, residuals + xs + g_ys, caps, T, not a["reverse"])
    grads = [None] * len(ins)
    for k, i in enumerate(fc):
        grads[i] = res[k]
    for k, i in enumerate(fcap):
        grads[i] = res[len(fc) + k]
    n = len(fc) + len(fcap)
    for k, i in enumerate(fx):
        grads[nc + i] = res[n + k]
    return tuple(grads)


def run_scan(body, init, xs, captures, length, reverse, checkpoint=False):
    """Apply the scan op to tensors: (final carries..., ys...). Where a gradient will be asked of it, the loop
    runs the forward part of the body's derivative and keeps its residuals (outputs it does not return); see
    `split_body`."""
    from .._tensor import Tensor
    args = list(init) + list(xs) + list(captures)
    attrs = dict(n_carry=len(init), n_x=len(xs), length=int(length), reverse=bool(reverse), saved=0, grad=None)
    if STATE.grad_enabled and any(isinstance(t, Tensor) and t.requires_grad for t in args):
        body, attrs["grad"], attrs["saved"] = split_body(body, len(init), len(xs), checkpoint)
    out = apply(OPS["scan"], *args, body=body, **attrs)
    return out[:len(out) - attrs["saved"]] if attrs["saved"] else out


defop("scan", _impl, _meta, _vjp, nout=0, saves="io", kind="other", grad_name="ScanBackward0")
