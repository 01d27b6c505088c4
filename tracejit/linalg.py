"""torch.linalg: factorizations, solvers, norms and products of matrices, batched over leading dims.

The factorizations (inv, solve, det, slogdet, cholesky, qr, eigh, svd, pinv) are registry ops
(tracejit/ops/linalg.py): numpy's LAPACK calls for the values, derivatives written with registry ops. Everything
else here is composed from those and from other ops, so it runs eagerly, traces, and differentiates with no rule of
its own. What differs from PyTorch: no complex dtypes (so no eig/eigvals of general matrices), lstsq's residuals are
always empty, and solve and lstsq take `left=True` / a right-hand side on the left only where PyTorch has no other.
"""
import builtins
import collections
import math

import numpy as np

from .ops import linalg as _L
from .ops import reduction as _R
from .ops import shape_ops as _S
from .ops.registry import apply as _apply, OPS as _OPS, norm_dim as _norm_dim
from ._dtype import bool_ as _bool, int32 as _int32, int64 as _int64
from .ops.linalg import matmul, _mT, _LinAlgError as LinAlgError

__all__ = ["LinAlgError", "inv", "solve", "solve_triangular", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh",
           "svd", "svdvals", "pinv", "matrix_norm", "norm", "vector_norm", "cross", "multi_dot", "matrix_power",
           "lstsq", "diagonal", "matmul", "vecdot", "cholesky_ex", "inv_ex", "matrix_exp", "householder_product"]

slogdet_t = collections.namedtuple("linalg_slogdet", ["sign", "logabsdet"])
qr_t = collections.namedtuple("linalg_qr", ["Q", "R"])
eigh_t = collections.namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
svd_t = collections.namedtuple("linalg_svd", ["U", "S", "Vh"])
lstsq_t = collections.namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
ex_t = collections.namedtuple("linalg_ex", ["result", "info"])
cholesky_ex_t = collections.namedtuple("linalg_cholesky_ex", ["L", "info"])


def inv(A):
    return _L.inverse(A)


def inv_ex(A, *, check_errors=False):
    """(inverse, info): eager info is 0; a singular matrix raises LinAlgError whatever check_errors says."""
    from .creation import zeros
    return ex_t(inv(A), zeros(tuple(A.shape[:-2]), dtype=_int32))


def _is_vector_rhs(A, B):
    """PyTorch's rule: B is a (batch of) vector(s) if it is 1-D, or has A's batch dims and one dim less."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A, B, *, left=True):
    """X with A X = B (left=True) or X A = B; B a (batch of) matrix or vector(s); batch dims broadcast."""
    if not left:
        return _mT(solve(_mT(A), _mT(B)))
    if _is_vector_rhs(A, B):
        return _apply(_OPS["linalg_solve"], A, _S.unsqueeze(B, -1)).squeeze(-1)
    return _apply(_OPS["linalg_solve"], A, B)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (or X A = B) where only A's upper or lower triangle is read (its diagonal taken as ones with
    unitriangular): the gradient of A lands on that triangle only, as in PyTorch."""
    from .ops.elementwise import where
    from .creation import eye
    t = _S.triu(A) if upper else _S.tril(A)
    if unitriangular:
        t = where(eye(A.shape[-1], dtype=_bool), 1.0, t)
    return solve(t, B, left=left)


def det(A):
    return _L.det(A)


def slogdet(A):
    return slogdet_t(*_L.slogdet(A))


def cholesky(A, *, upper=False):
    return _L.cholesky(A, upper)


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info) as PyTorch's: info 0 where the factorization succeeded, else the order of the first leading minor
    that is not positive-definite (L then LAPACK's partial factor; its pivot there is the first diagonal entry that
    is not > 0); check_errors=True raises LinAlgError instead."""
    from .ops.elementwise import logical_not, where
    _L._tensor_arg("linalg.cholesky_ex", A)
    low = _apply(_OPS["linalg_cholesky"], A, upper=bool(upper), name="linalg.cholesky_ex",
                 check_errors=bool(check_errors))
    bad = logical_not(_S.diagonal(low, 0, -2, -1) > 0)
    info = where(_R.any(bad, -1), _R.argmax(bad.to(_int32), -1) + 1, 0)
    return cholesky_ex_t(low, info.to(_int32))


def qr(A, mode="reduced"):
    if mode not in ("reduced", "r", "complete"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           f"or 'complete'")
    return qr_t(*_apply(_OPS["linalg_qr"], A, mode=mode))


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO


def eigh(A, UPLO="L"):
    return eigh_t(*_apply(_OPS["linalg_eigh"], A, UPLO=_uplo(UPLO)))


def eigvalsh(A, UPLO="L"):
    return eigh(A, UPLO).eigenvalues


def svd(A, full_matrices=True, *, driver=None):
    return svd_t(*_apply(_OPS["linalg_svd"], A, full_matrices=bool(full_matrices)))


def svdvals(A, *, driver=None):
    return _apply(_OPS["linalg_svd"], A, full_matrices=False)[1]


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """The pseudo-inverse; singular values (|eigenvalues| with hermitian) at most max(atol, rtol * largest) count
    as zero. rtol defaults to eps * max(m, n), or to 0 when atol > 0 is given; rcond is rtol's old name."""
    if rcond is not None:
        rtol = rcond
    return _apply(_OPS["linalg_pinv"], A, atol=float(atol or 0.0), rtol=None if rtol is None else float(rtol),
                  hermitian=bool(hermitian))


# ----------------------------------------------------------------------------- norms

def _to_norm_dtype(x, dtype, name):
    """x in the dtype a norm's `dtype=` asks for, checked as PyTorch's: a floating input, a floating dtype, and no
    narrowing (float64 -> float32 raises)."""
    from ._dtype import promote_types, to_dtype
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got "
                           f"{_L._dtname(x.dtype)}")
    dtype = to_dtype(dtype)
    if not dtype.is_floating_point:
        raise RuntimeError(f"linalg.{name}: dtype should be floating point or complex, but got {_L._dtname(dtype)}")
    if promote_types(x.dtype, dtype) is not dtype:
        raise RuntimeError(f"linalg.{name}: the dtype of the input ({_L._dtname(x.dtype)}) should be convertible "
                           f"without narrowing to the specified dtype ({_L._dtname(dtype)})")
    return x.to(dtype)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if isinstance(ord, str):
        raise TypeError("linalg_vector_norm(): argument 'ord' (position 2) must be Number, not str")
    if dtype is not None:
        x = _to_norm_dtype(x, dtype, "vector_norm")
    return _R.vector_norm(x, ord, dim, keepdim)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """'fro' (a vector 2-norm), 'nuc' (sum of singular values), 2 / -2 (largest / smallest singular value),
    1 / -1 (largest / smallest column sum of |A|), inf / -inf (the same of row sums), over the two dims `dim`."""
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if isinstance(dim, int) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {_dims_text(dim)}")
    if ord not in _MATRIX_ORDS or isinstance(ord, bool):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if dtype is not None:
        A = _to_norm_dtype(A, dtype, "matrix_norm")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as input. Got "
                           f"{_L._dtname(A.dtype)}")
    d0, d1 = (_norm_dim(d, A.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return _R.vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(_S.movedim(A, (d0, d1), (-2, -1)))
        r = _R.sum(s, -1) if ord == "nuc" else (_R.amax(s, -1) if ord == 2 else _R.amin(s, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                r = _S.unsqueeze(r, d)
        return r
    if ord in (math.inf, -math.inf):            # row sums: the same as the column sums of the other dim
        d0, d1 = d1, d0
    sums = _R.sum(abs(A), d0, keepdim=True)
    r = _R.amax(sums, d1, keepdim=True) if ord > 0 else _R.amin(sums, d1, keepdim=True)
    return r if keepdim else _S.squeeze(r, tuple(sorted((d0, d1))))


def _dims_text(dim):
    """The dims as PyTorch's messages list them: '0 1 2'."""
    return " ".join(str(d) for d in ((dim,) if isinstance(dim, int) else dim))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (dim an int, or no ord and no dim: of all elements) or a matrix norm (dim a 2-tuple, or a
    2-D input with ord and no dim), as torch.linalg.norm chooses."""
    if dim is not None:
        if not isinstance(dim, int) and len(dim) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
        if ord is None or ((isinstance(dim, int) or len(dim) == 1) and not isinstance(ord, str)):
            return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.ndim}D.")
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


# ----------------------------------------------------------------------------- products

def cross(input, other, *, dim=-1):
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _norm_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and "
                           f"{other.shape[d]}")
    a = [_S.narrow(input, d, i, 1) for i in range(3)]
    b = [_S.narrow(other, d, i, 1) for i in range(3)]
    return _S.cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)


def vecdot(x, y, *, dim=-1):
    return _R.sum(x * y, dim)


def multi_dot(tensors):
    """A chain of matrix products; the first and last may be vectors (a row and a column), the others are 2-D."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    n = len(tensors)
    for i, t in enumerate(tensors):
        end = i in (0, n - 1)
        if not (t.ndim == 2 or (end and t.ndim == 1)):
            which = "first tensor" if i == 0 else ("last tensor" if i == n - 1 else f"tensor {i}")
            raise RuntimeError(f"multi_dot(): the {which} must be {'1D or 2D' if end else '2D'} but got {t.ndim}D")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{tensors[0].dtype.name} and tensor {i} {t.dtype.name}")
    mats = [tensors[0].reshape(1, -1) if tensors[0].ndim == 1 else tensors[0]] + tensors[1:-1] + \
        [tensors[-1].reshape(-1, 1) if tensors[-1].ndim == 1 else tensors[-1]]
    out = mats[0]
    for i, m in enumerate(mats[1:]):
        if out.shape[-1] != m.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(mats[i].shape)} and "
                               f"{list(m.shape)} cannot be multiplied")
        out = matmul(out, m)
    if tensors[0].ndim == 1:
        out = out.squeeze(0)
    if tensors[-1].ndim == 1:
        out = out.squeeze(-1)
    return out


def matrix_power(A, n):
    """A^n by repeated squaring; n < 0 is the inverse's power; n = 0 the identity (its gradient is zero)."""
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {A.shape[-2]} "
                           f"by {A.shape[-1]} matrices")
    if n == 0:      # the identity, still a function of A (zero gradient, whatever A's values) as in PyTorch
        from .creation import eye
        from .ops.elementwise import where
        return where(eye(1, dtype=_bool), eye(A.shape[-1], dtype=A.dtype), A)
    if n < 0:
        A, n = inv(A), -n
    out = None
    while n:
        if n & 1:
            out = A if out is None else matmul(out, A)
        n >>= 1
        if n:
            A = matmul(A, A)
    return out


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares (for a wide A: least-norm) solution of A X = B, from A's pseudo-inverse with PyTorch's
    default cutoff eps * max(m, n). rank is returned (not for driver 'gels'), the singular values for 'gelsd' and
    'gelss'; residuals are always empty."""
    from .creation import empty
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    vector = B.ndim == A.ndim - 1
    b = _S.unsqueeze(B, -1) if vector else B
    if b.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2:]
    rtol = float(np.finfo(A.dtype.np).eps) * builtins.max(m, n) if rcond is None or rcond < 0 else float(rcond)
    x = matmul(pinv(A, rtol=rtol), b)
    if vector:
        x = x.squeeze(-1)
    s = svdvals(A.detach())
    rank = empty(0, dtype=_int64) if driver == "gels" else \
        _R.sum(s > _R.amax(s, -1, keepdim=True) * rtol, -1)
    sv = s if driver in ("gelsd", "gelss") else empty(0, dtype=A.dtype)
    return lstsq_t(x, empty(0, dtype=A.dtype), rank, sv)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _S.diagonal(A, offset, dim1, dim2)


def matrix_exp(A):
    """exp of a batch of square matrices (the registry op: a Taylor series scaled and squared per matrix, its
    gradient another matrix_exp; traced as one node whatever A's norm)."""
    return _L.matrix_exp(A)


def householder_product(A, tau):
    """The first k columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th column of A below the
    diagonal and 1 on it (LAPACK's orgqr)."""
    from .creation import eye
    n, k = A.shape[-2], A.shape[-1]
    v = A.tril(-1) + eye(n, k, dtype=A.dtype, device=A.device)
    q = eye(n, k, dtype=A.dtype, device=A.device).expand(A.shape)
    for i in reversed(range(k)):
        vi = v[..., :, i:i + 1]
        q = q - tau[..., i:i + 1].unsqueeze(-1) * (vi @ (vi.mT @ q))
    return q
