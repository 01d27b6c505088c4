"""Common subexpression elimination: one node per (op, inputs, attributes); random ops and collectives (each a
message to the other ranks) are never merged."""
from ..ir.graph import Value
from .rewrite import Rewriter


def _key(x):
    if isinstance(x, Value):
        return ("v", id(x))
    if isinstance(x, dict):
        return tuple(sorted((k, _key(v)) for k, v in x.items()))
    if isinstance(x, (tuple, list)):
        return tuple(_key(v) for v in x)
    if isinstance(x, float):
        return ("f", x.hex())
    try:
        hash(x)
        return (type(x).__name__, x)
    except TypeError:
        return ("id", id(x))


def cse(g):
    r = Rewriter(g)
    seen = {}
    for n in g.nodes:
        if n.op.random or n.op.kind == "collective":
            r.copy(n)
            continue
        k = (n.op.name, _key([r.get(i) for i in n.inputs]), _key(n.attrs))
        prev = seen.get(k)
        if prev is not None:
            for o, p in zip(n.outputs, prev):
                r.alias(o, p)
        else:
            seen[k] = r.copy(n)
    return r.finish()
