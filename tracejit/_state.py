"""Mode flags read on every op (kept in one small object so the hot path is one lookup).

Per thread, as PyTorch's: grad mode (no_grad, enable_grad, set_grad_enabled), inference mode, the active trace
and profiler belong to the thread that set them (a new thread starts with grad enabled and nothing active).
Process-wide, as PyTorch's: anomaly mode (torch.autograd.set_detect_anomaly in one thread is seen by all), the
creation counter and the cuda dispatcher.
"""
import itertools
import threading

SERIAL = itertools.count(1)     # tensor creation counter (next() is atomic): tensors made during a trace are constants


class _State(threading.local):
    # (no __slots__: a slot of a threading.local would be shared by every thread)

    def __init__(self):
        self.grad_enabled = True
        self.tracer = None      # the active tracing context (tracing/tracer.py) or None
        self.profiler = None    # the active autograd.profiler.profile or None
        self.inference = False

    # the device dispatcher, set when the first cuda tensor is made (tracejit.cuda): one per process, so a class
    # attribute (every thread sees it; set it with set_cuda_dispatch, not STATE.cuda = ...)
    cuda = None
    anomaly = property(lambda self: _GLOBAL["anomaly"], lambda self, v: _GLOBAL.__setitem__("anomaly", v))
    # anomaly mode's check_nan (set_detect_anomaly(True, check_nan=False) records stacks without NaN checks)
    anomaly_nan = property(lambda self: _GLOBAL["anomaly_nan"], lambda self, v: _GLOBAL.__setitem__("anomaly_nan", v))


_GLOBAL = {"anomaly": False, "anomaly_nan": True}


def set_cuda_dispatch(fn):
    _State.cuda = staticmethod(fn)     # (a plain function as a class attribute would be called as a method)


STATE = _State()
