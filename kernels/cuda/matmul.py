"""Batched matmul on the GPU: a tiled shared-memory kernel reading strided views.

C[b] = A[b] @ B[b] with A[b] at a.buf[aoffs[b] + i*as0 + k*as1] (any strides: transposed weights are read in
place, no copy) and C contiguous [batch, M, N]. Each TILE x TILE block computes one output tile: it walks
the K dimension a tile at a time, staging a tile of A and a tile of B in shared memory (one element per
thread) so each global element is read once per tile instead of once per multiply-add. The batch index is
the grid's z; `aoffs`/`boffs` (device int64 arrays) hold each batch's offset, so broadcast batch dims cost
nothing.
"""
import functools

import numpy as np
from numba import cuda

from .launch import TILE, launch, tag


@functools.lru_cache(maxsize=None)
def matmul_kernel(dt, tile=TILE):
    T = np.dtype(dt).type
    zero = T(0)

    @cuda.jit
    def k(a, aoffs, as0, as1, b, boffs, bs0, bs1, c, M, N, K):
        sa = cuda.shared.array((tile, tile), T)
        sb = cuda.shared.array((tile, tile), T)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        z = cuda.blockIdx.z
        row = cuda.blockIdx.y * tile + ty
        col = cuda.blockIdx.x * tile + tx
        ao = aoffs[z]
        bo = boffs[z]
        acc = zero
        for t in range((K + tile - 1) // tile):
            ka = t * tile + tx
            if row < M and ka < K:
                sa[ty, tx] = a[ao + row * as0 + ka * as1]
            else:
                sa[ty, tx] = zero
            kb = t * tile + ty
            if kb < K and col < N:
                sb[ty, tx] = b[bo + kb * bs0 + col * bs1]
            else:
                sb[ty, tx] = zero
            cuda.syncthreads()
            for kk in range(tile):
                acc = T(acc + sa[ty, kk] * sb[kk, tx])
            cuda.syncthreads()
        if row < M and col < N:
            c[z * M * N + row * N + col] = acc

    return tag(k, "kernels.cuda.matmul", "matmul_kernel", np.dtype(dt).str, tile)


def matmul(a, aoffs, as0, as1, b, boffs, bs0, bs1, c, batch, M, N, K):
    if batch == 0 or M == 0 or N == 0:
        return
    kern = matmul_kernel(np.dtype(c.dtype).str)
    grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE, batch)
    launch(kern, grid, (TILE, TILE), a, aoffs, as0, as1, b, boffs, bs0, bs1, c, M, N, K)
