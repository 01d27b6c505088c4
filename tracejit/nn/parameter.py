"""Parameter (a leaf tensor a Module registers as trainable) and Buffer (a marker for module state)."""
from .._tensor import Tensor


def _alias(cls, data):
    """A `cls` tensor sharing `data`'s array and version counter (PyTorch's _make_subclass)."""
    t = object.__new__(cls)
    t._init(data._data)
    t._value = data._value
    t._version = data._version
    return t


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning one to a Module attribute registers it."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from ..creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        t = _alias(cls, data)
        t.requires_grad_(requires_grad)
        return t

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        from .._tensor import Tensor as _T
        return (_rebuild_parameter, (_T.__reduce_ex__(self, proto), self.requires_grad))


def _rebuild_parameter(reduced, requires_grad):
    fn, args = reduced[0], reduced[1]
    return Parameter(fn(*args), requires_grad)


class Buffer(Tensor):
    """Marks a tensor as module state when assigned to a Module attribute (`self.x = nn.Buffer(t)`).

    The module stores a plain tensor; `persistent=False` keeps it out of the state_dict."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            from ..creation import empty
            data = empty(0)
        t = _alias(cls, data)
        t.__dict__["persistent"] = persistent
        return t

    def __init__(self, data=None, *, persistent=True):
        pass


class UninitializedParameter(Parameter):
    def __new__(cls, *a, **k):
        raise NotImplementedError("lazy modules (UninitializedParameter) are not supported by tracejit")
