"""Tensor creation: from data, filled, ranges and random (random ones are registry ops, so a traced
function draws fresh numbers on every call)."""
import math

import operator

import numpy as np

from . import _dtype as D
from ._tensor import Tensor, check_device
from .ops.registry import apply, OPS


def _infer(data):
    """tracejit dtype for Python data, PyTorch's inference: the promotion of the elements' types, where
    Python bool/int/float are bool/int64/default float and tensors and numpy scalars keep their dtype;
    an empty sequence is the default float."""
    dt = None
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
            continue
        if isinstance(x, Tensor):
            d = x.dtype
        elif isinstance(x, (np.ndarray, np.generic)):
            d = D.from_numpy_dtype(x.dtype)
        elif isinstance(x, bool):
            d = D.bool_
        elif isinstance(x, int):
            d = D.int64
        elif isinstance(x, float):
            d = D.get_default_dtype()
        elif isinstance(x, complex):
            raise TypeError("complex tensors are not supported by tracejit")
        else:
            raise TypeError(f"Could not infer dtype of {type(x).__name__}")
        dt = d if dt is None else D.promote_types(dt, d)
    return dt or D.get_default_dtype()


def _unwrap(data):
    if isinstance(data, Tensor):
        data._concrete("tensor(tensor)")
        return data._data
    if isinstance(data, (list, tuple)):
        return [_unwrap(x) for x in data]
    return data


def _to_array(data, dtype=None):
    if isinstance(data, np.ndarray):
        dt = dtype or D.from_numpy_dtype(data.dtype)
        return np.array(data, dtype=dt.np)
    if isinstance(data, Tensor):
        data._concrete("tensor(tensor)")
        return np.array(data._data, dtype=(dtype or data.dtype).np)
    if dtype is None:
        dtype = _infer(data)
    try:
        return np.array(_unwrap(data), dtype=dtype.np)
    except ValueError as e:
        raise ValueError(f"expected sequence of equal-length lists to build a tensor: {e}") from None


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    check_device(device)
    t = _place(Tensor._wrap(_to_array(data, D.to_dtype(dtype) if dtype is not None else None)), device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _place(t, device):
    """`t` (just made on the host) moved to `device` when that is a GPU."""
    if device is None or t._data is None or (device == "cpu" if isinstance(device, str) else str(device) == "cpu"):
        return t            # (a tracer: a random op recorded inside a trace runs where the graph runs)
    from ._tensor import device as _device
    if _device(device).type == "cuda":
        from .cuda import _move
        return Tensor._wrap(_move(t._data, "cuda"))
    return t


def as_tensor(data, dtype=None, device=None):
    check_device(device)
    if isinstance(data, Tensor):
        if device is not None:
            data = data.to(device)
        return data if dtype is None or data.dtype is D.to_dtype(dtype) else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or D.to_dtype(dtype).np == data.dtype):
        return _place(from_numpy(data), device)
    return tensor(data, dtype=dtype, device=device)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    t = tensor(obj, dtype=dtype, device=device) if copy else as_tensor(obj, dtype=dtype, device=device)
    return t.requires_grad_(True) if requires_grad else t


def from_numpy(ndarray):
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    D.from_numpy_dtype(ndarray.dtype)
    return Tensor._wrap(ndarray)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    try:
        out = tuple(operator.index(s) for s in size)     # (PyTorch: ints only, not '3' nor 3.5)
    except TypeError:
        k, bad = next(((k, s) for k, s in enumerate(size) if not hasattr(type(s), "__index__")), (0, size[0]))
        raise TypeError(f"argument 'size' failed to unpack the object at pos {k + 1} with error \"type must be "
                        f"tuple of ints,but got {type(bad).__name__}\"") from None
    for s in out:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(out)}")
    return out


def _dt(dtype, default=None):
    return D.to_dtype(dtype) if dtype is not None else (default or D.get_default_dtype())


def _finish(t, requires_grad, device=None):
    check_device(device)
    if device is not None:
        t = _place(t, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _finish(Tensor._wrap(np.zeros(_shape(size), _dt(dtype).np)), requires_grad, device)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _finish(Tensor._wrap(np.ones(_shape(size), _dt(dtype).np)), requires_grad, device)


def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=None):
    return _finish(Tensor._wrap(np.empty(_shape(size), _dt(dtype).np)), requires_grad, device)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = D.result_type(fill_value)
    return _finish(Tensor._wrap(np.full(_shape((size,)), fill_value, _dt(dtype).np)), requires_grad, device)


def _like(fn):
    def f(input, *args, dtype=None, device=None, requires_grad=False, memory_format=None):
        return fn(tuple(input.shape), *args, dtype=dtype or input.dtype, requires_grad=requires_grad,
                  device=device if device is not None else _dev(input))
    f.__name__ = fn.__name__ + "_like"
    return f


def _dev(t):
    """The device a *_like result goes to: the input's when it is a GPU (None keeps the CPU path as it was)."""
    d = t._data
    return None if type(d) is np.ndarray else t.device


zeros_like, ones_like, empty_like = _like(zeros), _like(ones), _like(empty)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype, requires_grad=requires_grad,
                device=device if device is not None else _dev(input))


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    vals = [start, end, step]
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = D.get_default_dtype() if any(isinstance(v, float) for v in vals) else D.int64
    dtype = D.to_dtype(dtype)
    n = max(0, math.ceil((end - start) / step))
    arr = (np.arange(n, dtype=np.float64) * step + start).astype(dtype.np) if dtype.is_floating_point \
        else np.arange(start, end, step, dtype=dtype.np)
    return _finish(Tensor._wrap(arr), requires_grad, device)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    if int(steps) < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _finish(Tensor._wrap(np.linspace(start, end, int(steps)).astype(_dt(dtype).np)), requires_grad, device)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    if int(steps) < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _finish(Tensor._wrap(np.logspace(start, end, int(steps), base=base).astype(_dt(dtype).np)),
                   requires_grad, device)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    return _finish(Tensor._wrap(np.eye(n, m, dtype=_dt(dtype).np)), requires_grad, device)


# ----------------------------------------------------------------------------- random

def _rand(op, size, dtype, generator, requires_grad, device, **kw):
    dtype = _dt(dtype)
    t = apply(OPS[op], shape=_shape(size), dtype=dtype, generator=generator, **kw)
    return _finish(t, requires_grad, device)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _rand("rand", size, dtype, generator, requires_grad, device)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _rand("randn", size, dtype, generator, requires_grad, device)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    return _rand("randint", (tuple(size),), _dt(dtype, D.int64), generator, requires_grad, device,
                 low=int(low), high=int(high))


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    return _finish(apply(OPS["randperm"], n=int(n), dtype=_dt(dtype, D.int64), generator=generator), requires_grad,
                   device)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    return rand(tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad,
                device=device if device is not None else _dev(input))


def randn_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    return randn(tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad,
                 device=device if device is not None else _dev(input))


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad,
                   device=device if device is not None else _dev(input))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """All four forms: (Tensor, Tensor), (Tensor, float), (float, Tensor), (float, float, size)."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal(): with float mean and std, size is required")
        return _rand("randn", (tuple(size),), dtype, generator, requires_grad, device, mean=float(mean), std=float(std))
    if st and std._data is not None and (std < 0).any():     # (values are checked eagerly, not in a trace)
        raise RuntimeError("normal expects all elements of std >= 0.0")
    ref = mean if mt else std
    from .ops.registry import broadcast_shapes
    shape = broadcast_shapes(*(x.shape for x in (mean, std) if isinstance(x, Tensor)))
    z = randn(shape, generator=generator, dtype=ref.dtype)
    return z * std + mean


def bernoulli(input, p=None, *, generator=None):
    if p is not None:
        input = full_like(input, p)
    return apply(OPS["bernoulli"], input.detach() if input.requires_grad else input, generator=generator)


def poisson(input, generator=None):
    """A Poisson draw per rate of `input` (a float tensor; the result has its dtype and no gradient)."""
    from .autograd.grad_mode import no_grad
    from .distributions.sampling import poisson as draw
    _float_only(input, "poisson_cpu")
    if input._data is not None and not bool((input >= 0).all()):   # (values are checked eagerly, not in a trace)
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    with no_grad():
        return draw(input.detach(), generator)


def binomial(count, prob, generator=None):
    """A Binomial(count, prob) draw per element (float tensors, broadcast; prob clamped to [0, 1], a negative count
    draws 0, as PyTorch's)."""
    from .autograd.grad_mode import no_grad
    from .distributions.sampling import binomial as draw
    for t, name in ((count, "count"), (prob, "prob")):
        if not t.dtype.is_floating_point:
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: {_type_name(t)}")
    with no_grad():
        return draw(count.detach().clamp(min=0), prob.detach().clamp(0, 1), generator).to(count.dtype)


def _standard_gamma(input, generator=None):
    """Gamma(input, 1) draws (float tensor), the smallest normal number where a draw underflows; no gradient."""
    from .autograd.grad_mode import no_grad
    from .distributions.sampling import standard_gamma
    _float_only(input, "gamma_cpu")
    with no_grad():
        return standard_gamma(input.detach(), generator)


def _float_only(t, kernel):
    if not t.dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_type_name(t)}\'')


def _type_name(t):
    from ._out import _CATEGORY
    return _CATEGORY.get(t.dtype.np.name, t.dtype.np.name)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    return apply(OPS["multinomial"], input.detach() if input.requires_grad else input, num_samples=int(num_samples),
                 replacement=bool(replacement), generator=generator)
