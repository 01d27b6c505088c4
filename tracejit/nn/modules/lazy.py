"""Lazy modules: parameters whose shapes come from the first input (PyTorch's LazyModuleMixin flow).

An UninitializedParameter holds no data: any use of it raises, except listing it (module.parameters(), an
optimizer, state_dict). At the first call a forward pre-hook asks the module to `materialize` each one with the
input's shape: the same object becomes an ordinary Parameter, so an optimizer built before the call updates it. The
module then becomes its eager class (LazyLinear -> Linear).
"""
from ... import creation as C
from .. import parameter as _P
from ..parameter import Parameter

_USE = ("Attempted to use an uninitialized parameter. This error happens when you are using a `LazyModule` or "
        "explicitly manipulating `tracejit.nn.parameter.UninitializedParameter` objects. When using LazyModules "
        "call `forward` with a dummy batch to initialize the parameters before calling tracejit functions")


class _NoData:
    """The storage of an uninitialized parameter: any use raises PyTorch's ValueError."""
    __slots__ = ()

    def __getattr__(self, name):
        raise ValueError(_USE)

    def __array__(self, *args, **kwargs):
        raise ValueError(_USE)

    def __len__(self):
        raise ValueError(_USE)


class UninitializedParameter(_P.UninitializedParameter):
    """A parameter of a lazy module before its first call: no shape yet, and no values."""
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        t = object.__new__(cls)
        t._init(_NoData())
        t._requires_grad = requires_grad
        t.__dict__["_lazy_factory"] = {"device": device, "dtype": dtype}
        return t

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def materialize(self, shape, device=None, dtype=None):
        """Gives the parameter storage of `shape` (uninitialized values) and makes it an ordinary Parameter."""
        kw = self.__dict__.pop("_lazy_factory")
        data = C.empty(tuple(shape), device=device or kw["device"], dtype=dtype or kw["dtype"])
        self._data = data._data
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return "<UninitializedParameter>"

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (UninitializedParameter, (self.requires_grad,))


def is_lazy(p):
    return isinstance(p, UninitializedParameter)


def _infer_parameters(module, args):
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyModuleMixin:
    """Mixed in before the eager class: registers the first-call hook; state_dict keeps the lazy parameters as they
    are, and load_state_dict gives them the loaded shapes first."""
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self):
        return any(is_lazy(p) for p in list(self._parameters.values()) + list(self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars or is_lazy(p) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars or is_lazy(b) else b.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        for name, p in list(self._parameters.items()):
            key = prefix + name
            if is_lazy(p) and key in state_dict and not is_lazy(state_dict[key]):
                p.materialize(state_dict[key].shape)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
