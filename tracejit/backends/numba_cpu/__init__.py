"""The numba CPU backend: fusion pass, one generated numba kernel per fused group, a plan-based executor."""
from ... import config
from ...passes.fusion import fusion
from ..diskcache import KernelCompileError, cache_info, clear_cache  # noqa: F401
from .executor import CompiledGraph
from .gemm import gemm_updates

__all__ = ["NumbaBackend", "KernelCompileError", "cache_info", "clear_cache"]


class NumbaBackend:
    name = "numba"
    donates = True      # compile() takes `donate`: see CompiledGraph

    def compile(self, graph, donate=None):
        fused = fusion(gemm_updates(graph), rows=True)
        return CompiledGraph(fused, fastmath=getattr(config, "fastmath", False), donate=donate)
