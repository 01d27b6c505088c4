"""The numba CUDA backend: tensors on "cuda" (device arrays, eager kernels) and compiled graphs on the GPU.

- `array.py`: CudaArray, a cuda tensor's data (flat device buffer + view);
- `eager.py`: the device dispatcher `registry.apply` calls once a cuda tensor exists;
- `ops.py`: CUDA implementations of the non-elementwise ops (kernels in `kernels/cuda/`);
- `codegen.py`, `rt.py`: elementwise groups as `@cuda.jit` grid-stride kernels (the CPU code generator's
  scalar statements, a per-dtype CUDA math runtime);
- `executor.py`: compiled graphs: fused kernels, device buffers planned once per signature.

numba.cuda is imported only when CUDA is used (importing this package imports nothing from numba).
"""

from .. import Backend

__all__ = ["NumbaCudaBackend"]


class NumbaCudaBackend(Backend):
    name = "numba_cuda"

    def compile(self, graph):
        from ...passes.decompose import decompose
        from ...passes.fusion import fusion
        from .executor import CompiledCudaGraph
        return CompiledCudaGraph(fusion(decompose(graph)))


class CudaInterpreter(Backend):
    """The reference interpreter on cuda: every node through the eager device dispatcher, no fusion."""
    name = "interpreter"

    def compile(self, graph):
        import numpy as np
        from ..interpreter import run
        from .array import CudaArray, from_host
        from .eager import dispatch

        def dev(a):
            return a if type(a) is CudaArray else from_host(np.asarray(a))
        consts = {v: dev(a) for v, a in graph.consts.items()}
        return lambda arrays: run(graph, [dev(a) for a in arrays], dispatch, dev, consts)


def cuda_backend(name=None):
    """The backend for a graph whose tensors are on cuda: 'numba' (the default) compiles for the GPU."""
    from ... import config
    name = name or config.default_backend
    if name in ("numba", "numba_cuda"):
        return NumbaCudaBackend()
    if name == "interpreter":
        return CudaInterpreter()
    raise ValueError(f"unknown backend {name!r}: choose 'numba', 'numba_cuda' or 'interpreter'")
