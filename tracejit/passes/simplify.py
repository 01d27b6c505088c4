"""Constant folding and algebraic simplification: x*1, x+0, x-0, x/1, x**1, -(-x), reshape of reshape,
identity reshapes/permutes/casts, and ops whose inputs are all constants (computed now, at compile time).
The facts it uses are the registry's traits `unit`, `commutative`, `involution`, `noop` and `reshapes`.

Also the gradient of a split: a sum of slice gradients (`index_backward` of basic slices: zeros with the
gradient placed in them) that sit side by side along one dim is one `cat` of the gradients (placed, if they do
not cover the dim): `q, k, v = qkv.split(C, -1)` or an LSTM's `chunk(4)` get their input's gradient in one copy
instead of zero-filled arrays and adds."""
import numpy as np

from ..ir.graph import Value
from ..ops.registry import OPS, AVal
from .rewrite import Rewriter

def _is_unit(s, u):
    return not isinstance(s, (Value, bool)) and s == u


def _same_type(a, b):
    return isinstance(a, Value) and tuple(a.shape) == tuple(b.shape) and a.dtype is b.dtype


def _placement(v):
    """(gradient, dim, lo, hi, shape) when v is zeros of `shape` with the gradient at [lo:hi) along dim (an
    index_backward of basic slices, step 1, every other dim whole), else None."""
    n = getattr(v, "producer", None)
    if n is None or n.op is not OPS["index_backward"] or len(n.inputs) != 1:
        return None
    spec, shape = tuple(n.attrs["spec"]), tuple(n.attrs["shape"])
    if spec.count(Ellipsis) == 1:
        k = spec.index(Ellipsis)
        spec = spec[:k] + (slice(None),) * (len(shape) - len(spec) + 1) + spec[k + 1:]
    if len(spec) > len(shape) or not all(isinstance(s, slice) for s in spec):
        return None
    spec = spec + (slice(None),) * (len(shape) - len(spec))
    moved = [d for d, s in enumerate(spec) if s.indices(shape[d]) != (0, shape[d], 1)]
    if len(moved) != 1:
        return None
    d = moved[0]
    lo, hi, step = spec[d].indices(shape[d])
    return (n.inputs[0], d, lo, hi, shape) if step == 1 and hi > lo else None


def _side_by_side(r, a, b, out):
    """a + b as one cat when both are placements along the same dim that touch (see _placement); else None."""
    pa, pb = _placement(a), _placement(b)
    if pa is None or pb is None or pa[1] != pb[1] or pa[4] != pb[4] or a.dtype is not out.dtype or \
            b.dtype is not out.dtype or tuple(out.shape) != pa[4]:
        return None
    if pb[3] == pa[2]:
        pa, pb = pb, pa
    if pa[3] != pb[2]:
        return None
    d, shape = pa[1], pa[4]
    parts = []
    for g in (pa[0], pb[0]):            # a cat of cats along the same dim is one cat
        p = g.producer
        parts += list(p.inputs) if p is not None and p.op is OPS["cat"] and p.attrs["dim"] == d else [g]
    cshape = tuple(pa[0].shape[:d]) + (pb[3] - pa[2],) + tuple(pa[0].shape[d + 1:])
    (c,) = r.g.add_node(OPS["cat"], parts, {"dim": d}, [AVal(cshape, out.dtype)])
    if (pa[2], pb[3]) == (0, shape[d]):
        return c
    spec = tuple(slice(pa[2], pb[3]) if k == d else slice(None) for k in range(len(shape)))
    (v,) = r.g.add_node(OPS["index_backward"], [c], {"shape": shape, "spec": spec},
                        [AVal(shape, out.dtype)])
    return v


def simplify(g):
    r = Rewriter(g)
    consts = {r.map[v]: a for v, a in g.consts.items()}
    for n in g.nodes:
        ins = [r.get(i) for i in n.inputs]
        out = n.outputs[0]
        op = n.op
        if op is OPS["add"] and len(ins) == 2 and not n.attrs:
            v = _side_by_side(r, ins[0], ins[1], out)
            if v is not None:
                r.alias(out, v)
                continue
        # x (op) unit -> x, when nothing (shape, dtype) changes
        if op.unit is not None and len(ins) == 2:
            a, b = ins
            if _is_unit(b, op.unit) and _same_type(a, out):
                r.alias(out, a)
                continue
            if op.commutative and _is_unit(a, op.unit) and _same_type(b, out):
                r.alias(out, b)
                continue
        if op.involution and isinstance(ins[0], Value) and ins[0].producer is not None \
                and ins[0].producer.op is op:
            r.alias(out, ins[0].producer.inputs[0])
            continue
        if op.noop is not None and _same_type(ins[0], out) and op.noop(n.attrs, out):
            r.alias(out, ins[0])
            continue
        if op.reshapes and isinstance(ins[0], Value) and ins[0].producer is not None \
                and ins[0].producer.op.reshapes:
            src = ins[0].producer.inputs[0]
            (new,) = r.g.add_node(OPS["reshape"], [src], {"shape": out.shape}, [out])
            r.alias(out, new)
            continue
        # constant folding (small results only, never random ops or collectives)
        if not n.op.random and n.op.kind != "collective" and all(not isinstance(i, Value) or i in consts for i in ins) \
                and any(isinstance(i, Value) for i in ins) and all(int(np.prod(o.shape)) <= 4096 for o in n.outputs):
            res = n.op.impl(*[consts[i] if isinstance(i, Value) else i for i in ins], **n.attrs)
            res = res if n.op.nout != 1 else (res,)
            for o, a in zip(n.outputs, res):
                c = r.g.add_const(np.asarray(a))
                consts[c] = np.asarray(a)
                r.alias(o, c)
            continue
        r.copy(n)
    return r.finish()
