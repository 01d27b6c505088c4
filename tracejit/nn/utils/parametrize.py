"""nn.utils.parametrize: a parameter or buffer computed on every access from unconstrained originals.

register_parametrization(module, "weight", P) moves module.weight to module.parametrizations.weight.original (or
original0, original1, ... when P.right_inverse returns several tensors) and makes `weight` a property of a subclass
made for this module alone (PyTorch's Parametrized<Class>), which returns P(original): the state_dict names are
PyTorch's, so its checkpoints load. Assigning to module.weight stores right_inverse(value) in the originals.
"""
import contextlib

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

_cache = {"enabled": 0, "values": {}}


@contextlib.contextmanager
def cached():
    """Within it, each parametrized tensor is computed once, on its first access."""
    _cache["enabled"] += 1
    try:
        yield
    finally:
        _cache["enabled"] -= 1
        if not _cache["enabled"]:
            _cache["values"] = {}


def _register(module, name, tensor, like):
    """tensor as a parameter of module if `like` is one, else as a buffer."""
    if isinstance(like, Parameter):
        module.register_parameter(name, tensor if isinstance(tensor, Parameter) else Parameter(tensor,
                                                                                             like.requires_grad))
    else:
        module.register_buffer(name, tensor)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s) they are applied to."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        new = original
        with no_grad():
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:           # taken as the identity at registration
                        pass
        if not isinstance(new, (Tensor, list, tuple)):
            raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                                 f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}")
            if new is not original:
                original.data = new.detach()          # the same tensor object: optimizers holding it still work
            _register(self, "original", original, original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, "
                                     f"tuple...). Got element {i} of the sequence with type {type(t).__name__}.")
                _register(self, f"original{i}", t.detach(), original)
        if not unsafe:
            _check(self(), original, "registering a parametrization")

    def right_inverse(self, value):
        """Stores value, through the right inverses of the parametrizations, in the originals."""
        with no_grad():
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
                elif not self.unsafe:
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement right_inverse.")
            if self.is_tensor:
                self.original.data = value.detach()
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").data = t.detach()

    def forward(self):
        x = self[0](self.original) if self.is_tensor else \
            self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in list(self)[1:]:
            x = m(x)
        return x


def _check(value, like, when):
    if not isinstance(value, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
    if value.dtype != like.dtype or tuple(value.shape) != tuple(like.shape):
        raise ValueError(f"Parametrization must not change the dtype or shape of the tensor ({when}), unless "
                         f"`unsafe` is True.\nunparametrized dtype: {like.dtype}, shape: {tuple(like.shape)}\n"
                         f"parametrized dtype: {value.dtype}, shape: {tuple(value.shape)}")


def _parametrized_class(module):
    """module's class made its own subclass, to hold its parametrized tensors' properties."""
    cls = type(module)
    if not getattr(cls, "_tracejit_parametrized", False):
        cls = type(f"Parametrized{cls.__name__}", (cls,), {"_tracejit_parametrized": True,
                                                            "_load_from_state_dict": _load_from_state_dict})
        module.__class__ = cls
    return cls


def _property(name):
    def get(self):
        key = (id(self), name)
        if _cache["enabled"]:
            if key not in _cache["values"]:
                _cache["values"][key] = self.parametrizations[name]()
            return _cache["values"][key]
        return self.parametrizations[name]()

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)
    return property(get, set_)


def _load_from_state_dict(self, state_dict, prefix, *args):
    """A parametrization may rename a checkpoint's keys of older forms first (weight_norm: <name>_g, <name>_v)."""
    for name, plist in self.parametrizations.items():
        for m in plist:
            if hasattr(m, "_rename_legacy_keys"):
                m._rename_legacy_keys(state_dict, prefix, name)
    super(type(self), self)._load_from_state_dict(state_dict, prefix, *args)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """module.<tensor_name> becomes parametrization(original) (or, when it is parametrized already, the new
    parametrization of its current value); returns module."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check(x, y, "registering a parametrization")
            if hasattr(parametrization, "right_inverse"):
                _check(parametrization.right_inverse(x), y, "calling right_inverse")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                         f"name '{tensor_name}'")
    original = getattr(module, tensor_name)
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    setattr(_parametrized_class(module), tensor_name, _property(tensor_name))
    return module


def is_parametrized(module, tensor_name=None):
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """module.<tensor_name> a parameter (or buffer) again: its current value, or with leave_parametrized=False its
    original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            original.data = value.detach()
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                             "in terms of a sequence of tensors.")
        with no_grad():
            value = getattr(module, tensor_name)
        like = plist.original0
        original = Parameter(value.detach(), like.requires_grad) if isinstance(like, Parameter) else value.detach()
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original, original if plist.is_tensor else like)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module):
    """The class of module before any parametrization was registered on it."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)
