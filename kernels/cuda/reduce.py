"""Row reductions on the GPU: sum / mean / max / min of each row of a C-contiguous [M, K] view.

One block per row (blocks loop over rows with a grid stride): each thread accumulates a strided slice of the
row in registers, then the block combines the partial results with a shared-memory tree (log2(TPB) steps).
max/min propagate NaN like numpy. The caller (tracejit/backends/numba_cuda/ops.py) brings any reduction
over any dims to this form: reduced dims permuted last, copied contiguous when the view is not.
"""
import functools

import numpy as np
from numba import cuda

from .launch import MAX_BLOCKS, TPB, launch, tag

KINDS = ("sum", "prod", "max", "min")


def _identity(kind, acc):
    acc = np.dtype(acc)
    if kind == "sum":
        return acc.type(0)
    if kind == "prod":
        return acc.type(1)
    if acc.kind == "f":
        return acc.type(-np.inf if kind == "max" else np.inf)
    if acc.kind == "b":
        return acc.type(kind == "min")
    info = np.iinfo(acc)
    return acc.type(info.min if kind == "max" else info.max)


@functools.lru_cache(maxsize=None)
def row_kernel(kind, in_dt, acc_dt, out_dt, tpb=TPB):
    """kernel(x, xo, M, K, out, oo, scale): out[oo + r] = reduce(x[xo + r*K : xo + (r+1)*K]) * scale (sum)."""
    A = np.dtype(acc_dt).type
    O = np.dtype(out_dt).type
    ident = _identity(kind, acc_dt)

    if kind == "sum":
        @cuda.jit(device=True)
        def comb(a, b):
            return A(a + b)
    elif kind == "prod":
        @cuda.jit(device=True)
        def comb(a, b):
            return A(a * b)
    elif kind == "max":
        @cuda.jit(device=True)
        def comb(a, b):
            return a if (a > b or a != a) else b      # NaN wins
    else:
        @cuda.jit(device=True)
        def comb(a, b):
            return a if (a < b or a != a) else b

    scaled = kind == "sum"

    @cuda.jit
    def k(x, xo, M, K, out, oo, scale):
        sm = cuda.shared.array(tpb, A)
        tid = cuda.threadIdx.x
        row = cuda.blockIdx.x
        while row < M:
            acc = ident
            base = xo + row * K
            j = tid
            while j < K:
                acc = comb(acc, A(x[base + j]))
                j += tpb
            sm[tid] = acc
            cuda.syncthreads()
            s = tpb // 2
            while s > 0:
                if tid < s:
                    sm[tid] = comb(sm[tid], sm[tid + s])
                cuda.syncthreads()
                s //= 2
            if tid == 0:
                if scaled:
                    out[oo + row] = O(sm[0] * scale)
                else:
                    out[oo + row] = O(sm[0])
            cuda.syncthreads()          # sm is reused by the next row
            row += cuda.gridDim.x

    return tag(k, "tracejit.kernels.cuda.reduce", "row_kernel", kind, np.dtype(in_dt).str, np.dtype(acc_dt).str,
               np.dtype(out_dt).str, tpb)


def reduce_rows(kind, x, xo, M, K, out, oo, acc_dt, scale=1.0):
    """Launch the row reduction: x, out are flat device buffers (x rows contiguous from offset xo)."""
    if M == 0:
        return
    kern = row_kernel(kind, np.dtype(x.dtype).str, np.dtype(acc_dt).str, np.dtype(out.dtype).str)
    launch(kern, max(1, min(M, MAX_BLOCKS)), TPB, x, xo, M, K, out, oo, np.dtype(acc_dt).type(scale))


@functools.lru_cache(maxsize=None)
def arg_kernel(is_max, dt, tpb=TPB):
    """kernel(x, xo, M, K, vals, idx): per row the max (min) and the index of its first occurrence; a NaN
    counts as the maximum and the minimum (its first index wins), like numpy's argmax/argmin."""
    T = np.dtype(dt).type

    @cuda.jit(device=True)
    def better(av, ai, bv, bi):         # is (av, ai) the one to keep over (bv, bi)?
        if av != av:
            return bv == bv or ai < bi
        if bv != bv:
            return False
        if av == bv:
            return ai < bi
        return (av > bv) if is_max else (av < bv)

    @cuda.jit
    def k(x, xo, M, K, vals, idx):
        sv = cuda.shared.array(tpb, T)
        si = cuda.shared.array(tpb, np.int64)
        tid = cuda.threadIdx.x
        row = cuda.blockIdx.x
        while row < M:
            base = xo + row * K
            bi = -1
            bv = T(0)
            j = tid
            while j < K:
                v = x[base + j]
                if bi < 0 or better(v, j, bv, bi):
                    bv = v
                    bi = j
                j += tpb
            sv[tid] = bv
            si[tid] = bi
            cuda.syncthreads()
            s = tpb // 2
            while s > 0:
                if tid < s:
                    oi = si[tid + s]
                    if oi >= 0 and (si[tid] < 0 or better(sv[tid + s], oi, sv[tid], si[tid])):
                        sv[tid] = sv[tid + s]
                        si[tid] = oi
                cuda.syncthreads()
                s //= 2
            if tid == 0:
                vals[row] = sv[0]
                idx[row] = si[0]
            cuda.syncthreads()
            row += cuda.gridDim.x

    return tag(k, "tracejit.kernels.cuda.reduce", "arg_kernel", is_max, np.dtype(dt).str, tpb)


def arg_rows(is_max, x, xo, M, K, vals, idx):
    """vals[r], idx[r] = max (min) of row r of x and its first index (vals, idx: contiguous buffers)."""
    if M == 0:
        return
    launch(arg_kernel(bool(is_max), np.dtype(x.dtype).str), max(1, min(M, MAX_BLOCKS)), TPB, x, xo, M, K, vals, idx)
