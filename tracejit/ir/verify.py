"""The IR verifier: SSA, defined-before-use, and every node's shapes/dtypes re-derived from its op's rule."""
from .graph import Value


class IRError(RuntimeError):
    pass


def verify(g):
    defined = set(id(v) for v in g.inputs) | set(id(v) for v in g.consts)
    for n in g.nodes:
        for i in n.inputs:
            if isinstance(i, Value) and id(i) not in defined:
                raise IRError(f"use of %{i.id} before its definition in: {n}")
        if n.op.meta is not None:
            want = n.op.meta(*n.inputs, **n.attrs)
            want = want if isinstance(want, (tuple, list)) else (want,)
            if len(want) != len(n.outputs):
                raise IRError(f"{n.op.name}'s shape rule gives {len(want)} values for {len(n.outputs)} outputs: {n}")
            for o, w in zip(n.outputs, want):
                if tuple(o.shape) != tuple(w.shape) or o.dtype is not w.dtype:
                    raise IRError(f"%{o.id} is {o.type_str} but {n.op.name}'s shape rule gives "
                                  f"{w.dtype.short}[{','.join(map(str, w.shape))}]: {n}")
        for o in n.outputs:
            if id(o) in defined:
                raise IRError(f"%{o.id} is defined twice (not SSA)")
            if o.producer is not n:
                raise IRError(f"%{o.id} does not point back to its producer")
            defined.add(id(o))
    for o in g.outputs:
        if isinstance(o, Value) and id(o) not in defined:
            raise IRError(f"graph output %{o.id} is never defined")
    return g
