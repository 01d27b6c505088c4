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
            from .graph import FREED_MSG, FreedGraphError
            raise FreedGraphError(FREED_MSG)
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
    """grad_fn of a custom Function; each Function class gets its own subclass named `<ClassName>Backward`
    (backward_class). As in PyTorch the node reads through to the ctx: `y.grad_fn.saved_tensors`, attributes
    set on ctx in forward. Its edges are the tensor arguments only; backward returns one gradient per argument."""

    def __init__(self, cls, ctx, tensor_args):
        super().__init__()
        self._cls = cls
        self.ctx = ctx
        self._tensor_args = tensor_args     # positions of the tensor arguments among forward's arguments
        self._shapes_out = ()
        self.nout = 1

    def name(self):
        return type(self).__name__

    def __getattr__(self, name):
        if name.startswith("__") or name in ("ctx", "_cls", "_tensor_args"):
            raise AttributeError(name)
        try:
            return getattr(self.ctx, name)
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'") from None

    def apply(self, grads):
        from ..creation import zeros
        ctx = self.ctx
        if ctx.materialize_grads:
            grads = [g if g is not None else zeros(s, dtype=d) for g, (s, d) in zip(grads, self._shapes_out)]
        res = self._cls.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        nargs = len(ctx.needs_input_grad)
        if len(res) < nargs or (len(res) > nargs and any(r is not None for r in res[nargs:])):
            raise RuntimeError(f"function {type(self).__name__} returned an incorrect number of gradients "
                               f"(expected {nargs}, got {len(res)})")
        return tuple(res[i] for i in self._tensor_args)

    def release(self):
        self.ctx.to_save = None


def backward_class(cls):
    """The node class of Function `cls`: `<ClassName>Backward`, made once per Function class."""
    node_cls = cls.__dict__.get("_backward_cls")
    if node_cls is None:
        node_cls = type(cls.__name__ + "Backward", (BackwardCFunction,), {"__module__": __name__})
        cls._backward_cls = node_cls
    return node_cls


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
            tensor_args = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
            node = backward_class(cls)(cls, ctx, tensor_args)
            node.edges = tuple(edge_of(args[i]) for i in tensor_args)
            node._shapes_out = tuple((tuple(o.shape), o.dtype) if isinstance(o, Tensor) else ((), None) for o in outs)
            node.nout = len(outs)
            node.shapes = tuple(tuple(args[i].shape) for i in tensor_args)
            node.dtypes = tuple(args[i].dtype for i in tensor_args)
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
