"""Padding modules over F.pad: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad in 1-D, 2-D
and 3-D. An int pads every side by it; a tuple is (left, right[, top, bottom[, front, back]])."""
from .. import functional as F
from .module import Module


class _PadNd(Module):
    _n = 1
    mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = (padding,) * (2 * self._n) if isinstance(padding, int) else tuple(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _n = 1


class ConstantPad2d(_ConstantPadNd):
    _n = 2


class ConstantPad3d(_ConstantPadNd):
    _n = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    _n = 1


class ZeroPad2d(_ZeroPadNd):
    _n = 2


class ZeroPad3d(_ZeroPadNd):
    _n = 3


class ReflectionPad1d(_PadNd):
    _n, mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    _n, mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    _n, mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    _n, mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    _n, mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    _n, mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    mode = "circular"

    def forward(self, input):
        if input.dim() not in (self._n + 1, self._n + 2):        # checked here, as PyTorch's modules do
            raise ValueError(f"expected {self._n + 1}D or {self._n + 2}D input (got {input.dim()}D input)")
        return super().forward(input)


class CircularPad1d(_CircularPadNd):
    _n = 1


class CircularPad2d(_CircularPadNd):
    _n = 2


class CircularPad3d(_CircularPadNd):
    _n = 3
