"""MultivariateNormal: a Gaussian over vectors, given by its covariance, its precision or a lower Cholesky factor of
the covariance. Everything is computed from that factor L (covariance = L L^T) with tracejit.linalg's cholesky and
solve_triangular, so log_prob, entropy and rsample differentiate to whichever matrix was given."""
import math

import tracejit as tj

from . import constraints
from .distribution import Distribution
from .utils import lazy_property


def _batch_mahalanobis(L, x):
    """x^T (L L^T)^-1 x over the last dim, batch dims of L and x broadcast: |L^-1 x|^2."""
    shape = tj.broadcast_shapes(tuple(L.shape[:-1]), tuple(x.shape))
    L = L.expand(shape + (shape[-1],))
    y = tj.linalg.solve_triangular(L, x.expand(shape).unsqueeze(-1), upper=False).squeeze(-1)
    return (y ** 2).sum(-1)


def _precision_to_scale_tril(P):
    """A lower factor L with L L^T = P^-1, without inverting P: the Cholesky factor of P with its rows and columns
    reversed is upper-triangular U with U^T U = reversed P, so L = (reversed factor)^-T is lower and fits."""
    lf = tj.linalg.cholesky(tj.flip(P, (-2, -1)))
    l_inv = tj.flip(lf, (-2, -1)).mT
    eye = tj.eye(P.shape[-1], dtype=P.dtype).expand(tuple(l_inv.shape))
    return tj.linalg.solve_triangular(l_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [(n, m) for n, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                                     ("precision_matrix", precision_matrix)) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        (name, matrix), = given
        if matrix.ndim < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{what} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = tuple(tj.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        self.__dict__[name] = matrix.expand(batch_shape + (-1, -1))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = tj.linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        batch_shape = tuple(tj.Size(batch_shape))
        new.loc = self.loc.expand(batch_shape + tuple(self._event_shape))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(batch_shape + tuple(self._event_shape) * 2)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return tj.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        return (self._unbroadcasted_scale_tril ** 2).sum(-1).expand(tuple(self._batch_shape) +
                                                                   tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        eps = tj.randn(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return tj.log(self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1)).sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(tuple(self._batch_shape)) if len(self._batch_shape) else h
