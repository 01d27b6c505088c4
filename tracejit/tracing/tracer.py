"""The tracing context: while it is active every op appends a node to an IR graph instead of computing.

Tensors the function reads without receiving them (module parameters, globals) are *lifted*: on first use
the real tensor is switched into tracer mode in place (its data put aside), so reads, in-place updates and
`.grad` assignments inside the function all act on IR values. When the trace ends every lifted tensor gets
its real state back, and what changed (its value, its `.grad`) becomes an output written back after runs.
"""
import weakref
from threading import get_ident

import numpy as np

from .._state import STATE, SERIAL
from .._tensor import Tensor
from ..ir.graph import Graph, Value
from .errors import TraceError
from .layout import is_contiguous, result_layout, strides_of, view_op_strides


class Slot:
    """Where a graph input comes from, or a written-back output goes: (tensor, 'data' | 'grad')."""
    __slots__ = ("tensor", "kind", "name")

    def __init__(self, tensor, kind, name):
        self.tensor, self.kind, self.name = tensor, kind, name


class TraceContext:
    def __init__(self):
        self.graph = Graph()
        self.start_serial = next(SERIAL)   # tensors made from now on have larger serials
        self.swapped = []        # (tensor, saved state) restored at exit
        self.slots = []          # Slot per graph input (explicit args first)
        self.initial = {}        # id(tensor) -> initial input Value (data)
        self.initial_grad = {}   # id(tensor) -> initial grad (Tensor tracer or None)
        self.lifted = []         # tensors lifted implicitly (not arguments)
        self.names = {}
        self.created = []        # weakrefs to every tracer made here
        self.adopted = []        # tensors made inside and updated in place (e.g. new optimizer state)
        self.grad_touched = set()
        self.made_inside = {}    # id(tensor) -> (tensor, const Value) for tensors created during the trace
        self.modules = {}        # id(module) -> (module, training flag) seen during the trace
        self.value_guards = {}   # (id(container), key) -> (container, key, value) of Python values read
        self._prev = None

    # ------------------------------------------------------------------ entering / leaving
    def __enter__(self):
        self._prev = STATE.tracer
        STATE.tracer = self
        return self

    def __exit__(self, *exc):
        STATE.tracer = self._prev
        self.restore()
        return False

    def restore(self):
        for t, data in self.adopted:     # back to real tensors; the first run writes their new values
            t._data, t._value = data, None
        for t, cls in reversed(self.swapped):
            _unlift(t, cls)
        self.swapped = []

    def _swap(self, t, name, kind="data"):
        """Turn a real tensor into a tracer standing for a new graph input (for this thread only)."""
        self.swapped.append((t, _lift_class(t)))
        v = self.graph.add_input(t._data.shape, t.dtype, name)
        self.slots.append(Slot(t, kind, name))
        t.__dict__.pop("_layout", None)
        if t._data.ndim and not t._data.flags.c_contiguous:     # eager strides, for view checks and stride()
            t.__dict__["_layout"] = strides_of(t)
        t._data = None
        t._value = v
        t.grad_fn = None         # inside the graph every input is a leaf; the call site links real edges
        t._output_nr = 0
        from .._tensor import _Version
        t._version = _Version()
        return v

    def add_argument(self, t, name):
        """An explicit tensor argument: lifted the same way, bound by position at call time."""
        if t._data is None:
            return t._value
        return self._lift(t, name)

    def _lift(self, t, name):
        v = self._swap(t, name)
        self.initial[id(t)] = v
        self.names[id(t)] = name
        self.initial_grad[id(t)] = [t._grad, None]
        return v

    def touch_grad(self, t):
        """`t.grad` is read or written inside the trace: its None-ness is guarded, a real one is lifted."""
        if t._data is not None and t._serial <= self.start_serial:
            self.value_of(t)          # its .grad is state the function reads or writes: lift the tensor
        if id(t) not in self.initial_grad:
            return
        self.grad_touched.add(id(t))
        g = t._grad
        if g is not None and g._data is not None and g is self.initial_grad[id(t)][0]:
            self.initial_grad[id(t)][1] = self._swap(g, self.names[id(t)] + ".grad", "grad")
            g.__dict__["_grad_of"] = t

    # ------------------------------------------------------------------ recording
    def value_of(self, a):
        if isinstance(a, Tensor):
            if a._data is None:
                if a._base is not None:
                    self.sync(a)
                v = a._value
                if v.graph is not self.graph:
                    raise TraceError(
                        "a tensor from another trace leaked into this one (a tracer was stored somewhere during "
                        "an earlier trace, e.g. an out-of-place result kept on an object). Keep state that must "
                        "persist across calls in tensors created outside the traced function, or update it in "
                        "place.")
                return v
            if a._serial > self.start_serial:                      # made inside the function: a constant
                hit = self.made_inside.get(id(a))
                if hit is None:
                    hit = self.made_inside[id(a)] = (a, self.graph.add_const(a._host().copy()))
                return hit[1]
            self.lifted.append(a)
            return self._lift(a, f"lifted{len(self.lifted) - 1}")
        if isinstance(a, (np.generic,)):
            return a.item()
        return a

    def record(self, op, args, attrs):
        from ..ops.registry import _SCALARS, check_operand     # (the same check as eager apply's)
        for i, a in enumerate(args):
            if not isinstance(a, Tensor) and type(a) not in _SCALARS:
                check_operand(op, a, i)
        vals = [self.value_of(a) for a in args]
        if op.meta is None:
            raise TraceError(f"op {op.name} has no shape rule and cannot be traced")
        avals = op.meta(*vals, **attrs)
        outs = self.graph.add_node(op, vals, attrs, avals)
        ts = tuple(self.tracer(v) for v in outs)
        if op.view:
            self._note_view(op, args[0], ts[0], attrs)
        else:
            lay = result_layout(op, args, outs[0].shape) if outs and outs[0].shape else None
            if lay is not None:
                ts[0].__dict__["_layout"] = lay
        return ts

    # ------------------------------------------------------------------ views and their in-place updates
    # A view made while tracing remembers its base (the tensor at the root of its chain of views), the chain
    # of view ops from the base, and the base's generation when its value was last derived. An in-place
    # update of a view writes the new elements into the base (a new base value); an in-place update of any
    # tensor bumps its generation, and a view whose base moved on is derived again from the base when read:
    # PyTorch's functionalization, so traced programs see the aliasing eager mode has.
    def _note_view(self, op, src, t, attrs):
        st = view_op_strides(op, src.shape, strides_of(src), attrs)
        if not is_contiguous(t._value.shape, st):
            t.__dict__["_layout"] = tuple(st)
        base = src._base if src._base is not None else src
        chain = src.__dict__.get("_vchain", ()) if src._base is not None else ()
        t._base = base
        t._version = src._version
        d = t.__dict__
        d["_vchain"] = chain + ((op, attrs, tuple(src.shape)),)
        d["_vgen"] = base.__dict__.get("_vgen", 0)

    def sync(self, t):
        """Derive view `t` again from its base if the base was updated in place since."""
        d = t.__dict__
        chain = d.get("_vchain")
        if chain is None:
            return
        base = t._base
        gen = base.__dict__.get("_vgen", 0)
        if d["_vgen"] == gen:
            return
        from ..ops.registry import apply
        v = base
        for op, attrs, _ in chain:
            v = apply(op, v, **attrs)
        t._value, t.grad_fn, t._output_nr, t._requires_grad = v._value, v.grad_fn, v._output_nr, v._requires_grad
        d["_vgen"] = gen

    def write(self, t, res):
        """In-place update: tensor `t` now holds `res`; if `t` is a view, so do its elements in its base."""
        d = t.__dict__
        chain = d.get("_vchain") if t._base is not None else None
        if chain is not None:
            base = t._base
            self.ensure_tracer(base)
            self.sync(base)
            nb = _scatter_into(base, chain, res)
            self.rebind(base, nb)
            if nb._requires_grad and STATE.grad_enabled:      # the base's autograd identity moves on too
                base.grad_fn, base._output_nr, base._requires_grad = nb.grad_fn, nb._output_nr, nb._requires_grad
            bd = base.__dict__
            bd["_vgen"] = bd.get("_vgen", 0) + 1
            d["_vgen"] = bd["_vgen"]
        else:
            d["_vgen"] = d.get("_vgen", 0) + 1
        self.rebind(t, res)

    def tracer(self, v):
        t = object.__new__(Tensor)
        t._init(None)
        t._value = v
        self.created.append(weakref.ref(t))
        return t

    def escaped(self):
        """Tracers still alive after the trace (call gc first) that nothing of ours holds: results the
        function stored on Python objects (new optimizer state, caches). They must become real tensors."""
        mine = {id(t) for t, _ in self.swapped} | {id(t) for t, _ in self.adopted}
        out = []
        for r in self.created:
            t = r()
            if t is not None and t._data is None and id(t) not in mine and t._value.graph is self.graph:
                out.append(t)
        return out

    def ensure_tracer(self, t):
        """Make a real tensor about to be updated in place a tracer (lifted, or a constant made inside)."""
        if t._data is None:
            return
        v = self.value_of(t)
        if t._data is not None:      # made inside the trace and updated in place: persistent new state
            self.adopted.append((t, t._data))
            t._data = None
            t._value = v

    def rebind(self, t, res):
        """Functionalized in-place update: `t` now stands for the value `res`."""
        self.ensure_tracer(t)
        t._value = res._value

    def guard_value(self, container, key, value):
        """A Python value the function read (e.g. an optimizer's learning rate): the compiled program is
        only reused while container[key] still equals it."""
        self.value_guards.setdefault((id(container), key), (container, key, value))

    def note_module(self, m):
        self.modules.setdefault(id(m), (m, m.training))


# ----------------------------------------------------------------------------- lifting, per thread
# A lifted tensor (a module's parameter read by a traced function) is a tracer in the tracing thread only: its
# class becomes a subclass whose swapped fields are properties. The tracing thread reads and writes the tensor's
# own slots (the tracer state); every other thread reads and writes the real state kept aside in `_tj_real`, so
# eager work, or a compiled program, running on the same tensors in another thread sees them unchanged.
_SWAPPED = ("_data", "_value", "_grad", "grad_fn", "_output_nr", "_requires_grad", "_version")
_LIFTED = {}


def _field(name):
    slot = Tensor.__dict__[name]
    sget, sset = slot.__get__, slot.__set__

    def get(self):
        real = self.__dict__.get("_tj_real")
        if real is None or real[0] == get_ident():
            return sget(self)
        return real[1][name]

    def put(self, v):
        real = self.__dict__.get("_tj_real")
        if real is None or real[0] == get_ident():
            sset(self, v)
        else:
            real[1][name] = v
    return property(get, put)


def _lifted_class(cls):
    sub = _LIFTED.get(cls)
    if sub is None:
        ns = {name: _field(name) for name in _SWAPPED}
        ns.update(__slots__=(), __module__=cls.__module__, __qualname__=cls.__qualname__, _tj_lifted=cls)
        sub = _LIFTED[cls] = type(cls.__name__, (cls,), ns)
    return sub


def _lift_class(t):
    """Keep t's real state for the other threads, then make its fields per-thread; returns its class."""
    cls = type(t)
    if getattr(cls, "_tj_lifted", None) is not None:       # (already lifted: a tensor swapped twice)
        return None
    t.__dict__["_tj_real"] = (get_ident(), {name: getattr(t, name) for name in _SWAPPED})
    t.__class__ = _lifted_class(cls)
    return cls


def _unlift(t, cls):
    if cls is None:
        return
    real = t.__dict__["_tj_real"][1]
    for name in _SWAPPED:                  # (what other threads wrote meanwhile is kept)
        Tensor.__dict__[name].__set__(t, real[name])
    t.__class__ = cls
    del t.__dict__["_tj_real"]


def _scatter_into(base, chain, res):
    """The value of `base` after the elements its view (`chain` of view ops) shows are replaced by `res`."""
    from ..ops.registry import OPS, apply
    from ..ops.shape_ops import permute, reshape
    if all(op.name in ("view", "permute") for op, _, _ in chain):      # a bijection: undo it
        v = res
        for op, attrs, shape in reversed(chain):
            v = reshape(v, shape) if op.name == "view" else permute(v, tuple(np.argsort(attrs["dims"])))
        return v
    if len(chain) == 1 and chain[0][0].name == "slice":      # basic indexing: write the slice
        return apply(OPS["index_put"], base, res, spec=chain[0][1]["spec"], accumulate=False)
    if any(op.name == "expand" for op, _, _ in chain):
        from ..ops.inplace import READ_ONLY
        raise RuntimeError(READ_ONLY)
    pos = np.arange(int(np.prod(base.shape, dtype=np.int64)), dtype=np.int64).reshape(tuple(base.shape))
    for op, attrs, _ in chain:                  # where each element of the view lives in the base
        pos = op.impl(pos, **attrs)
    from ..creation import tensor
    from ..ops.indexing import _T
    flat = apply(OPS["index_put"], reshape(base, (-1,)), reshape(res, (-1,)),
                 tensor(np.ascontiguousarray(pos).reshape(-1)), spec=(_T(0),), accumulate=False)
    return reshape(flat, tuple(base.shape))
