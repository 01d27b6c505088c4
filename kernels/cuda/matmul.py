"""Batched matmul on the GPU: a tiled shared-memory kernel with register blocking, reading strided views.

C[b] = A[b] @ B[b] with A[b] at a.buf[aoffs[b] + i*as0 + k*as1] (any strides: transposed weights are read in
place, no copy) and C contiguous [batch, M, N]. A block computes a BM x BN tile of C: it walks K a BK-slab at
a time, the whole block staging the A slab (BM x BK) and the B slab (BK x BN) in shared memory, then each
thread accumulates a TM x TN patch of the tile in registers (TM + TN shared reads per TM * TN multiply-adds,
instead of 2 per 1). Staging loads walk the operand's unit-stride dimension across neighbouring threads, so
global reads coalesce whether an operand is row-major or transposed. The batch index is the grid's z;
`aoffs`/`boffs` (device int64 arrays) hold each batch's offset, so broadcast batch dims cost nothing.
"""
import functools

import numpy as np
from numba import cuda

from .launch import SIM, launch, tag

# tile shape: block tile BM x BN, K-slab BK, per-thread patch TM x TN ((BM/TM) x (BN/TN) threads per block)
TILES = (4, 4, 4, 2, 2) if SIM else (64, 64, 16, 4, 4)


@functools.lru_cache(maxsize=None)
def matmul_kernel(dt, tiles=TILES):
    BM, BN, BK, TM, TN = tiles
    T = np.dtype(dt).type
    zero = T(0)
    TX, TY = BN // TN, BM // TM
    NT = TX * TY

    @cuda.jit
    def k(a, aoffs, as0, as1, b, boffs, bs0, bs1, c, M, N, K):
        sa = cuda.shared.array((BK, BM), T)       # A slab, transposed: sa[k, m]
        sb = cuda.shared.array((BK, BN), T)
        acc = cuda.local.array((TM, TN), T)
        ra = cuda.local.array(TM, T)
        rb = cuda.local.array(TN, T)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * TX + tx
        z = cuda.blockIdx.z
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        ao = aoffs[z]
        bo = boffs[z]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = zero
        for t in range(0, K, BK):
            e = tid
            while e < BM * BK:
                if as1 == 1:                      # neighbouring threads: neighbouring k (row-major A)
                    mm = e // BK
                    kk = e - mm * BK
                else:                             # neighbouring m (a transposed view)
                    kk = e // BM
                    mm = e - kk * BM
                r = row0 + mm
                kc = t + kk
                sa[kk, mm] = a[ao + r * as0 + kc * as1] if (r < M and kc < K) else zero
                e += NT
            e = tid
            while e < BK * BN:
                if bs1 == 1:
                    kk = e // BN
                    nn = e - kk * BN
                else:
                    nn = e // BK
                    kk = e - nn * BK
                kr = t + kk
                cc = col0 + nn
                sb[kk, nn] = b[bo + kr * bs0 + cc * bs1] if (kr < K and cc < N) else zero
                e += NT
            cuda.syncthreads()
            for kk in range(BK):
                for i in range(TM):
                    ra[i] = sa[kk, ty * TM + i]
                for j in range(TN):
                    rb[j] = sb[kk, tx * TN + j]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] = T(acc[i, j] + ra[i] * rb[j])
            cuda.syncthreads()
        base = z * M * N
        for i in range(TM):
            r = row0 + ty * TM + i
            if r < M:
                for j in range(TN):
                    cc = col0 + tx * TN + j
                    if cc < N:
                        c[base + r * N + cc] = acc[i, j]

    return tag(k, "tracejit.kernels.cuda.matmul", "matmul_kernel", np.dtype(dt).str, list(tiles))


def matmul(a, aoffs, as0, as1, b, boffs, bs0, bs1, c, batch, M, N, K):
    if batch == 0 or M == 0 or N == 0:
        return
    BM, BN, BK, TM, TN = TILES
    kern = matmul_kernel(np.dtype(c.dtype).str)
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM, batch)
    launch(kern, grid, (BN // TN, BM // TM), a, aoffs, as0, as1, b, boffs, bs0, bs1, c, M, N, K)
