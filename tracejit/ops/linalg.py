"""Matrix products. One primitive, batched `matmul` (ndim >= 2, broadcast batch dims), and `einsum`;
mm, bmm, inner, outer are composed from them; `addmm`, `mv`, `dot` are ops that lower to them."""
import numpy as np

from .. import _dtype as D
from .._state import STATE
from .registry import AVal, apply, broadcast_shapes, defop, OPS
from .shape_ops import transpose


def _matmul_meta(a, b):
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a.shape[-2:]))} and "
                           f"{'x'.join(map(str, b.shape[-2:]))})")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return AVal(batch + (a.shape[-2], b.shape[-1]), a.dtype)


def _matmul_np(a, b):
    if a.dtype != b.dtype or a.shape[-1] != b.shape[-2]:
        _matmul_meta(AVal(a.shape, D._FROM_NP[a.dtype]), AVal(b.shape, D._FROM_NP[b.dtype]))
    if b.ndim == 2 and a.ndim > 2:
        # [..., M, K] @ [K, N] (a Linear layer on a batch of sequences): one [prod(...) * M, K] @ [K, N] product
        # instead of numpy's loop of small ones (a copy first when the batch dims do not merge)
        return np.matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[-1],))
    try:
        return np.matmul(a, b)
    except ValueError:      # batch dims that do not broadcast: the shape rule's message names them
        _matmul_meta(AVal(a.shape, D._FROM_NP[a.dtype]), AVal(b.shape, D._FROM_NP[b.dtype]))
        raise


def _mT(x):
    return transpose(x, -1, -2)


def _mat2_grad(a, g, b):
    """a^T @ g, the gradient of the matrix b in a @ b. When b is a transposed row-major matrix (a Linear's
    weight.t()), eagerly, it is computed as (g^T @ a)^T, in b's layout, as PyTorch's mm backward does: the
    weight's gradient then is row-major, like the weight, and AccumulateGrad needs no transposing copy."""
    d = b._data
    if STATE.tracer is None and type(d) is np.ndarray and d.ndim == 2 and d.flags.f_contiguous and \
            not d.flags.c_contiguous:
        return _mT(apply(OPS["matmul"], _mT(g), a))
    return apply(OPS["matmul"], _mT(a), g)


def _matmul_vjp(c, g):
    a, b = c.inputs
    ga = apply(OPS["matmul"], g, _mT(b)) if c.edges[0] is not None else None
    gb = None
    if c.edges[1] is not None:
        if len(c.shapes[1]) == 2 and len(c.shapes[0]) > 2:
            # the weight's gradient of a batched Linear: one a^T @ g over all rows, not a product per batch
            # element summed afterwards ([batch, K, N] in memory)
            from .shape_ops import reshape
            K, N = c.shapes[1]
            gb = _mat2_grad(reshape(a, (-1, K)), reshape(g, (-1, N)), b)
        elif len(c.shapes[0]) == 2 == len(c.shapes[1]):
            gb = _mat2_grad(a, g, b)        # x @ w.t(): in w.t()'s layout, as PyTorch's mm backward
        else:
            gb = apply(OPS["matmul"], _mT(a), g)
    return ga, gb  # the engine sums broadcast batch dims back


defop("matmul", _matmul_np, _matmul_meta, _matmul_vjp, kind="matmul", saves="i", grad_name="MmBackward0",
      reads=lambda i, args: args[1 - i]._requires_grad)  # a @ b reads a only for b's gradient


def matmul(input, other):
    if other.ndim == 1 and input.ndim in (1, 2):        # PyTorch's matmul: dot and mv (their own nodes)
        return dot(input, other) if input.ndim == 1 else mv(input, other)
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {input.ndim}D and "
                           f"{other.ndim}D")
    a = input.reshape(1, -1) if input.ndim == 1 else input
    b = other.reshape(-1, 1) if other.ndim == 1 else other
    if a.shape[-1] != b.shape[-2]:
        if input.ndim == 1 and other.ndim == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                               f"[{other.shape[0]}] to have the same number of elements, but got {input.shape[0]} "
                               f"and {other.shape[0]} elements respectively")
        if other.ndim == 1:     # PyTorch folds a batch of matrices by a vector into one mv
            m = int(np.prod(a.shape[:-1]))
            raise RuntimeError(f"size mismatch, got input ({m}), mat ({m}x{a.shape[-1]}), vec ({other.shape[0]})")
        if b.ndim > 2:          # a bmm over the broadcast batch (PyTorch's text for operands not requiring grad)
            n = int(np.prod(broadcast_shapes(a.shape[:-2], b.shape[:-2])))
            raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{n}, {a.shape[-1]}] "
                               f"but got: [{n}, {b.shape[-2]}].")
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a.shape[-2:]))} and "
                           f"{'x'.join(map(str, b.shape[-2:]))})")
    if a.dtype is not b.dtype:
        dt = D.promote_types(a.dtype, b.dtype)
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}")
    out = apply(OPS["matmul"], a, b)
    if input.ndim == 1:
        out = out.squeeze(-2)
    if other.ndim == 1:
        out = out.squeeze(-1)
    return out


def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: expected 3D tensors, got {input.ndim}D and {mat2.ndim}D")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: {input.shape[0]} and {mat2.shape[0]}")
    from .shape_ops import _node_named
    return _node_named(matmul(input, mat2), input, "BmmBackward0")   # one matmul node: PyTorch's bmm


# mv and dot are ops of their own (PyTorch's MvBackward0 / DotBackward0, with an edge per operand); a backend lowers
# them to a matmul between views (`decompose`)
def _dtname(d):
    from .._out import _CATEGORY
    return _CATEGORY[d.name]


def _mv_meta(mat, vec):
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({mat.shape[0]}), mat ({mat.shape[0]}x{mat.shape[1]}), vec "
                           f"({vec.shape[0]})")
    if mat.dtype is not vec.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {_dtname(vec.dtype)}, "
                           f"{_dtname(mat.dtype)}, and {_dtname(vec.dtype)}")
    return AVal(mat.shape[:1], mat.dtype)


def _dot_meta(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape != b.shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have "
                           f"the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {_dtname(a.dtype)} and "
                           f"{_dtname(b.dtype)}")
    return AVal((), a.dtype)


def _checked_np(meta):
    def impl(a, b):
        meta(AVal(a.shape, D._FROM_NP[a.dtype]), AVal(b.shape, D._FROM_NP[b.dtype]))   # PyTorch's errors
        return np.asarray(np.matmul(a, b))
    return impl


def _mv_vjp(c, g):
    from .shape_ops import reshape
    mat, vec = c.inputs
    gm = reshape(g, (-1, 1)) * reshape(vec, (1, -1)) if c.edges[0] is not None else None
    return gm, apply(OPS["mv"], _mT(mat), g) if c.edges[1] is not None else None


def _mv_decompose(mat, vec):
    from .shape_ops import reshape
    return reshape(apply(OPS["matmul"], mat, reshape(vec, (-1, 1))), mat.shape[:1])


def _dot_decompose(a, b):
    from .shape_ops import reshape
    return reshape(apply(OPS["matmul"], reshape(a, (1, -1)), reshape(b, (-1, 1))), ())


def _reads_other(i, args):
    return args[1 - i]._requires_grad


defop("mv", _checked_np(_mv_meta), _mv_meta, _mv_vjp, kind="matmul", saves="i", reads=_reads_other,
      decompose=_mv_decompose, fuses_in_parts=True)
defop("dot", _checked_np(_dot_meta), _dot_meta, lambda c, g: (g * c.inputs[1], g * c.inputs[0]), kind="matmul",
      saves="i", reads=_reads_other, decompose=_dot_decompose, fuses_in_parts=True)


def _tensor_args(fn, names, args):
    from .._tensor import Tensor
    for i, (name, a) in enumerate(zip(names, args)):
        if not isinstance(a, Tensor):
            raise TypeError(f"{fn}(): argument '{name}' (position {i + 1}) must be Tensor, not {type(a).__name__}")


def mv(input, vec):
    _tensor_args("mv", ("input", "vec"), (input, vec))
    return apply(OPS["mv"], input, vec)


def dot(input, other):
    _tensor_args("dot", ("input", "tensor"), (input, other))
    return apply(OPS["dot"], input, other)


def vdot(input, other):
    from .shape_ops import _node_named
    return _node_named(dot(input, other), input, "VdotBackward0")     # real tensors: vdot is dot


def inner(input, other):
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    if other.ndim <= 2:
        return matmul(input, _mT(other) if other.ndim > 1 else other)
    # contract the last dims: out shape is input.shape[:-1] + other.shape[:-1]
    out = matmul(input, _mT(other.reshape(-1, other.shape[-1])))
    return out.reshape(tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


def outer(input, vec2):
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


ger = outer


def _add_scaled(input, prod, beta, alpha):
    """beta * input + alpha * prod; beta == 0 ignores input's values (nan/inf), as PyTorch does."""
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        from .shape_ops import expand
        from .registry import broadcast_shapes
        return expand(prod, broadcast_shapes(input.shape, prod.shape))
    return prod + (input if beta == 1 else input * beta)


# addmm is an op of its own (PyTorch's AddmmBackward0 node, with edges input, mat1, mat2: F.linear's graph); a
# backend lowers it to matmul and the scaled add (`decompose`), so it needs no kernel
def _addmm_meta(input, mat1, mat2, *, beta=1, alpha=1):
    from .._out import _CATEGORY
    from .shape_ops import _expanded_shape
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    for name, a in (("self", input), ("mat1", mat1)):
        if a.dtype is not mat2.dtype:
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got {_CATEGORY[a.dtype.name]} and "
                               f"{_CATEGORY[mat2.dtype.name]}")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
                           f"{mat2.shape[0]}x{mat2.shape[1]})")
    shape = (mat1.shape[0], mat2.shape[1])
    _expanded_shape(tuple(input.shape), shape, f"torch.{_CATEGORY[input.dtype.name]}Tensor")
    return AVal(shape, mat2.dtype)


def _addmm_np(input, mat1, mat2, *, beta=1, alpha=1):
    if not (mat1.ndim == mat2.ndim == 2 and mat1.shape[1] == mat2.shape[0] and input.dtype == mat1.dtype == mat2.dtype
            and input.shape in (mat2.shape[1:], (mat1.shape[0], mat2.shape[1]))):  # (a Linear's need no shape rule)
        _addmm_meta(*[AVal(a.shape, D._FROM_NP[a.dtype]) for a in (input, mat1, mat2)])
    r = np.matmul(mat1, mat2)
    if alpha != 1:
        r = (r * alpha).astype(r.dtype, copy=False)
    if beta == 0:           # input's values are ignored (nan and inf too), as in PyTorch
        return r
    # into the product's fresh array (the shape rule checked that input expands to it): no second output to fault in
    return np.add(r, input if beta == 1 else (input * beta).astype(input.dtype, copy=False), out=r)


def _addmm_vjp(c, g):
    _, a, b = c.inputs
    beta, alpha = c.attrs.get("beta", 1), c.attrs.get("alpha", 1)
    gi = (g if beta == 1 else g * beta) if c.edges[0] is not None else None
    ga = apply(OPS["matmul"], g, _mT(b)) if c.edges[1] is not None else None
    gb = _mat2_grad(a, g, b) if c.edges[2] is not None else None
    if alpha != 1:
        ga, gb = (None if x is None else x * alpha for x in (ga, gb))
    return gi, ga, gb       # the engine sums input's broadcast dims back


def _addmm_decompose(input, mat1, mat2, *, beta=1, alpha=1):
    return _add_scaled(input, apply(OPS["matmul"], mat1, mat2), beta, alpha)


defop("addmm", _addmm_np, _addmm_meta, _addmm_vjp, kind="matmul", saves="i", decompose=_addmm_decompose,
      fuses_in_parts=True, reads=lambda i, args: i > 0 and args[3 - i]._requires_grad)   # mat1 only for mat2's gradient, and back


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    _tensor_args("addmm", ("input", "mat1", "mat2"), (input, mat1, mat2))
    return apply(OPS["addmm"], input, mat1, mat2, beta=beta, alpha=alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    # PyTorch's checks: input is a vector of mat's rows, or of one element (it never broadcasts the product)
    if input.ndim > 1 or mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    n = int(np.prod(input.shape))
    if mat.shape[1] != vec.shape[0] or (n != mat.shape[0] and n != 1):
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat ({mat.shape[0]}x{mat.shape[1]}), vec "
                           f"({vec.shape[0]})")
    return _add_scaled(input, mv(mat, vec), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    from .._out import _CATEGORY
    from .shape_ops import _expanded_shape
    prod = bmm(batch1, batch2)
    _expanded_shape(tuple(input.shape), tuple(prod.shape), f"torch.{_CATEGORY[input.dtype.name]}Tensor")  # as PyTorch
    return _add_scaled(input, prod, beta, alpha)


# ----------------------------------------------------------------------------- einsum

def _parse(eq, ndims):
    eq = eq.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise RuntimeError(f"einsum(): {len(terms)} operands in the equation but {len(ndims)} given")
    letters = sorted(set("".join(terms).replace(".", "")))
    free = [ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if ch not in letters]
    for i, (t, n) in enumerate(zip(terms, ndims)):
        if len(t.replace("...", "")) > n or ("..." not in t and len(t) != n):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(t.replace('...', ''))}) "
                               f"does not match the number of dimensions ({n}) for operand {i}"
                               + ("" if "..." in t else " and no ellipsis was given"))
    # ellipsis dims are right-aligned across operands (they broadcast like ordinary dims)
    ks = [n - (len(t) - 3) for t, n in zip(terms, ndims) if "..." in t]
    ell = "".join(free[:max(ks)]) if ks else None
    out_terms = []
    for t, n in zip(terms, ndims):
        if "..." in t:
            k = n - (len(t) - 3)
            t = t.replace("...", ell[len(ell) - k:])
        out_terms.append(t)
    if not _:
        counts = {}
        for t in out_terms:
            for ch in t:
                counts[ch] = counts.get(ch, 0) + 1
        rhs = (ell or "") + "".join(ch for ch in letters if counts.get(ch) == 1)
    else:
        rhs = rhs.replace("...", ell or "")
        for ch in rhs:
            if ch not in "".join(out_terms):
                raise RuntimeError(f"einsum(): output subscript {ch} does not appear in the equation for any input "
                                   f"operand")
    return out_terms, rhs


def _einsum_meta(*xs, terms, out):
    sizes = {}
    for t, x in zip(terms, xs):
        for ch, s in zip(t, x.shape):
            if sizes.get(ch, s) != s and s != 1 and sizes[ch] != 1:
                raise RuntimeError(f"einsum(): operands do not broadcast for subscript {ch}: {sizes[ch]} vs {s}")
            sizes[ch] = s if sizes.get(ch, 1) == 1 else sizes[ch]
    return AVal(tuple(sizes[ch] for ch in out), xs[0].dtype)


def _einsum_np(*xs, terms, out):
    sizes = {}
    for t, x in zip(terms, xs):
        for ch, s in zip(t, x.shape):
            if s != 1:
                sizes[ch] = s
    # numpy's einsum does not broadcast size-1 subscripts; PyTorch does
    xs = [x if all(s == sizes.get(ch, s) for ch, s in zip(t, x.shape)) else
          np.broadcast_to(x, tuple(sizes.get(ch, s) for ch, s in zip(t, x.shape))) for t, x in zip(terms, xs)]
    return np.einsum(",".join(terms) + "->" + out, *xs, optimize=len(xs) > 2)


def _einsum_vjp(c, g):
    terms, out = c.attrs["terms"], c.attrs["out"]
    xs = c.inputs
    grads = []
    for i, t in enumerate(terms):
        if c.edges[i] is None:
            grads.append(None)
            continue
        u = "".join(dict.fromkeys(t))   # the operand's distinct subscripts (t repeats some for a diagonal)
        size = {ch: c.shapes[i][t.index(ch)] for ch in u}
        others = [(terms[j], xs[j]) for j in range(len(xs)) if j != i]
        avail = set(out).union(*[set(tt) for tt, _ in others])
        keep = "".join(ch for ch in u if ch in avail)
        gi = einsum_terms([out] + [tt for tt, _ in others], keep, g, *[x for _, x in others])
        # subscripts summed away only in this operand, or size 1 elsewhere (broadcast): expand the gradient
        full = [gi.shape[keep.index(ch)] if ch in avail else 1 for ch in u]
        if keep != u:
            gi = gi.reshape(full)
        want = [size[ch] if f == 1 else f for f, ch in zip(full, u)]
        if want != full:
            gi = gi.expand(want)
        if u != t:  # a repeated subscript: the gradient lives on that diagonal (identity matrices place it)
            from ..creation import eye
            fresh = [ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     if ch not in "".join(terms) + out]
            t2, eyes, seen = "", [], set()
            for ch in t:
                if ch in seen:
                    f = fresh.pop(0)
                    t2 += f
                    eyes.append(ch + f)
                else:
                    seen.add(ch)
                    t2 += ch
            mats = [eye(size[e[0]], dtype=gi.dtype) for e in eyes]
            gi = einsum_terms([u] + eyes, t2, gi, *mats)
        grads.append(gi)
    return tuple(grads)


defop("einsum", _einsum_np, _einsum_meta, _einsum_vjp, kind="matmul", saves="i",
      aliases=True)   # numpy gives a view for a pure permutation or diagonal ("ij->ji", "ii->i")


def einsum_terms(terms, out, *xs):
    return apply(OPS["einsum"], *xs, terms=tuple(terms), out=out)


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    terms, out = _parse(equation, [x.ndim for x in operands])
    for i, (t, x) in enumerate(zip(terms, operands)):    # a repeated subscript (a diagonal) does not broadcast
        first = {}
        for ch, s in zip(t, x.shape):
            if first.setdefault(ch, s) != s:
                raise RuntimeError(f"einsum(): subscript {ch} is repeated for operand {i} but the sizes don't match, "
                                   f"{s} != {first[ch]}")
    dt = operands[0].dtype
    for x in operands[1:]:
        if x.dtype is not dt:
            raise RuntimeError(f"einsum(): operands must have the same dtype, got {dt.name} and {x.dtype.name}")
    return einsum_terms(terms, out, *operands)
