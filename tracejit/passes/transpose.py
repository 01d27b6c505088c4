"""Transposed products: `(A @ B).T` (2-D, the product read by nothing else) becomes `B.T @ A.T`.

Autodiff of `x @ W.T` (nn.Linear) gives the weight's gradient as the transpose of `x.T @ g`: a strided view of a
product. BLAS computes `g.T @ x` from the same operands at the same cost, laid out as the weight is; whatever
reads the gradient as memory (a flatten into DistributedDataParallel's gradient bucket, a copy into `.grad`)
then reads it in order instead of a transposed copy (4 MiB of float32 transposed: several milliseconds).
"""
from ..ir.graph import Value
from ..ops.registry import OPS
from .rewrite import Rewriter, use_counts


def _rewritable(n, uses):
    """n is `permute(dims=(1, 0))` of a 2-D product of two 2-D values that nothing else reads."""
    src = n.inputs[0] if n.op.name == "permute" and n.inputs else None
    m = src.producer if isinstance(src, Value) else None
    return m is not None and m.op.name == "matmul" and tuple(n.attrs["dims"]) == (1, 0) and uses[id(src)] == 1 \
        and all(isinstance(x, Value) and x.ndim == 2 for x in m.inputs)


def _transposed(x):
    """The node computing x as a transpose of a 2-D value, or None."""
    p = x.producer
    return p if p is not None and p.op.name == "permute" and tuple(p.attrs["dims"]) == (1, 0) else None


def _t(r, x):
    """x.T in the new graph: the operand of x when x is itself a transpose (autodiff's `g.T`), else a permute."""
    p = _transposed(x)
    if p is not None:
        return r.get(p.inputs[0])
    x = r.get(x)
    return r.g.add_node(OPS["permute"], [x], {"dims": (1, 0)}, [OPS["permute"].meta(x, dims=(1, 0))])[0]


def transposed_products(g):
    uses = use_counts(g)
    found = [n for n in g.nodes if _rewritable(n, uses)]
    if not found:
        return g                    # (nothing to rewrite: no copy of the graph)
    # not copied: the products (read only by their transposes) and transposed operands read only by them
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
            (out,) = r.g.add_node(OPS["matmul"], [_t(r, b), _t(r, a)], {}, [n.outputs[0]])
            r.alias(n.outputs[0], out)
        elif id(n) not in skip:
            r.copy(n)
    return r.finish()
