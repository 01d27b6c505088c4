"""InstanceNorm1d/2d/3d (optionally with running statistics) and their lazy forms LazyInstanceNorm1d/2d/3d."""
import warnings

from .. import functional as F
from .batchnorm import _LazyNormBase, _NormBase


class _InstanceNorm(_NormBase):
    """Normalizes each (sample, channel) plane by its own statistics; with track_running_stats, training also
    updates running statistics (the batch's mean of the planes' mean and unbiased variance) that eval uses."""
    DIMS = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input):
        if input.dim() not in (self.DIMS + 1, self.DIMS + 2):
            raise ValueError(f"expected {self.DIMS + 1}D or {self.DIMS + 2}D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        dim = input.dim() - self.DIMS - 1
        if input.shape[dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={dim} to match num_features ({self.num_features}), "
                                 f"but got: {input.shape[dim]}.")
            warnings.warn(f"input's size at dim={dim} does not match num_features. You can silence this warning by "
                          "not passing in num_features, which is not used because affine=False", stacklevel=2)
        unbatched = input.dim() == self.DIMS + 1
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    DIMS = 1


class InstanceNorm2d(_InstanceNorm):
    DIMS = 2


class InstanceNorm3d(_InstanceNorm):
    DIMS = 3


class LazyInstanceNorm1d(_LazyNormBase, InstanceNorm1d):
    """InstanceNorm1d whose num_features is the first input's size(1); as PyTorch's, affine and
    track_running_stats default to True here."""
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNormBase, InstanceNorm2d):
    """InstanceNorm2d whose num_features is the first input's size(1) (affine, track_running_stats default True)."""
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNormBase, InstanceNorm3d):
    """InstanceNorm3d whose num_features is the first input's size(1) (affine, track_running_stats default True)."""
    cls_to_become = InstanceNorm3d
