"""softmax / log_softmax over the last axis of a C-contiguous [M, K] view: one block per row.

Two shared-memory tree reductions per row (the max, then the sum of exp(x - max)), then every thread writes
its strided slice of the row. Like the numpy implementation (and PyTorch), the shift is the max as it is: a
row holding +inf, or only -inf, is NaN everywhere.
"""
import functools
import math

import numpy as np
from numba import cuda

from .launch import MAX_BLOCKS, TPB, launch, tag


@functools.lru_cache(maxsize=None)
def softmax_kernel(log, dt, tpb=TPB):
    T = np.dtype(dt).type
    zero, ninf, inf = T(0), T(-np.inf), T(np.inf)
    hi = T(np.log(np.finfo(T).max))

    @cuda.jit(device=True)
    def exp(d):
        return inf if d >= hi else T(math.exp(d))     # Python's math.exp (the simulator) raises on overflow

    @cuda.jit(device=True)
    def tree(sm, tid, is_max):
        s = tpb // 2
        while s > 0:
            if tid < s:
                a = sm[tid]
                b = sm[tid + s]
                if is_max:
                    sm[tid] = a if (a > b or a != a) else b
                else:
                    sm[tid] = T(a + b)
            cuda.syncthreads()
            s //= 2

    @cuda.jit
    def k(x, xo, M, K, out, oo):
        sm = cuda.shared.array(tpb, T)
        tid = cuda.threadIdx.x
        row = cuda.blockIdx.x
        while row < M:
            base = xo + row * K
            m = ninf
            j = tid
            while j < K:
                v = x[base + j]
                m = v if (v > m or v != v) else m
                j += tpb
            sm[tid] = m
            cuda.syncthreads()
            tree(sm, tid, True)
            m = sm[0]
            cuda.syncthreads()
            s = zero
            j = tid
            while j < K:
                s = T(s + exp(T(x[base + j] - m)))
                j += tpb
            sm[tid] = s
            cuda.syncthreads()
            tree(sm, tid, False)
            s = sm[0]
            cuda.syncthreads()
            ob = oo + row * K
            j = tid
            if log:
                ls = T(math.log(s)) if s > zero else ninf
                while j < K:
                    out[ob + j] = T(T(x[base + j] - m) - ls)
                    j += tpb
            else:
                while j < K:
                    out[ob + j] = T(exp(T(x[base + j] - m)) / s)
                    j += tpb
            row += cuda.gridDim.x

    return tag(k, "tracejit.kernels.cuda.softmax", "softmax_kernel", log, np.dtype(dt).str, tpb)


def softmax_rows(x, xo, M, K, out, oo, log=False):
    if M == 0 or K == 0:
        return
    kern = softmax_kernel(bool(log), np.dtype(x.dtype).str)
    launch(kern, max(1, min(M, MAX_BLOCKS)), TPB, x, xo, M, K, out, oo)
