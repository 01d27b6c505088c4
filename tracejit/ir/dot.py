"""Graphviz DOT export of an IR graph (fused kernels drawn as clusters when a node carries `group`)."""
from .graph import Value


def _esc(s):
    return s.replace('"', '\\"')


def to_dot(g, name="G"):
    lines = [f'digraph "{_esc(name)}" {{', '  rankdir=TB; node [fontname="monospace", fontsize=10];']
    for v, nm in zip(g.inputs, g.input_names):
        lines.append(f'  v{v.id} [shape=box, style=filled, fillcolor="#dde8ff", '
                     f'label="%{v.id}: {v.type_str}\\n{_esc(nm or "input")}"];')
    for v in g.consts:
        lines.append(f'  v{v.id} [shape=box, style=dashed, label="%{v.id}: const {v.type_str}"];')
    groups = {}
    for k, n in enumerate(g.nodes):
        if n.op.kind == "fused":
            lines.extend(_fused_cluster(g, k, n))
            continue
        grp = n.attrs.get("_group")
        label = f"{n.op.name}\\n" + "\\n".join(f"%{o.id}: {o.type_str}" for o in n.outputs)
        stmt = f'  n{k} [shape=ellipse, label="{_esc(label)}"];'
        (groups.setdefault(grp, []) if grp is not None else lines).append(stmt)
        for i in n.inputs:
            if isinstance(i, Value):
                src = f"v{i.id}" if i.producer is None else f"n{g.nodes.index(i.producer)}"
                lines.append(f'  {src} -> n{k} [label="%{i.id}", fontsize=8];')
    for grp, stmts in groups.items():
        lines.append(f'  subgraph cluster_{grp} {{ label="fused kernel {grp}"; style=filled; fillcolor="#fff3d6";')
        lines.extend("  " + s for s in stmts)
        lines.append("  }")
    for j, o in enumerate(g.outputs):
        if isinstance(o, Value):
            src = f"v{o.id}" if o.producer is None else f"n{g.nodes.index(o.producer)}"
            lines.append(f'  out{j} [shape=box, style=filled, fillcolor="#e3f7e3", label="output {j}"];')
            lines.append(f"  {src} -> out{j};")
    lines.append("}")
    return "\n".join(lines)


def _fused_cluster(g, k, n):
    """A fused node (from the fusion pass) as a cluster holding its body; its outputs leave from n{k}."""
    body = n.attrs["body"]
    src = {}
    for i in n.inputs:
        if isinstance(i, Value):
            src[id(i)] = f"v{i.id}" if i.producer is None else f"n{g.nodes.index(i.producer)}"
    out = [f'  subgraph cluster_{n.op.name} {{ label="{n.op.name}"; style=filled; fillcolor="#fff3d6";']
    edges = []
    for j, m in enumerate(body.nodes):
        label = f"{m.op.name}\\n" + "\\n".join(f"%{o.id}: {o.type_str}" for o in m.outputs)
        out.append(f'    n{k}_{j} [shape=ellipse, label="{_esc(label)}"];')
        for i in m.inputs:
            if isinstance(i, Value):
                edges.append(f'  {src[id(i)]} -> n{k}_{j} [label="%{i.id}", fontsize=8];')
        for o in m.outputs:
            src[id(o)] = f"n{k}_{j}"
    outs = "\\n".join(f"%{o.id}: {o.type_str}" for o in n.outputs)
    out.append(f'    n{k} [shape=box, label="{_esc(n.op.name)} outputs\\n{outs}"];')
    out.append("  }")
    for o in n.outputs:
        edges.append(f"  {src[id(o)]} -> n{k};")
    return out + edges
