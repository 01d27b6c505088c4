"""Backends compile an IR graph into a callable: list of input arrays -> list of output arrays.

`Backend` is what the tracer asks of one (tracing/trace.py, stage `compile_programs`); each backend subclasses it.
"""


class Backend:
    name = "?"

    def compile(self, graph):
        """The graph as a callable: [input arrays] -> [output arrays]."""
        raise NotImplementedError

    def compile_pair(self, forward, backward=None, donate=None):
        """(forward callable, backward callable or None) of a traced function. `donate` ({forward output index:
        forward input index}, the new value of an input updated in place) allows writing that output into the
        input's array; a backend that cannot ignores it. A backend may compile the two together."""
        return self.compile(forward), (self.compile(backward) if backward is not None else None)

def compile_bodies(graph, compile):
    """`graph`, with the body of each loop op (scan: ops/control.py) replaced by `compile(body)`, the backend's
    callable of it (an object with `.graph`, called on a list of arrays): the loop then runs compiled code."""
    if not any("body" in n.attrs and n.op.kind != "fused" for n in graph.nodes):
        return graph
    from ..passes.rewrite import Rewriter
    r = Rewriter(graph)
    for n in graph.nodes:
        if "body" in n.attrs and n.op.kind != "fused":
            outs = r.emit(n.op, n.inputs, dict(n.attrs, body=compile(n.attrs["body"])), n.outputs)
            for o, v in zip(n.outputs, outs):
                r.alias(o, v)
        else:
            r.copy(n)
    return r.finish()


_BACKENDS = {}


def register(name, factory):
    _BACKENDS[name] = factory


def get_backend(name=None):
    from .. import config
    name = name or config.default_backend
    if name not in _BACKENDS:
        if name == "interpreter":
            from .interpreter import Interpreter
            register("interpreter", Interpreter)
        elif name == "numba":
            from .numba_cpu import NumbaBackend
            register("numba", NumbaBackend)
        elif name == "numba_cuda":
            from .numba_cuda import NumbaCudaBackend
            register("numba_cuda", NumbaCudaBackend)
        else:
            raise ValueError(f"unknown backend {name!r}: choose 'numba', 'numba_cuda' or 'interpreter'")
    return _BACKENDS[name]()


# torch.backends' switches, for PyTorch code that sets or reads them
from ._torch_flags import cpu, cuda, cudnn, mkldnn, mps, openmp  # noqa: E402,F401
