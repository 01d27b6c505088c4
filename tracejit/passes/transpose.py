"""Transposed products: a product read only through a permute whose last axis is the product's row axis,
`(A @ B).T` in 2-D, becomes `B.T @ A.T` (`.T` swapping the last two axes), permuted the same way otherwise.

Autodiff of `x @ W.T` (nn.Linear) gives the weight's gradient as the transpose of `x.T @ g`: a strided view of a
product. BLAS computes `g.T @ x` from the same operands at the same cost, laid out as the weight is; whatever
reads the gradient as memory (a flatten into DistributedDataParallel's gradient bucket, a copy into `.grad`)
then reads it in order instead of a transposed copy (4 MiB of float32 transposed: several milliseconds). The
same for batched products: attention's key gradient, `(q.T @ dS).T` per head, came out as a view whose every
row was a column of the product, and the `cat` of the q, k, v gradients into the fused qkv projection's copied
it at 0.30-0.44 ms instead of 0.08 (the GPT bench, 16x64x128 each).
"""
from ..ir.graph import Value
from ..ops.registry import OPS
from .rewrite import Rewriter, use_counts


def _swap_last(nd):
    return tuple(range(nd - 2)) + (nd - 1, nd - 2)


def _dims(n, nd):
    return tuple(d % nd for d in n.attrs["dims"])


def _rewritable(n, uses):
    """n is a permute whose last axis is the row axis of a product of two values of its rank that nothing else
    reads."""
    src = n.inputs[0] if n.op.name == "permute" and n.inputs else None
    m = src.producer if isinstance(src, Value) else None
    if m is None or m.op.name != "matmul" or uses[id(src)] != 1 or src.ndim < 2:
        return False
    nd = src.ndim
    return _dims(n, nd)[-1] == nd - 2 and all(isinstance(x, Value) and x.ndim == nd for x in m.inputs)


def _transposed(x):
    """The node computing x as x's operand with its last two axes swapped, or None."""
    p = x.producer
    return p if p is not None and p.op.name == "permute" and _dims(p, x.ndim) == _swap_last(x.ndim) else None


def _t(r, x):
    """x with its last two axes swapped, in the new graph: the operand of x when x is itself such a view
    (autodiff's `g.T`), else a permute."""
    p = _transposed(x)
    if p is not None:
        return r.get(p.inputs[0])
    x, dims = r.get(x), _swap_last(x.ndim)
    return r.g.add_node(OPS["permute"], [x], {"dims": dims}, [OPS["permute"].meta(x, dims=dims)])[0]


def transposed_products(g):
    uses = use_counts(g)
    found = [n for n in g.nodes if _rewritable(n, uses)]
    if not found:
        return g                    # (nothing to rewrite: no copy of the graph)
    # not copied: the products (read only by their permutes) and transposed operands read only by them
    skip = set()
    for n in found:
        m = n.inputs[0].producer
        skip.add(id(m))
        for x in m.inputs:
            t = _transposed(x)
            if t is not None and uses[id(x)] == 1:
                skip.add(id(t))
    found = set(map(id, found))
    r = Rewriter(g)
    for n in g.nodes:
        if id(n) in found:
            a, b = n.inputs[0].producer.inputs
            nd = a.ndim
            lhs, rhs = _t(r, b), _t(r, a)
            # the permute of the product read the other way round: its axes nd-2 and nd-1 swapped
            dims = tuple({nd - 2: nd - 1, nd - 1: nd - 2}.get(d, d) for d in _dims(n, nd))
            if dims == tuple(range(nd)):
                (out,) = r.g.add_node(OPS["matmul"], [lhs, rhs], {}, [n.outputs[0]])
            else:
                (prod,) = r.g.add_node(OPS["matmul"], [lhs, rhs], {}, [OPS["matmul"].meta(lhs, rhs)])
                (out,) = r.g.add_node(OPS["permute"], [prod], {"dims": dims}, [n.outputs[0]])
            r.alias(n.outputs[0], out)
        elif id(n) not in skip:
            r.copy(n)
    return r.finish()
