"""nn.utils.parametrizations.weight_norm: weight normalization as a parametrization (PyTorch's current form).
orthogonal and spectral_norm are not provided."""
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
