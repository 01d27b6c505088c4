"""Small matrix products of an unrolled loop, batched into one GEMM each.

A loop over time written in Python (an RNN cell called once per step) traces into many small products that do
not depend on each other:

- `x[t] @ W` for every step t (the input projection): one product `x.reshape(T*m, k) @ W`, whose rows
  `[t*m, (t+1)*m)` are the step's product (read as a view);
- the weight's gradient `sum over t of A_t.T @ B_t` (an add tree, as the autograd engine accumulates it): one
  product `cat(A).T @ cat(B)` (when every A_t is x[t], over consecutive steps: x itself, no copy).

Each small product costs a BLAS call and a pass of the executor (10-30 us for [32, 64] operands, most of it
overhead); the batched one runs at BLAS speed. Only products up to SMALL_FLOPS each are batched: bigger ones are
not overhead-bound, and the cat of their operands would cost a copy for nothing. The sums are reordered (one GEMM
adds in its own order): float rounding may differ from the unrolled sum in the last bits.
"""
from ..ir.graph import Value
from ..ops.registry import OPS, AVal
from .dce import dce
from .rewrite import Rewriter, use_counts

SMALL_FLOPS = 1 << 22         # 2*m*k*n of one product


def _step(v):
    """(X, t) when v is X[t]: a `slice` by one integer of a 3-d X, else None."""
    n = v.producer if isinstance(v, Value) else None
    if n is None or n.op is not OPS["slice"] or n.inputs[0].ndim != 3:
        return None
    spec = n.attrs["spec"]
    if len(spec) != 1 or type(spec[0]) is not int:
        return None
    return n.inputs[0], spec[0] % n.inputs[0].shape[0]


def _small(n):
    a, b = n.inputs
    return isinstance(a, Value) and isinstance(b, Value) and a.ndim == 2 and b.ndim == 2 and not n.attrs and \
        a.dtype is b.dtype and a.dtype.is_floating_point and 2 * a.shape[0] * a.shape[1] * b.shape[1] <= SMALL_FLOPS


def _input_projections(g):
    """{id(node): (X, R, [(t, node)...])} for products X[t] @ R, two or more of one (X, R)."""
    groups = {}
    for n in g.nodes:
        if n.op is OPS["matmul"] and _small(n):
            st = _step(n.inputs[0])
            if st is not None:
                groups.setdefault((id(st[0]), id(n.inputs[1])), (st[0], n.inputs[1], []))[2].append((st[1], n))
    return {id(m): grp for grp in groups.values() if len(grp[2]) > 1 for _, m in grp[2]}


def _terms(v, memo, uses):
    """[(A, B)...] when v is a sum (an add tree, each add's operands read there only) of products A.T @ B of
    small 2-d operands of one shape pair, else None."""
    if id(v) in memo:
        return memo[id(v)]
    res = None
    n = v.producer if isinstance(v, Value) else None
    if n is not None and n.op is OPS["matmul"] and _small(n):
        p = n.inputs[0].producer
        if p is not None and p.op is OPS["permute"] and tuple(p.attrs["dims"]) == (1, 0):
            res = [(p.inputs[0], n.inputs[1])]
    elif n is not None and n.op is OPS["add"] and len(n.inputs) == 2 and not n.attrs and \
            all(isinstance(i, Value) and uses.get(id(i)) == 1 and tuple(i.shape) == tuple(v.shape) and
                i.dtype is v.dtype for i in n.inputs):
        a, b = (_terms(i, memo, uses) for i in n.inputs)
        if a is not None and b is not None and \
                (tuple(a[0][0].shape), tuple(a[0][1].shape)) == (tuple(b[0][0].shape), tuple(b[0][1].shape)):
            res = a + b
    memo[id(v)] = res
    return res


def _stacked(r, vals, made):
    """The values (2-d, one shape) stacked along dim 0, in order: a view of X when they are X[t0], X[t0+1], ...
    (`made`: the stacks made so far, by their values' ids: the step gradients of two weights are stacked once)"""
    key = tuple(map(id, vals))
    if key in made:
        return made[key]
    made[key] = out = _stack(r, vals)
    return out


def _stack(r, vals):
    steps = [_step(v) for v in vals]
    m, k = vals[0].shape
    X = steps[0][0] if steps[0] is not None else None
    if X is not None and all(s is not None and s[0] is X and s[1] == steps[0][1] + i for i, s in enumerate(steps)):
        t0 = steps[0][1]
        src = r.get(X)
        if len(vals) != X.shape[0]:
            (src,) = r.g.add_node(OPS["slice"], [src], {"spec": (slice(t0, t0 + len(vals)),)},
                                  [AVal((len(vals), m, k), X.dtype)])
        (out,) = r.g.add_node(OPS["reshape"], [src], {"shape": (len(vals) * m, k)}, [AVal((len(vals) * m, k), X.dtype)])
        return out
    (out,) = r.g.add_node(OPS["cat"], [r.get(v) for v in vals], {"dim": 0}, [AVal((len(vals) * m, k), vals[0].dtype)])
    return out


def _order(sums):
    """Each sum's terms in the order they are stacked: by step where every A is x[t] of one x (stacked as a view of
    x), else in the order another sum stacks the same B values (the gradients of the steps' outputs, which both
    weights of a step read: stacked once)."""
    orders = {}
    for k, terms in sums.items():
        steps = [_step(a) for a, _ in terms]
        if all(st is not None and st[0] is steps[0][0] for st in steps):
            sums[k] = terms = [tm for _, tm in sorted(zip([st[1] for st in steps], terms), key=lambda p: p[0])]
            orders[frozenset(id(b) for _, b in terms)] = [id(b) for _, b in terms]
    for k, terms in sums.items():
        order = orders.get(frozenset(id(b) for _, b in terms))
        if order is not None and len(order) == len(terms):
            at = {b: i for i, b in enumerate(order)}
            sums[k] = sorted(terms, key=lambda tm: at[id(tm[1])])


def batch_matmuls(g):
    proj = _input_projections(g)
    uses = use_counts(g)
    memo = {}
    sums = {}                   # id(root add node) -> its terms
    for n in g.nodes:
        if n.op is OPS["add"]:
            t = _terms(n.outputs[0], memo, uses)
            if t is not None:
                sums[id(n)] = t
    for n in g.nodes:           # only the roots: an add read by another add of the same tree is part of it
        if n.op is OPS["add"] and id(n) in sums:
            for i in n.inputs:
                if i.producer is not None:
                    sums.pop(id(i.producer), None)
    if not proj and not sums:
        return g
    _order(sums)
    r = Rewriter(g)
    done, made = set(), {}
    for n in g.nodes:
        grp = proj.get(id(n))
        if grp is not None:
            if id(n) in done:
                continue
            X, R, members = grp
            T, m, k = X.shape
            nn = R.shape[1]
            (x2,) = r.g.add_node(OPS["reshape"], [r.get(X)], {"shape": (T * m, k)}, [AVal((T * m, k), X.dtype)])
            (p,) = r.g.add_node(OPS["matmul"], [x2, r.get(R)], {}, [AVal((T * m, nn), X.dtype)])
            (p3,) = r.g.add_node(OPS["reshape"], [p], {"shape": (T, m, nn)}, [AVal((T, m, nn), X.dtype)])
            for t, mem in members:
                (o,) = r.g.add_node(OPS["slice"], [p3], {"spec": (t,)}, [AVal((m, nn), X.dtype)])
                r.alias(mem.outputs[0], o)
                done.add(id(mem))
            continue
        terms = sums.get(id(n))
        if terms is not None:
            a = _stacked(r, [x for x, _ in terms], made)
            b = _stacked(r, [y for _, y in terms], made)
            (at,) = r.g.add_node(OPS["permute"], [a], {"dims": (1, 0)}, [AVal(a.shape[::-1], a.dtype)])
            (out,) = r.g.add_node(OPS["matmul"], [at, b], {}, [n.outputs[0]])
            r.alias(n.outputs[0], out)
            continue
        r.copy(n)
    return dce(r.finish())
