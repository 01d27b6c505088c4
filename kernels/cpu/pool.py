"""Pooling kernels over (N, C, H, W) arrays: max (with argmax indices), average, adaptive average, and
their backward scatters. Indices are flat positions in the H*W plane, as PyTorch returns them."""
import math

import numba
import numpy as np


@numba.njit(cache=True)
def max_pool2d(x, kh, kw, sh, sw, ph, pw, dh, dw, out, idx):
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for n in range(N):
        for c in range(C):
            plane = x[n, c]
            for oh in range(OH):
                h0 = oh * sh - ph
                h1 = min(h0 + (kh - 1) * dh + 1, H)
                while h0 < 0:
                    h0 += dh
                for ow in range(OW):
                    w0 = ow * sw - pw
                    w1 = min(w0 + (kw - 1) * dw + 1, W)
                    while w0 < 0:
                        w0 += dw
                    # PyTorch's rule: NaN wins, ties keep the first position
                    best = -np.inf
                    bi = h0 * W + w0
                    for h in range(h0, h1, dh):
                        for w in range(w0, w1, dw):
                            v = plane[h, w]
                            if v > best or math.isnan(v):
                                best = v
                                bi = h * W + w
                    out[n, c, oh, ow] = best
                    idx[n, c, oh, ow] = bi


@numba.njit(cache=True)
def max_pool2d_2x2(x, out, idx):
    """max_pool2d's most common form (2x2 windows, stride 2, no padding or dilation, no partial windows)
    unrolled: the general kernel's loops over runtime window sizes cost several times more."""
    W = x.shape[3]
    N, C, OH, OW = out.shape
    for n in range(N):
        for c in range(C):
            for oh in range(OH):
                r0 = x[n, c, 2 * oh]
                r1 = x[n, c, 2 * oh + 1]
                k0 = 2 * oh * W
                for ow in range(OW):
                    w = 2 * ow
                    # the general kernel's rule, in the same order: NaN wins, ties keep the first position
                    best, bi = r0[w], k0 + w
                    v = r0[w + 1]
                    if v > best or v != v:
                        best, bi = v, k0 + w + 1
                    v = r1[w]
                    if v > best or v != v:
                        best, bi = v, k0 + W + w
                    v = r1[w + 1]
                    if v > best or v != v:
                        best, bi = v, k0 + W + w + 1
                    out[n, c, oh, ow] = best
                    idx[n, c, oh, ow] = bi


@numba.njit(cache=True)
def max_pool2d_backward(g, idx, out):
    """out[n, c].flat[idx[n, c, oh, ow]] += g[n, c, oh, ow] (out is (N, C, H*W), zeroed here)."""
    N, C, OH, OW = g.shape
    HW = out.shape[2]
    for n in range(N):
        for c in range(C):
            dst = out[n, c]
            for k in range(HW):
                dst[k] = 0
            for oh in range(OH):
                for ow in range(OW):
                    k = idx[n, c, oh, ow]
                    if k >= 0:
                        dst[k] += g[n, c, oh, ow]


@numba.njit(cache=True)
def _avg_window(o, s, p, k, size):
    """(start, end, padded size) of a pooling window, clipped to the input (PyTorch's rule)."""
    start = o * s - p
    end = min(start + k, size + p)
    padded = end - start
    return max(start, 0), min(end, size), padded


@numba.njit(cache=True)
def avg_pool2d(x, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, out):
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for oh in range(OH):
        h0, h1, hp = _avg_window(oh, sh, ph, kh, H)
        for ow in range(OW):
            w0, w1, wp = _avg_window(ow, sw, pw, kw, W)
            if divisor > 0:
                d = divisor
            elif count_include_pad:
                d = hp * wp
            else:
                d = (h1 - h0) * (w1 - w0)
            for n in range(N):
                for c in range(C):
                    acc = 0.0
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            acc += x[n, c, h, w]
                    out[n, c, oh, ow] = acc / d


@numba.njit(cache=True)
def avg_pool2d_backward(g, kh, kw, sh, sw, ph, pw, count_include_pad, divisor, out):
    N, C, H, W = out.shape
    OH, OW = g.shape[2], g.shape[3]
    for n in range(N):
        for c in range(C):
            for h in range(H):
                for w in range(W):
                    out[n, c, h, w] = 0
    for oh in range(OH):
        h0, h1, hp = _avg_window(oh, sh, ph, kh, H)
        for ow in range(OW):
            w0, w1, wp = _avg_window(ow, sw, pw, kw, W)
            if divisor > 0:
                d = divisor
            elif count_include_pad:
                d = hp * wp
            else:
                d = (h1 - h0) * (w1 - w0)
            for n in range(N):
                for c in range(C):
                    v = g[n, c, oh, ow] / d
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            out[n, c, h, w] += v


@numba.njit(cache=True)
def _adaptive_range(o, osize, isize):
    return (o * isize) // osize, -((-(o + 1) * isize) // osize)


@numba.njit(cache=True)
def adaptive_avg_pool2d(x, out):
    """out (N, C, OH, OW) = the means of x's (N, C, H, W) windows, each summed in float64 in the order (h, w). The
    channels run innermost, C sums at once: one sum's chain of dependent adds at a time (its latency) made the
    ResNet bench's global pooling (64x64x4x4) 0.062 ms, now 0.024 (one thread, AMD EPYC znver4; the same bits)."""
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    acc = np.empty(C)
    for n in range(N):
        for oh in range(OH):
            h0, h1 = _adaptive_range(oh, OH, H)
            for ow in range(OW):
                w0, w1 = _adaptive_range(ow, OW, W)
                d = (h1 - h0) * (w1 - w0)
                acc[:] = 0.0
                for h in range(h0, h1):
                    for w in range(w0, w1):
                        for c in range(C):
                            acc[c] += x[n, c, h, w]
                for c in range(C):
                    out[n, c, oh, ow] = acc[c] / d


@numba.njit(cache=True)
def adaptive_avg_pool2d_backward(g, out):
    """out (N, C, H, W) = each window's share of g (N, C, OH, OW), added where windows overlap; where they tile
    the input (OH divides H, OW divides W) each element is written once, without zeroing and adding, in runs
    (global pooling's 64x64x4x4: 0.071 -> 0.048 ms, one thread, AMD EPYC znver4; the same bits)."""
    N, C, H, W = out.shape
    OH, OW = g.shape[2], g.shape[3]
    if H % OH == 0 and W % OW == 0:
        kh, kw = H // OH, W // OW
        d = kh * kw
        flat = out.reshape(-1)
        run, runs = (kh * W, 1) if OW == 1 else (kw, kh)      # a window's contiguous runs of elements
        for n in range(N):
            for c in range(C):
                for oh in range(OH):
                    for ow in range(OW):
                        v = g[n, c, oh, ow] / d
                        for r in range(runs):
                            b = ((n * C + c) * H + oh * kh + r) * W + ow * kw
                            for t in range(run):
                                flat[b + t] = v
        return
    for n in range(N):
        for c in range(C):
            for h in range(H):
                for w in range(W):
                    out[n, c, h, w] = 0
    for oh in range(OH):
        h0, h1 = _adaptive_range(oh, OH, H)
        for ow in range(OW):
            w0, w1 = _adaptive_range(ow, OW, W)
            d = (h1 - h0) * (w1 - w0)
            for n in range(N):
                for c in range(C):
                    v = g[n, c, oh, ow] / d
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            out[n, c, h, w] += v


def pool_out_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape: a last window must start inside the input or its left padding."""
    num = size + 2 * p - d * (k - 1) - 1 + ((s - 1) if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out
