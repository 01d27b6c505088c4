"""tracejit.cuda: is a GPU there, and the switch that turns on device dispatch.

numba.cuda is imported lazily (it costs 0.2-0.6 s), only when CUDA is first asked about. Without an NVIDIA
driver every entry point raises one clear RuntimeError instead of numba's driver traceback. With
NUMBA_ENABLE_CUDASIM=1 (set before numba is imported) numba's CUDA simulator stands in for a GPU: slow
(each CUDA thread is a Python thread) but exact, which is how the cuda tests run on machines without one.
"""
import os

from ._state import STATE

_NO_CUDA = ("CUDA is not available: no NVIDIA GPU/driver found; tensors stay on the CPU. To test CUDA code without "
            "a GPU set NUMBA_ENABLE_CUDASIM=1 before importing tracejit.")

_available = None


def _numba_cuda():
    import numpy as np
    if not hasattr(np, "row_stack"):
        # numba-cuda <= 0.30 registers an overload of np.row_stack (vstack's alias, removed in numpy 2.5) while it
        # loads its typing registries, at the first kernel compile: without the alias no kernel compiles
        np.row_stack = np.vstack
    from numba import cuda
    return cuda


def simulator():
    """True when numba's CUDA simulator stands in for the GPU."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


def is_available():
    global _available
    if _available is None:
        try:
            _available = bool(_numba_cuda().is_available())
        except Exception:       # numba without cuda support, a broken toolkit...: no GPU for tracejit
            _available = False
    return _available


def device_count():
    if not is_available():
        return 0
    try:
        return len(_numba_cuda().gpus)
    except Exception:
        return 0


def current_device():
    _require()
    return 0


def set_device(device):
    _require()
    if int(getattr(device, "index", device) or 0) != 0:
        raise RuntimeError("tracejit supports one GPU (cuda:0)")


def get_device_name(device=None):
    _require()
    if simulator():
        return "numba CUDA simulator"
    d = _numba_cuda().get_current_device()
    name = d.name
    return name.decode() if isinstance(name, bytes) else str(name)


def synchronize(device=None):
    """Wait for every kernel launched so far (a no-op without a GPU, like PyTorch's without CUDA work)."""
    if is_available():
        _numba_cuda().synchronize()


def manual_seed(seed):
    """Random numbers for cuda tensors are drawn on the host and copied over: one generator for both."""
    from .random import manual_seed as _seed
    _seed(seed)


manual_seed_all = manual_seed


def is_initialized():
    return STATE.cuda is not None


def empty_cache():
    """Free device memory numba still holds for dropped arrays (its deferred deallocations)."""
    if STATE.cuda is not None and not simulator():
        _numba_cuda().current_context().deallocations.clear()


def _require():
    """Raise the clear error when there is no GPU (nor the simulator)."""
    if not is_available():
        raise RuntimeError(_NO_CUDA)


def _activate():
    """The first cuda tensor exists: from now on `apply` routes ops through the device dispatcher."""
    if STATE.cuda is None:
        from .backends.numba_cuda.eager import dispatch
        try:        # small tensors launch small grids: that is expected, not worth a warning per op
            from numba import config
            config.CUDA_LOW_OCCUPANCY_WARNINGS = False
        except Exception:
            pass
        from ._state import set_cuda_dispatch
        set_cuda_dispatch(dispatch)


def to_device(t, device):
    """Tensor.to(device) for a device change: a copy, differentiable like PyTorch's (ToCopyBackward0)."""
    from ._tensor import Tensor, device as _device
    d = device if isinstance(device, _device) else _device(str(device))
    if d.type == "cuda" and d.index not in (None, 0):
        raise RuntimeError(f"Invalid device {d}: tracejit supports one GPU (cuda:0)")
    here = t.device
    if here.type == d.type:
        return t
    if t._data is None:
        from .tracing.errors import TraceError, user_frame
        raise TraceError(f"{user_frame()}: cannot trace a move to {d} inside a traced function: a compiled graph "
                         f"runs on one device.\nFix: move the inputs and the module before calling the traced "
                         f"function.")
    if STATE.grad_enabled and t._requires_grad:
        return _ToDevice.apply(t, d.type)
    return Tensor._wrap(_move(t._data, d.type))


def _move(arr, kind):
    from .backends.numba_cuda import array as A
    if kind == "cuda":
        return A.from_host(arr)
    return arr.to_host()


def _make_to_device():
    from .autograd.function import Function

    class ToCopy(Function):
        @staticmethod
        def forward(ctx, x, kind):
            ctx.src = "cpu" if kind == "cuda" else "cuda"
            from ._tensor import Tensor
            return Tensor._wrap(_move(x._data, kind))

        @staticmethod
        def backward(ctx, g):
            return to_device(g, ctx.src), None

    return ToCopy


class _Lazy:
    def __init__(self, make):
        self._make, self._cls = make, None

    def apply(self, *a):
        if self._cls is None:
            self._cls = self._make()
        return self._cls.apply(*a)


_ToDevice = _Lazy(_make_to_device)


def __getattr__(name):
    if name == "amp":                   # torch.cuda.amp (GradScaler, autocast): tracejit/amp.py
        from .amp import cuda_amp
        return cuda_amp
    raise AttributeError(f"module 'tracejit.cuda' has no attribute {name!r}")
