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


def _pieces(v, memo):
    """(dim, shape, [(gradient, lo, hi)...] sorted) when v is a placement (see _placement) or a sum of placements
    of disjoint ranges along the same dim (an add tree: the gradients of chunk(4)'s parts arrive in any order),
    else None."""
    if id(v) in memo:
        return memo[id(v)]
    res = None
    p = _placement(v)
    if p is not None:
        res = (p[1], p[4], [(p[0], p[2], p[3])])
    else:
        n = getattr(v, "producer", None)
        if n is not None and n.op is OPS["add"] and len(n.inputs) == 2 and not n.attrs and \
                all(isinstance(i, Value) and i.dtype is v.dtype for i in n.inputs):
            a, b = (_pieces(i, memo) for i in n.inputs)
            if a is not None and b is not None and a[:2] == b[:2]:
                parts = sorted(a[2] + b[2], key=lambda t: t[1])
                if all(x[2] <= y[1] for x, y in zip(parts, parts[1:])):
                    res = (a[0], a[1], parts)
    memo[id(v)] = res
    return res


def _side_by_side(r, a, b, out, memo):
    """a + b as one cat when together they are placements along one dim of ranges that touch, from lo to hi (see
    _pieces); else None."""
    if not (isinstance(a, Value) and isinstance(b, Value)) or a.dtype is not out.dtype or b.dtype is not out.dtype:
        return None
    pa, pb = _pieces(a, memo), _pieces(b, memo)
    if pa is None or pb is None or pa[:2] != pb[:2] or tuple(out.shape) != pa[1]:
        return None
    d, shape = pa[0], pa[1]
    ranges = sorted(pa[2] + pb[2], key=lambda t: t[1])
    if any(x[2] != y[1] for x, y in zip(ranges, ranges[1:])):
        return None
    parts = []
    for g, _, _ in ranges:              # a cat of cats along the same dim is one cat
        p = g.producer
        parts += list(p.inputs) if p is not None and p.op is OPS["cat"] and p.attrs["dim"] == d else [g]
    lo, hi = ranges[0][1], ranges[-1][2]
    cshape = tuple(shape[:d]) + (hi - lo,) + tuple(shape[d + 1:])
    (c,) = r.g.add_node(OPS["cat"], parts, {"dim": d}, [AVal(cshape, out.dtype)])
    if (lo, hi) == (0, shape[d]):
        return c
    spec = tuple(slice(lo, hi) if k == d else slice(None) for k in range(len(shape)))
    (v,) = r.g.add_node(OPS["index_backward"], [c], {"shape": shape, "spec": spec}, [AVal(shape, out.dtype)])
    return v


def simplify(g):
    r = Rewriter(g)
    consts = {r.map[v]: a for v, a in g.consts.items()}
    memo = {}                   # _pieces of the new graph's values
    for n in g.nodes:
        ins = [r.get(i) for i in n.inputs]
        out = n.outputs[0]
        op = n.op
        if op is OPS["add"] and len(ins) == 2 and not n.attrs:
            v = _side_by_side(r, ins[0], ins[1], out, memo)
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
