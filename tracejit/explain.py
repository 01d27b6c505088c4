"""tracejit.explain(fn, *args): the dynamic graph, the static graph, what each pass did, and what runs.

`explain` runs `fn` once eagerly (recording the grad_fn graph) and traces it with `@trace`, then collects:
the eager autograd graph, the traced IR (forward and the backward derived from it), the IR after each
pass, the fusion groups and generated kernel source of the backend, the cache status, and the time of each
kernel (and each other step) in one run. `print(explain(...))` shows it as text; `.to_html()` /
`.save_html(path)` write one self-contained page with the graphs drawn side by side (SVG from Graphviz's
`dot` when it is installed, the text form otherwise).
"""
import html
import re
import shutil
import subprocess
import time

import numpy as np


def parse_inputs(spec):
    """"f32[8,4] i64[8]" -> random tensors of those types (written as the IR writes them)."""
    import tracejit as torch
    from ._dtype import from_short
    from ._dtype import _BY_SHORT
    out = []
    shorts = " ".join(sorted(_BY_SHORT))
    left = re.sub(r"\w+\[[^\]]*\]", " ", spec).split()
    if left:
        raise ValueError(f"cannot read {left[0]!r}: write each input as DTYPE[SHAPE], e.g. 'f32[8,4] i64[8]' "
                         f"(a scalar: 'f32[]')")
    for m in re.finditer(r"(\w+)\[([^\]]*)\]", spec):
        if m.group(1) not in _BY_SHORT:
            raise ValueError(f"unknown dtype {m.group(1)!r} in {m.group(0)!r}: write the IR's short names ({shorts}), "
                             f"e.g. 'f32[8,4]' for float32")
        dt = from_short(m.group(1))
        dims = m.group(2).replace(" ", "")
        if not re.fullmatch(r"(\d+(,\d+)*)?,?", dims):
            raise ValueError(f"cannot read the shape in {m.group(0)!r}: write sizes as numbers, e.g. 'f32[8,4]'")
        shape = tuple(int(s) for s in dims.split(",") if s)
        if dt.is_floating_point:
            out.append(torch.randn(shape, dtype=dt))
        elif dt.name == "bool":
            out.append(torch.randint(0, 2, shape).bool())
        else:
            out.append(torch.randint(0, 4, shape, dtype=dt))
    if not out:
        raise ValueError(f"no input types in {spec!r}: write them like 'f32[8,4] i64[8]'")
    return out


# ----------------------------------------------------------------------------------------------- eager graph

def _eager_nodes(roots):
    """(nodes in visiting order, edges (parent, child)) of the grad_fn graph below `roots`."""
    nodes, edges, seen = [], [], set()
    stack = [n for n in roots if n is not None]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        nodes.append(n)
        for nxt, _ in reversed(n.next_functions):     # (node, output_nr) pairs, (None, 0) for no gradient
            if nxt is not None:
                edges.append((n, nxt))
                stack.append(nxt)
    return nodes, edges


def _node_label(n):
    name = n.name()
    var = getattr(n, "variable", None)
    if var is not None:
        return f"{name} (leaf {var.dtype.short}{list(var.shape)})"
    return name


def eager_text(outs):
    lines, seen = [], set()

    def walk(node, depth):
        if node is None:
            return
        if id(node) in seen:
            lines.append("  " * depth + _node_label(node) + "  (shared, shown above)")
            return
        seen.add(id(node))
        lines.append("  " * depth + _node_label(node))
        for nxt, _ in node.next_functions:
            walk(nxt, depth + 1)
    for i, t in enumerate(outs):
        if len(outs) > 1:
            lines.append(f"output {i}:")
        walk(t.grad_fn, 1 if len(outs) > 1 else 0)
    return "\n".join(lines) or "(no grad_fn: nothing requires grad)"


def eager_dot(outs):
    nodes, edges = _eager_nodes([t.grad_fn for t in outs])
    ids = {id(n): f"g{k}" for k, n in enumerate(nodes)}
    lines = ['digraph eager {', '  rankdir=TB; node [fontname="monospace", fontsize=10];']
    for i, t in enumerate(outs):
        lines.append(f'  out{i} [shape=box, style=filled, fillcolor="#e3f7e3", '
                     f'label="output {i}\\n{t.dtype.short}{list(t.shape)}"];')
        if t.grad_fn is not None:
            lines.append(f"  out{i} -> {ids[id(t.grad_fn)]};")
    for n in nodes:
        leaf = getattr(n, "variable", None) is not None
        style = 'shape=box, style=filled, fillcolor="#dde8ff"' if leaf else "shape=ellipse"
        lines.append(f'  {ids[id(n)]} [{style}, label="{_node_label(n)}"];')
    for a, b in edges:
        lines.append(f"  {ids[id(a)]} -> {ids[id(b)]};")
    lines.append("}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- profiling

def _forward_arrays(tf, entry, args, kwargs):
    _, leaves = tf._signature(args, kwargs)
    ts, why = entry.resolve(leaves)
    if why:
        raise RuntimeError(why)
    return [t._data if k == "data" else t._grad._data for (k, _), t in zip(entry.sources, ts)]


def _n_fwd_outputs(entry):
    return entry.n_out + sum(1 for _, kind in entry.writeback if kind != "grad_none")


def profile(compiled, graph, arrays):
    """[(step label, seconds)] of one run of a compiled program, per kernel / per node where the backend
    allows it (numba's CompiledGraph, the interpreter), else one row for the whole program; and the outputs."""
    step_times = getattr(compiled, "step_times", None)     # a backend that times its own steps (numba CPU)
    times = step_times(arrays)[0] if step_times is not None and graph is not None else None
    if times is not None and len(times) == len(graph.nodes):
        rows = [(_step_label(node), t) for node, t in zip(graph.nodes, times)]
        t0 = time.perf_counter()
        outs = compiled(arrays)
        rows.append(("(whole program, one call)", time.perf_counter() - t0))
        return rows, outs
    if graph is not None:             # any other backend: each node with the registry's implementation
        from .backends.interpreter import bind, run_node
        env = bind(graph, arrays)
        rows = []
        for n in graph.nodes:
            t0 = time.perf_counter()
            run_node(n, env)
            rows.append((_step_label(n), time.perf_counter() - t0))
        t0 = time.perf_counter()
        outs = compiled(arrays)
        rows.append(("(whole program, one call)", time.perf_counter() - t0))
        return rows, outs
    t0 = time.perf_counter()
    outs = compiled(arrays)
    return [("(whole program, one call)", time.perf_counter() - t0)], outs


def _step_label(node):
    outs = " ".join(f"%{o.id}:{o.type_str}" for o in node.outputs)
    if node.op.kind == "fused":
        body = node.attrs.get("body")
        ops = ", ".join(m.op.name for m in body.nodes) if body is not None else ""
        return f"{node.op.name} -> {outs}  [kernel: {ops}]"
    return f"{node.op.name} -> {outs}"


# ----------------------------------------------------------------------------------------------- kernels

def kernel_sources(compiled):
    """[(kernel name, source)] the backend generated for one compiled program (empty when it generates none)."""
    ks = getattr(compiled, "kernels", None)
    out = []
    if ks:
        for k in ks:
            name, src = (k[0], k[1]) if isinstance(k, tuple) else (getattr(k, "name", "kernel"), k)
            src = getattr(src, "source", src)
            out.append((str(name), str(src)))
        return out
    src = getattr(compiled, "source", None)
    if callable(src):
        src = src()
    return [("kernels", src)] if src else []


def fusion_groups(graph):
    """[(kernel name, [ops], inputs, outputs)] of the fused nodes in a compiled graph."""
    from .ir.graph import Value
    out = []
    for n in graph.nodes if graph is not None else ():
        if n.op.kind != "fused":
            continue
        body = n.attrs.get("body")
        ops = [m.op.name for m in body.nodes] if body is not None else []
        ins = " ".join(f"%{i.id}:{i.type_str}" for i in n.inputs if isinstance(i, Value))
        outs = " ".join(f"%{o.id}:{o.type_str}" for o in n.outputs)
        name = n.op.name
        if "rows" in n.attrs:              # a row kernel: reductions over the last dims with their elementwise work
            lead, kept, trail = n.attrs["rows"]
            name += f" (row kernel, {int(np.prod(kept))} rows x {int(np.prod(lead)) * int(np.prod(trail))})"
        out.append((name, ops, ins, outs))
    return out


# ----------------------------------------------------------------------------------------------- explain

class Explanation:
    """What explain() found. str() is the text report; to_html() the page."""

    def __init__(self, name, inputs):
        self.name = name
        self.inputs = inputs
        self.eager_text = ""
        self.eager_dot = None
        self.static = []          # (title, graph) drawn beside the eager graph
        self.passes = []          # (title, text)
        self.programs = []        # (title, text): forward / backward as compiled
        self.groups = []          # (program, kernel, ops, ins, outs)
        self.kernels = []         # (program, kernel name, source)
        self.cache = []           # (what, value)
        self.timings = []         # (program, step, seconds)
        self.notes = []

    # ---------------------------------------------------------------- text
    def sections(self):
        s = [("eager: dynamic graph (grad_fn chain, built while the code ran)", self.eager_text)]
        for title, text in self.passes:
            s.append((title, text))
        for title, text in self.programs:
            s.append((title, text))
        if self.groups:
            s.append(("fusion groups", "\n".join(f"[{p}] {k}: {' -> '.join(ops)}\n    in  {ins}\n    out {outs}"
                                                 for p, k, ops, ins, outs in self.groups)))
        else:
            s.append(("fusion groups", "(none: this backend does not fuse, or nothing was fusable)"))
        if self.kernels:
            s.append(("generated kernel source", "\n\n".join(f"# ---- [{p}] {k}\n{src.rstrip()}"
                                                             for p, k, src in self.kernels)))
        else:
            s.append(("generated kernel source", "(none: this backend runs the registry's numpy implementations)"))
        s.append(("cache", "\n".join(f"{k}: {v}" for k, v in self.cache)))
        s.append(("time of one run, per kernel / step", "\n".join(
            f"[{p}] {1e6 * t:10.1f} us  {step}" for p, step, t in self.timings)))
        if self.notes:
            s.append(("notes", "\n".join(self.notes)))
        return s

    def text(self):
        head = f"tracejit.explain: {self.name}({', '.join(self.inputs)})"
        return head + "\n\n" + "\n\n".join(f"== {t} ==\n{b}" for t, b in self.sections())

    __str__ = text

    def __repr__(self):
        return self.text()

    # ---------------------------------------------------------------- html
    def to_html(self):
        return _render_html(self)

    def save_html(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_html())
        return path


def explain(fn, *args, backend=None, requires_grad="auto", **kwargs):
    """Explain `fn` on these arguments.

    requires_grad: "auto" (default) makes floating tensor arguments require grad, so that a backward exists,
    unless one of them already does (then the arguments are used as given); True / False for all of them.
    `fn` runs eagerly once and traced twice: a function that updates state in place (a training step) does
    so each time.
    """
    import tracejit as torch
    from .passes import DEFAULT_PASSES
    from .tracing.trace import TracedFunction
    f = fn.fn if isinstance(fn, TracedFunction) else fn
    backend = backend or (fn.backend_name if isinstance(fn, TracedFunction) else None)
    if requires_grad == "auto":
        requires_grad = not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
    if requires_grad:
        args = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a
                for a in args]
    name = getattr(f, "__qualname__", getattr(f, "__name__", "fn"))
    ex = Explanation(name, [f"{a.dtype.short}{list(a.shape)}" if isinstance(a, torch.Tensor) else repr(a)
                            for a in args])

    # the dynamic face: run it, walk the grad_fn graph
    out = f(*args, **kwargs)
    outs = _tensors(out)
    if not outs:
        ex.eager_text = "(the function returned no tensor)"
    elif all(t.grad_fn is None for t in outs):
        ex.eager_text = ("(no grad_fn on the outputs: nothing they depend on requires grad, or the function ran "
                         "backward itself and returned detached values - a training step - so its dynamic graph "
                         "was built and freed inside the call)")
    else:
        ex.eager_text = eager_text(outs)
        ex.eager_dot = eager_dot(outs)

    # the static face: trace, then look at every stage
    tf = torch.trace(f, backend=backend)
    be_name = backend or torch.config.default_backend
    c0 = _compile_counts()
    t0 = time.perf_counter()
    gs = tf.graph(*args, **kwargs)
    trace_s = time.perf_counter() - t0
    c1 = _compile_counts()
    e = gs.entry
    traced = gs.traced
    ex.passes.append((f"traced: the captured graph ({len(traced.nodes)} nodes; forward, and the backward "
                      f"derived symbolically)", traced.text()))
    g = traced
    for p in DEFAULT_PASSES:
        g2 = p(g)
        ex.passes.append((f"after pass {p.__name__} ({len(g.nodes)} -> {len(g2.nodes)} nodes)", g2.text()))
        g = g2
    if gs.backward is not None:
        ex.passes.append((f"after partition: forward program ({len(gs.forward.nodes)} nodes, saves "
                          f"{e.n_saved} values for the backward)", gs.forward.text()))
        ex.passes.append((f"after partition: backward program ({len(gs.backward.nodes)} nodes)", gs.backward.text()))
    else:
        ex.passes.append(("forward program (no backward: nothing requires grad)", gs.forward.text()))
    progs = [("forward", e.fwd, e.fwd_fn, gs.compiled_forward)]
    if e.bwd is not None:
        progs.append(("backward", e.bwd, e.bwd_fn, gs.compiled_backward))
    for pname, ir, fn_, compiled_graph in progs:
        if compiled_graph is not None and compiled_graph is not ir:
            ex.programs.append((f"{pname} as the {be_name} backend runs it (after fusion: "
                                f"{len(ir.nodes)} -> {len(compiled_graph.nodes)} nodes)", compiled_graph.text()))
        for k, ops, ins, outs_ in fusion_groups(compiled_graph):
            ex.groups.append((pname, k, ops, ins, outs_))
        for k, src in kernel_sources(fn_):
            ex.kernels.append((pname, k, src))
    ex.static.append(("static: forward (traced IR)", e.fwd))
    if e.bwd is not None:
        ex.static.append(("static: backward (derived IR)", e.bwd))
    for pname, ir, fn_, compiled_graph in progs:
        if compiled_graph is not None and compiled_graph is not ir:
            ex.static.append((f"compiled {pname} (fused kernels as clusters)", compiled_graph))

    # one run, timed per kernel
    try:
        arrays = _forward_arrays(tf, e, args, kwargs)
        rows, fouts = profile(e.fwd_fn, gs.compiled_forward or e.fwd, arrays)
        ex.timings += [("forward", s, t) for s, t in rows]
        if e.bwd_fn is not None:
            k = _n_fwd_outputs(e)
            saved = list(fouts[k:k + e.n_saved])
            cts = [np.ones(o.shape, o.dtype.np) for o in (e.fwd.outputs[i] for i in e.out_rg)]
            rows, _ = profile(e.bwd_fn, gs.compiled_backward or e.bwd, saved + cts)
            ex.timings += [("backward", s, t) for s, t in rows]
    except Exception as err:      # profiling is best effort: the rest of the report stands
        ex.notes.append(f"per-kernel timing unavailable: {type(err).__name__}: {err}")
    t0 = time.perf_counter()
    tf(*args, **kwargs)
    call_s = time.perf_counter() - t0

    info = tf.cache_info()
    ex.cache.append(("backend", be_name))
    ex.cache.append(("trace + passes + compile (first call)", f"{trace_s * 1e3:.1f} ms"))
    ex.cache.append(("one cached call through @trace (incl. argument checks)", f"{call_s * 1e3:.3f} ms"))
    ex.cache.append(("signature cache of this traced function",
                     f"{info['entries']} entr{'y' if info['entries'] == 1 else 'ies'}, {info['traces']} trace(s), "
                     f"{info['hits']} hit(s), limit {info['limit']}"))
    if c0 is not None and c1 is not None:
        helped = c1[2] - c0[2]        # compiled by forked helpers, then loaded here from the cache
        ex.cache.append(("kernels numba compiled for this trace",
                         f"{c1[0] - c0[0] + helped}" + (f" ({helped} of them in forked helper processes)"
                                                       if helped else "")))
        ex.cache.append(("kernels loaded from the disk cache for this trace", c1[1] - c0[1] - helped))
        if c1[3] > c0[3]:
            ex.cache.append(("kernels lowered by direct.py for this trace (they run until numba's kernels, "
                             "compiled in the background, are ready)", c1[3] - c0[3]))
    for pname, _, fn_, _ in progs:
        if getattr(fn_, "plan", None) is not None:
            ex.cache.append((f"{pname}: intermediate buffers", fn_.plan.summary()))
    disk = _disk_info()
    if disk:
        ex.cache.append(("disk cache", disk))
    return ex


def _tensors(out):
    import tracejit as torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def _compile_counts():
    """(kernels compiled here, loaded from the disk cache, compiled by forked helpers, direct kernels lowered or
    loaded) so far in this process."""
    try:
        from .backends.numba_cpu.executor import compile_stats
        s = compile_stats()
        direct = s["direct"] + s["direct_loaded"]
    except Exception:
        s, direct = None, 0
    try:
        from .backends import diskcache
        return (diskcache.compile_count(), diskcache.cache_hit_count(), diskcache._STATS["compiled_by_helpers"],
                direct)
    except Exception:
        return None if s is None else (s["compiled"], s["loaded"], 0, direct)


def _disk_info():
    try:
        from .backends.diskcache import cache_info
        info = cache_info()
    except Exception:
        return None
    path = info.get("path") or info.get("dir")
    n = info.get("entries", info.get("modules"))
    size = info.get("bytes")
    return f"{path}: {n} kernel modules" + (f", {size / 1e6:.1f} MB" if size else "")


# ----------------------------------------------------------------------------------------------- html

def _svg(dot_source):
    """SVG text of a DOT graph via Graphviz's `dot`, or None (not installed, or it failed)."""
    exe = shutil.which("dot")
    if not exe or not dot_source:
        return None
    try:
        r = subprocess.run([exe, "-Tsvg"], input=dot_source, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    svg = r.stdout
    i = svg.find("<svg")
    return svg[i:] if i >= 0 else None


def _figure(title, dot_source, text):
    svg = _svg(dot_source)
    body = (f'<div class="svg">{svg}</div>' if svg else f"<pre>{html.escape(text)}</pre>")
    return f"<figure><figcaption>{html.escape(title)}</figcaption>{body}</figure>"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222;max-width:110em}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
.side{display:grid;grid-template-columns:1fr 1fr;gap:1.2em;align-items:start}
.col{border:1px solid #ddd;border-radius:6px;padding:.6em;overflow:auto;background:#fcfcfc}
.col h3{margin:.2em 0 .6em;font-size:1em}
figure{margin:0 0 1em} figcaption{font-weight:600;font-size:.9em;margin-bottom:.3em}
pre{background:#f5f5f5;padding:.6em;border-radius:4px;overflow:auto;font-size:12px;line-height:1.35}
.svg{overflow:auto;max-height:85vh} .svg svg{max-width:none;height:auto}
details{margin:.3em 0} summary{cursor:pointer;font-weight:600}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left}
td.num{text-align:right;font-family:monospace} .note{color:#666;font-size:.9em}
"""


def _render_html(ex):
    esc = html.escape
    dot_ok = bool(shutil.which("dot"))
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>tracejit explain: {esc(ex.name)}</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>tracejit explain: <code>{esc(ex.name)}({esc(', '.join(ex.inputs))})</code></h1>",
             "<p class='note'>" + ("Graphs drawn with Graphviz <code>dot</code>." if dot_ok else
                                   "Graphviz <code>dot</code> is not installed: graphs are shown as text "
                                   "(install graphviz to draw them).") + "</p>",
             "<h2>The same code, two graphs</h2><div class='side'>",
             "<div class='col'><h3>Eager (dynamic): the grad_fn graph recorded while the code ran</h3>",
             _figure("autograd graph, from the output back to the leaves", ex.eager_dot, ex.eager_text),
             "</div><div class='col'><h3>Traced (static): the IR captured once per input signature</h3>"]
    for title, g in ex.static:
        parts.append(_figure(title, g.to_dot(title), g.text()))
    parts.append("</div></div>")

    parts.append("<h2>The IR after each pass</h2>")
    for i, (title, text) in enumerate(ex.passes):
        parts.append(f"<details{' open' if i == 0 else ''}><summary>{esc(title)}</summary><pre>{esc(text)}</pre>"
                     f"</details>")
    for title, text in ex.programs:
        parts.append(f"<details open><summary>{esc(title)}</summary><pre>{esc(text)}</pre></details>")

    parts.append("<h2>Fusion groups</h2>")
    if ex.groups:
        parts.append("<table><tr><th>program</th><th>kernel</th><th>ops in the loop</th><th>inputs</th>"
                     "<th>outputs</th></tr>")
        for p, k, ops, ins, outs in ex.groups:
            parts.append(f"<tr><td>{esc(p)}</td><td>{esc(k)}</td><td>{esc(' → '.join(ops))}</td>"
                         f"<td><code>{esc(ins)}</code></td><td><code>{esc(outs)}</code></td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>None: this backend does not fuse, or nothing was fusable.</p>")

    parts.append("<h2>Generated kernel source</h2>")
    if ex.kernels:
        for p, k, src in ex.kernels:
            parts.append(f"<details><summary>[{esc(p)}] {esc(k)}</summary><pre>{esc(src)}</pre></details>")
    else:
        parts.append("<p>None: this backend runs the registry's numpy implementations.</p>")

    parts.append("<h2>Cache</h2><table>")
    for k, v in ex.cache:
        parts.append(f"<tr><td>{esc(str(k))}</td><td>{esc(str(v))}</td></tr>")
    parts.append("</table>")

    parts.append("<h2>Time of one run, per kernel and step</h2><table><tr><th>program</th><th>time</th>"
                 "<th>step</th></tr>")
    for p, step, t in ex.timings:
        parts.append(f"<tr><td>{esc(p)}</td><td class='num'>{1e6 * t:.1f} µs</td><td><code>{esc(step)}</code>"
                     f"</td></tr>")
    parts.append("</table>")
    for n in ex.notes:
        parts.append(f"<p class='note'>{esc(n)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
