"""Check mode: `trace(fn, check=True)` or TRACEJIT_CHECK=1 for a whole program.

The first call of each signature also runs the function eagerly, on the same inputs and from the same state,
and compares the compiled program with it: the outputs, the new values of the tensors it updates in place
(parameters, optimizer state, `.grad`) and, when outputs require grad, the gradients of the outputs (with a fixed
random cotangent) with respect to every tensor they depend on that requires grad. A difference beyond the
tolerance of the dtype raises `CheckError`, naming the first op of the program whose value differs: the forward
program is run once more, with every intermediate value an output, compiled by the same backend and by the
reference interpreter, and the values compared node by node.

Tolerances (|compiled - eager| <= atol + rtol * |eager|, with atol also scaled by the largest |eager| value of
that tensor, so sums with cancellation are not flagged): float16/bfloat16 rtol 1e-2; float32 rtol 1e-4;
float64 rtol 1e-9; integers and bool exactly. Why the compiled program may round differently from eager (all
within these bounds): a fused kernel keeps float32 intermediates in registers instead of rounding each op's
result to memory the way numpy does; its sums add in chunks (of 8192 elements) in a different order from
numpy's pairwise sums; exp, tanh, sigmoid and erf come from tracejit's vectorized math (within 2 ulp, numpy's
libm within 1); `tracejit.config.fastmath = True` allows reassociation. NaN and inf must appear in the same
places. Random ops draw from the same generator state in both runs.
"""
import os

import numpy as np

ENABLED = os.environ.get("TRACEJIT_CHECK", "0") == "1"

RTOL = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-4, "float64": 1e-9}


class CheckError(AssertionError):
    """The compiled program's result differs from the eager run's (trace(check=True) / TRACEJIT_CHECK=1)."""


def tolerance(dtype_name):
    rtol = RTOL.get(dtype_name)
    return (0.0, 0.0) if rtol is None else (rtol, rtol * 0.1)


def differs(got, want):
    """None when `got` matches `want` within the tolerance of want's dtype, else a description."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} instead of {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} instead of {want.dtype}"
    if want.size == 0:
        return None
    if want.dtype.kind not in "fc":
        bad = got != want
        if not bad.any():
            return None
        i = np.unravel_index(np.argmax(bad), want.shape)
        return f"at index {tuple(map(int, i))}: {got[i]} instead of {want[i]} (exact for {want.dtype})"
    rtol, atol = tolerance(want.dtype.name)
    g, w = got.astype(np.float64), want.astype(np.float64)
    same_special = (np.isnan(g) == np.isnan(w)) & ((g == w) | np.isfinite(w) | np.isnan(w))
    finite = np.isfinite(w) & np.isfinite(g)
    scale = float(np.max(np.abs(w[finite]))) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(g - w), 0.0)
        bad = ~same_special | (finite & (err > atol * max(scale, 1.0) + rtol * np.abs(w))) | \
            (np.isfinite(w) != np.isfinite(g))
    if not bad.any():
        return None
    i = np.unravel_index(np.argmax(bad), want.shape)
    return (f"at index {tuple(map(int, i))}: {g[i]:.9g} instead of {w[i]:.9g} (max |difference| "
            f"{float(err.max()):.3g}; {want.dtype} tolerance rtol={rtol:g}, atol={atol:g} x max|value|)")


def _arrays(ts):
    return [t._host().copy() if t is not None else None for t in ts]


def checked_call(tf, entry, ts, args, kwargs):
    """Run `entry` for this call (as TracedFunction._run) after running the function eagerly from the same state;
    raise CheckError when they differ. Returns the compiled call's result."""
    from .. import random as R
    from .._state import STATE
    from ..autograd.grad_mode import no_grad
    from .pytree import collect
    owners = list(ts)
    data0 = [t._data.copy() for t in owners]
    grads0 = [t._grad for t in owners]
    gdata0 = [g._data.copy() if g is not None else None for g in grads0]
    rng = R.get_rng_state()

    def restore():
        for t, d, g, gd in zip(owners, data0, grads0, gdata0):
            with no_grad():
                np.copyto(t._data, d)
            t._grad = g
            if g is not None:
                np.copyto(g._data, gd)
        R.set_rng_state(rng)

    # eager, from the state the compiled program starts from
    out = tf.fn(*args, **kwargs)
    eager_outs = []
    collect(out, eager_outs)
    eager_vals = _arrays(eager_outs)
    eager_state = _arrays(owners)
    eager_grads = _arrays([t._grad for t in owners])
    eager_dgrads = _input_grads(eager_outs, owners) if STATE.grad_enabled else None
    del out
    restore()
    res = tf._run(entry, ts)
    comp_outs = []
    collect(res, comp_outs)
    problems = []

    def compare(what, c, e, absent="None", present="set"):
        if (c is None) != (e is None):
            problems.append(f"{what} is {absent if c is None else present} (eager: {absent if e is None else present})")
        elif c is not None:
            why = differs(c, e)
            if why:
                problems.append(f"{what} differs {why}")

    if len(comp_outs) != len(eager_outs):
        problems.append(f"{len(comp_outs)} outputs instead of {len(eager_outs)}")
    for k, (c, e) in enumerate(zip(_arrays(comp_outs), eager_vals)):
        compare(f"output {k}", c, e)
    for k, (c, e) in enumerate(zip(_arrays(owners), eager_state)):
        compare(f"the tensor it updates ({_name(entry, k)})", c, e)
    for k, (c, e) in enumerate(zip(_arrays([t._grad for t in owners]), eager_grads)):
        compare(f".grad of {_name(entry, k)}", c, e)
    if eager_dgrads is not None and not problems:
        for k, (c, e) in enumerate(zip(_input_grads(comp_outs, owners, retain=True), eager_dgrads)):
            compare(f"the gradient with respect to {_name(entry, k)}", c, e, "missing", "present")
    if problems:
        where = _first_differing_op(tf, entry, data0, gdata0)
        raise CheckError(f"trace check of {tf.__name__}: the compiled program differs from eager: "
                         + "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
                         + f". {where}")
    return res


def _name(entry, k):
    kind, src = entry.sources[k]
    what = f"argument {src}" if isinstance(src, int) else "a tensor it reads"
    return what + (" .grad" if kind == "grad" else "")


def _input_grads(outs, owners, retain=False):
    """d(sum(out * fixed random cotangent))/d(each owner that requires grad), or None per owner."""
    from ..autograd import grad as agrad
    from .._tensor import Tensor
    diff = [o for o in outs if isinstance(o, Tensor) and o.requires_grad and o.dtype.is_floating_point]
    wrt = [t for t in owners if t.requires_grad]
    if not diff or not wrt:
        return [None] * len(owners)
    rng = np.random.default_rng(0)
    cts = [Tensor._wrap(rng.standard_normal(tuple(o.shape)).astype(o.dtype.np)) for o in diff]
    gs = agrad(diff, wrt, cts, retain_graph=retain, allow_unused=True)
    by_id = {id(t): g for t, g in zip(wrt, gs)}
    return [(by_id[id(t)]._host().copy() if by_id.get(id(t)) is not None else None) if t.requires_grad else None
            for t in owners]


def _first_differing_op(tf, entry, data0, gdata0):
    """Compile the forward program with every intermediate value an output, run it and the reference interpreter
    from the call's starting state, and name the first node whose value differs."""
    from ..backends.interpreter import run as interpret
    from ..ir.graph import format_node
    from ..passes.rewrite import Rewriter
    g = entry.fwd
    try:
        r = Rewriter(g)
        for n in g.nodes:
            r.copy(n)
        full = r.finish()
        vals = [(n, o) for n in g.nodes for o in n.outputs]
        full.outputs = [r.map[o] for _, o in vals]
        full.output_names = [f"v{o.id}" for _, o in vals]
        arrays = [gdata0[i] if kind == "grad" else data0[i] for i, (kind, _) in enumerate(entry.sources)]
        if entry.on_device:
            return "(the first differing op is not located for cuda programs)"
        from ..backends import get_backend
        got = get_backend(tf.backend_name).compile(full)([a.copy() for a in arrays])
        want = interpret(full, [a.copy() for a in arrays])
        for (n, o), a, b in zip(vals, got, want):
            if differs(a, b):
                return (f"First op whose value differs from eager: {format_node(n)} "
                        f"({differs(a, b)}).")
        return "Every op of the forward program matches eager: the difference is in the backward program or " \
               "the written-back state."
    except Exception as e:             # (locating is best effort: the difference above is what matters)
        return f"(the differing op could not be located: {type(e).__name__}: {e})"
