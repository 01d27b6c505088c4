"""Dead code elimination: drop nodes none of whose outputs reach a graph output."""
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
    keep, live = live_nodes(g)
    r = Rewriter(g)
    for n in g.nodes:
        if id(n) in keep:
            r.copy(n)
    out = r.finish()
    # unused constants go too
    out.consts = {r.map[v]: a for v, a in g.consts.items() if id(v) in live}
    return out
