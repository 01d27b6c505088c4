"""The dynamic graph: one Node per recorded op (PyTorch's grad_fn), built while the code runs."""
import functools
import weakref

from .._dtype import _FROM_NP, bool_ as _BOOL
from .._state import STATE
from .._tensor import Tensor

class FreedGraphError(RuntimeError):
    """A backward through a graph whose saved tensors were freed (PyTorch raises a RuntimeError)."""


FREED_MSG = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
             "have already been freed). Saved intermediate values of the graph are freed when you call "
             ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
             "a second time or if you need to access saved tensors after calling backward.")


class RemovableHandle:
    __slots__ = ("_d", "_k")

    def __init__(self, d, k):
        self._d, self._k = d, k

    def remove(self):
        self._d.pop(self._k, None)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


class Node:
    """Base of grad_fn nodes: `next_functions`, hooks, `metadata`, `name()`."""
    # rarely set fields default at class level: one node is built per recorded op, so __init__ stays short
    _post_hooks = None
    _pre_hooks = None
    _tensor_hooks = None    # output_nr -> {key: hook} (Tensor.register_hook on non-leaves)
    _retained = None        # output_nr -> weakref(tensor) (retain_grad)
    _trace = None           # forward stack, recorded in anomaly mode
    edges = ()              # per input: the (node, output_nr) its gradient goes to, or None (the engine's view)
    nout = 1                # how many outputs (gradient slots) the node has
    shapes = None           # per input: the shape and dtype its gradient is fitted to (None: as it comes)
    dtypes = None

    def __init__(self):
        pass

    @functools.cached_property
    def metadata(self):
        """A dict for the user's annotations (PyTorch's Node.metadata), made on first use."""
        return {}

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        """PyTorch's view of `edges`: (node, output_nr) pairs, (None, 0) for an input that needs no gradient."""
        return tuple([e or NO_EDGE for e in self.edges])

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) -> new grad_inputs or None, called after this node runs."""
        if self._post_hooks is None:
            self._post_hooks = {}
        k = object()
        self._post_hooks[k] = fn
        return RemovableHandle(self._post_hooks, k)

    def register_prehook(self, fn):
        """fn(grad_outputs) -> new grad_outputs or None, called before this node runs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        k = object()
        self._pre_hooks[k] = fn
        return RemovableHandle(self._pre_hooks, k)

    def release(self):
        pass

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"

    def __call__(self, *grads):
        return self.apply(grads)


NO_EDGE = (None, 0)     # PyTorch's next_functions entry for an input that needs no gradient


class OpNode(Node):
    """grad_fn of a registry op: applies the op's VJP rule; doubles as the rule's `ctx`.

    Each node is an instance of a subclass named as PyTorch names its node (`MulBackward0`), made once per
    name from the registry entry's `grad_name` (node_class)."""
    __slots__ = ()
    _saved_in = None        # tuple of args as given (tensors and scalars)
    _in_versions = None
    _saved_out = None       # tuple of (data, value, version counter, version at save)
    _had_saved = False
    shapes = ()
    dtypes = ()

    def __init__(self, op, attrs):
        self.op = op
        self.attrs = attrs
        self.nout = op.nout

    def _visible(self):
        """Positions of the arguments PyTorch's node has an edge for: the differentiable arguments of the op's
        signature, not index, mask or target tensors, nor Python scalars except those it wraps as tensors
        (x * 2, where(c, x, 0.) have an edge (None, 0) for the number; pow(x, 2) has none)."""
        elementwise = self.op.kind == "elementwise"
        scalars = elementwise and getattr(self.op, "scalar_edges", True)
        out = []
        for i, d in enumerate(self.dtypes):
            if d is None:       # a Python scalar or None
                if not (scalars(i) if callable(scalars) else scalars):
                    continue
            elif d is _BOOL or (not d.is_floating_point and not elementwise):
                continue
            out.append(i)
        return out

    @property
    def next_functions(self):
        edges = self.edges
        return tuple([edges[i] or NO_EDGE for i in self._visible()])

    # ------------------------------------------------------------ what a VJP rule reads
    @property
    def inputs(self):
        if self._saved_in is None:
            if self._had_saved:
                raise FreedGraphError(FREED_MSG)
            raise RuntimeError(f"{self.name()}: the op's VJP reads inputs, but the op declares saves={self.op.saves!r}")
        for a, v in zip(self._saved_in, self._in_versions):
            if v is not None and a._version.v != v:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{a.dtype.name}{list(a.shape)}] is at version {a._version.v}; expected version {v} "
                    f"instead. The op that saved it is {self.name()}. Hint: clone() the tensor before modifying it "
                    f"in place.")
        return self._saved_in

    @property
    def out(self):
        if self._saved_out is None:
            if self._had_saved:
                raise FreedGraphError(FREED_MSG)
            raise RuntimeError(f"{self.name()}: the op's VJP reads its output, but saves={self.op.saves!r}")
        outs = []
        for i, saved in enumerate(self._saved_out):
            if saved is None:        # an output the VJP does not read (Op.saved_outputs)
                outs.append(None)
                continue
            data, value, ver, v = saved
            if ver.v != v:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{data.dtype}{list(data.shape)}], which is output {i} of {self.name()}, is at version "
                    f"{ver.v}; expected version {v} instead. "
                    f"Hint: clone() the result before modifying it in place.")
            t = object.__new__(Tensor)
            t._init(data)
            t._value = value
            t._version = ver
            if data is None or data.dtype.kind == "f":
                t._requires_grad = True
                t.grad_fn = self
                t._output_nr = i
            outs.append(t)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __getattr__(self, name):
        # PyTorch's introspection: _saved_self, _saved_other, _saved_result, _saved_<attr>
        if name == "_saved_self":
            return self.inputs[0]
        if name == "_saved_other":
            return self.inputs[1]
        if name == "_saved_result":
            return self.out
        if name.startswith("_saved_") and name[7:] in self.attrs:
            return self.attrs[name[7:]]
        raise AttributeError(f"'{self.name()}' object has no attribute '{name}'")

    def apply(self, grads):
        return self.op.vjp(self, *grads)

    def release(self):
        if self._saved_in is not None or self._saved_out is not None:
            self._had_saved = True
        self._saved_in = None
        self._saved_out = None


class AccumulateGrad(Node):
    def __init__(self, variable):
        super().__init__()
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"      # PyTorch's name() of this node (its C++ name)

    def apply(self, grads):
        return ()


def accumulate_node(t):
    node = t.__dict__.get("_accumulate")
    if node is None or node.variable is not t:
        node = AccumulateGrad(t)
        t.__dict__["_accumulate"] = node
    return node


_NODE_CLASSES = {}


def node_class(name):
    """The OpNode subclass called `name` (one per name, as PyTorch has one class per backward formula)."""
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(name, (OpNode,), {"__slots__": (), "__module__": "builtins",
                                                            "__qualname__": name})
    return cls


def edge_of(t):
    """The (node, output_nr) a gradient for tensor `t` flows into, or None."""
    if not t._requires_grad:
        return None
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    return (accumulate_node(t), 0)


INFERENCE_SAVED = ("Inference tensors cannot be saved for backward. Please do not use Tensors created in inference "
                   "mode in computation tracked by autograd. To work around this, you can make a clone to get a "
                   "normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
                   "`torch.inference_mode()`.")


def record(op, args, outs, attrs):
    """Attach a grad_fn for `op` to `outs` (called by registry.apply when an input requires grad)."""
    name = op.grad_name
    if type(name) is not str:
        name = name(attrs, args)    # a callable names the node from the op's call (SumBackward0 / 1)
    cls = _NODE_CLASSES.get(name)
    node = (cls or node_class(name))(op, attrs)
    if not op.nout:                 # an op whose number of outputs its attributes decide (scan)
        node.nout = len(outs)
    n = len(args)
    edges, shapes, dtypes = [None] * n, [None] * n, [None] * n   # filled by index: no append calls
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if a._requires_grad:    # edge_of(a), inline: this runs for every input of every recorded op
                fn = a.grad_fn
                edges[i] = (fn, a._output_nr) if fn is not None else (accumulate_node(a), 0)
            d = a._data
            if d is not None:       # a.shape and a.dtype, without their properties
                shapes[i] = d.shape
                dtypes[i] = _FROM_NP[d.dtype]
            else:
                shapes[i] = tuple(a._value.shape)
                dtypes[i] = a._value.dtype
    node.edges = tuple(edges)
    node.shapes = tuple(shapes)
    node.dtypes = tuple(dtypes)
    saves = op.saves
    if "i" in saves:
        node._saved_in = args
        reads = op.reads  # which saved inputs the VJP reads the values of: only those are version-checked
        versions = [None] * n
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                if a._inference:
                    raise RuntimeError(INFERENCE_SAVED)
                if reads is None or reads(i, args):
                    versions[i] = a._version.v
        node._in_versions = tuple(versions)
    if "o" in saves:
        keep = op.saved_outputs
        node._saved_out = tuple([(o._data, o._value, o._version, o._version.v) if keep is None or k in keep else None
                                 for k, o in enumerate(outs)])
    if STATE.anomaly:
        import traceback
        node._trace = traceback.format_stack()[:-3]
    i = 0
    for o in outs:
        d = o._data
        if (_FROM_NP[d.dtype] if d is not None else o._value.dtype).is_floating_point:
            o._requires_grad = True
            o.grad_fn = node
            o._output_nr = i
        i += 1
    return node


def register_tensor_hook(t, hook):
    node = t.grad_fn
    if node._tensor_hooks is None:
        node._tensor_hooks = {}
    d = node._tensor_hooks.setdefault(t._output_nr, {})
    k = object()
    d[k] = hook
    return RemovableHandle(d, k)


def retain(t):
    node = t.grad_fn
    if node._retained is None:
        node._retained = {}
    node._retained[t._output_nr] = weakref.ref(t)
