"""Hand-written numba kernels for the CPU. Importing any of them first tunes numba's code generation, its
OpenMP threads and its start-up (below)."""
import os


def _short_omp_spin():
    """Let numba's OpenMP worker threads sleep soon after a parallel kernel.

    libgomp's default (no OMP_WAIT_POLICY) busy-waits ~300000 spins after each parallel region: on these
    2-core machines the spinning worker takes the core from whatever runs next (numpy, BLAS, another library's
    threads). Measured: jax.jit's 4M-element chain right after a traced call 10.4 ms instead of 2.3 ms; with
    GOMP_SPINCOUNT=10000, 2.7 ms, and our own call no slower (2.6-2.8 ms). Read by libgomp when it loads
    (numba's first parallel kernel), so set here, before; the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "10000"


def _prefer_512_bit_vectors():
    """On Intel server cores from Sapphire Rapids on, let LLVM vectorize with 512-bit registers.

    LLVM tunes every Intel AVX-512 core with `prefer-256-bit` (on Skylake-X 512-bit code lowered the clock);
    on these cores the clock penalty is gone, and our compute-bound kernels (vmath's polynomial exp, tanh,
    sigmoid) run ~1.35x faster at 512 bits (the 4M-element fused chain, one thread: 7.8 -> 5.8 ms). AMD Zen 4/5
    get 512 bits from LLVM already. Process-wide numba configuration: done only before numba's CPU code
    generator exists and when the user set neither NUMBA_CPU_NAME nor NUMBA_CPU_FEATURES;
    TRACEJIT_VECTOR_BITS=256 keeps LLVM's choice."""
    if os.environ.get("TRACEJIT_VECTOR_BITS", "") == "256" or \
            os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        return
    from numba.core import config
    from numba.core.registry import cpu_target
    if config.CPU_NAME or config.CPU_FEATURES or "_toplevel_target_context" in vars(cpu_target):
        return
    import llvmlite.binding as ll
    if ll.get_host_cpu_name() not in _CORES_512:
        return
    features = ll.get_host_cpu_features().flatten()
    if "+avx512f" in features.split(","):
        config.CPU_FEATURES = features + ",-prefer-256-bit"


def _numba_without_scipy_linalg():
    """Keep numba's first compilation from importing scipy.linalg.

    The first compilation in a process imports numba.np.arraymath, whose module code asks
    numba.np.linalg.ensure_blas() whether BLAS is there: that imports scipy.linalg, 0.25-0.35 s of every cold
    start here (scipy comes with jax and many other packages), for a flag our kernels never read (it picks
    np.dot for np.convolve/np.correlate inside numba functions). An import hook runs arraymath's module code,
    when numba imports it, with an ensure_blas that looks for scipy.linalg without importing it; the real one
    is back right after, and numba code that uses BLAS still calls it (importing scipy) when it is typed.
    Importing arraymath here instead would cost a disk-cache hit, which never needs it, ~0.07 s."""
    import sys
    if "scipy.linalg" in sys.modules or "numba.np.arraymath" in sys.modules:
        return
    import importlib.abc
    import importlib.util

    def ensure_blas():
        try:
            found = importlib.util.find_spec("scipy.linalg") is not None
        except ImportError:
            found = False
        if not found:
            raise ImportError("scipy 0.16+ is required for linear algebra")

    class Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "numba.np.arraymath":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or not hasattr(spec.loader, "exec_module"):
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                from numba.np import linalg
                real, linalg.ensure_blas = linalg.ensure_blas, ensure_blas
                try:
                    run(module)
                finally:
                    linalg.ensure_blas = real
            spec.loader.exec_module = exec_module      # (this module's own loader object)
            return spec

    sys.meta_path.insert(0, Hook())


_CORES_512 = frozenset(("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids"))

_short_omp_spin()
_prefer_512_bit_vectors()
_numba_without_scipy_linalg()
