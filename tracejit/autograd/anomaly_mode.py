"""Anomaly mode: each node records its forward stack; a NaN produced in backward raises and names that op."""
import warnings

from .._state import STATE


class detect_anomaly:
    """Context manager (and decorator) turning anomaly mode on, PyTorch's torch.autograd.detect_anomaly."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self._prev = (STATE.anomaly, STATE.anomaly_nan)
        STATE.anomaly, STATE.anomaly_nan = True, bool(self.check_nan)

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_nan = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with self:
                return fn(*a, **k)
        return wrapper


class set_detect_anomaly:
    """Sets anomaly mode on or off at once; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode, check_nan=True):
        self._prev = (STATE.anomaly, STATE.anomaly_nan)
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_nan = self._prev
        return False


def set_anomaly_enabled(enabled, check_nan=True):
    STATE.anomaly, STATE.anomaly_nan = bool(enabled), bool(check_nan)


def is_anomaly_enabled():
    return STATE.anomaly


def is_anomaly_check_nan_enabled():
    return STATE.anomaly_nan
