"""Distribution: PyTorch's base class (torch.distributions.Distribution). A distribution has a batch_shape (independent,
differently parameterized copies) and an event_shape (the shape of one draw); samples have shape
sample_shape + batch_shape + event_shape. Everything is computed with tracejit ops, so log-probabilities and
reparameterized samples are differentiable, eagerly and in traced programs."""
import tracejit as tj

from . import constraints
from .utils import lazy_property


def _shown(t):
    """A tensor as PyTorch's messages print it: a 0-d one as its value."""
    return t.item() if t.ndim == 0 else t


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = True           # PyTorch's default (__debug__): parameters and values are checked
    # parameter name -> its number of event dims (expand() keeps those); subclasses list theirs
    _params = {}

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = tj.Size(batch_shape), tj.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args and _checkable():
            for name, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if name not in self.__dict__ and isinstance(getattr(type(self), name, None), lazy_property):
                    continue                # (not given: computed from a parameter that was checked)
                value = getattr(self, name)
                if not bool(constraint.check(value).all()):
                    raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{_shown(value)}")

    batch_shape = property(lambda self: self._batch_shape)
    event_shape = property(lambda self: self._event_shape)

    @property
    def arg_constraints(self):
        return {}

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self)} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self)} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A draw that carries no gradient (rsample's, under no_grad, where there is one)."""
        with tj.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample")

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return tj.exp(self.entropy())

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def expand(self, batch_shape, _instance=None):
        """The same distribution broadcast to batch_shape: every parameter expanded (a view), nothing copied."""
        batch_shape = tj.Size(batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        for name, event_dims in self._params.items():
            if name in self.__dict__:
                p = self.__dict__[name]
                new.__dict__[name] = p.expand(tuple(batch_shape) + tuple(p.shape[p.ndim - event_dims:]))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _extended_shape(self, sample_shape=()):
        return tj.Size(tuple(tj.Size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """PyTorch's checks of a value given to log_prob/cdf: a tensor, of a shape that broadcasts with
        batch_shape + event_shape, inside the support."""
        if not isinstance(value, tj.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        start = value.ndim - len(self._event_shape)
        if tuple(value.shape[start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.size()} vs "
                             f"{self._event_shape}.")
        want = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(tuple(value.shape)), reversed(want)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {value.size()} vs "
                                 f"{tj.Size(want)}.")
        if not _checkable():
            return
        support = self.support
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{_shown(value)}")

    def __repr__(self):
        shown = []
        for name in self.arg_constraints:
            if name in self.__dict__:
                p = self.__dict__[name]
                shown.append(f"{name}: {_shown(p) if p.numel() == 1 else p.size()}")
        return f"{type(self).__name__}({', '.join(shown)})"


def _checkable():
    """Value checks need values: none while tracing (a traced program runs without them)."""
    from .._state import STATE
    return STATE.tracer is None
