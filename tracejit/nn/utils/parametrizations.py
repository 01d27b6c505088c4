"""nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal as parametrizations (PyTorch's current
forms, over nn.utils.parametrize: the state_dict keys are parametrizations.<name>.original plus each one's buffers)."""
import numpy as np

from ... import creation as C
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...linalg import householder_product, matrix_exp
from ...ops.linalg import mv, vdot
from ...ops.shape_ops import cat
from .. import functional as F
from ..modules.module import Module
from . import parametrize
from .weight_norm import _weight_norm, norm_except_dim


class _WeightNorm(Module):
    """w = g v / |v| from (original0, original1) = (g, v); right_inverse splits a weight into them."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight

    @staticmethod
    def _rename_legacy_keys(state_dict, prefix, name):
        """A checkpoint of the hook form (<name>_g, <name>_v) loads into the parametrization's originals."""
        g, v = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g in state_dict and v in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v)


def weight_norm(module, name="weight", dim=0):
    """module.<name> becomes g v / |v| with g = parametrizations.<name>.original0 (its norm over every dim but
    `dim`; dim=None: one norm) and v = parametrizations.<name>.original1; returns module."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """w / sigma(w), sigma the largest singular value of w as a matrix (`dim` first, the rest flattened) estimated
    by power iteration: buffers _u and _v, 15 steps at registration, n_power_iterations more (no grad) on each
    forward in training mode; sigma = u . (W v) keeps its gradient through W. A 1-d w is just normalized."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got "
                             f"{dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._reshape_weight_to_matrix(weight)
            h, w = mat.shape
            with no_grad():
                self.register_buffer("_u", F.normalize(mat.new_empty(h).normal_(0, 1), dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(mat.new_empty(w).normal_(0, 1), dim=0, eps=self.eps))
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n_power_iterations):
        """u <- normalize(W v), then v <- normalize(W^T u), in place, without grad."""
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(mv(mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(mv(mat.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()     # sigma's graph keeps these values, not later updates
        return weight / vdot(u, mv(mat, v))

    def right_inverse(self, value):
        return value


def _weight_of(module, name):
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    return weight


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> becomes its original (parametrizations.<name>.original) divided by its spectral norm
    (dim None: 1 for ConvTranspose*d, else 0); returns module."""
    weight = _weight_of(module, name)
    if dim is None:
        from ..modules.conv import _ConvTransposeNd
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


def _make_orthogonal(a):
    """Q of a = QR with diag(R) >= 0 (a tall)."""
    q, r = np.linalg.qr(a.detach().numpy())
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    return C.tensor(q * np.where(d == 0, 1.0, d)[..., None, :], dtype=a.dtype, device=a.device)


def _is_orthogonal(q):
    k, n = q.shape[-1], q.shape[-2]
    qn = q.detach().numpy()
    eps = 10.0 * n * np.finfo(qn.dtype).eps
    return np.allclose(np.swapaxes(qn, -1, -2) @ qn, np.eye(k), rtol=1e-5, atol=eps)


class _Orthogonal(Module):
    """An orthogonal matrix (or batch; a wide one has orthonormal rows) from an unconstrained one X by
    'matrix_exp' (exp of the skew part of tril(X)), 'cayley' ((I - A/2)^-1 (I + A/2)) or 'householder'
    (reflections from the columns of X below its diagonal, columns signed by trunc(diag X)). With
    use_trivialization the result is base @ Q, base (a buffer) the orthogonal matrix last assigned."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = cat([X, C.zeros(tuple(X.shape[:-2]) + (n, n - k), dtype=X.dtype, device=X.device)], -1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = matrix_exp(A)
            else:
                eye = C.eye(n, dtype=A.dtype, device=A.device)
                from ...linalg import solve
                Q = solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            Q = householder_product(A, 2.0 / (1.0 + (A * A).sum(-2)))
            Q = Q * X.diagonal(dim1=-2, dim2=-1).detach().trunc().unsqueeze(-2)
        if getattr(self, "base", None) is not None:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        """The X whose forward is Q: with use_trivialization, -I (base := Q completed to a square orthogonal
        matrix); without, for householder only, the reflections of Q's QR."""
        with no_grad():
            if tuple(Q.shape) != tuple(self.shape):
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of "
                                 f"shape {Q.shape}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q, n, k = Q.mT, k, n
            if "base" not in self._buffers:
                if self.orthogonal_map != "householder":
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                return self._householder_inverse(Q, transpose)
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                extra = C.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(cat([Q, extra], -1))
            self.base = Q
            eye = C.eye(Q_init.shape[-2], Q_init.shape[-1], dtype=Q_init.dtype, device=Q_init.device)
            return C.zeros_like(Q_init) - eye

    @staticmethod
    def _householder_inverse(Q, transpose):
        """LAPACK geqrf of Q (reflections below the diagonal), its diagonal replaced by the signs of R's (-1
        where a reflection was skipped, tau 0)."""
        q = Q.detach().numpy()
        flat = q.reshape((-1,) + q.shape[-2:])
        out = np.empty_like(flat)
        for i, m in enumerate(flat):
            h, tau = np.linalg.qr(m, mode="raw")
            a = h.T.copy()
            d = np.sign(np.diagonal(a)).copy()
            d[: len(tau)][tau == 0] *= -1
            np.fill_diagonal(a, d)
            out[i] = a
        A = C.tensor(out.reshape(q.shape), dtype=Q.dtype, device=Q.device)
        return A.mT if transpose else A


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """module.<name> (a matrix or batch of them) becomes orthogonal: orthogonal_map 'matrix_exp' (the default for
    square matrices), 'cayley' or 'householder' (the default otherwise); returns module."""
    weight = _weight_of(module, name)
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in ("matrix_exp", "cayley", "householder"):
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: '
                         f'{orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
