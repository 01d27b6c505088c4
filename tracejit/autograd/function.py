"""autograd.Function: user-defined forward/backward pairs, usable eagerly and inside traced functions."""
import functools

from .._state import STATE
from .graph import Node, edge_of


class FunctionCtx:
    def __init__(self):
        self.to_save = ()
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.materialize_grads = True
        self._node = None
        self.saved_for_forward = None

    def save_for_backward(self, *tensors):
        self.to_save = tuple(tensors)
        self._versions = tuple(getattr(t, "_version", None) and t._version.v for t in tensors)

    @property
    def saved_tensors(self):
        if self.to_save is None:
            from .graph import FREED_MSG
            raise RuntimeError(FREED_MSG)
        for t, v in zip(self.to_save, self._versions):
            if t is not None and v is not None and t._version.v != v:
                raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                                   "inplace operation (a tensor saved with ctx.save_for_backward)")
        return self.to_save

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class BackwardCFunction(Node):
    def __init__(self, cls, ctx, nargs):
        super().__init__()
        self._cls = cls
        self.ctx = ctx
        self._shapes_out = ()
        self.nout = 1

    def name(self):
        return self._cls.__name__ + "Backward"

    def apply(self, grads):
        from ..creation import zeros
        ctx = self.ctx
        if ctx.materialize_grads:
            grads = [g if g is not None else zeros(s, dtype=d) for g, (s, d) in zip(grads, self._shapes_out)]
        res = self._cls.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        return res

    def release(self):
        self.ctx.to_save = None


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads); call with .apply(*args)."""

    def __init__(self, *a, **k):
        pass

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        from .._tensor import Tensor
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            if "setup_context" in cls.__dict__ or any("setup_context" in b.__dict__ for b in cls.__mro__[1:-2]
                                                        if b is not Function):
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        finally:
            STATE.grad_enabled = prev
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        outs = tuple(o.detach() if isinstance(o, Tensor) and any(o is a for a in args) else o for o in outs)
        if prev and any(ctx.needs_input_grad):
            node = BackwardCFunction(cls, ctx, len(args))
            node.next_functions = tuple(edge_of(a) if isinstance(a, Tensor) else None for a in args)
            node._shapes_out = tuple((tuple(o.shape), o.dtype) if isinstance(o, Tensor) else ((), None) for o in outs)
            node.nout = len(outs)
            node.shapes = tuple(tuple(a.shape) if isinstance(a, Tensor) else None for a in args)
            node.dtypes = tuple(a.dtype if isinstance(a, Tensor) else None for a in args)
            ctx._node = node
            for i, o in enumerate(outs):
                if isinstance(o, Tensor) and o.dtype.is_floating_point and id(o) not in ctx.non_differentiable:
                    o._requires_grad = True
                    o.grad_fn = node
                    o._output_nr = i
        return outs[0] if single else outs

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError


def once_differentiable(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        from .grad_mode import no_grad
        with no_grad():
            return fn(ctx, *args)
    return wrapper
