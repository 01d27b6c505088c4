"""nn.utils.spectral_norm / remove_spectral_norm: PyTorch's forward-pre-hook form of spectral normalization,
w = w_orig / sigma(w_orig) (parameter `<name>_orig`, buffers `<name>_u` and `<name>_v`: the power iteration's
singular vector estimates; `<name>` a plain tensor recomputed before every forward). In training mode each forward
first runs n_power_iterations steps of power iteration, without grad, updating u and v in place; in eval mode it
uses them as they are. sigma = u . (W v) keeps its gradient through W."""
from ...autograd.grad_mode import no_grad
from ...ops.linalg import dot, mv
from .. import functional as F
from ..parameter import Parameter, UninitializedParameter
from .weight_norm import remove_hook


class SpectralNorm:
    """The forward pre-hook that recomputes module.<name> from <name>_orig, <name>_u and <name>_v."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight):
        """The weight as a matrix: its `dim` first, every other dim flattened into the columns."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.size(0), -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(mv(mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(mv(mat, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()       # sigma's graph keeps these values, not the buffers updated later
        return weight / dot(u, mv(mat, v))

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        del module._parameters[self.name + "_orig"]
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `SpectralNorm` can't have uninitialized parameters. Make sure "
                             "to run the dummy forward before applying spectral normalization")
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Replaces module.<name> with <name>_orig divided by its largest singular value, estimated by power iteration
    (dim None: 1 for ConvTranspose*d, else 0); returns the module."""
    if dim is None:
        from ..modules.conv import _ConvTransposeNd
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Makes module.<name> a parameter again, with the value w_orig / sigma from the current u and v."""
    return remove_hook(module, SpectralNorm, name, "spectral_norm")
