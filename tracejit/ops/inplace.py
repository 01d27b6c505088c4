"""In-place ops (`x.add_(y)`, `x[i] = v`, `p -= lr * g`): computed out of place, then written back.

Eagerly the result is copied into the tensor's buffer and its version counter bumped; if autograd is
involved, the tensor takes the new grad_fn (its old value lives on in a snapshot the new node saved).
While tracing the same code rebinds the tracer to the new IR value: in-place updates are functionalized.
"""
import numpy as np

from .._state import STATE

READ_ONLY = ("unsupported operation: the tensor is read-only (an expanded view shares memory between elements); "
             "clone() it before writing")


def _snapshot(t):
    """A tensor standing for `t`'s value before the update (same autograd identity, own version)."""
    from .._tensor import Tensor
    s = object.__new__(Tensor)
    s._init(t._data.copy() if t._data is not None else None)
    s._value = t._value
    s._requires_grad = t._requires_grad
    s.grad_fn = t.grad_fn
    s._output_nr = t._output_nr
    return s


def inplace(self, compute, args=()):
    """Update `self` with `compute(old_self)`; `args` are the other tensor operands (for autograd)."""
    from .._tensor import Tensor, INFERENCE_INPLACE
    if self._inference and not STATE.inference:
        raise RuntimeError(INFERENCE_INPLACE)
    grad = STATE.grad_enabled
    if grad and self._requires_grad and self.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    need = grad and (self._requires_grad or any(isinstance(a, Tensor) and a._requires_grad for a in args))
    tracing = STATE.tracer is not None
    if tracing:
        STATE.tracer.ensure_tracer(self)
        STATE.tracer.sync(self)
    if need and self._base is not None and self._base._requires_grad and self._base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    src = _snapshot(self) if (need or tracing) else self
    res = compute(src)
    if not isinstance(res, Tensor):
        from ..creation import tensor
        res = tensor(res, dtype=self.dtype)
    if need and src._requires_grad and not res._requires_grad and self.dtype.is_floating_point:
        # overwritten without reading it (fill_, zero_, copy_): PyTorch keeps the tensor in the graph, its
        # old value getting a zero gradient
        from .elementwise import where
        res = where(True, res, src)
    rd, sd = res.dtype, self.dtype
    if rd is not sd and (rd._cat > sd._cat):
        raise RuntimeError(f"result type {rd.name.capitalize()} can't be cast to the desired output type "
                           f"{sd.name.capitalize()}")
    if tuple(res.shape) != tuple(self.shape):
        from .registry import broadcast_shapes
        if broadcast_shapes(res.shape, self.shape) != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                               f"{list(broadcast_shapes(res.shape, self.shape))}")
        res = res.expand(self.shape)
    if tracing:
        if rd is not sd:
            res = res.to(sd)
        STATE.tracer.write(self, res)      # a view's update also lands in its base
    else:
        try:
            d, r = self._data, res._data
            if isinstance(d, np.ndarray):
                np.copyto(d, r if isinstance(r, np.ndarray) else r.to_host(), casting="unsafe")
            else:
                d.copy_from(r)          # a device array (cuda): a copy kernel writing through the view
        except ValueError:
            raise RuntimeError(READ_ONLY) from None
    self._version.v += 1
    if "_vver" in self.__dict__:        # a view updated itself: its history is the update's, not stale
        self.__dict__["_vver"] = self._version.v
    if need:
        self.grad_fn = res.grad_fn
        self._output_nr = res._output_nr
        self._requires_grad = res._requires_grad
        if self._base is not None and not tracing:
            _copy_slices(self, res)
    return self


def _positions(view, base):
    """Flat positions in `base` (a C-contiguous array) of each element of `view` (a numpy view into it)."""
    if not (isinstance(view, np.ndarray) and isinstance(base, np.ndarray) and base.flags.c_contiguous):
        return None
    isz = base.itemsize
    off = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if off % isz or any(s % isz for s in view.strides):
        return None
    pos = np.full(view.shape, off // isz, np.int64)
    for d, (n, s) in enumerate(zip(view.shape, view.strides)):
        pos += np.arange(n, dtype=np.int64).reshape([-1 if k == d else 1 for k in range(view.ndim)]) * (s // isz)
    if pos.size and (pos.min() < 0 or pos.max() >= base.size):
        return None
    return pos


def _copy_slices(view, res):
    """PyTorch's CopySlices: after an in-place update of a view, its base's new value is the old base with
    the view's elements replaced by `res`. The data is already written (through the view); this records
    the autograd node (an index_put of the view's positions) that makes the base's gradient right."""
    from .._tensor import Tensor
    from ..autograd.graph import record
    from .indexing import _T
    from .registry import OPS
    base = view._base
    pos = _positions(view._data, base._data)
    if pos is None:
        raise RuntimeError("tracejit cannot record an in-place update of this view for autograd (its base is not "
                           "a contiguous array); clone() the base or use an out-of-place op.")
    old = object.__new__(Tensor)          # the base's value before the update, as an autograd identity
    old._init(base._data)                 # (index_put's VJP never reads it, so the data need not be copied)
    old._requires_grad, old.grad_fn, old._output_nr = base._requires_grad, base.grad_fn, base._output_nr
    idx = tuple(Tensor._wrap(i) for i in np.unravel_index(pos, base._data.shape))
    record(OPS["index_put"], (old, res) + idx, (base,),
           {"spec": tuple(_T(k) for k in range(len(idx))), "accumulate": False})


def make_inplace(fn):
    """`x.f_(*a)` from the out-of-place function `f(x, *a)`."""
    def method(self, *args, **kwargs):
        # an operand that is `self` means self's value before the update
        return inplace(self, lambda s: fn(s, *[s if a is self else a for a in args], **kwargs),
                       args + tuple(kwargs.values()))
    method.__name__ = fn.__name__ + "_"
    return method
