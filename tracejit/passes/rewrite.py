"""Small helpers shared by the passes: copy a graph node by node into a new one, with a value map; count the
readers of each value."""
from ..ir.graph import Graph, Value


def use_counts(g, returned=1):
    """{id(value): how many node inputs read it, plus `returned` for each time the program returns it}."""
    uses = {k: len(ns) for k, ns in g.users().items()}
    for v in g.outputs:
        if isinstance(v, Value):
            uses[id(v)] = uses.get(id(v), 0) + returned
    return uses


class Rewriter:
    def __init__(self, g):
        self.old = g
        self.g = Graph()
        self.map = {}
        for v, name in zip(g.inputs, g.input_names):
            self.map[v] = self.g.add_input(v.shape, v.dtype, name)
        for v, arr in g.consts.items():
            self.map[v] = self.g.add_const(arr)

    def get(self, x):
        return self.map[x] if isinstance(x, Value) else x

    def emit(self, op, inputs, attrs, avals):
        return self.g.add_node(op, [self.get(i) for i in inputs], attrs, avals)

    def copy(self, node):
        outs = self.emit(node.op, node.inputs, node.attrs, [o for o in node.outputs])
        for o, n in zip(node.outputs, outs):
            self.map[o] = n
        return outs

    def alias(self, old, new):
        self.map[old] = new

    def finish(self):
        self.g.outputs = [self.get(o) for o in self.old.outputs]
        self.g.output_names = list(self.old.output_names)
        return self.g
