"""The numba CPU backend: fusion pass, one generated numba kernel per fused group, a plan-based executor."""
import numpy as np

from ... import config
from ...ir.graph import Value
from ...passes.decompose import decompose
from ...passes.fusion import can_fuse_windows, fusion
from ...passes.loops import hoist_loops
from .. import Backend, compile_bodies
from ..diskcache import KernelCompileError, cache_info, clear_cache  # noqa: F401
from .executor import CompiledGraph, warm_kernels
from .convcols import shared_columns
from .gemm import gemm_updates, product_sums

__all__ = ["NumbaBackend", "KernelCompileError", "cache_info", "clear_cache"]


SMALL = 1 << 16     # elements: a backward program's outputs up to this size are allocated fresh for each call


class NumbaBackend(Backend):
    name = "numba"

    def compile(self, graph):
        return self._compile([(graph, None)])[0]

    def compile_pair(self, forward, backward=None, donate=None):
        """The forward and backward programs, their kernels compiled together (on two cores, at once). A backward
        whose outputs are all small allocates them fresh for each call (CompiledGraph.keep_returned)."""
        cgs = self._compile([(forward, donate)] + ([(backward, None)] if backward is not None else []))
        if backward is not None and all(int(np.prod(v.shape)) <= SMALL for v in backward.outputs
                                        if isinstance(v, Value)):
            cgs[1].keep_returned = False
        return cgs[0], (cgs[1] if backward is not None else None)

    def _compile(self, jobs):
        cgs = []

        def program(g, donate=None):            # (a loop's body is a program of its own, compiled here too)
            g = compile_bodies(hoist_loops(g), program)
            cgs.append(CompiledGraph(fusion(shared_columns(product_sums(gemm_updates(decompose(g)))),
                                            can_fuse_windows, rows=True),
                                     fastmath=getattr(config, "fastmath", False), donate=donate, warm=False))
            return cgs[-1]
        out = [program(g, d) for g, d in jobs]
        warm_kernels(cgs)
        return out
