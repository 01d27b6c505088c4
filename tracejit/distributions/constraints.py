"""The sets parameters and values must lie in (PyTorch's torch.distributions.constraints): `check(value)` is a boolean
tensor made of tracejit ops; reprs are PyTorch's, so validation messages read the same."""
from .. import ops as _ops  # noqa: F401  (registers the ops the checks use)


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


def _fmt(bound):
    """A bound as PyTorch prints it: a number, a one-element tensor's value, else the tensor."""
    if hasattr(bound, "numel") and bound.numel() == 1:
        return bound.item()
    return bound


class _Dependent(Constraint):
    """A constraint set by other parameters (Uniform's low and high): not checked on its own."""

    def __init__(self, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete, event_dim)

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


class _Real(Constraint):
    def check(self, value):
        return value == value               # (False for NaN only)


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"{type(self).__name__[1:]}(lower_bound={_fmt(self.lower_bound)})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return self.lower_bound <= value


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={_fmt(self.upper_bound)})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"{type(self).__name__[1:]}(lower_bound={_fmt(self.lower_bound)}, upper_bound={_fmt(self.upper_bound)})"


class _IntegerInterval(_Interval):
    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & super().check(value)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _IntegerGreaterThan(Constraint):
    """Integers >= lower_bound (counts: Poisson, Geometric)."""
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={_fmt(self.lower_bound)})"


class _Multinomial(Constraint):
    """Vectors of nonnegative counts summing to at most upper_bound (PyTorch checks this weaker condition too)."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).all(-1).all(-1)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal: the Cholesky factors."""
    event_dim = 2

    def check(self, value):
        return _LowerTriangular().check(value) & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _Symmetric(Constraint):
    event_dim = 2

    def check(self, value):
        import tracejit as tj
        return tj.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveDefinite(_Symmetric):
    """Symmetric matrices whose eigenvalues are all positive (PyTorch asks whether a Cholesky factorization
    succeeds; tracejit's cholesky raises instead of reporting, so the smallest eigenvalue is asked)."""

    def check(self, value):
        import tracejit as tj
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return tj.linalg.eigvalsh(value)[..., 0] > 0


class _IndependentConstraint(Constraint):
    """base_constraint over the rightmost `reinterpreted_batch_ndims` dims, all of which must hold."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint, self.reinterpreted_batch_ndims = base_constraint, reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        ok = self.base_constraint.check(value)
        for _ in range(self.reinterpreted_batch_ndims):
            ok = ok.all(-1)
        return ok

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


dependent = _Dependent()
real = _Real()
boolean = _Boolean()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
one_hot = _OneHot()
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
interval = _Interval
integer_interval = _IntegerInterval
independent = _IndependentConstraint
real_vector = _IndependentConstraint(real, 1)
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
multinomial = _Multinomial
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
