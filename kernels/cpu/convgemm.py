"""Convolution products one image at a time, BLAS called from numba: no transposed copy of a batch-sized array.

kernels/cpu/conv.py's products multiply the whole batch at once: the (O, N*OH*OW) forward product is then
transposed to NCHW, the output gradient g is transposed to (O, N*OH*OW) for each backward product, and the input
gradient's column matrix is as big as the batch's columns. Here each image is one product per group (cblas ?gemm
called from the compiled loop through `gemm_call`: no Python per image) that reads image n's columns where they
lie in the batch's (C*kh*kw, N, OH, OW) columns (a (K, OH*OW) block with row stride N*OH*OW) and reads or writes
NCHW arrays directly; the input gradient's columns are one image's, in the cache, before col2im.
"""
import numba
import numpy as np
from numba import prange

from .blas import gemm_call
from .conv import col2im_images
from .threads import prange_twin


@numba.njit(cache=True)
def forward_images(fp, one, zero, cols, w, groups, bias, out):
    """out (N, O, OH, OW) = w (O, Kg) times the columns cols (groups*Kg, N, OH, OW), plus bias (size 0: none)."""
    N, O, OH, OW = out.shape
    Og, Kg, P = O // groups, w.shape[1], OH * OW
    z = cols.itemsize
    os = out.reshape(-1)
    ca, wa, oa = np.int64(cols.ctypes.data), np.int64(w.ctypes.data), np.int64(out.ctypes.data)
    for n in prange(N):
        for gi in range(groups):
            gemm_call(fp, 0, 0, Og, P, Kg, one, wa + gi * Og * Kg * z, Kg, ca + (gi * Kg * N + n) * P * z, N * P,
                      zero, oa + (n * O + gi * Og) * P * z, P)
        if bias.size:
            for o in range(O):
                d, bo = (n * O + o) * P, bias[o]
                for p in range(P):
                    os[d + p] += bo


@numba.njit(cache=True)
def input_grad_images(fp, one, zero, g, w, groups, kh, kw, sh, sw, ph, pw, dh, dw, out):
    """out (N, C, H, W) = the input gradient of conv2d from g (N, O, OH, OW) and w (O, Kg): per image, its column
    gradients w_g^T @ g[n]_g (one product per group) into a cache-sized block, then col2im into the image."""
    N, O, OH, OW = g.shape
    C, H, W = out.shape[1], out.shape[2], out.shape[3]
    Og, Kg, P = O // groups, w.shape[1], OH * OW
    z = g.itemsize
    cols = np.empty(groups * Kg * P, g.dtype)
    os = out.reshape(-1)
    ca, wa, ga = np.int64(cols.ctypes.data), np.int64(w.ctypes.data), np.int64(g.ctypes.data)
    for n in range(N):
        for gi in range(groups):
            gemm_call(fp, 1, 0, Kg, P, Og, one, wa + gi * Og * Kg * z, Kg, ga + (n * O + gi * Og) * P * z, P, zero,
                      ca + gi * Kg * P * z, P)
        col2im_images(cols, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, os, C, H, W, n, 1)


def weight_grad_images(fp, one, zero, cols, g, groups, kmajor, out):
    """The weight gradient of conv2d from the input's columns (groups*Kg, N, OH, OW) and g (N, O, OH, OW), in parts:
    out[p] sums the products of images N*p//parts .. N*(p+1)//parts (parts = len(out); BLAS adds them, beta = 1).
    out[p] is (groups, O/groups, Kg), or (groups, Kg, O/groups) when `kmajor` (the product with the longer side
    as its rows)."""
    N, O, OH, OW = g.shape
    Og, P = O // groups, OH * OW
    Kg = cols.shape[0] // groups
    z = cols.itemsize
    parts, whole = out.shape[0], Kg * Og * groups
    ca, ga = np.int64(cols.ctypes.data), np.int64(g.ctypes.data)
    for p in prange(parts):
        lo, hi = N * p // parts, N * (p + 1) // parts
        oa = np.int64(out.ctypes.data) + p * whole * z
        if hi == lo:
            out[p].reshape(-1)[:] = 0
        for n in range(lo, hi):
            beta = zero if n == lo else one
            for gi in range(groups):
                c, d = ca + (gi * Kg * N + n) * P * z, ga + (n * O + gi * Og) * P * z
                if kmajor:
                    gemm_call(fp, 0, 1, Kg, Og, P, one, c, N * P, d, P, beta, oa + gi * Kg * Og * z, Og)
                else:
                    gemm_call(fp, 0, 1, Og, Kg, P, one, d, P, c, N * P, beta, oa + gi * Og * Kg * z, Kg)


# the images shared among numba's threads (conv.py: where each image's product is below OpenBLAS's own threading size)
weight_grad_images_par = prange_twin(weight_grad_images)
weight_grad_images = numba.njit(cache=True)(weight_grad_images)
forward_images_par = prange_twin(forward_images.py_func)
