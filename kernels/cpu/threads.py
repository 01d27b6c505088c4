"""Work split over threads from Python: calls that release the GIL (nogil numba kernels) run on disjoint slices of a
batch at once, on the calling thread and a pool's. Handing a call to the pool costs ~0.1 ms on a 2-core VM (AMD EPYC
znver4: `run` of two empty calls), and the pool competes with numba's OpenMP workers for the cores: convtile.py uses
it while its prange variants compile, and for very large padding copies.

A thread count compiles nothing more: a slice of a C-contiguous batch along its first axis has the whole batch's
numba type. The pool holds one thread per numba thread, made on first use, none in a forked child (its threads do
not survive the fork)."""
import os
import threading
import types
from concurrent.futures import ThreadPoolExecutor

import numba

_POOL = [None]
_LOCK = threading.Lock()
os.register_at_fork(after_in_child=lambda: _POOL.__setitem__(0, None))


def split(n, parts):
    """[lo, hi) ranges of n items in `parts` near-equal slices (fewer when there are fewer items; one when n = 0)."""
    parts = max(1, min(parts, n))
    return [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]


def run(calls):
    """The calls at once, the first on this thread, the others on the pool's; returns when every one has (an
    exception of one is raised after all have ended)."""
    if len(calls) > 1:
        with _LOCK:
            if _POOL[0] is None:
                _POOL[0] = ThreadPoolExecutor(numba.config.NUMBA_NUM_THREADS, thread_name_prefix="tracejit")
        rest = [_POOL[0].submit(c) for c in calls[1:]]
    else:
        rest = []
    try:
        calls[0]()
    finally:
        for f in rest:
            f.result()


def prange_twin(f, cache=True):
    """The prange variant of the Python function f, compiled with numba's threads: a copy of f named f's name +
    "_par" (numba's disk cache keys a function by its qualified name and signature, not its options)."""
    par = types.FunctionType(f.__code__, f.__globals__, f.__name__ + "_par", f.__defaults__, f.__closure__)
    par.__qualname__ = f.__qualname__ + "_par"
    return numba.njit(cache=cache, nogil=True, parallel=True)(par)
