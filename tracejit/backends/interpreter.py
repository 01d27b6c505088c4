"""The reference interpreter: runs a graph node by node with the registry's eager implementations.
It is the oracle every other backend is tested against.

`run_node` is the one step of every graph walk: this interpreter (numpy `impl`), `replay` (`apply` on tensors),
the CUDA interpreter (the device dispatcher) and `explain`'s per-node profile differ only in how they run an op
(`call`) and wrap its results (`wrap`)."""
import numpy as np

from ..ir.graph import Value
from . import Backend


def run_impl(op, args, attrs):
    return op.impl(*args, **attrs)


def run_node(node, env, call=run_impl, wrap=np.asarray):
    """Run one node: its operands from `env` (value -> array), its outputs into `env`. (`np.asarray`, the default
    `wrap`: numpy reductions return scalars, not 0-d arrays.)"""
    res = call(node.op, [env[i] if isinstance(i, Value) else i for i in node.inputs], node.attrs)
    if node.op.nout == 1:
        env[node.outputs[0]] = wrap(res)
    else:
        env.update(zip(node.outputs, map(wrap, res)))


def bind(graph, arrays, consts=None):
    """The environment a run starts from: the graph's constants and its inputs."""
    if len(arrays) != len(graph.inputs):
        raise RuntimeError(f"graph expects {len(graph.inputs)} inputs, got {len(arrays)}")
    env = dict(graph.consts if consts is None else consts)
    env.update(zip(graph.inputs, arrays))
    return env


def run(graph, arrays, call=run_impl, wrap=np.asarray, consts=None):
    env = bind(graph, arrays, consts)
    for n in graph.nodes:
        run_node(n, env, call, wrap)
    return [env[o] if isinstance(o, Value) else o for o in graph.outputs]


def _apply(op, args, attrs):
    from ..ops.registry import apply
    return apply(op, *args, **attrs)


def replay(graph, tensors):
    """Run a graph through `apply` on Tensors: eagerly with autograd recording, or into a new trace."""
    from .._tensor import Tensor
    return run(graph, tensors, _apply, lambda t: t, {v: Tensor._wrap(a) for v, a in graph.consts.items()})


class Interpreter(Backend):
    name = "interpreter"

    def compile(self, graph):
        return lambda arrays: run(graph, arrays)
