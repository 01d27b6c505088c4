"""Dead code elimination: drop nodes none of whose outputs reach a graph output. Collectives stay (each is a message
the other ranks wait for: a rank whose program returns a collective's result only on some ranks must still send)."""
from ..ir.graph import Value
from .rewrite import Rewriter


def live_nodes(g, roots=None):
    live = set(id(v) for v in (g.outputs if roots is None else roots) if isinstance(v, Value))
    keep = set()
    for n in reversed(g.nodes):
        if any(id(o) in live for o in n.outputs):
            keep.add(id(n))
            live.update(id(i) for i in n.inputs if isinstance(i, Value))
    return keep, live


def dce(g):
    keep, live = live_nodes(g, list(g.outputs) + [o for n in g.nodes if n.op.kind == "collective" for o in n.outputs])
    r = Rewriter(g)
    for n in g.nodes:
        if id(n) in keep:
            r.copy(n)
    out = r.finish()
    # unused constants go too
    out.consts = {r.map[v]: a for v, a in g.consts.items() if id(v) in live}
    return out
