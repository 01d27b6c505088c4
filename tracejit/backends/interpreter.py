"""The reference interpreter: runs a graph node by node with the registry's eager implementations.
It is the oracle every other backend is tested against."""
import numpy as np

from ..ir.graph import Value


def run(graph, arrays):
    env = dict(graph.consts)
    if len(arrays) != len(graph.inputs):
        raise RuntimeError(f"graph expects {len(graph.inputs)} inputs, got {len(arrays)}")
    env.update(zip(graph.inputs, arrays))
    for n in graph.nodes:
        res = n.op.impl(*[env[i] if isinstance(i, Value) else i for i in n.inputs], **n.attrs)
        if n.op.nout == 1:
            env[n.outputs[0]] = np.asarray(res)   # numpy reductions return scalars, not 0-d arrays
        else:
            env.update(zip(n.outputs, map(np.asarray, res)))
    return [env[o] if isinstance(o, Value) else o for o in graph.outputs]


def replay(graph, tensors):
    """Run a graph through `apply` on Tensors: eagerly with autograd recording, or into a new trace."""
    from ..ops.registry import apply
    from .._tensor import Tensor
    env = {v: Tensor._wrap(a) for v, a in graph.consts.items()}
    env.update(zip(graph.inputs, tensors))
    for n in graph.nodes:
        res = apply(n.op, *[env[i] if isinstance(i, Value) else i for i in n.inputs], **n.attrs)
        if n.op.nout == 1:
            env[n.outputs[0]] = res
        else:
            env.update(zip(n.outputs, res))
    return [env[o] if isinstance(o, Value) else o for o in graph.outputs]


class Interpreter:
    name = "interpreter"

    def compile(self, graph):
        return lambda arrays: run(graph, arrays)
