"""glibc malloc settings for array work: big arrays from the heap, freed memory kept for the next one.

glibc serves allocations above M_MMAP_THRESHOLD (128 KiB, adjusted upward only in some patterns) with fresh
mmap'd pages and returns them on free: every such array the next op allocates page-faults on first touch
(measured: a 2 MiB float32 temporary made and freed in a loop, ~990 minor faults per iteration, ~5 with the
settings below; the CNN bench's first convolution 1.11 -> 0.33 ms, its eager step 15.2 -> 12.8 ms). Arrays up
to 32 MiB now come from the heap, and up to 256 MiB of freed memory stays in the process for reuse: the
caching-allocator trade PyTorch and XLA make with their own allocators. Linux/glibc only; nothing is changed
when the user tuned malloc (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES) or set
TRACEJIT_MALLOC=default.
"""
import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
applied = False


def tune():
    global applied
    env = os.environ
    if applied or env.get("TRACEJIT_MALLOC") == "default" or not sys.platform.startswith("linux") or \
            "MALLOC_MMAP_THRESHOLD_" in env or "MALLOC_TRIM_THRESHOLD_" in env or "malloc" in env.get("GLIBC_TUNABLES", ""):
        return
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):     # another C library (musl): leave it
            return
        applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                              TRIM_THRESHOLD))
    except (OSError, AttributeError):
        pass
