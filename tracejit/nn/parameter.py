"""Parameter (a leaf tensor a Module registers as trainable) and Buffer (a marker for module state); the lazy
modules' UninitializedParameter and UninitializedBuffer (no shape and no values until `materialize`), is_lazy."""
from .._tensor import Tensor
from ..ops.registry import WordedValueError


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


_USE = ("Attempted to use an uninitialized parameter. This error happens when you are using a `LazyModule` or "
        "explicitly manipulating `tracejit.nn.parameter.UninitializedParameter` objects. When using LazyModules "
        "call `forward` with a dummy batch to initialize the parameters before calling tracejit functions")


class _NoData:
    """The storage of an uninitialized parameter or buffer: any use raises PyTorch's ValueError."""
    __slots__ = ()

    def __getattr__(self, name):
        raise WordedValueError(_USE)

    def __array__(self, *args, **kwargs):
        raise WordedValueError(_USE)

    def __len__(self):
        raise WordedValueError(_USE)


class UninitializedTensorMixin:
    """A tensor with no storage yet: `materialize(shape)` gives it one and turns the same object into its
    `cls_to_become` (so references taken before, an optimizer's, see the materialized tensor).

    As PyTorch's, it stands for an empty 1-d tensor of its dtype and device: size() is (0,), ndim 1, dtype,
    device and is_floating_point() answer, while .shape raises RuntimeError and every other use (numel(), dim(),
    values, ops, formatting) ValueError."""
    cls_to_become = None

    def _init_lazy(self, requires_grad, device, dtype):
        from .. import _dtype as D
        from .._tensor import device as _device
        self._init(_NoData())
        self._requires_grad = requires_grad
        self.__dict__["_lazy_factory"] = {"device": _device(device if device is not None else "cpu"),
                                          "dtype": D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()}

    def materialize(self, shape, device=None, dtype=None):
        """Gives the tensor storage of `shape` (uninitialized values) and makes it a `cls_to_become`."""
        from ..creation import empty
        kw = self.__dict__.pop("_lazy_factory")
        data = empty(tuple(shape), device=device or kw["device"], dtype=dtype or kw["dtype"])
        self._data = data._data
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def size(self, dim=None):
        from ..size import Size
        if dim is None:
            return Size((0,))
        from ..ops.registry import norm_dim
        norm_dim(dim, 1)
        return 0

    @property
    def ndim(self):
        return 1

    @property
    def dtype(self):
        return self.__dict__["_lazy_factory"]["dtype"]

    @property
    def device(self):
        return self.__dict__["_lazy_factory"]["device"]

    def _unusable(self, *args, **kwargs):
        raise WordedValueError(_USE)

    dim = ndimension = numel = nelement = element_size = is_contiguous = numpy = tolist = item = _unusable
    __len__ = __iter__ = __format__ = _unusable

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize "
                           "the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (type(self), (self.requires_grad,))

class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter of a lazy module before its first call: no shape yet, and no values."""
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        t = object.__new__(cls)
        t._init_lazy(requires_grad, device, dtype)
        return t

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        """Another uninitialized parameter (a lazy module can be copied before its first call, as in PyTorch; an
        uninitialized buffer cannot)."""
        if id(self) not in memo:
            kw = self.__dict__["_lazy_factory"]
            memo[id(self)] = type(self)(self.requires_grad, kw["device"], kw["dtype"])
        return memo[id(self)]


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer of a lazy module before its first call: no shape yet, and no values; a plain tensor once
    materialized."""
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        t = object.__new__(cls)
        t._init_lazy(requires_grad, device, dtype)
        t.__dict__["persistent"] = persistent
        return t

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass


def is_lazy(param):
    """Whether param is an uninitialized parameter or buffer of a lazy module."""
    return isinstance(param, UninitializedTensorMixin)
