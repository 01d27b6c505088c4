"""The numba CPU backend: fusion pass, one generated numba kernel per fused group, a plan-based executor."""
from ... import config
from ...passes.decompose import decompose
from ...passes.fusion import fusion
from ..diskcache import KernelCompileError, cache_info, clear_cache  # noqa: F401
from .executor import CompiledGraph, warm_kernels
from .convcols import shared_columns
from .gemm import gemm_updates

__all__ = ["NumbaBackend", "KernelCompileError", "cache_info", "clear_cache"]


class NumbaBackend:
    name = "numba"
    donates = True      # compile() takes `donate`: see CompiledGraph

    def compile(self, graph, donate=None):
        return self.compile_many([(graph, donate)])[0]

    def compile_many(self, jobs):
        """[(graph, donate)] -> CompiledGraphs whose kernels compile together (a forward and its backward)."""
        cgs = [CompiledGraph(fusion(shared_columns(gemm_updates(decompose(g))), rows=True),
                             fastmath=getattr(config, "fastmath", False), donate=d, warm=False) for g, d in jobs]
        warm_kernels(cgs)
        return cgs
