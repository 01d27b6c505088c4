"""Backends compile an IR graph into a callable: list of input arrays -> list of output arrays."""

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
