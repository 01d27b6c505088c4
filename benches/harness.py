"""The timing harness every benchmark in benches/ shares.

- `pin_threads()`: one thread for OpenBLAS, torch and numba (the machines have 2 shared cores; one thread
  per system keeps the comparison fair and the noise lower). The table says so.
- `check_same(results, rtol, atol)`: every benchmark calls it before timing; raises `Mismatch` when a
  system's numbers differ from the reference system's.
- `compare(fns, baseline=...)`: times each system (callables without arguments), interleaving the systems
  round by round so machine noise hits them alike, batching calls so one sample lasts >= `min_sample` s.
  Returns `Result`s: median, IQR, min/max, speedup vs the baseline measured in the same run, and the
  fraction of a roof (bandwidth, BLAS, a hand-written numba loop) where the workload gives its work.
- `references(...)`: which reference systems are usable here (numpy always; torch eager, torch.compile,
  jax.jit when importable and working), each with the reason when not.
- `try_jax(threads)`: jax with its CPU thread pool sized for the benchmark at hand (XLA reads PJRT_NPROC when
  it creates its CPU client), or the reason it is unavailable.
- `roofs()`: memory bandwidth from a large `np.copyto`, a hand-written numba triad loop, BLAS sgemm GFLOP/s.

Benchmarks are modules `benches/bench_<name>.py` with `run(quick=False)` returning a list of `Result`
(or of dicts); `tracejit bench` prints them as one table.
"""
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    # effective only for libraries not imported yet; pin_threads() does the rest. numba's pool keeps its default
    # size (one thread per core) and pin_threads() sets how many of them run, so a benchmark that gives every
    # system all cores (fused_chain) can give numba all of them too
    os.environ.setdefault(_v, "1")
# the CPU benchmarks compare CPU code: jax with a GPU plugin installed would otherwise run on the GPU
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# tracejit's numba settings (OpenMP workers that sleep soon, the vector width) before pin_threads() starts
# numba's threads or torch loads its own OpenMP: as in a user's process that imports tracejit first
import tracejit.kernels.cpu  # noqa: E402,F401
from tracejit.kernels.cpu.blas import blas_threads  # noqa: E402

# What the command line chose; benchmarks read it (their run() only takes `quick`).
CONFIG = {
    "compare": None,         # None = every reference system available; else a set like {"numpy", "torch"}
    "threads": 1,
    "clock": "wall",         # "cpu": time calls by the process's CPU time (all threads), not the wall clock
}
CHECKS = []                  # one entry per successful check_same call: (label, systems, max abs error)


class Mismatch(AssertionError):
    """Two systems computed different numbers: nothing is timed."""


# ----------------------------------------------------------------------------------------------- results

@dataclass
class Result:
    bench: str                   # benchmark module (mlp_step, rows, ...)
    name: str                    # workload inside it (softmax, layernorm, cold, ...)
    system: str                  # who ran it (numpy, tracejit eager, torch.compile, ...)
    size: str                    # problem size as a reader would write it
    median: float                # seconds per call
    q1: float = None
    q3: float = None
    min: float = None
    max: float = None
    samples: int = 0
    baseline: str = None         # system the speedup is relative to
    speedup: float = None        # baseline median / this median (> 1: faster than the baseline)
    roofs: dict = field(default_factory=dict)   # roof name -> fraction of it reached (1.0 = at the roof)
    checked: bool = False        # check_same passed for this row's numbers before timing
    note: str = ""               # shown under the table
    extra: dict = field(default_factory=dict)   # anything else worth keeping in the JSON

    def as_dict(self):
        return asdict(self)


def result_from_dict(d):
    keys = Result.__dataclass_fields__
    return Result(**{k: v for k, v in d.items() if k in keys})


# ----------------------------------------------------------------------------------------------- threads

def pin_threads(n=None):
    """Pin OpenBLAS, torch and numba to `n` threads (default CONFIG['threads']); returns what was set."""
    n = n or CONFIG["threads"]
    done = {}
    blas = blas_threads(n)
    done["OpenBLAS"] = blas if blas is not None else os.environ.get("OPENBLAS_NUM_THREADS", "?") + " (env)"
    if "torch" in sys.modules or (wanted("torch") and _importable("torch")):
        try:
            import torch
            torch.set_num_threads(n)
            done["torch"] = torch.get_num_threads()
        except Exception:
            pass
    try:
        import numba
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        done["numba"] = numba.get_num_threads()
    except Exception:
        pass
    return done


def _importable(mod):
    import importlib.util
    return importlib.util.find_spec(mod) is not None


# ----------------------------------------------------------------------------------------------- correctness

def to_numpy(v):
    """Arrays, numbers, tracejit/torch tensors and tuples/lists/dicts of them -> numpy (float64 for floats)."""
    if isinstance(v, dict):
        return {k: to_numpy(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return tuple(to_numpy(x) for x in v)
    if hasattr(v, "detach") and hasattr(v, "numpy"):       # tracejit or torch tensor
        v = v.detach()
        if hasattr(v, "cpu"):
            v = v.cpu()
        v = v.numpy()
    a = np.asarray(v)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _max_err(ref, got, rtol, atol, path="out"):
    """(worst error relative to the tolerance, description) over matching leaves; raises on structure."""
    if isinstance(ref, dict):
        if not isinstance(got, dict) or set(ref) != set(got):
            raise Mismatch(f"{path}: keys {sorted(got) if isinstance(got, dict) else type(got)} != {sorted(ref)}")
        parts = [_max_err(ref[k], got[k], rtol, atol, f"{path}[{k!r}]") for k in ref]
        return max(parts, key=lambda p: p[0]) if parts else (0.0, "")
    if isinstance(ref, tuple):
        if not isinstance(got, tuple) or len(got) != len(ref):
            raise Mismatch(f"{path}: {len(got) if isinstance(got, tuple) else 'not a sequence'} values, "
                           f"expected {len(ref)}")
        parts = [_max_err(r, g, rtol, atol, f"{path}[{i}]") for i, (r, g) in enumerate(zip(ref, got))]
        return max(parts, key=lambda p: p[0]) if parts else (0.0, "")
    if ref.shape != got.shape:
        raise Mismatch(f"{path}: shape {got.shape}, expected {ref.shape}")
    if ref.size == 0:
        return 0.0, ""
    if not (np.isfinite(got) == np.isfinite(ref)).all():
        return float("inf"), f"{path}: non-finite values differ"
    r, g = np.nan_to_num(ref), np.nan_to_num(got)
    err = np.abs(g.astype(np.float64) - r)
    worst = float((err / (atol + rtol * np.abs(r))).max())
    return worst, f"{path}: max abs error {float(err.max()):.3g}"


def check_same(results, rtol=1e-4, atol=1e-5, reference=None, label=""):
    """Every system's result agrees with the reference system's (default: 'numpy' if present, else the first).

    `results`: {system: value}. Raises Mismatch naming the system and the worst element otherwise.
    Returns {system: max abs error}.
    """
    if not results:
        raise ValueError("check_same: no results")
    ref_name = reference or ("numpy" if "numpy" in results else next(iter(results)))
    ref = to_numpy(results[ref_name])
    errs = {}
    for name, val in results.items():
        if name == ref_name:
            continue
        worst, desc = _max_err(ref, to_numpy(val), rtol, atol)
        if not worst <= 1.0:
            raise Mismatch(f"{label + ': ' if label else ''}{name} disagrees with {ref_name} "
                           f"(rtol={rtol}, atol={atol}): {desc}")
        errs[name] = desc
    CHECKS.append((label, tuple(results), ref_name))
    return errs


# ----------------------------------------------------------------------------------------------- timing

def _loops_for(fn, target):
    """How many calls make one sample last about `target` seconds."""
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        dt = time.perf_counter() - t0
        if dt >= target / 4 or loops >= 1 << 16:
            return max(1, round(loops * target / max(dt, 1e-9)))
        loops *= 4


def _quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def measure(fn, repeat=15, min_sample=0.02, warmup=2):
    """Samples (seconds per call) of one callable alone."""
    return _sample({"_": fn}, repeat, min_sample, warmup)["_"]


def _sample(fns, repeat, min_sample, warmup, max_time=None):
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    if "tracejit.backends.numba_cpu.workers" in sys.modules:
        # numba's kernels still compiling in the background (direct kernels and serial variants run meanwhile,
        # and the helper takes a core): time what runs once they are in, as a longer-running program would
        if not sys.modules["tracejit.backends.numba_cpu.workers"].wait_background(600):
            print("   (background compiles still running after 600 s: timing anyway)", flush=True)
        for fn in fns.values():
            fn()
    loops = {k: _loops_for(fn, min_sample) if min_sample else 1 for k, fn in fns.items()}
    samples = {k: [] for k in fns}
    perf = time.process_time if CONFIG["clock"] == "cpu" else time.perf_counter
    start = time.perf_counter()
    for r in range(repeat):
        for k, fn in fns.items():
            n = loops[k]
            t0 = perf()
            for _ in range(n):
                fn()
            samples[k].append((perf() - t0) / n)
        if max_time is not None and r >= 4 and time.perf_counter() - start > max_time:
            break                  # enough samples for a median; slow systems should not stall the suite
    return samples


def summarize(bench, name, system, size, samples, **kw):
    med = statistics.median(samples)
    q1, q3 = _quartiles(samples)
    return Result(bench, name, system, size, med, q1, q3, min(samples), max(samples), len(samples), **kw)


def compare(fns, bench, name, size, baseline=None, repeat=15, min_sample=0.02, warmup=2, work=None,
            roof_loop=None, checked=True, max_time=None, notes=None):
    """Time the systems in `fns` ({system: callable}) round-robin; one Result per system.

    baseline: system the speedup is relative to (default: the first).
    work: {"bytes": moved per call} and/or {"flops": per call}: adds the bandwidth / BLAS roof fractions.
    roof_loop: name of the system in `fns` that is the hand-written numba loop: every row also gets
      roof_loop_median / median as its fraction of that roof.
    """
    samples = _sample(fns, repeat, min_sample, warmup, max_time)
    base = baseline or next(iter(fns))
    out = []
    for sys_name, s in samples.items():
        r = summarize(bench, name, sys_name, size, s, baseline=base, checked=checked,
                      note=(notes or {}).get(sys_name, ""))
        out.append(r)
    meds = {r.system: r.median for r in out}
    rf = roofs() if work else {}
    for r in out:
        r.speedup = meds[base] / r.median
        if work and work.get("bytes") and rf.get("bandwidth_GBps"):
            r.roofs["bandwidth"] = work["bytes"] / r.median / 1e9 / rf["bandwidth_GBps"]
        if work and work.get("flops") and rf.get("sgemm_GFLOPs"):
            r.roofs["blas"] = work["flops"] / r.median / 1e9 / rf["sgemm_GFLOPs"]
        if roof_loop and roof_loop in meds:
            r.roofs["numba loop"] = meds[roof_loop] / r.median
    return out


# ----------------------------------------------------------------------------------------------- roofs

_ROOFS = {}


def _triad_kernel():
    import numba

    @numba.njit(cache=False, fastmath=True)
    def triad(a, b, c, s):
        for i in range(a.size):
            a[i] = b[i] + s * c[i]
    return triad


def roofs(quick=None):
    """Machine roofs, measured once per process (single thread, like every system in the suite)."""
    if _ROOFS:
        return _ROOFS
    pin_threads()
    n = 1 << 24                      # 64 MiB per float32 array: well past the 32 MiB L3
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)              # first touch
    # roofs are what the machine can do: the best sample, not the median
    t = min(measure(lambda: np.copyto(dst, src), repeat=9, min_sample=0))
    _ROOFS["bandwidth_GBps"] = 2 * src.nbytes / t / 1e9
    _ROOFS["bandwidth_how"] = "best np.copyto of 64 MiB float32, read + write counted"
    try:
        triad = _triad_kernel()
        c = np.ones(n, np.float32)
        triad(dst, src, c, np.float32(0.5))
        t = min(measure(lambda: triad(dst, src, c, np.float32(0.5)), repeat=9, min_sample=0))
        _ROOFS["numba_triad_GBps"] = 3 * src.nbytes / t / 1e9
        _ROOFS["numba_triad_how"] = "hand-written numba loop a = b + s*c over 64 MiB float32 arrays"
    except Exception as e:   # numba missing or broken: the suite still runs
        _ROOFS["numba_triad_GBps"] = None
        _ROOFS["numba_triad_how"] = f"unavailable: {type(e).__name__}: {e}"
    del src, dst
    m = 1024
    a = np.random.default_rng(0).standard_normal((m, m), dtype=np.float32)
    b = a.copy()
    t = min(measure(lambda: a @ b, repeat=9, min_sample=0.05))
    _ROOFS["sgemm_GFLOPs"] = 2 * m ** 3 / t / 1e9
    _ROOFS["sgemm_how"] = "best numpy float32 1024x1024 @ 1024x1024"
    return _ROOFS


# ----------------------------------------------------------------------------------------------- references

_REFS = {}


def wanted(system):
    """Did the user ask for this reference system (--compare)? numpy is always measured."""
    c = CONFIG["compare"]
    return system == "numpy" or c is None or system in c


def references():
    """{'numpy': version, 'torch': version or 'unavailable: ...', 'torch.compile': ..., 'jax': ...}."""
    if _REFS:
        return _REFS
    _REFS["numpy"] = np.__version__
    try:
        import torch
        _REFS["torch"] = torch.__version__
    except Exception as e:
        _REFS["torch"] = f"unavailable: {type(e).__name__}: {e}"
    if not _REFS["torch"].startswith("unavailable"):
        ok, why = torch_compile_works()
        _REFS["torch.compile"] = "works" if ok else why
    else:
        _REFS["torch.compile"] = "unavailable: torch not installed"
    try:
        import jax
        _REFS["jax"] = jax.__version__
    except Exception:
        _REFS["jax"] = "unavailable: not installed"
    return _REFS


_TC = {}


def torch_compile_works():
    """(True, '') if torch.compile compiles and runs a tiny function here, else (False, 'unavailable: why')."""
    if "ok" in _TC:
        return _TC["ok"], _TC["why"]
    try:
        import torch
        f = torch.compile(lambda x: torch.sin(x) + 1, dynamic=False)
        x = torch.ones(8)
        if not torch.allclose(f(x), torch.sin(x) + 1):
            raise RuntimeError("wrong result")
        _TC["ok"], _TC["why"] = True, ""
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:160]
        _TC["ok"], _TC["why"] = False, f"unavailable: {type(e).__name__}: {first}"
    return _TC["ok"], _TC["why"]


def try_torch_compile(fn, *args, **kw):
    """torch.compile(fn) after one successful call, or (None, 'unavailable: reason')."""
    ok, why = torch_compile_works()
    if not ok:
        return None, why
    try:
        import torch
        cf = torch.compile(fn, dynamic=False, **kw)
        cf(*args)
        return cf, ""
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:160]
        return None, f"unavailable: {type(e).__name__}: {first}"


_JAX = {}                    # "threads": the PJRT_NPROC value the live jax CPU client was created with
_PJRT_NPROC0 = os.environ.get("PJRT_NPROC")


def try_jax(threads=None):
    """(jax, '') with jax's CPU client using `threads` threads (None: jax's default, about one per core), after a
    jitted smoke test; or (None, 'unavailable: reason').

    XLA sizes its CPU thread pools from PJRT_NPROC when it creates the client (at the first computation, not at
    import). The usual recipe XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" does
    not pin jaxlib 0.10: its elementwise work and matmuls still kept 4 threads busy here, where PJRT_NPROC=1 leaves
    one busy thread (and intra_op_parallelism_threads is no XLA flag: alone in XLA_FLAGS it aborts the process).
    A benchmark asking for another count than the live client's gets a fresh client (`tracejit bench` runs every
    benchmark in one process); arrays and jitted functions of the old one stay usable but keep its threads.
    """
    why = references()["jax"]
    if why.startswith("unavailable"):
        return None, why
    want = _PJRT_NPROC0 if threads is None else str(int(threads))
    try:
        import jax
        import jax.numpy as jnp
        if _JAX.get("threads", "not created") != want:
            if want is None:
                os.environ.pop("PJRT_NPROC", None)
            else:
                os.environ["PJRT_NPROC"] = want
            import jax.extend.backend
            jax.extend.backend.clear_backends()     # nothing to clear before the first computation
            _JAX["threads"] = want
        x = jnp.arange(8, dtype=jnp.float32)
        if not np.allclose(np.asarray(jax.jit(lambda v: jnp.sin(v) + 1)(x)), np.sin(np.arange(8)) + 1, atol=1e-6):
            raise RuntimeError("wrong result")
        return jax, ""
    except Exception as e:
        _JAX.pop("threads", None)
        first = (str(e).strip().splitlines() or [""])[0][:160]
        return None, f"unavailable: {type(e).__name__}: {first}"


# ----------------------------------------------------------------------------------------------- machine

def machine():
    info = {"cpu": "?", "cores": os.cpu_count(), "python": sys.version.split()[0], "numpy": np.__version__}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
    except Exception:
        pass
    try:
        import numba
        info["numba"] = numba.__version__
    except Exception:
        pass
    try:          # what numba compiles tracejit's kernels for (TRACEJIT_VECTOR_BITS, NUMBA_CPU_*)
        info.update(tracejit.kernels.cpu.vector_info())
    except Exception:
        pass
    return info


def machine_line(m):
    """The CPU as the bench header and --compare-to name it: model, LLVM host CPU, vector ISA and width."""
    isa = f", {m['isa']} {m['vector_bits']}-bit vectors" if m.get("isa") else ""
    return f"{m.get('cpu', '?')} (LLVM host CPU {m.get('llvm_cpu', '?')}{isa})"


def fmt_time(s):
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"
