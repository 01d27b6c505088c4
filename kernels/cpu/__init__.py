"""Hand-written numba kernels for the CPU. Importing any of them first tunes numba's code generation, its
OpenMP threads, its start-up and its disk cache's recovery from bad files (below)."""
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
    """Choose the vector instruction set numba's kernels are compiled for (TRACEJIT_VECTOR_BITS).

    Unset ("auto"): on Intel server cores from Sapphire Rapids on, let LLVM vectorize with 512-bit registers.
    LLVM tunes every Intel AVX-512 core with `prefer-256-bit` (on Skylake-X 512-bit code lowered the clock);
    on these cores the clock penalty is gone, and our compute-bound kernels (vmath's polynomial exp, tanh,
    sigmoid) run ~1.35x faster at 512 bits (the 4M-element fused chain, one thread: 7.8 -> 5.8 ms). AMD Zen 4/5
    get 512 bits from LLVM already; AVX2-only cores (Zen 2/3, Intel client cores) 256.
    "512": 512-bit vectors on any CPU with AVX-512. "256": the AVX2 code an AVX2-only CPU runs (AVX-512 off),
    "128": the SSE4.2 code (AVX off): for comparing and testing those code paths on a bigger CPU. Process-wide
    numba configuration: done only before numba's CPU code generator exists and when the user set neither
    NUMBA_CPU_NAME nor NUMBA_CPU_FEATURES."""
    want = os.environ.get("TRACEJIT_VECTOR_BITS", "auto").strip() or "auto"
    if os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        return
    from numba.core import config
    from numba.core.registry import cpu_target
    if config.CPU_NAME or config.CPU_FEATURES or "_toplevel_target_context" in vars(cpu_target):
        return
    import llvmlite.binding as ll
    features = ll.get_host_cpu_features().flatten()
    if want not in ("auto", "512", "256", "128"):
        import warnings
        warnings.warn(f"TRACEJIT_VECTOR_BITS={want!r} is not one of auto, 512, 256, 128: ignored", stacklevel=2)
        return
    chosen = vector_features(features, want, ll.get_host_cpu_name())
    if chosen != features:
        config.CPU_FEATURES = chosen


def vector_features(features, bits, cpu=""):
    """The LLVM feature string for TRACEJIT_VECTOR_BITS=`bits` on a CPU with `features` (see above)."""
    have = features.split(",")
    if bits == "auto":
        bits = "512" if cpu in _CORES_512 else None
    if bits == "512":
        return features + ",-prefer-256-bit" if "+avx512f" in have else features
    if bits in ("256", "128"):
        off = ("avx512", "avx10", "amx", "evex512") + (("avx", "fma", "f16c", "vaes", "vpclmulqdq", "gfni",
                                                         "xop", "sha512", "sm3", "sm4") if bits == "128" else ())
        return ",".join("-" + f[1:] if f.startswith("+") and f[1:].startswith(off) else f for f in have)
    return features


def vector_info():
    """What numba compiles kernels for in this process: {"llvm_cpu", "isa" (AVX-512 / AVX2 / AVX / SSE4.2 /
    ...), "vector_bits" (the widest vectors LLVM prefers for our loops)}. Reads numba's configuration (set by
    TRACEJIT_VECTOR_BITS, NUMBA_CPU_NAME or NUMBA_CPU_FEATURES) and the host CPU."""
    import llvmlite.binding as ll
    from numba.core import config
    cpu = config.CPU_NAME or ll.get_host_cpu_name()
    feats = (config.CPU_FEATURES if config.CPU_FEATURES is not None else
             ll.get_host_cpu_features().flatten() if not config.CPU_NAME or config.CPU_NAME == "host" else "")
    on = {f[1:] for f in feats.split(",") if f.startswith("+")}
    off = {f[1:] for f in feats.split(",") if f.startswith("-")}
    if "avx512f" in on:
        isa = "AVX-512"
        wide = "prefer-256-bit" in off or cpu.startswith(("znver4", "znver5"))
        bits = 512 if wide else 256
    elif "avx2" in on:
        isa, bits = "AVX2", 256
    elif "avx" in on:
        isa, bits = "AVX", 256
    elif "sse4.2" in on:
        isa, bits = "SSE4.2", 128
    else:
        isa, bits = ("generic" if not on else "SSE2"), 128
    return {"llvm_cpu": cpu, "isa": isa, "vector_bits": bits}


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


def _recovering_numba_cache():
    """numba's disk cache, made to heal: a bad file is discarded with one log line and the kernel compiled again.

    numba raises (the call fails, in every later process too) when a cache index (`*.nbi`) or data file (`*.nbc`)
    is truncated, empty, garbage or another program's: `pickle data was truncated`, `EOFError`. Here loading such
    a file logs one line on the "tracejit" logger, deletes the file (when it can) and returns "not cached", so numba
    compiles and saves a fresh entry; a failure to save (a full disk, a read-only folder) loses only that entry.
    A cache folder that cannot be written but holds the module's kernels (a read-only install or shared cache) is
    read: numba's own locators skip any folder they cannot write, so every process compiled everything again.
    Installed once per process, on numba's classes: the runtime helpers here, the generated kernels (whose data
    files tracejit.backends.diskcache also checksums, and whose cache it loads through Cache._load_overload, the
    method wrapped here) and any other numba cache in the process."""
    from numba.core import caching
    F, C = caching.IndexDataCacheFile, caching.Cache
    if getattr(F, "_tj_recovering", False):
        return
    import logging
    log = logging.getLogger("tracejit")
    load_index, load_data, load_overload, save_overload = F._load_index, F._load_data, C._load_overload, \
        C.save_overload

    def discard(path, e):
        for hook in ON_DISCARD:
            hook()
        try:
            os.unlink(path)
            what = "discarded"
        except FileNotFoundError:
            what = "gone"
        except OSError:
            what = "left in place (cannot delete it)"
        first = (str(e).strip().splitlines() or [""])[0][:120]
        log.warning("tracejit: unreadable numba cache file %s (%s: %s): %s, compiling the kernel again", path,
                    type(e).__name__, first, what)

    def _load_index(self):
        try:
            return load_index(self)
        except Exception as e:
            discard(self._index_path, e)
            return {}

    def _load_data(self, name):
        try:
            return load_data(self, name)
        except OSError:
            raise                       # (numba's load: a data file gone since the index named it -> not cached)
        except Exception as e:
            discard(self._data_path(name), e)
            raise OSError("bad cache data file") from None

    def _load_overload(self, sig, target_context):
        try:
            res = load_overload(self, sig, target_context)
            fd, fn = getattr(res, "fndesc", None), self._py_func
            if fd is not None and (fd.qualname, fd.modname) != (fn.__qualname__, fn.__module__):
                raise ValueError(f"it holds {fd.modname}.{fd.qualname}")    # (another function's file)
            return res
        except Exception as e:          # data that unpickles but does not rebuild (another program's file, ...)
            discard(self._cache_file._index_path, e)
            return None

    def _save_overload(self, sig, data):
        try:
            save_overload(self, sig, data)
        except _ReadOnly:
            pass
        except Exception as e:
            log.warning("tracejit: could not write numba's cache for %s (%s: %s): it runs, uncached", self._name,
                        type(e).__name__, (str(e).strip().splitlines() or [""])[0][:120])

    class _ReadOnly(OSError):
        pass

    class ReadOnlyCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        """The folder numba would cache a module in, when this process cannot write it but it holds that module's
        cache index files: loaded from, never written."""

        def __init__(self, py_func, py_file, path):
            self._py_file, self._lineno, self._cache_path = py_file, py_func.__code__.co_firstlineno, path

        def get_cache_path(self):
            return self._cache_path

        def ensure_cache_path(self):
            raise _ReadOnly(f"read-only cache folder {self._cache_path}")

        @classmethod
        def from_function(cls, py_func, py_file):
            from numba.core import config
            if not os.path.isfile(py_file):
                return None
            if config.CACHE_DIR:
                path = os.path.join(config.CACHE_DIR, caching._CacheLocator.get_suitable_cache_subpath(py_file))
            else:
                path = os.path.join(os.path.dirname(py_file), "__pycache__")
            if not os.path.isdir(path) or _writable(path):
                return None             # (numba's own locators take it)
            prefix = os.path.splitext(os.path.basename(py_file))[0] + "."
            try:
                if not any(n.startswith(prefix) and n.endswith(".nbi") for n in os.listdir(path)):
                    return None
            except OSError:
                return None
            return cls(py_func, py_file, path)

    F._load_index, F._load_data, C._load_overload, C.save_overload = _load_index, _load_data, _load_overload, \
        _save_overload
    caching.CacheImpl._locator_classes = [ReadOnlyCacheLocator] + list(caching.CacheImpl._locator_classes)
    F._tj_recovering = True


ON_DISCARD = []     # called for each bad numba cache file (tracejit.backends.diskcache counts them)


def _writable(path):
    """Whether a file can be created in path (what numba's locators try; os.access says yes to root always)."""
    import tempfile
    try:
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


_CORES_512 = frozenset(("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids"))

_short_omp_spin()
_prefer_512_bit_vectors()
_numba_without_scipy_linalg()
_recovering_numba_cache()
from .blas import short_spin  # noqa: E402  (after the settings above: it builds numba intrinsics)
short_spin()                  # numpy's OpenBLAS threads: as _short_omp_spin for numba's
