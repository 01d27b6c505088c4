"""Matrix products. One primitive, batched `matmul` (ndim >= 2, broadcast batch dims), and `einsum`;
mm, bmm, inner, outer are composed from them; `addmm`, `mv`, `dot` are ops that lower to them."""
import numpy as np

from .. import _dtype as D
from ..kernels.cpu.blas import np_matmul
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
        return np_matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[-1],))
    try:
        return np_matmul(a, b)
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


# ----------------------------------------------------------------------------- torch.linalg: factorizations
# Each factorization is one op: numpy's LAPACK call for the value, a VJP written with registry ops (so it is
# differentiable again, and the symbolic autodiff pass emits it as graph nodes). The functions of torch.linalg that
# are products of these (solve_triangular, cholesky_solve, pinv's users, norms, matrix_power...) are compositions
# in tracejit/linalg.py and need no derivative of their own. Public names here are PyTorch's top-level functions and
# Tensor methods (inverse, det, ...): everything in this module without a leading underscore becomes both.
import collections  # noqa: E402


class _LinAlgError(RuntimeError):
    """A matrix the factorization cannot handle (singular, not positive-definite): PyTorch's torch.linalg.LinAlgError,
    a RuntimeError, so `except RuntimeError` still catches it."""


_LinAlgError.__module__ = "tracejit.linalg"

_slogdet_t = collections.namedtuple("slogdet", ["sign", "logabsdet"])
_qr_t = collections.namedtuple("qr", ["Q", "R"])
_svd_t = collections.namedtuple("svd", ["U", "S", "V"])


def _square_meta(name, A, square=True):
    """PyTorch's checks of a linalg input: a float32/float64 batch of (square) matrices."""
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {_dtname(A.dtype)}")
    if A.dtype is D.float16:
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got Half")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def _meta_checked(meta, fn):
    """An eager impl that applies the shape rule first (PyTorch's errors before numpy's)."""
    def impl(*arrays, **attrs):
        meta(*[AVal(a.shape, D._FROM_NP[a.dtype]) for a in arrays], **attrs)
        return fn(*arrays, **attrs)
    return impl


def _zero_pivot(m):
    """The 1-based position of the first zero pivot of m's LU factorization with partial pivoting (LAPACK's
    getrf info), or 0: which diagonal element PyTorch names when a matrix is singular."""
    m = np.array(m)
    n = m.shape[0]
    for k in range(n):
        p = k + int(np.argmax(np.abs(m[k:, k])))
        if m[p, k] == 0:
            return k + 1
        m[[k, p]] = m[[p, k]]
        m[k + 1:] -= np.outer(m[k + 1:, k] / m[k, k], m[k])
    return 0


def _batch_prefix(shape, b):
    return f"(Batch element {b}): " if len(shape) > 2 else ""


def _singular(name, a, text):
    """Raise PyTorch's LinAlgError for the first singular matrix of the batch a."""
    flat = a.reshape((-1,) + a.shape[-2:])
    for b, m in enumerate(flat):
        k = _zero_pivot(m)
        if k:
            raise _LinAlgError(f"{name}: {_batch_prefix(a.shape, b)}" + text.format(k=k))
    raise _LinAlgError(f"{name}: " + text.format(k="?"))


def _mm(a, b):
    return apply(OPS["matmul"], a, b)


def _eye_like(x, n):
    from ..creation import eye
    return eye(n, dtype=x.dtype)


# ---- inv: X = A^-1, dX = -X dA X, so gA = -X^T g X^T
def _inv_np(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        _singular("linalg.inv", a, "The diagonal element {k} is zero, the inversion could not be completed because "
                                   "the input matrix is singular.")


def _inv_meta(A):
    _square_meta("linalg.inv", A)
    return AVal(A.shape, A.dtype)


def _inv_vjp(c, g):
    xt = _mT(c.out)
    return (-_mm(_mm(xt, g), xt),)


defop("linalg_inv", _meta_checked(_inv_meta, _inv_np), _inv_meta, _inv_vjp, saves="o",
      grad_name="LinalgInvExBackward0")


# ---- solve: A X = B with B a batch of matrices (vectors are made columns by the caller); batch dims broadcast.
# gB = A^-T g (another solve), gA = -gB X^T; the engine sums broadcast batch dims back.
def _solve_meta(A, B):
    _square_meta("linalg.solve", A)
    if A.dtype is not B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{_dtname(A.dtype)} and B of type {_dtname(B.dtype)} instead")
    if B.ndim < 2 or B.shape[-2] != A.shape[-1]:
        rows, cols = (B.shape[-2], B.shape[-1]) if B.ndim >= 2 else (B.shape[-1] if B.ndim else 1, 1)
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {rows}x{cols})")
    return AVal(broadcast_shapes(A.shape[:-2], B.shape[:-2]) + B.shape[-2:], A.dtype)


def _solve_np(a, b):
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        _singular("torch.linalg.solve", np.broadcast_to(a, batch + a.shape[-2:]),
                  "The solver failed because the input matrix is singular.")


def _solve_vjp(c, g):
    a, _ = c.inputs
    gb = apply(OPS["linalg_solve"], _mT(a), g)
    ga = -_mm(gb, _mT(c.out)) if c.edges[0] is not None else None
    return ga, gb


defop("linalg_solve", _meta_checked(_solve_meta, _solve_np), _solve_meta, _solve_vjp, saves="io",
      grad_name="LinalgSolveExBackward0")


# ---- det. Its gradient is the cofactor matrix g * adj(A)^T, computed from the SVD A = U S V^T as
# det(U) det(V) U diag(prod_{j != i} s_j) V^T: unlike det(A) A^-T it is right for singular matrices too.
def _det_meta(A):
    _square_meta("linalg.det", A)
    return AVal(A.shape[:-2], A.dtype)


def _det_vjp(c, g):
    from .elementwise import where
    from .reduction import prod
    from .shape_ops import unsqueeze
    (a,) = c.inputs
    u, s, vh = apply(OPS["linalg_svd"], a, full_matrices=False)
    n = c.shapes[0][-1]
    others = where(_eye_like(s, n) != 0, 1.0, unsqueeze(s, -2))
    p = prod(others, -1)                        # p_i: the product of the singular values but the i-th
    sign = apply(OPS["linalg_det"], u) * apply(OPS["linalg_det"], vh)
    cof = _mm(u * unsqueeze(p, -2), vh)
    return (cof * unsqueeze(unsqueeze(g * sign, -1), -1),)


defop("linalg_det", _meta_checked(_det_meta, np.linalg.det), _det_meta, _det_vjp, saves="i",
      grad_name="LinalgDetBackward0")


# ---- slogdet: (sign, log|det|); only log|det| is differentiable: g A^-T
def _slogdet_meta(A):
    _square_meta("linalg.slogdet", A)
    return AVal(A.shape[:-2], A.dtype), AVal(A.shape[:-2], A.dtype)


def _slogdet_np(a):
    sign, logabs = np.linalg.slogdet(a)
    return np.asarray(sign, a.dtype), np.asarray(logabs, a.dtype)


def _slogdet_vjp(c, gsign, glog):
    from .shape_ops import unsqueeze
    if glog is None:
        return (None,)
    (a,) = c.inputs
    return (_mT(apply(OPS["linalg_inv"], a)) * unsqueeze(unsqueeze(glog, -1), -1),)


defop("linalg_slogdet", _meta_checked(_slogdet_meta, _slogdet_np), _slogdet_meta, _slogdet_vjp, nout=2, saves="i",
      grad_name="LinalgSlogdetBackward0")


# ---- cholesky: A = L L^T. Murray's formula: gA = L^-T phi(L^T gL) L^-1, phi = lower triangle with half its
# diagonal, then made symmetric (A is symmetric: only symmetric perturbations are meaningful)
def _cholesky_meta(A, upper=False, name="linalg.cholesky", check_errors=True):
    _square_meta(name, A)
    return AVal(A.shape, A.dtype)


def _potf2(m):
    """LAPACK's unblocked Cholesky of one matrix's lower triangle: (L, info). info > 0 is the order of the first
    leading minor that is not positive-definite; L then holds that column's pivot as computed (<= 0 or NaN) and
    the columns after it as given, as PyTorch's cholesky_ex returns it."""
    low = np.tril(m)
    for j in range(m.shape[0]):
        ajj = m[j, j] - low[j, :j] @ low[j, :j]
        if not ajj > 0:
            low[j, j] = ajj
            return low, j + 1
        low[j, j] = np.sqrt(ajj)
        low[j + 1:, j] = (m[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
    return low, 0


def _cholesky_np(a, upper=False, name="linalg.cholesky", check_errors=True):
    try:
        low = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        low = None
    if low is None or np.isnan(np.diagonal(low, 0, -2, -1)).any():    # LAPACK fails on NaN too; numpy does not
        parts = [_potf2(m) for m in a.reshape((-1,) + a.shape[-2:])]
        for b, (_, info) in enumerate(parts):
            if info and check_errors:
                raise _LinAlgError(f"{name}: {_batch_prefix(a.shape, b)}The factorization could not be completed "
                                   f"because the input is not positive-definite (the leading minor of order {info} "
                                   f"is not positive-definite).") from None
        low = np.stack([m for m, _ in parts]).reshape(a.shape)
    return np.ascontiguousarray(np.swapaxes(low, -1, -2)) if upper else low


def _cholesky_vjp(c, g):
    from .shape_ops import tril
    low, gl = c.out, g
    if c.attrs.get("upper", False):
        low, gl = _mT(low), _mT(g)
    n = c.shapes[0][-1]
    p = tril(_mm(_mT(low), gl)) * (1 - 0.5 * _eye_like(low, n))
    x = apply(OPS["linalg_solve"], _mT(low), p)                  # L^-T phi
    ga = _mT(apply(OPS["linalg_solve"], _mT(low), _mT(x)))        # (L^-T phi) L^-1
    return (0.5 * (ga + _mT(ga)),)


defop("linalg_cholesky", _meta_checked(_cholesky_meta, _cholesky_np), _cholesky_meta, _cholesky_vjp, saves="o",
      grad_name="LinalgCholeskyExBackward0")


# ---- qr: mode 'reduced' (Q m x k, R k x n), 'complete' (Q m x m, R m x n) or 'r' (Q empty)
def _qr_meta(A, mode="reduced"):
    _square_meta("linalg.qr", A, square=False)
    m, n = A.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    b = A.shape[:-2]
    q = AVal((0,), A.dtype) if mode == "r" else AVal(b + (m, k), A.dtype)
    return q, AVal(b + (k, n), A.dtype)


def _qr_np(a, mode="reduced"):
    if mode == "r":
        return np.zeros((0,), a.dtype), np.linalg.qr(a, mode="r")
    return tuple(np.linalg.qr(a, mode=mode))


def _qr_square_vjp(q, r, gq, gr):
    """gA for A = QR with R square (m >= n): (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q, where copyltu(M) is
    the symmetric matrix with M's lower triangle."""
    from .shape_ops import tril
    m = _mm(r, _mT(gr)) - _mm(_mT(gq), q)
    low = tril(m, -1)
    b = gq + _mm(q, low + _mT(low) + m * _eye_like(m, m.shape[-1]))
    return _mT(apply(OPS["linalg_solve"], r, _mT(b)))


def _qr_vjp(c, gq, gr):
    from ..creation import zeros
    from .shape_ops import cat, narrow
    mode = c.attrs.get("mode", "reduced")
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                           "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    m, n = c.shapes[0][-2:]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    q, r = c.out
    gq = zeros(tuple(q.shape), dtype=q.dtype) if gq is None else gq
    gr = zeros(tuple(r.shape), dtype=r.dtype) if gr is None else gr
    if m >= n:
        return (_qr_square_vjp(q, r, gq, gr),)
    # A = [X | Y] with X = Q R1 square and Y = Q R2: R2's gradient reaches Y through Q, and Q's through Y
    (a,) = c.inputs
    y, gr2 = narrow(a, -1, m, n - m), narrow(gr, -1, m, n - m)
    gx = _qr_square_vjp(q, narrow(r, -1, 0, m), gq + _mm(y, _mT(gr2)), narrow(gr, -1, 0, m))
    return (cat([gx, _mm(q, gr2)], -1),)


defop("linalg_qr", _meta_checked(_qr_meta, _qr_np), _qr_meta, _qr_vjp, nout=2, saves="io",
      grad_name="LinalgQrBackward0")


# ---- eigh: ascending eigenvalues L and orthonormal eigenvectors V of a symmetric matrix (one triangle read).
# gA = V (diag(gL) + skew(V^T gV) / E) V^T with E_ij = L_j - L_i: equal eigenvalues give inf, as in PyTorch.
def _eigh_meta(A, UPLO="L"):
    _square_meta("linalg.eigh", A)
    return AVal(A.shape[:-1], A.dtype), AVal(A.shape, A.dtype)


def _eigh_np(a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return w, v


def _eigh_vjp(c, gl, gv):
    from .shape_ops import unsqueeze, diag_embed
    lam, v = c.out
    n = c.shapes[0][-1]
    ret = None
    if gv is not None:
        x = _mm(_mT(v), gv)
        e = unsqueeze(lam, -2) - unsqueeze(lam, -1) + _eye_like(lam, n)
        ret = 0.5 * (x - _mT(x)) / e
    if gl is not None:
        ret = diag_embed(gl) if ret is None else ret + diag_embed(gl)
    return (_mm(_mm(v, ret), _mT(v)),)


defop("linalg_eigh", _meta_checked(_eigh_meta, _eigh_np), _eigh_meta, _eigh_vjp, nout=2, saves="o",
      grad_name="LinalgEighBackward0")


# ---- svd: A = U diag(S) Vh. PyTorch's formula; with full_matrices only the first min(m, n) singular vectors
# carry a gradient (the others are not unique). The loss must not depend on the signs of the singular vectors
# (the gauge): for a loss that does, the gradient is that of some loss that does not.
def _svd_meta(A, full_matrices=True):
    _square_meta("linalg.svd", A, square=False)
    m, n = A.shape[-2:]
    k = min(m, n)
    b = A.shape[:-2]
    if full_matrices:
        return AVal(b + (m, m), A.dtype), AVal(b + (k,), A.dtype), AVal(b + (n, n), A.dtype)
    return AVal(b + (m, k), A.dtype), AVal(b + (k,), A.dtype), AVal(b + (k, n), A.dtype)


def _svd_np(a, full_matrices=True):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


def _svd_vjp(c, gu, gs, gvh):
    from .shape_ops import narrow, unsqueeze, diag_embed
    u, s, vh = c.out
    m, n = c.shapes[0][-2:]
    k = min(m, n)
    if c.attrs.get("full_matrices", True):
        u, vh = narrow(u, -1, 0, k), narrow(vh, -2, 0, k)
        gu = None if gu is None else narrow(gu, -1, 0, k)
        gvh = None if gvh is None else narrow(gvh, -2, 0, k)
    if gu is None and gvh is None:
        return (_mm(u * unsqueeze(gs, -2), vh),)
    s2 = s * s
    e = unsqueeze(s2, -2) - unsqueeze(s2, -1) + _eye_like(s, k)
    ret = 0
    if gu is not None:
        x = _mm(_mT(u), gu)
        ret = (x - _mT(x)) * unsqueeze(s, -2)
    if gvh is not None:
        x = _mm(vh, _mT(gvh))
        ret = ret + unsqueeze(s, -1) * (x - _mT(x))
    ret = ret / e
    if gs is not None:
        ret = ret + diag_embed(gs)
    if m > n and gu is not None:            # U's columns outside A's column space: (I - U U^T) gU S^-1
        ga = _mm(u, ret)
        gus = gu / unsqueeze(s, -2)
        ga = ga + gus - _mm(u, _mm(_mT(u), gus))
        return (_mm(ga, vh),)
    if m < n and gvh is not None:           # and Vh's rows outside its row space
        ga = _mm(ret, vh)
        sgv = gvh / unsqueeze(s, -1)
        ga = ga + sgv - _mm(_mm(sgv, _mT(vh)), vh)
        return (_mm(u, ga),)
    return (_mm(_mm(u, ret), vh),)


defop("linalg_svd", _meta_checked(_svd_meta, _svd_np), _svd_meta, _svd_vjp, nout=3, saves="o",
      grad_name="LinalgSvdBackward0")


# ---- pinv: the pseudo-inverse, singular values at most max(atol, rtol * largest) taken as zero. Its gradient
# (for a locally constant rank): -X^T g X^T + (I - A X) g^T X X^T + X^T X g^T (I - X A)
def _pinv_meta(A, atol=0.0, rtol=None, hermitian=False):
    _square_meta("linalg.pinv", A, square=hermitian)
    return AVal(A.shape[:-2] + (A.shape[-1], A.shape[-2]), A.dtype)


def _pinv_np(a, atol=0.0, rtol=None, hermitian=False):
    if rtol is None:
        rtol = 0.0 if atol > 0 else np.finfo(a.dtype).eps * max(a.shape[-2:])
    if hermitian:
        w, v = np.linalg.eigh(a)
        aw = np.abs(w)
        cut = np.maximum(atol, rtol * aw.max(-1, keepdims=True, initial=0))
        inv = np.divide(1, w, out=np.zeros_like(w), where=aw > cut)
        return np.matmul(v * inv[..., None, :], np.swapaxes(v, -1, -2))
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    cut = np.maximum(atol, rtol * s.max(-1, keepdims=True, initial=0))
    inv = np.divide(1, s, out=np.zeros_like(s), where=s > cut)
    return np.matmul(np.swapaxes(vh, -1, -2) * inv[..., None, :], np.swapaxes(u, -1, -2))


def _pinv_vjp(c, g):
    (a,) = c.inputs
    x = c.out
    m, n = c.shapes[0][-2:]
    xt, gt = _mT(x), _mT(g)
    ga = -_mm(_mm(xt, g), xt)
    ga = ga + _mm(_mm(_eye_like(a, m) - _mm(a, x), gt), _mm(x, xt))
    return (ga + _mm(_mm(xt, x), _mm(gt, _eye_like(a, n) - _mm(x, a))),)


defop("linalg_pinv", _meta_checked(_pinv_meta, _pinv_np), _pinv_meta, _pinv_vjp, saves="io",
      grad_name="LinalgPinvBackward0")


# ---- matrix_exp: scaling and squaring of a Taylor series, the number of squarings chosen per matrix from its
# 1-norm when the op runs (so a traced program handles any norm: that choice is no Python number baked into the
# graph). Its gradient is the Frechet derivative at A^T in the direction g: the top-right block of
# exp([[A^T, g], [0, A^T]]) (Higham), another matrix_exp, so it is differentiable again.
_EXP_TERMS = 18         # Taylor degree, for a 1-norm at most 1/2 after scaling: truncation below 1e-22


def _matrix_exp_meta(A):
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_exp: The input tensor A must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.matrix_exp: Expected a floating point or complex tensor as input. Got "
                           f"{_dtname(A.dtype)}")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_exp: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    return AVal(A.shape, A.dtype)


def _squarings(norm):
    """How often exp(A / 2^s) must be squared for A of this 1-norm: s with norm / 2^s <= 1/2."""
    ok = np.isfinite(norm) & (norm > 0)
    return np.where(ok, np.maximum(np.ceil(np.log2(np.where(ok, norm, 1.0))) + 1, 0), 0).astype(np.int64)


def _matrix_exp_np(a):
    x = a.astype(np.float32) if a.dtype == np.float16 else a
    s = _squarings(np.abs(x).sum(-2).max(-1, initial=0))
    x = x / np.ldexp(1.0, s)[..., None, None].astype(x.dtype)
    term = result = np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)
    for k in range(1, _EXP_TERMS + 1):
        term = np.matmul(term, x) / x.dtype.type(k)
        result = result + term
    for i in range(int(s.max(initial=0))):
        result = np.where((s > i)[..., None, None], np.matmul(result, result), result)
    return np.ascontiguousarray(result, dtype=a.dtype)


def _matrix_exp_vjp(c, g):
    from .shape_ops import cat, narrow
    from ..creation import zeros_like
    at = _mT(c.inputs[0])
    n = at.shape[-1]
    big = cat([cat([at, g], -1), cat([zeros_like(at), at], -1)], -2)
    return (narrow(narrow(apply(OPS["matrix_exp"], big), -2, 0, n), -1, n, n),)


def _matrix_exp_parts(a):
    """The same series with registry ops, one number of squarings for the whole batch, read from A's values: the
    op on a device that has no kernel for it (eager only: it reads a norm)."""
    from ..creation import eye
    norm = float(a.abs().sum(-2).max()) if a.numel() else 0.0
    s = int(_squarings(np.float64(norm)))
    x = a / 2.0 ** s
    term = result = eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(a.shape)
    for k in range(1, _EXP_TERMS + 1):
        term = _mm(term, x) / k
        result = result + term
    for _ in range(s):
        result = _mm(result, result)
    return result


defop("matrix_exp", _meta_checked(_matrix_exp_meta, _matrix_exp_np), _matrix_exp_meta, _matrix_exp_vjp, saves="i",
      grad_name="LinalgMatrixExpBackward0", decompose=_matrix_exp_parts)


# ----------------------------------------------------------------------------- PyTorch's top-level names

def _tensor_arg(fn, x, name="input"):
    from .._tensor import Tensor
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position 1) must be Tensor, not {type(x).__name__}")


def inverse(input):
    _tensor_arg("inverse", input)
    return apply(OPS["linalg_inv"], input)


def matrix_exp(input):
    _tensor_arg("matrix_exp", input)
    return apply(OPS["matrix_exp"], input)


def det(input):
    _tensor_arg("det", input)
    return apply(OPS["linalg_det"], input)


def slogdet(input):
    _tensor_arg("slogdet", input)
    return _slogdet_t(*apply(OPS["linalg_slogdet"], input))


def logdet(input):
    """log(det(A)): nan where det < 0, -inf where it is 0 (log of slogdet's sign added to log|det|)."""
    from .elementwise import log
    sign, logabs = slogdet(input)
    return logabs + log(sign.detach())


def cholesky(input, upper=False):
    _tensor_arg("cholesky", input)
    return apply(OPS["linalg_cholesky"], input, upper=bool(upper))


def cholesky_solve(input, input2, upper=False):
    """X with A X = B (input) where A = L L^T and L = input2 (or U^T U with upper=True): two triangular solves."""
    from .. import linalg
    a = _mT(input2) if upper else input2
    return linalg.solve_triangular(_mT(a), linalg.solve_triangular(a, input, upper=False), upper=True)


def cholesky_inverse(input, upper=False):
    from ..creation import eye
    return cholesky_solve(eye(input.shape[-1], dtype=input.dtype), input, upper)


def matrix_power(input, n):
    from .. import linalg
    return linalg.matrix_power(input, n)


def pinverse(input, rcond=1e-15):
    return apply(OPS["linalg_pinv"], input, atol=0.0, rtol=float(rcond), hermitian=False)


def qr(input, some=True):
    return _qr_t(*apply(OPS["linalg_qr"], input, mode="reduced" if some else "complete"))


def svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V = Vh^T; compute_uv=False gives zero-filled U (m x m) and V (n x n)."""
    from ..creation import zeros
    if not compute_uv:
        from .. import linalg
        m, n = input.shape[-2:]
        b = tuple(input.shape[:-2])
        return _svd_t(zeros(b + (m, m), dtype=input.dtype), linalg.svdvals(input),
                      zeros(b + (n, n), dtype=input.dtype))
    u, s, vh = apply(OPS["linalg_svd"], input, full_matrices=not some)
    return _svd_t(u, s, _mT(vh))


def cross(input, other, dim=None):
    """torch.cross: dim=None takes the first dim of size 3 (with PyTorch's deprecation warning)."""
    from .. import linalg
    if dim is None:
        import warnings
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        shape = broadcast_shapes(input.shape, other.shape)
        dim = next((i for i, s in enumerate(shape) if s == 3), -1)
    return linalg.cross(input, other, dim=dim)
