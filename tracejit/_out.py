"""`out=`: the result of `tracejit.<fn>(..., out=t)` is written into `t`, with PyTorch's rules.

The keyword is added to the functions of the `tracejit` namespace only (`torch.add(a, b, out=c)`), not to
the methods and operators, whose calls stay one frame. The rules: no autograd through an `out=` call; the
result's dtype must cast to `out`'s without going down a category (float -> int, int -> bool are errors);
an `out` of another shape is resized (with PyTorch's deprecation warning unless it is empty); creation
functions take their dtype from `out` when none is given.
"""
import functools
import warnings

import numpy as np

from ._state import STATE
from ._tensor import Tensor

# the creation functions and, from the op modules, the functions PyTorch also gives an out= argument
CREATION = ("zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "rand", "randn", "randint",
            "randperm")
OPS = ("matmul", "mm", "bmm", "mv", "dot", "inner", "outer", "addmm", "addmv", "baddbmm",
       "sum", "nansum", "mean", "nanmean", "prod", "amax", "amin", "argmax", "argmin", "var", "std", "logsumexp",
       "max", "min", "median", "kthvalue", "aminmax",
       "norm", "all", "any", "cumsum", "cumprod", "cat", "concat", "concatenate", "stack", "hstack", "vstack",
       "dstack", "column_stack", "flip", "tril", "triu")
_NOT_OUT = ("allclose", "equal", "cast", "pointwise", "ones_like_", "isclose", "result_type", "positive")

_CATEGORY = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
             "float16": "Half", "float32": "Float", "float64": "Double"}


def write(name, result, out):
    """Write `result` into `out` as PyTorch's out= does; returns `out`. A tuple result (values, indices) goes
    into a tuple of as many tensors, each by these rules."""
    if isinstance(result, tuple) and isinstance(out, (tuple, list)) and len(out) == len(result):
        outs = [write(name, r, o) for r, o in zip(result, out)]
        return type(result)(*outs) if hasattr(result, "_fields") else tuple(outs)
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if not isinstance(result, Tensor):
        raise TypeError(f"{name}() got an unexpected keyword argument 'out' (its result is not one tensor)")
    if STATE.grad_enabled and (out._requires_grad or result._requires_grad):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")
    rd, od = result.dtype, out.dtype
    if rd._cat > od._cat:
        raise RuntimeError(f"result type {_CATEGORY[rd.name]} can't be cast to the desired output type "
                           f"{_CATEGORY[od.name]}")
    if tuple(out.shape) != tuple(result.shape) or STATE.tracer is not None or type(out._data) is not np.ndarray:
        if tuple(out.shape) != tuple(result.shape):
            if STATE.tracer is not None:
                raise RuntimeError(f"{name}(): out= of shape {list(out.shape)} for a result of shape "
                                   f"{list(result.shape)} cannot be resized inside a traced function")
            if out.numel():
                warnings.warn(f"An output with one or more elements was resized since it had shape "
                              f"{list(out.shape)}, which does not match the required output shape "
                              f"{list(result.shape)}. This behavior is deprecated, and in a future PyTorch release "
                              "outputs will not be resized unless they have zero elements. You can explicitly reuse "
                              "an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
                              stacklevel=3)
            out._data = result.to(od)._data.copy()
            out._version.v += 1
            return out
        return out.copy_(result)        # traced or on a device: an in-place copy
    np.copyto(out._data, result._data, casting="unsafe")
    out._version.v += 1
    return out


def _with_out(fn, name, creation):
    @functools.wraps(fn)
    def f(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if creation and kwargs.get("dtype") is None and isinstance(out, Tensor):
            kwargs["dtype"] = out.dtype
        return write(name, fn(*args, **kwargs), out)
    return f


def add_out(namespace, op_modules):
    """Give the functions of `namespace` (tracejit's globals) that PyTorch gives out= the keyword."""
    names = [(n, True) for n in CREATION]
    names += [(n, False) for n in OPS]
    for mod in op_modules:      # elementwise: every public function
        names += [(n, False) for n in dir(mod) if not n.startswith("_") and n not in _NOT_OUT
                  and getattr(getattr(mod, n), "__module__", None) == mod.__name__]
    for n, creation in names:
        fn = namespace.get(n)
        if fn is None or isinstance(fn, type) or not callable(fn):
            continue
        code = getattr(fn, "__code__", None)
        if code is not None and "out" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            continue        # takes out= itself
        namespace[n] = _with_out(fn, n, creation)
