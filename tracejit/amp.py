"""tracejit.amp: PyTorch's mixed-precision API (`torch.autocast`, `torch.amp.GradScaler`) for code that uses it.

tracejit computes every op in its tensors' own dtypes: there is no autocast. `autocast(..., enabled=False)`, the
way training scripts switch mixed precision off, is a no-op as in PyTorch; `enabled=True` warns once and runs
the block in full precision, as PyTorch does on a device where it has no autocast (it warns and disables it).

`GradScaler` is PyTorch's loss scaling: the loss multiplied by the scale, the gradients divided by it before the
optimizer step, a step skipped when a gradient is inf or NaN, and the scale grown every `growth_interval` clean
steps and cut on an overflow. On the default device "cuda" without a GPU it warns and disables itself, as
PyTorch's does (every method then passes through). It reads the gradients' values to decide on a step, so it
belongs outside a traced function (trace the forward and backward, and step with the scaler after).
"""
import math
import warnings

import numpy as np

_DEVICES = ("cpu", "cuda", "mps", "xpu", "hpu", "meta")
_WARNED = []


def _device_type(device):
    t = str(getattr(device, "type", device)).split(":")[0]
    if t not in _DEVICES:
        raise RuntimeError(f"Expected one of {', '.join(_DEVICES)} device type at start of device string: {t}")
    return t


class autocast:
    """`with autocast(device_type, dtype=None, enabled=True, cache_enabled=None):` (also a decorator). See the
    module's docstring: tracejit runs the block in the tensors' own dtypes."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _device_type(device_type)
        self.fast_dtype, self._enabled = dtype, False
        if enabled and not _WARNED:
            _WARNED.append(True)
            warnings.warn("tracejit has no autocast: the block runs in the tensors' own dtypes (float32 stays "
                          "float32). Pass enabled=False to silence this.", UserWarning, stacklevel=2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def run(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return run


def is_autocast_enabled(device_type=None):
    return False


class GradScaler:
    """PyTorch's GradScaler (see the module's docstring). Optimizer state per optimizer: whether its gradients
    were unscaled since the last update and whether they held an inf or NaN."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = _device_type(device)
        if enabled and self._device == "cuda":
            from . import cuda
            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                              UserWarning, stacklevel=2)
                enabled = False
        if enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._enabled = enabled
        self._scale, self._growth_factor, self._backoff_factor = float(init_scale), growth_factor, backoff_factor
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._per_optimizer = {}

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs (a tensor, or nested lists and tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        from ._tensor import Tensor
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": "ready", "found_inf": False})

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale (in place), noting whether any is inf or NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == "unscaled":
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] == "stepped":
            raise RuntimeError("unscale_() is being called after step().")
        from .autograd import no_grad
        inv = float(np.float32(1.0) / np.float32(self._scale))
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.dtype.is_floating_point and p.grad.dtype.itemsize < 4:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    p.grad.mul_(inv)
                    found = found or not bool(np.isfinite(p.grad.numpy()).all())
        st.update(stage="unscaled", found_inf=found)

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless its (unscaled) gradients hold an inf or NaN; its result or None."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] == "stepped":
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == "ready":
            self.unscale_(optimizer)
        out = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = "stepped"
        return out

    def update(self, new_scale=None):
        """The next scale: `new_scale` if given; else cut by backoff_factor after an inf/NaN in any optimizer's
        gradients, grown by growth_factor after growth_interval clean updates in a row."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(st["found_inf"] for st in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    self._scale = grown if math.isfinite(float(np.float32(grown))) else self._scale
                    self._growth_tracker = 0
        self._scale = float(np.float32(self._scale))        # (PyTorch keeps it in a float32 tensor)
        self._per_optimizer = {}

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor, self._backoff_factor = state_dict["growth_factor"], state_dict["backoff_factor"]
        self._growth_interval, self._growth_tracker = state_dict["growth_interval"], state_dict["_growth_tracker"]


class _CudaGradScaler(GradScaler):
    """torch.cuda.amp.GradScaler: GradScaler("cuda", ...), which PyTorch deprecates in favour of that spelling."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        warnings.warn("torch.cuda.amp.GradScaler(...) is deprecated: use torch.amp.GradScaler('cuda', ...)",
                      FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def _cuda_autocast(enabled=True, dtype=None, cache_enabled=True):
    return autocast("cuda", dtype, enabled, cache_enabled)


def _namespace():
    import types
    ns = types.ModuleType("tracejit.cuda.amp", "torch.cuda.amp's names: GradScaler and autocast on \"cuda\".")
    ns.GradScaler, ns.autocast = _CudaGradScaler, _cuda_autocast
    return ns


cuda_amp = _namespace()
