"""tracejit.jit: TorchScript's entry points for model code that calls them, compiled by tracejit's tracer.

`jit.trace(fn_or_module, example_inputs)` records the computation on the example inputs into a graph and
compiles it, as PyTorch's does; here the graph is tracejit's (`tracejit.trace`), guarded like any traced
function, so a later call with other shapes or a changed training mode traces again instead of silently
replaying the first path. `jit.script` compiles the same way (tracejit traces; it has no TorchScript compiler
for Python source): the results are the function's, its data-dependent branches followed per call signature.
A module comes back as a `ScriptModule` holding the module's own parameters, buffers and submodules (the same
state_dict names), whose calls run traced. The decorators and queries model code sprinkles (`ignore`, `unused`,
`export`, `is_scripting`, `annotate`, `Final`) behave as they do in eager PyTorch. There is no TorchScript
archive: `jit.save`/`jit.load` raise.
"""
import typing

from ._state import STATE
from .nn.modules.module import Module
from .tracing.trace import trace as _trace

Final = typing.Final


class ScriptModule(Module):
    """What jit.trace/jit.script make of a module: the module's own parameters, buffers and submodules (the same
    objects, under the same state_dict names) and its other attributes; calls run traced (`tracejit.trace`,
    guarded on the module's train()/eval()); train()/eval() reach the original module too."""

    def __init__(self, mod):
        super().__init__()
        d = self.__dict__
        d["_parameters"], d["_buffers"], d["_modules"] = mod._parameters, mod._buffers, mod._modules
        d["_non_persistent_buffers_set"] = mod._non_persistent_buffers_set
        d["training"], d["_orig"], d["_traced"] = mod.training, mod, _trace(mod)

    def forward(self, *args, **kwargs):
        return self._traced(*args, **kwargs)

    def train(self, mode=True):
        self._orig.train(mode)
        self.__dict__["training"] = self._orig.training
        return self

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_orig"], name)


def _compiled(obj, example_inputs=None):
    if isinstance(obj, Module):
        out = ScriptModule(obj)
        traced = out._traced
    elif callable(obj):
        out = traced = _trace(obj)
    else:
        raise RuntimeError(f"tracejit.jit: expected a function or an nn.Module, got {type(obj).__name__}")
    if example_inputs is not None:
        args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
        traced(*args)                              # compiled now, on the examples, as PyTorch traces then
    return out


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
          example_kwarg_inputs=None, _store_inputs=True):
    """torch.jit.trace: `func` (a function or module) traced and compiled on `example_inputs` (a tensor or a
    tuple of them). The check_* and strict options are TorchScript's and change nothing here."""
    if example_kwarg_inputs is not None:
        raise NotImplementedError("tracejit.jit.trace: example_kwarg_inputs is not supported; pass the example as "
                                  "positional example_inputs")
    return _compiled(func, example_inputs)


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """torch.jit.script: `obj` (a function or module) compiled by tracejit's tracer (see the module docstring)."""
    return _compiled(obj)


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """torch.jit.freeze: the module as it is (its traced calls already read the parameters as constants of the
    call; nothing to fold)."""
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


def _decorator(fn=None, **_):
    """A decorator usable bare (@jit.ignore) or called (@jit.ignore(drop=True)): the function unchanged."""
    return fn if callable(fn) else (lambda f: f)


ignore = unused = export = _decorator


def is_scripting():
    """False: tracejit never compiles Python source as TorchScript (model code's scripting-only branches stay off)."""
    return False


def is_tracing():
    """Whether this call runs inside a tracejit trace (torch.jit.is_tracing's question, for tracejit's tracer)."""
    return STATE.tracer is not None


def annotate(the_type, the_value):
    return the_value


class _Future:
    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value


def fork(func, *args, **kwargs):
    """torch.jit.fork: `func` runs now; its future's wait() returns the result."""
    return _Future(func(*args, **kwargs))


def wait(future):
    return future.wait()


def _no_archive(*args, **kwargs):
    raise NotImplementedError("tracejit has no TorchScript archive: save the state_dict with tracejit.save and "
                              "build the model in code to load it")


save = load = _no_archive


def script_if_tracing(fn):
    return fn
