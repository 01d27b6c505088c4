"""nn.utils.weight_norm / remove_weight_norm: PyTorch's forward-pre-hook form of weight normalization, w = g v / |v|
(parameters `<name>_g` and `<name>_v`; `<name>` a plain tensor recomputed before every forward), deprecated there
in favour of nn.utils.parametrizations.weight_norm."""
import warnings

from ...ops import reduction as R
from ..parameter import Parameter, UninitializedParameter


def norm_except_dim(v, pow=2, dim=0):
    """The p-norm of v over every dim but `dim`, kept in v's rank (dim -1: over all of v, a 0-d tensor)."""
    if dim == -1:
        return R.vector_norm(v, pow)
    d = dim % v.ndim
    return R.vector_norm(v, pow, tuple(i for i in range(v.ndim) if i != d), keepdim=True)


def _weight_norm(v, g, dim=0):
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that recomputes module.<name> from <name>_g and <name>_v."""

    def __init__(self, name, dim):
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `WeightNorm` can't have uninitialized parameters. Make sure to "
                             "run the dummy forward before applying weight normalization")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Replaces module.<name> with <name>_g (its norm over every dim but `dim`; dim=None: one norm) and <name>_v
    (its direction); returns the module."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Makes module.<name> a parameter again, with the value g v / |v|."""
    return remove_hook(module, WeightNorm, name, "weight_norm")


def remove_hook(module, kind, name, what):
    """Removes the forward pre-hook of class `kind` that reparameterizes module.<name> (its `remove` makes the
    weight a parameter again); PyTorch's ValueError if there is none."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"{what} of '{name}' not found in {module}")
