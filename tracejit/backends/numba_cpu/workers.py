"""A program's kernels compiled in parallel: forked helper processes fill numba's disk cache.

numba compiles one function at a time under a process-wide lock (typing and lowering in Python, then
LLVM): 80-400 ms per kernel here, so a program's first call pays the sum over its kernels. When at least
two of them are not in the disk cache, `fork_compile` forks helpers (one per spare core, at most
TRACEJIT_COMPILE_WORKERS; 0 turns this off): each compiles its share, which numba saves to the cache, and
exits. The caller compiles its own share meanwhile, waits, and then loads the helpers' kernels from the
cache. A helper that fails or hangs costs only time: whatever it did not leave in the cache the caller
compiles itself. On by default on Linux; on other POSIX systems (fork) only when TRACEJIT_COMPILE_WORKERS asks.
The fork happens while holding numba's compiler lock, so no other thread of the caller is inside numba, and a
helper runs nothing but numba's compiler (no kernel, no OpenMP) with its own quiet stdout/stderr.
"""
import os
import sys
import time
import warnings

from ..diskcache import _STATS

_GRACE_S = 10.0          # a helper may take twice the caller's own compile time, plus this


def max_helpers():
    v = os.environ.get("TRACEJIT_COMPILE_WORKERS", "").strip()
    if v:
        if not v.isdigit():
            raise ValueError(f"TRACEJIT_COMPILE_WORKERS={v!r}: expected a number of helper processes (0 turns "
                             f"parallel compilation off)")
        return int(v)
    if not sys.platform.startswith("linux"):    # (macOS: system frameworks are not fork-safe; ask for them)
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(cpus - 1, 8)


def _needs_compiling(disp):
    """Not compiled in this process, cached on disk by numba (a helper's work reaches us), and no cache index
    there yet (then it was compiled before, by some process)."""
    cf = getattr(getattr(disp, "_cache", None), "_cache_file", None)
    return not disp.signatures and cf is not None and not os.path.exists(cf._index_path)


def fork_compile(jobs):
    """jobs: [(dispatcher, args, size of its source)]. Returns (mine, wait): the indices of the jobs the caller
    runs first, and a function that waits for the helpers; the caller then runs the other jobs (cache loads)."""
    everything = list(range(len(jobs)))
    n = max_helpers()
    if n <= 0 or not hasattr(os, "fork"):
        return everything, _nothing
    todo, seen = [], set()
    for i, (disp, _, size) in enumerate(jobs):
        if id(disp) not in seen and _needs_compiling(disp):
            seen.add(id(disp))
            # compile time grows with the source (flat ~0.1 s, a softmax's forward and backward rows ~0.7 s);
            # a prange variant compiles ~3x slower
            todo.append((size * (3 if disp.targetoptions.get("parallel") else 1), i))
    if len(todo) < 2:
        return everything, _nothing
    # longest first, each to the least loaded of the caller (bin 0) and the helpers
    bins = [[0, []] for _ in range(min(n, len(todo) - 1) + 1)]
    for cost, i in sorted(todo, reverse=True):
        b = min(bins, key=lambda b: b[0])
        b[0] += cost
        b[1].append(i)
    theirs = set(id(jobs[i][0]) for _, share in bins[1:] for i in share)     # (their dispatchers, shared too)
    # numba's first compilation in a process installs its typing and lowering registries (~0.2 s): once, here,
    # for the helpers to inherit
    from numba.core.registry import cpu_target
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:          # (another thread's numba compilation refreshes them too)
        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()
    pids = []
    for _, share in bins[1:]:
        pid = _fork_helper([jobs[i] for i in share])
        if pid:
            pids.append((pid, len(share)))
    if not pids:
        return everything, _nothing
    started = time.monotonic()

    def wait():
        deadline = time.monotonic() + _GRACE_S + 2 * (time.monotonic() - started)
        for pid, k in pids:
            if _reap(pid, deadline):
                _STATS["compiled_by_helpers"] += k
            else:
                _STATS["helper_failures"] += 1
    return [i for i in everything if id(jobs[i][0]) not in theirs], wait


def _nothing():
    pass


def _fork_helper(share):
    from numba.core.compiler_lock import global_compiler_lock
    from numba import typeof
    sigs = [(disp, tuple(typeof(a) for a in args)) for disp, args, _ in share]
    with global_compiler_lock, warnings.catch_warnings():   # no other thread is compiling while it is copied
        # Python 3.12+ and jax warn about fork in a threaded process: the helper runs none of those threads'
        # code (a deadlock there would only cost time: see _reap)
        warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
        warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
        try:
            pid = os.fork()
        except OSError:
            return None
        if pid == 0:                    # the helper: compile, let numba save, leave without cleanup
            code = 1
            try:
                _helper(sigs)
                code = 0
            finally:
                os._exit(code)
    _STATS["helpers"] += 1
    return pid


def _helper(sigs):
    warnings.simplefilter("ignore")
    sys.stdout = sys.stderr = open(os.devnull, "w")
    for disp, sig in sigs:
        disp.compile(sig)


def _reap(pid, deadline):
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:       # reaped by someone else (SIGCHLD ignored): its work may be in the cache
            return False
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if time.monotonic() > deadline:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
            return False
        time.sleep(0.002)
