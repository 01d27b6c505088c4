"""Matmul epilogues BLAS does itself: `P + alpha * (A @ B)` becomes one `gemm_acc` node (C = alpha*A@B + C).

The pattern is every SGD-like update of a weight by a matrix gradient, `W - lr * X.T @ dZ`: numpy's matmul
would write the product to a fresh array and a fused kernel would read it and W again; BLAS with beta = 1 adds
the product into the output while it computes it. The executor writes it into W's own array when W is donated
(see executor._donations), else into a copy of P. A backend lowering, after autodiff (the node has no derivative)
and before fusion; the interpreter backend keeps the plain ops as the reference.
"""
import numpy as np

from tracejit.kernels.cpu.blas import gemm_acc
from ...ir.graph import Value
from ...ops.registry import OPS, AVal, Op
from ...passes.rewrite import Rewriter, use_counts


def _impl(p, a, b, alpha, into_p=False, transposed=False, out=None):
    """p + alpha * a @ b (`transposed`: p + alpha * (a @ b).T, i.e. b.T @ a.T, transposed views BLAS reads as they
    are): into `out` (p's own array, donated) or, `into_p`, into p (a partial sum nothing else reads) when BLAS
    can write it there, else into a copy."""
    if transposed:
        a, b = b.T, a.T
    if into_p:
        out = p
    if out is not None and type(out) is np.ndarray and gemm_acc(a, b, out, alpha, 1.0):
        return out
    c = np.array(p, order="C")
    if not gemm_acc(a, b, c, alpha, 1.0):
        c += alpha * (a @ b) if alpha != 1 else a @ b
    return c


def _meta(p, a, b, alpha, into_p=False, transposed=False, out=None):
    return AVal(p.shape, p.dtype)


GEMM_ACC = Op("gemm_acc", _impl, _meta, None, kind="matmul", saves="")
# smaller updates stay matmul + fused kernel (the BLAS call from numba costs ~0.5 us: a 512x10 update by a k=64
# product took 31 us as gemm_acc, 36 us as matmul and kernel; through ctypes it had taken 41 us)
MIN_ELEMENTS = 1 << 12


def _product(v, uses, min_elements=MIN_ELEMENTS):
    """(A, B, transposed, nodes) when v is a 2-D float matmul read once, or its transpose (nn.Linear's weight
    gradient: (B.T @ A.T)), else None."""
    n = v.producer if isinstance(v, Value) else None
    if n is not None and n.op.name == "permute" and tuple(n.attrs["dims"]) == (1, 0) and uses.get(id(v)) == 1:
        ab = _product(n.inputs[0], uses, min_elements)
        return None if ab is None or ab[2] else (ab[0], ab[1], True, ab[3] + [n])
    if n is None or n.op.name != "matmul" or uses.get(id(v)) != 1 or len(v.shape) != 2 or \
            v.dtype.np not in (np.float32, np.float64) or any(len(x.shape) != 2 for x in n.inputs) or \
            v.shape[0] * v.shape[1] < min_elements:
        return None
    return n.inputs[0], n.inputs[1], False, [n]


def _gemm_acc(r, p, a, b, alpha, transposed, **attrs):
    """A gemm_acc node in the new graph: p + alpha * (a @ b), or its transpose added."""
    attrs = dict(attrs, alpha=alpha, **({"transposed": True} if transposed else {}))
    return r.g.add_node(GEMM_ACC, [p, r.get(a), r.get(b)], attrs, [AVal(p.shape, p.dtype)])[0]


def gemm_updates(g):
    """`P + k * (A @ B)`, `P - k * (A @ B)`, `P +- A @ B` (k a Python number; P an input of the program; P, A, B
    2-D, float32 or float64, P of the product's shape, the product and its scaled value read by nothing else)
    -> gemm_acc(P, A, B)."""
    uses = use_counts(g, returned=2)      # (returned: never folded away)

    def scaled(v):
        """(A, B, transposed, k, the nodes it replaces) for v = k * product or a product (k = 1)."""
        ab = _product(v, uses)
        if ab is not None:
            return ab[:3] + (1.0, ab[3])
        n = v.producer if isinstance(v, Value) else None
        if n is None or n.op.name != "mul" or uses.get(id(v)) != 1:
            return None
        x, y = n.inputs
        k, m = (x, y) if not isinstance(x, Value) else (y, x)
        if isinstance(k, Value) or isinstance(k, bool) or not isinstance(k, (int, float)):
            return None
        ab = _product(m, uses)
        return None if ab is None else ab[:3] + (float(k), ab[3] + [n])

    # P a program input (a weight, optimizer state): an intermediate P (momentum's mu * buf) would leave the
    # fused kernel that computes it and the update together, for a copy and a second kernel
    inputs = set(id(v) for v in g.inputs)
    found = {}        # id(add/sub node) -> (P, A, B, transposed, alpha)
    dead = set()      # ids of the nodes the gemm_acc replaces (the matmul, its transpose, the scaling)
    for n in g.nodes:
        if (n.op.name != "add" and n.op.name != "sub") or len(n.inputs) != 2:
            continue
        out = n.outputs[0]
        for j in ((0, 1) if n.op.commutative else (0,)):
            p, t = n.inputs[j], n.inputs[1 - j]
            if not (isinstance(p, Value) and id(p) in inputs and isinstance(t, Value) and len(out.shape) == 2 and
                    p.dtype is out.dtype is t.dtype and tuple(p.shape) == tuple(out.shape) == tuple(t.shape)):
                continue
            s = scaled(t)
            if s is not None:
                a, b, transposed, k, nodes = s
                found[id(n)] = (p, a, b, transposed, -k if n.op.name == "sub" else k)
                dead.update(id(m) for m in nodes)
                break
    if not found:
        return g
    r = Rewriter(g)
    for n in g.nodes:
        if id(n) in dead:
            continue
        if id(n) in found:
            p, a, b, transposed, alpha = found[id(n)]
            r.alias(n.outputs[0], _gemm_acc(r, r.get(p), a, b, alpha, transposed))
        else:
            r.copy(n)
    return r.finish()


def product_sums(g):
    """A sum of several 2-D float products, each read only by the sum (an unrolled RNN's weight gradient: one
    product per time step, `sum_t dZ_t.T @ X_t`) -> the first product, then a gemm_acc per further product adding
    it into that same array (`into_p`), each where its product was computed. The sum is then one array, hot in
    the cache, instead of T products kept alive for one wide kernel at the end (LSTM-64's weight gradients:
    64 [256, 64] products and a 64-input add). Other terms of the sum, broadcast ones too (biases), are added after
    the last product: LSTM gates `(x @ W_ih.T + b_ih) + (h @ W_hh.T + b_hh)` are one array, then the biases."""
    uses = use_counts(g, returned=2)

    def plain_add(n, like):             # an add of two values of like's dtype, to like's shape (broadcasting)
        return n.op.name == "add" and len(n.inputs) == 2 and tuple(n.outputs[0].shape) == tuple(like.shape) and \
            all(isinstance(x, Value) and x.dtype is like.dtype for x in n.inputs)

    where = {id(n): k for k, n in enumerate(g.nodes)}
    taken, plans = set(), {}          # ids of the add nodes in a rewritten sum; root add id -> (products, others)
    for n in reversed(g.nodes):       # (the outermost add of a sum comes first)
        if id(n) in taken or not n.outputs or len(n.outputs[0].shape) != 2 or not plain_add(n, n.outputs[0]):
            continue
        adds, terms, todo = [n], [], list(n.inputs)
        while todo:
            v = todo.pop()
            p = v.producer
            if p is not None and uses.get(id(v)) == 1 and plain_add(p, n.outputs[0]):
                adds.append(p)
                todo.extend(p.inputs)
            else:
                terms.append((_product(v, uses, 0), v))
        prods = sorted((p for p, _ in terms if p is not None), key=lambda p: where[id(p[3][0])])
        if len(prods) >= 2:
            taken.update(id(m) for m in adds)
            plans[id(n)] = (prods, [v for p, v in terms if p is None])
    if not plans:
        return g
    first = {}                 # id(matmul node) -> (plan root id, product index)
    dead = set()
    for root, (prods, _) in plans.items():
        for j, p in enumerate(prods):
            first[id(p[3][0])] = (root, j)
            dead.update(id(m) for m in p[3])
    acc = {}                   # plan root id -> the partial sum so far (new graph)
    r = Rewriter(g)
    for n in g.nodes:
        if id(n) in first:
            root, j = first[id(n)]
            a, b, transposed, _ = plans[root][0][j]
            if j:
                acc[root] = _gemm_acc(r, acc[root], a, b, 1.0, transposed, into_p=True)
                continue
            a, b = r.get(a), r.get(b)
            if transposed:      # (a C-contiguous first product: B.T @ A.T)
                a, b = [r.g.add_node(OPS["permute"], [x], {"dims": (1, 0)}, AVal(x.shape[::-1], x.dtype))[0]
                        for x in (b, a)]
            (acc[root],) = r.g.add_node(OPS["matmul"], [a, b], {}, [AVal((a.shape[0], b.shape[1]), a.dtype)])
        elif id(n) in dead or id(n) in taken and id(n) not in plans:
            continue
        elif id(n) in plans:
            s = acc[id(n)]
            for v in plans[id(n)][1]:
                (s,) = r.g.add_node(OPS["add"], [s, r.get(v)], {}, [AVal(s.shape, s.dtype)])
            r.alias(n.outputs[0], s)
        else:
            r.copy(n)
    return r.finish()
