"""Indexing kernels on the GPU: gather by offsets, scatter (store / atomic add) by offsets, gather/scatter
along a dim (torch.gather / torch.scatter), and tril/triu masks.

Advanced indexing (x[idx], index_put, its backward) is reduced by the caller to flat element offsets
(computed with numpy's own indexing rules from the index tensors), so these kernels stay rank-free.
gather/scatter along a dim read the index tensor on the device; their shapes and strides travel as small
int64 device arrays. Out-of-range indices set a flag instead of reading out of bounds.
"""
import functools

import numpy as np
from numba import cuda

from .launch import TPB, blocks_for, launch, tag


@functools.lru_cache(maxsize=None)
def take_kernel(dt):
    """out[oo + i] = x[offs[i]] for i < n."""
    @cuda.jit
    def k(x, offs, out, oo, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[oo + i] = x[offs[i]]
            i += step
    return tag(k, "tracejit.kernels.cuda.index", "take_kernel", np.dtype(dt).str)


@functools.lru_cache(maxsize=None)
def put_kernel(dt, accumulate):
    """x[offs[i]] = v[vo + i] (or += atomically) for i < n. Without accumulating, the offsets must be distinct
    (which duplicate would win is up to the GPU's scheduling): `put` makes them so."""
    if accumulate:
        @cuda.jit
        def k(x, offs, v, vo, n):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                cuda.atomic.add(x, offs[i], v[vo + i])
                i += step
    else:
        @cuda.jit
        def k(x, offs, v, vo, n):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                x[offs[i]] = v[vo + i]
                i += step
    return tag(k, "tracejit.kernels.cuda.index", "put_kernel", np.dtype(dt).str, accumulate)


def take(x, offs, out, oo, n):
    if n:
        launch(take_kernel(np.dtype(x.dtype).str), blocks_for(n), TPB, x, offs, out, oo, n)


def put(x, offs, v, vo, n, accumulate):
    """x[offs[i]] = v[vo + i] (host int64 `offs`); a repeated offset takes its last value, as on the CPU, or the
    sum of its values with `accumulate`."""
    from numba import cuda
    if not n:
        return
    offs = np.ascontiguousarray(offs, np.int64)
    if not accumulate:
        last = n - 1 - np.unique(offs[::-1], return_index=True)[1]
        if last.size < n:
            kept = cuda.device_array(last.size, v.dtype)
            take(v, cuda.to_device(last + vo), kept, 0, last.size)
            offs, v, vo, n = offs[last], kept, 0, last.size
    launch(put_kernel(np.dtype(x.dtype).str, bool(accumulate)), blocks_for(n), TPB, x, cuda.to_device(offs), v, vo, n)


@functools.lru_cache(maxsize=None)
def along_dim_kernel(dt, idt, mode):
    """For each position c of the index tensor (shape `ishape`): t = x-offset of c with c[dim] = index[c].

    mode "gather": out[i] = x[t]; "scatter_add": x[t] += src[c] (atomic); "scatter" in two launches, so that the
    last position c writing to a t wins (as on the CPU, whatever order the GPU's threads run in): "claim" takes
    owner[t] = max(owner[t], i) (atomic, owner = out: int64 filled with -1), then "scatter": x[t] = src[c] where
    owner[t] == i. meta rows: 0 ishape, 1 index strides, 2 x strides, 3 src strides (0 for a scalar src)."""
    T = np.dtype(dt).type

    @cuda.jit
    def k(x, xo, index, io, src, so, out, meta, ndim, dim, size, n, err):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            q = i
            ip = io
            xp = xo
            sp = so
            for a in range(ndim - 1, -1, -1):
                c = q % meta[0, a]
                q = q // meta[0, a]
                ip += c * meta[1, a]
                sp += c * meta[3, a]
                if a != dim:
                    xp += c * meta[2, a]
            j = index[ip]
            if j < 0 or j >= size:
                err[0] = 1
            else:
                xp += j * meta[2, dim]
                if mode == 0:
                    out[i] = x[xp]
                elif mode == 1:
                    if out[xp - xo] == i:
                        x[xp] = T(src[sp])
                elif mode == 2:
                    cuda.atomic.add(x, xp, T(src[sp]))
                else:
                    cuda.atomic.max(out, xp - xo, i)
            i += step
    return tag(k, "tracejit.kernels.cuda.index", "along_dim_kernel", np.dtype(dt).str, np.dtype(idt).str, mode)


MODES = {"gather": 0, "scatter": 1, "scatter_add": 2, "claim": 3}


def along_dim(mode, x, xo, index, io, src, so, out, meta, ndim, dim, size, n, err):
    if n:
        kern = along_dim_kernel(np.dtype(x.dtype).str, np.dtype(index.dtype).str, MODES[mode])
        launch(kern, blocks_for(n), TPB, x, xo, index, io, src, so, out, meta, ndim, dim, size, n, err)


@functools.lru_cache(maxsize=None)
def tri_kernel(dt, upper):
    """Contiguous [B, R, C]: keep x where col - row <= k (tril) or >= k (triu), else 0."""
    T = np.dtype(dt).type
    zero = T(0)

    @cuda.jit
    def k(x, xo, out, R, C, kk, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            col = i % C
            row = (i // C) % R
            d = col - row
            keep = d >= kk if upper else d <= kk
            out[i] = x[xo + i] if keep else zero
            i += step
    return tag(k, "tracejit.kernels.cuda.index", "tri_kernel", np.dtype(dt).str, upper)


def tri(x, xo, out, R, C, k, n, upper):
    if n:
        launch(tri_kernel(np.dtype(out.dtype).str, bool(upper)), blocks_for(n), TPB, x, xo, out, R, C, k, n)
