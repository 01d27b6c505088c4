"""The IR: an SSA graph whose nodes reference registry ops. Each value has a shape and a dtype."""
import itertools

import numpy as np


class Value:
    __slots__ = ("id", "shape", "dtype", "producer", "index", "graph", "__weakref__")

    def __init__(self, id, shape, dtype, producer=None, index=0, graph=None):
        self.id = id
        self.graph = graph
        self.shape = tuple(shape)
        self.dtype = dtype
        self.producer = producer
        self.index = index

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def type_str(self):
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"%{self.id}"


class Node:
    __slots__ = ("op", "inputs", "attrs", "outputs")

    def __init__(self, op, inputs, attrs, outputs):
        self.op = op
        self.inputs = inputs      # Values or Python scalars (inlined constants)
        self.attrs = attrs
        self.outputs = outputs

    def __repr__(self):
        return format_node(self)


class Graph:
    """inputs -> nodes -> outputs. Constants are values with data in `consts`."""

    def __init__(self):
        self.inputs = []
        self.nodes = []
        self.outputs = []
        self.consts = {}          # Value -> ndarray
        self.input_names = []     # what each input stands for (for printing)
        self.output_names = []
        self._ids = itertools.count()

    def new_value(self, shape, dtype, producer=None, index=0):
        return Value(next(self._ids), shape, dtype, producer, index, self)

    def add_input(self, shape, dtype, name=""):
        v = self.new_value(shape, dtype)
        self.inputs.append(v)
        self.input_names.append(name)
        return v

    def add_const(self, array):
        from .. import _dtype as D
        array = np.asarray(array)
        v = self.new_value(array.shape, D.from_numpy_dtype(array.dtype))
        self.consts[v] = array
        return v

    def add_node(self, op, inputs, attrs, avals):
        multi = isinstance(avals, (tuple, list))
        avals = avals if multi else (avals,)
        node = Node(op, list(inputs), dict(attrs), [])
        node.outputs = [self.new_value(a.shape, a.dtype, node, i) for i, a in enumerate(avals)]
        self.nodes.append(node)
        return node.outputs

    def users(self):
        """Def-use: {id(value): [the node of each read of it, in graph order]} (x * x lists its node twice);
        a graph output is not a read (see `outputs`)."""
        out = {}
        for n in self.nodes:
            for i in n.inputs:
                if isinstance(i, Value):
                    out.setdefault(id(i), []).append(n)
        return out

    def replace_all_uses_with(self, old, new):
        """Every read of the value `old` (node operands, graph outputs) reads `new` (a value or a constant)."""
        for n in self.nodes:
            if any(i is old for i in n.inputs):
                n.inputs = [new if i is old else i for i in n.inputs]
        self.outputs = [new if o is old else o for o in self.outputs]

    def text(self, title=None):
        return format_graph(self, title)

    def __str__(self):
        return self.text()

    def to_dot(self, name="G"):
        from .dot import to_dot
        return to_dot(self, name)


def _fmt_attr(v):
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, tuple):
        return "(" + ",".join(_fmt_attr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, slice):
        return ":".join("" if x is None else str(x) for x in (v.start, v.stop)) + (f":{v.step}" if v.step else "")
    if v is Ellipsis:
        return "..."
    if hasattr(v, "name") and hasattr(v, "short"):
        return v.short
    if v.__class__.__name__ == "Generator":
        return "gen"
    if isinstance(v, Graph) or isinstance(getattr(v, "graph", None), Graph):
        return "{...}"                    # a loop's body: format_graph prints it under the node
    return str(v)


def format_node(n):
    outs = " ".join(f"%{o.id}:{o.type_str}" for o in n.outputs)
    ins = " ".join(f"%{i.id}" if isinstance(i, Value) else repr(i) for i in n.inputs)
    attrs = ""
    shown = {k: v for k, v in n.attrs.items() if k != "generator" or v is not None}
    if shown:
        attrs = " {" + ", ".join(f"{k}={_fmt_attr(v)}" for k, v in shown.items()) + "}"
    return f"{outs} = {n.op.name} {ins}{attrs}".rstrip()


def format_graph(g, title=None):
    lines = []
    if title:
        lines.append(f"# {title}")
    ins = ", ".join(f"%{v.id}:{v.type_str}" + (f" ({nm})" if nm else "") for v, nm in zip(g.inputs, g.input_names))
    lines.append(f"graph({ins}) {{")
    for v, arr in g.consts.items():
        body = np.array2string(arr, threshold=6, separator=",").replace("\n", "") if arr.size <= 6 else f"<{arr.size} values>"
        lines.append(f"  %{v.id}:{v.type_str} = const {body}")
    for n in g.nodes:
        lines.append("  " + format_node(n))
        if n.op.kind == "fused":                     # the fused group's body, indented under it
            lines.extend("      | " + format_node(m) for m in n.attrs["body"].nodes)
        elif "body" in n.attrs:                      # a loop's body: a graph of its own
            body = n.attrs["body"]
            body = body if isinstance(body, Graph) else body.graph
            lines.extend("      | " + line for line in format_graph(body).splitlines())
    outs = ", ".join(f"%{v.id}" if isinstance(v, Value) else repr(v) for v in g.outputs)
    lines.append(f"  return {outs}")
    lines.append("}")
    return "\n".join(lines)
