"""`scan` as one op: a loop over the leading dimension of its `xs` that carries state, its body an IR graph.

    scan(*init, *xs, *captures, body=G, n_carry=nc, n_x=nx, length=T, reverse=False, keep=False)
        -> (*final_carry, *ys, *history)

`G` maps (carry..., x_t..., captures...) to (next_carry..., y_t...): traced once (tracejit.scan traces the user's
combine_fn into it), it runs T times, compiled once, whatever T is. `captures` are the tensors the body reads
from outside (module parameters): operands like any other, so their gradients flow. ys stack the y_t along a new
leading dim, in the order of xs (also with reverse=True, which runs t = T-1 .. 0). With `keep` the op also returns
the history of carries (the carry each step started from, stacked): what its derivative reads.

The derivative is a scan too: the reverse loop over the saved carries of G's own derivative (derived once per body
by the autodiff machinery, cached on the body graph). Its carries are the carries' cotangents and the captures'
gradients summed over steps; its ys are the xs' gradients. So gradients of scan are traced as one loop again.

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


def _meta(*vals, body, n_carry, n_x, length, reverse, keep):
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
    if keep:
        outs += [AVal((length,) + b.shape, b.dtype) for b in g.inputs[:n_carry]]
    return outs


def _impl(*arrays, body, n_carry, n_x, length, reverse, keep):
    _meta(*map(aval_of, arrays), body=body, n_carry=n_carry, n_x=n_x, length=length, reverse=reverse, keep=keep)
    g = body_graph(body)
    run = _runner(body)
    carry = list(arrays[:n_carry])
    xs = arrays[n_carry:n_carry + n_x]
    caps = list(arrays[n_carry + n_x:])
    ys = [np.empty((length,) + o.shape, o.dtype.np) for o in g.outputs[n_carry:]]
    hist = [np.empty((length,) + b.shape, b.dtype.np) for b in g.inputs[:n_carry]] if keep else []
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        for h, c in zip(hist, carry):
            h[t] = c
        outs = run(carry + [x[t] for x in xs] + caps)
        carry = [np.asarray(c) for c in outs[:n_carry]]
        for y, v in zip(ys, outs[n_carry:]):
            y[t] = v
    # a carry the body passes through unchanged is an operand's array: the op's outputs are its own
    carry = [c.copy() if any(np.may_share_memory(c, a) for a in arrays) else c for c in carry]
    return tuple(carry + ys + hist)


def _floating(vals):
    return [i for i, v in enumerate(vals) if v.dtype.is_floating_point]


def backward_body(g, n_carry, n_x, history):
    """The body of scan's derivative, from the body `g` (cached on it): inputs (cotangents of the floating
    carries, the captures' gradients so far, then per step the carry the forward step started from, x_t, the
    cotangents of the floating y_t, with `history` those of the floating carries' history, then the captures),
    outputs (the cotangents of the step's carries, the captures' gradients with this step's added, then the
    gradients of the floating x_t). (The history has a cotangent in a second derivative: the first one read it.)"""
    key = (n_carry, n_x, history)
    cache = g.__dict__.setdefault("_scan_backward", {})
    if key in cache:
        return cache[key]
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
        g_carry = [inp(ins_g[i], f"carry{i}.grad") for i in fc]
        g_acc = [inp(ins_g[i], f"capture{i - n_carry - n_x}.grad") for i in fcap]
        ins = [inp(v, f"carry{i}") for i, v in enumerate(ins_g[:n_carry])]
        ins += [inp(v, f"x{i}") for i, v in enumerate(ins_g[n_carry:n_carry + n_x])]
        g_y = [inp(g.outputs[k], f"y{k - n_carry}.grad") for k in fy]
        g_hist = [inp(ins_g[i], f"carry{i}.history.grad") for i in fc] if history else []
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
        new = [a + b for a, b in zip(grads[:n1], g_hist)] if history else grads[:n1]
        new += [a + b for a, b in zip(g_acc, grads[n2:])] + grads[n1:n2]
        G.outputs = [ctx.value_of(t) for t in new]
        G.output_names = [f"out{k}" for k in range(len(new))]
    cache[key] = bwd = run_passes(G)
    return bwd


def _vjp(c, *gs):
    from ..creation import zeros
    a = c.attrs
    g = body_graph(a["body"])
    nc, nx = a["n_carry"], a["n_x"]
    ins = c.inputs
    ny = len(g.outputs) - nc
    if a["keep"]:
        outs = c.out
        hist = list((outs if isinstance(outs, tuple) else (outs,))[nc + ny:])
    else:       # recorded where no gradient was expected (a scan in a body being differentiated): run it again
        hist = list(apply(OPS["scan"], *ins, **dict(a, keep=True))[nc + ny:])
    fc = _floating(g.inputs[:nc])
    fx = _floating(g.inputs[nc:nc + nx])
    fcap = [nc + nx + i for i in _floating(g.inputs[nc + nx:])]
    fy = _floating(g.outputs[nc:])

    def grad_or_zeros(k, like_shape, dtype):
        return gs[k] if gs[k] is not None else zeros(like_shape, dtype=dtype)
    g_final = [grad_or_zeros(i, g.outputs[i].shape, g.outputs[i].dtype) for i in fc]
    g_caps = [zeros(tuple(ins[i].shape), dtype=ins[i].dtype) for i in fcap]
    g_ys = [grad_or_zeros(nc + k, (a["length"],) + tuple(g.outputs[nc + k].shape), g.outputs[nc + k].dtype)
            for k in fy]
    g_hist = [gs[nc + ny + i] if nc + ny + i < len(gs) else None for i in fc]
    history = any(h is not None for h in g_hist)
    g_hist = [h if h is not None else zeros(tuple(hist[i].shape), dtype=hist[i].dtype)
              for h, i in zip(g_hist, fc)] if history else []
    bwd = backward_body(g, nc, nx, history)
    res = run_scan(bwd, g_final + g_caps, hist + list(ins[nc:nc + nx]) + g_ys + g_hist, list(ins[nc + nx:]),
                   a["length"], not a["reverse"])
    grads = [None] * len(ins)
    for k, i in enumerate(fc):
        grads[i] = res[k]
    for k, i in enumerate(fcap):
        grads[i] = res[len(fc) + k]
    n = len(fc) + len(fcap)
    for k, i in enumerate(fx):
        grads[nc + i] = res[n + k]
    return tuple(grads)


def run_scan(body, init, xs, captures, length, reverse):
    """Apply the scan op to tensors: (final carries..., ys...). It keeps the carries' history (an output it does
    not return) only when a gradient will be asked of it."""
    from .._tensor import Tensor
    args = list(init) + list(xs) + list(captures)
    keep = STATE.grad_enabled and any(isinstance(t, Tensor) and t.requires_grad for t in args)
    out = apply(OPS["scan"], *args, body=body, n_carry=len(init), n_x=len(xs), length=int(length),
                reverse=bool(reverse), keep=keep)
    return out[:len(out) - len(init)] if keep else out


defop("scan", _impl, _meta, _vjp, nout=0, saves="io", kind="other", grad_name="ScanBackward0")
