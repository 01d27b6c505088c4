"""Pytrees: the arguments and results of a traced function as nested tuples, lists, named tuples and dicts of
tensors. `flatten` makes an argument's structure key (the signature a compiled program is cached under) and
lists its tensors; `collect` replaces the tensors of a result by `OutLeaf` markers (listing them) and `unflatten`
puts new tensors back in their places."""
import numpy as np

from .._tensor import Tensor


def flatten(obj, leaves, static=False):
    """Structure key of `obj`; tensors appended to `leaves` (non-tensor leaves are baked into the key)."""
    if isinstance(obj, Tensor) and not static:
        leaves.append(obj)
        d = obj._data
        if d is None:
            obj._concrete("a tensor argument of a traced function")
        if type(d) is not np.ndarray and not isinstance(d, np.ndarray):     # a device array: its device keys too
            return ("T", d.shape, d.dtype, obj._requires_grad, str(d.device))
        if d.ndim > 1 and not d.flags.c_contiguous:   # strided: its strides decide what view() allows
            return ("T", d.shape, d.dtype, obj._requires_grad, d.strides)
        return ("T", d.shape, d.dtype, obj._requires_grad)       # (the fast path in __call__ builds the same)
    if isinstance(obj, Tensor):
        obj._concrete("a static tensor argument")
        return ("S", tuple(obj.shape), obj.dtype.name, obj._data.tobytes())
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__,) + tuple(flatten(o, leaves, static) for o in obj)
    if isinstance(obj, dict):
        return ("dict",) + tuple((k, flatten(obj[k], leaves, static)) for k in sorted(obj, key=repr))
    if isinstance(obj, np.ndarray):
        raise TypeError("@trace: a numpy.ndarray argument: pass a tensor instead (tracejit.from_numpy(a) or "
                        "tracejit.tensor(a))")
    try:
        hash(obj)
    except TypeError:
        raise TypeError(f"@trace: argument of type {type(obj).__name__} is neither a tensor, a container of "
                        f"tensors nor hashable; mark it static with static_argnums/static_argnames or pass it "
                        f"another way") from None
    return ("V", type(obj).__name__, obj)


def unflatten(obj, it):
    if isinstance(obj, OutLeaf):
        return next(it)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[unflatten(o, it) for o in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)(unflatten(o, it) for o in obj)
    if isinstance(obj, dict):
        return {k: unflatten(v, it) for k, v in obj.items()}
    return obj


class OutLeaf:
    __slots__ = ()


def collect(obj, leaves):
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return OutLeaf()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[collect(o, leaves) for o in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)(collect(o, leaves) for o in obj)
    if isinstance(obj, dict):
        return {k: collect(v, leaves) for k, v in obj.items()}
    return obj
