"""Launch geometry shared by every CUDA kernel, and the one place kernels are launched from.

On a GPU: 256-thread blocks and grid-stride loops (a grid covers the data or caps at MAX_BLOCKS and loops).
Under numba's simulator every CUDA thread is a Python thread (about 0.3 ms each), so the same kernels run
with tiny blocks and at most two of them: the grid-stride loops and tree reductions still take several
iterations, which is what the tests need to exercise.
"""
import os

from numba import cuda

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"

TPB = 4 if SIM else 256              # threads per block, elementwise and row kernels (a power of two)
MAX_BLOCKS = 2 if SIM else 8192       # grid-stride loops cover the rest
TILE = 4 if SIM else 16               # matmul tile edge (TILE x TILE threads per block)
MAX_TILE_BLOCKS = 4 if SIM else 65535

_RECORD = os.environ.get("TRACEJIT_CUDA_RECORD")     # path: log each kernel's argument types (tools/cuda_ptx_check)


def blocks_for(n, tpb=TPB):
    return max(1, min((n + tpb - 1) // tpb, MAX_BLOCKS))


def launch(kernel, blocks, threads, *args):
    """kernel[blocks, threads](*args), recording the argument types when asked to."""
    if _RECORD:
        _record(kernel, args)
    kernel[blocks, threads](*args)


def launch1d(kernel, n, *args):
    if n > 0:
        launch(kernel, blocks_for(n), TPB, *args)


def _record(kernel, args):
    import json
    import numpy as np
    key = getattr(kernel, "tj_key", None)
    if key is None:
        return
    types = []
    for a in args:
        if hasattr(a, "copy_to_host") or isinstance(a, np.ndarray):
            types.append(["array", np.dtype(a.dtype).str, a.ndim])
        elif isinstance(a, (bool, np.bool_)):
            types.append(["scalar", "bool"])
        elif isinstance(a, int):
            types.append(["scalar", "int64"])
        elif isinstance(a, float):
            types.append(["scalar", "float64"])
        elif isinstance(a, np.generic):
            types.append(["scalar", np.dtype(type(a)).name])
        else:
            types.append(["scalar", "none" if a is None else type(a).__name__])
    with open(_RECORD, "a") as f:
        f.write(json.dumps([key, types]) + "\n")


def tag(kernel, *key):
    """Name a kernel for the PTX check: (module, factory, factory args...) or ("gen", source path, fn name)."""
    kernel.tj_key = list(key)
    return kernel
