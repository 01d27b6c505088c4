"""Process-wide mode flags read on every op (kept in one small object so the hot path is one lookup)."""


class _State:
    __slots__ = ("grad_enabled", "tracer", "profiler", "anomaly", "inference", "serial", "cuda")

    def __init__(self):
        self.grad_enabled = True
        self.tracer = None      # the active tracing context (tracing/tracer.py) or None
        self.profiler = None    # the active autograd.profiler.profile or None
        self.anomaly = False
        self.inference = False
        self.serial = 0         # creation counter: tensors created during a trace are constants
        self.cuda = None        # the device dispatcher, set when the first cuda tensor is made (tracejit.cuda)


STATE = _State()
