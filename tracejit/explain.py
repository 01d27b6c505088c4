"""tracejit.explain(fn, *args): the dynamic graph, the static graph, what each pass did, and what runs."""
import re

import numpy as np


def parse_inputs(spec):
    """"f32[8,4] i64[8]" -> random tensors of those types (written as the IR writes them)."""
    import tracejit as torch
    from ._dtype import from_short
    out = []
    for m in re.finditer(r"(\w+)\[([\d, ]*)\]", spec):
        dt = from_short(m.group(1))
        shape = tuple(int(s) for s in m.group(2).replace(" ", "").split(",") if s)
        if dt.is_floating_point:
            out.append(torch.randn(shape, dtype=dt))
        else:
            out.append(torch.randint(0, 4, shape, dtype=dt))
    if not out:
        raise ValueError(f"no input types in {spec!r}: write them like 'f32[8,4] i64[8]'")
    return out


def _eager_chain(t):
    lines, seen = [], set()

    def walk(node, depth):
        if node is None or id(node) in seen:
            return
        seen.add(id(node))
        lines.append("  " * depth + node.name())
        for e in node.next_functions:
            if e is not None:
                walk(e[0], depth + 1)
    walk(t.grad_fn, 0)
    return "\n".join(lines) or "(no grad_fn: nothing requires grad)"


def explain(fn, *args, backend=None):
    import time
    import tracejit as torch
    from . import passes as P
    from .tracing.trace import TracedFunction, run_passes
    f = fn.fn if isinstance(fn, TracedFunction) else fn
    args = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a
            for a in args]
    sections = []
    out = f(*args)
    first = out if isinstance(out, torch.Tensor) else next((o for o in out if isinstance(o, torch.Tensor)), None)
    sections.append(("eager: dynamic graph (grad_fn chain)", _eager_chain(first) if first is not None else "-"))
    tf = torch.trace(f, backend=backend)
    t0 = time.perf_counter()
    gs = tf.graph(*args)
    compile_s = time.perf_counter() - t0
    traced = gs.traced
    sections.append(("traced: captured graph (forward, and backward derived symbolically)", traced.text()))
    g = traced
    from .passes import DEFAULT_PASSES
    for p in DEFAULT_PASSES:
        g2 = p(g)
        sections.append((f"after pass {p.__name__} ({len(g.nodes)} -> {len(g2.nodes)} nodes)", g2.text()))
        g = g2
    sections.append(("forward program", gs.forward.text()))
    if gs.backward is not None:
        sections.append(("backward program", gs.backward.text()))
    src = getattr(gs.entry.fwd_fn, "source", None)
    if src:
        sections.append(("generated kernel source", src))
    t0 = time.perf_counter()
    tf(*args)
    run_s = time.perf_counter() - t0
    info = tf.cache_info()
    sections.append(("cache and timing", f"trace+compile {compile_s * 1e3:.1f} ms; one cached run {run_s * 1e3:.3f} ms; "
                                         f"entries {info['entries']}, traces {info['traces']}, hits {info['hits']}"))
    return "\n\n".join(f"== {title} ==\n{body}" for title, body in sections)
