"""`tracejit.compile`: PyTorch's `torch.compile` spelled for programs that call it; the compiler is `trace`."""
from .nn.modules.module import Module
from .tracing.trace import trace


class OptimizedModule(Module):
    """What compile(module) returns (PyTorch's name): the module with its calls traced. Its parameters, buffers and
    state_dict are the module's, under `_orig_mod.` as in PyTorch; train()/eval() reach it (a traced call is
    guarded on them)."""

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod
        self._traced = trace(mod)

    def forward(self, *args, **kwargs):
        return self._traced(*args, **kwargs)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None, disable=False):
    """torch.compile's signature: a function comes back traced (`tracejit.trace`), a module as an OptimizedModule;
    usable as @compile and @compile(...). `disable=True` returns `model` itself; fullgraph, dynamic, backend, mode
    and options are PyTorch's knobs for its own compiler and change nothing here (a trace is always one whole graph
    per input signature)."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                                 disable=disable)
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model)
    if not callable(model):
        raise RuntimeError(f"compile: expected a callable or an nn.Module, got {type(model).__name__}")
    return trace(model)
