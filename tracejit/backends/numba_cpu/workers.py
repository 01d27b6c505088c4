"""A program's kernels compiled in parallel: forked helper processes fill numba's disk cache.

numba compiles one function at a time under a process-wide lock (typing and lowering in Python, then
LLVM): 80-400 ms per kernel here, so a program's first call pays the sum over its kernels. When at least
two of them are not in the disk cache, `fork_compile` forks helpers (one per spare core, at most
TRACEJIT_COMPILE_WORKERS; 0 turns this off). The kernels to compile wait in a queue, longest first (a pipe
of job numbers: each process reads the next one when it is free, so the work balances itself whatever each
kernel really costs); a helper compiles what it takes, which numba saves to the cache, and exits at the end
of the queue. The caller compiles what it takes meanwhile, waits, and then loads the helpers' kernels from the
cache. A helper that fails or hangs costs only time: whatever it did not leave in the cache the caller
compiles itself. On by default on Linux; on other POSIX systems (fork) only when TRACEJIT_COMPILE_WORKERS asks.
The fork happens while holding numba's compiler lock, so no other thread of the caller is inside numba, and a
helper runs nothing but numba's compiler (no kernel, no OpenMP) with its own quiet stdout/stderr.

A large kernel's prange variant (kernel_par, for the calls made while numba runs several threads) compiles ~3x
slower than its serial kernel (parfor lowering: ~1.7 s each for the ResNet bench's batch-norm rows, whose four
made its first step at two threads 10-11 s instead of 3.4 s). So the program's first call runs the serial kernels,
and `compile_later` forks one more helper, after the caller's own compiling, that compiles the prange variants into
the disk cache; each call takes a variant only once it is `ready` (its cache index is written, or the helper
ended without it: then the caller compiles it at that call). Both variants give the same bits (rows and chunks are
split into tasks, not reordered), so the switch changes no result.

The same queue shares out direct.py's lowering of a program's kernels (`fork_compile(jobs, run)`: a helper leaves
each lowered kernel's machine code beside the kernel modules); numba's own serial kernels then go to the background
helper too, ahead of the prange variants, and calls run the direct kernels until they are `ready`.

A kernel module that sets VECTOR_INTERLEAVE (codegen.INTERLEAVE: loops of vmath calls) compiles inside
`vector_interleave`, here and in the caller.
"""
import contextlib
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
    """Not compiled in this process, cached on disk by numba (a helper's work reaches us), and not in that cache
    yet, whole (numba writes an entry's index before its data: a process that finds the index alone would compile
    it at its first call)."""
    cf = getattr(getattr(disp, "_cache", None), "_cache_file", None)
    return not disp.overloads and cf is not None and not _written(cf)


def fork_compile(jobs, run=None):
    """jobs: [(dispatcher, args, size of its source)]. Returns (claim, wait): `claim()` yields the indices of the
    jobs the caller compiles, taken from the queue the helpers take from too, and `wait()` waits for the helpers;
    the caller then runs every job (the others load from the cache, or compile where a helper failed).
    With `run`, jobs are [(key, None, size)], all to do, and a helper calls run(i) for each index i it takes (which
    leaves its result where the caller finds it) instead of numba's compile of a dispatcher."""
    everything = lambda: iter(range(len(jobs)))      # noqa: E731  (no helpers: the caller runs them all)
    n = max_helpers()
    if n <= 0 or not hasattr(os, "fork"):
        return everything, _nothing
    todo, seen = [], set()
    for i, (disp, _, size) in enumerate(jobs):
        if run is not None:
            todo.append((size, i))
        elif id(disp) not in seen and _needs_compiling(disp):
            seen.add(id(disp))
            # compile time grows with the source (flat ~0.1 s, a softmax's forward and backward rows ~0.7 s);
            # a prange variant compiles ~3x slower
            todo.append((size * (3 if disp.targetoptions.get("parallel") else 1), i))
    if len(todo) < 2:
        return everything, _nothing
    todo = [i for _, i in sorted(todo, reverse=True)][:_QUEUE_MAX]
    # numba's first compilation in a process installs its typing and lowering registries (~0.2 s): once, here,
    # for the helpers to inherit
    from numba import typeof
    from numba.core.registry import cpu_target
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:          # (another thread's numba compilation refreshes them too)
        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()
    sigs = {i: (jobs[i][0], tuple(typeof(a) for a in jobs[i][1])) for i in todo} if run is None else run
    r, w = os.pipe()
    os.write(w, b"".join(i.to_bytes(4, "little") for i in todo))       # (fits the pipe: _QUEUE_MAX)
    os.close(w)
    pids = []
    for _ in range(min(n, len(todo) - 1)):
        pid = _fork_helper(_taken(r, sigs))
        if pid:
            pids.append(pid)
    if not pids:
        os.close(r)
        return everything, _nothing
    started = time.monotonic()
    mine, reading = [], [r]

    def done_reading():
        if reading:
            os.close(reading.pop())

    def claim():
        for i in _taken(r, None):
            mine.append(i)
            yield i
        done_reading()

    def wait():
        done_reading()
        deadline = time.monotonic() + _GRACE_S + 2 * (time.monotonic() - started)
        ok = [_reap(pid, deadline) for pid in pids]
        _STATS["helper_failures"] += ok.count(False)
        if all(ok) and run is None:      # (direct.py's lowering is counted by the executor)
            _STATS["compiled_by_helpers"] += len(todo) - len(mine)
    return claim, wait


_QUEUE_MAX = 8192       # job numbers of 4 bytes, within a pipe's 64 KiB (more: the caller compiles the rest)


def _taken(r, sigs):
    """The jobs this process takes from the queue, one at a time: indices (sigs None), or (dispatcher, signature)."""
    while True:
        b = os.read(r, 4)               # (4 bytes of a pipe written whole before any reader: one job, taken once)
        if len(b) < 4:
            return
        i = int.from_bytes(b, "little")
        yield i if sigs is None else sigs[i] if isinstance(sigs, dict) else (sigs, i)


def _nothing():
    pass


def _fork_helper(sigs, nice=0):
    from numba.core.compiler_lock import global_compiler_lock
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
                if nice:                # (a background helper: the caller's calls go first)
                    os.nice(nice)
                _helper(sigs)
                code = 0
            finally:
                os._exit(code)
    _STATS["helpers"] += 1
    return pid


_LATER = {}             # id(dispatcher) -> (its numba cache file, [helper pid, exit status or None])
_BACKGROUND = []        # those [pid, status] of background helpers not reaped yet


def compile_later(jobs):
    """jobs: [(dispatcher, args)]. One forked helper compiles those not in the disk cache into it while the caller
    goes on (their first calls take another variant until `ready`); returns the jobs the caller compiles now (no
    fork, no disk cache, or in the cache already: loaded)."""
    from numba import typeof
    for state in list(_BACKGROUND):     # (reap the helpers that ended, whether or not their kernels were called)
        _poll(state)
    later = [(d, a) for d, a in jobs if id(d) not in _LATER and _needs_compiling(d)]
    if later and max_helpers() > 0 and hasattr(os, "fork"):
        pid = _fork_helper([(d, tuple(typeof(x) for x in a)) for d, a in later], nice=10)
        if pid:
            state = [pid, None]
            _BACKGROUND.append(state)
            if _STATS["fallback_dir"] is not None and not _STOP_AT_EXIT:
                # a private cache folder, removed at exit (an exit handler registered before this one, so run
                # after it): the helper's work would be lost, and it would write there while it is removed
                import atexit
                atexit.register(_stop_background)
                _STOP_AT_EXIT.append(True)
            for d, _ in later:
                _LATER[id(d)] = (d._cache._cache_file, state)
    return [(d, a) for d, a in jobs if id(d) not in _LATER]        # (an earlier program's too: being compiled)


_STOP_AT_EXIT = []


def wait_background(timeout=None):
    """Waits until the background helpers have ended (their kernels then replace, at their next call, what ran
    meanwhile: direct kernels, serial kernels for prange variants); True if none is left. For benchmarks."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        for state in list(_BACKGROUND):
            _poll(state)
        if not _BACKGROUND:
            return True
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def _stop_background():
    for pid, status in list(_BACKGROUND):
        if status is None:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass


def when_compiled(disp, args):
    """disp, for these arguments, if numba has it in memory or in its disk cache; else None, its compilation left
    to a background helper (once): the caller runs something else meanwhile."""
    if disp.overloads:      # (not .signatures: a list built at every call, ~3 us; this runs at every call)
        return disp
    compile_later([(disp, args)])      # (nothing when it is in the cache or was asked for already)
    # ready: not left to a helper, or the helper wrote its index and data (or ended); then in the cache, or not used
    return disp if ready(disp) and not _needs_compiling(disp) else None


def ready(disp):
    """Whether `disp` may be called: not left to a background helper, or its cache entry is written (the call
    loads it), or the helper ended without writing it (the call compiles it)."""
    job = _LATER.get(id(disp))
    if job is None:
        return True
    cache_file, state = job
    if _written(cache_file) or _poll(state):
        _LATER.pop(id(disp), None)      # (calls from several threads may get here at once)
        return True
    return False


def _written(cf):
    """numba has written this cache file's index and every data file the index names (it writes the index first:
    a call in between would find no data and compile)."""
    if not os.path.exists(cf._index_path):
        return False
    try:
        names = cf._load_index().values()
    except Exception:
        return False
    return all(os.path.exists(cf._data_path(n)) for n in names)


def _poll(state):
    """Whether the background helper [pid, status] has ended (reaped here, once)."""
    if state[1] is None:
        try:
            done, status = os.waitpid(state[0], os.WNOHANG)
        except ChildProcessError:
            done, status = 1, 0
        if done:
            state[1] = status
            _BACKGROUND.remove(state)
    return state[1] is not None


def _helper(sigs):
    warnings.simplefilter("ignore")
    sys.stdout = sys.stderr = open(os.devnull, "w")
    # the process's own stdout and stderr too: a helper that outlives the caller (the background one) would keep
    # a pipe the caller writes to open, and `python train.py | tee log` would wait for it
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    for disp, sig in sigs:
        if callable(disp) and not hasattr(disp, "compile"):     # fork_compile's `run`
            disp(sig)
            continue
        with vector_interleave(disp):
            disp.compile(sig)


@contextlib.contextmanager
def vector_interleave(disp):
    """Compiling `disp` (a generated kernel) in here makes LLVM's loop vectorizer interleave its module's
    VECTOR_INTERLEAVE vectors per loop iteration, instruction by instruction, where it has that global: a loop of
    exp/tanh/sigmoid calls is a long chain of dependent instructions per vector, and with its own choice (one vector
    at a time) the core overlaps too few iterations to fill its pipes. The setting is LLVM's process-wide option,
    set under numba's compiler lock and reset to LLVM's own choice afterwards, so nothing else compiles with it.
    (numba compiles a dispatcher's variant that was not warmed, such as kernel_par after the thread count changed,
    at its first call: without it.)"""
    n = getattr(disp, "py_func", None) and disp.py_func.__globals__.get("VECTOR_INTERLEAVE")
    if not n:
        yield
        return
    import llvmlite.binding as ll
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:
        ll.set_option("tracejit", f"-force-vector-interleave={int(n)}")
        try:
            yield
        finally:
            ll.set_option("tracejit", "-force-vector-interleave=0")


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
