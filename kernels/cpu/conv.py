"""Convolution gather/scatter: im2col (`columns`: forward, weight gradient) and col2im (input gradient).

A convolution is computed as one BLAS matrix product per group over a column matrix
`cols[C*kh*kw, N, OH, OW]`, where row (c, i, j) holds input channel c shifted by kernel tap (i, j) for
every output position (zero where the tap falls into the padding). Channel-major rows make the groups
contiguous blocks of rows, and the (N, OH, OW) columns make one product cover the whole batch.
"""
import numba
import numpy as np


@numba.njit(cache=True)
def _tap_range(off, s, size, O):
    """The output positions o in [lo, hi) whose input position o*s + off lies inside [0, size)."""
    lo = 0
    while lo < O and lo * s + off < 0:
        lo += 1
    hi = O
    while hi > lo and (hi - 1) * s + off >= size:
        hi -= 1
    return lo, hi


@numba.njit(cache=True)
def col2im(cols, kh, kw, sh, sw, ph, pw, dh, dw, out):
    """The adjoint of im2col: out[n, c, h, w] = sum of the cols entries that `columns` read from there.
    Flat offsets into both arrays, as unsigned integers: numba then checks no negative index, and creates no
    array view per output row (slices of these short rows cost more than the adds: 1.5-1.9x slower, from
    [144, 64, 8, 8] to [576, 32, 56, 56] columns)."""
    N, C, H, W = out.shape
    OH, OW = cols.shape[2], cols.shape[3]
    o = out.reshape(-1)
    src = cols.reshape(-1)
    o[:] = 0
    for c in range(C):
        for i in range(kh):
            hlo, hhi = _tap_range(i * dh - ph, sh, H, OH)
            for j in range(kw):
                row = (c * kh + i) * kw + j
                off = j * dw - pw
                lo, hi = _tap_range(off, sw, W, OW)
                for n in range(N):
                    sbase = (row * N + n) * OH * OW + lo
                    dbase = (n * C + c) * H * W + lo * sw + off
                    for oh in range(hlo, hhi):
                        s0 = sbase + oh * OW
                        d0 = dbase + (oh * sh - ph + i * dh) * W
                        for t in range(hi - lo):
                            o[np.uint64(d0 + t * sw)] += src[np.uint64(s0 + t)]


def conv_out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@numba.njit(cache=True)
def im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, cols):
    """cols[(c*kh + i)*kw + j, n, oh, ow] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], 0 in the padding:
    each output row is a run of zeros, a (strided) copy of one input row, zeros. Flat unsigned offsets as in
    col2im. 1.4-1.8x faster than numpy's strided copy out of a padded copy of x, which it replaced (minimum of
    30 calls, one thread, on an AMD EPYC (LLVM host znver3, AVX2) shared and under load: [144, 64, 16, 16] columns
    1.38 -> 0.89 ms, [288, 64, 8, 8] 1.26 -> 0.69, [576, 64, 4, 4] 1.15 -> 0.70, stride 2 [144, 64, 8, 8] 0.57 ->
    0.35-0.45)."""
    N, C, H, W = x.shape
    OH, OW = cols.shape[2], cols.shape[3]
    src = x.reshape(-1)
    o = cols.reshape(-1)
    for c in range(C):
        for i in range(kh):
            hlo, hhi = _tap_range(i * dh - ph, sh, H, OH)
            for j in range(kw):
                row = (c * kh + i) * kw + j
                off = j * dw - pw
                lo, hi = _tap_range(off, sw, W, OW)
                for n in range(N):
                    dbase = (row * N + n) * OH * OW
                    sbase = (n * C + c) * H * W + off
                    for oh in range(OH):
                        d0 = dbase + oh * OW
                        if oh < hlo or oh >= hhi:
                            for t in range(OW):
                                o[np.uint64(d0 + t)] = 0
                            continue
                        s0 = sbase + (oh * sh - ph + i * dh) * W
                        for t in range(lo):
                            o[np.uint64(d0 + t)] = 0
                        for t in range(lo, hi):
                            o[np.uint64(d0 + t)] = src[np.uint64(s0 + t * sw)]
                        for t in range(hi, OW):
                            o[np.uint64(d0 + t)] = 0


def columns(x, kh, kw, stride, padding, dilation, OH, OW):
    """im2col: a fresh (C*kh*kw, N, OH, OW) array (see `im2col`) of a C-contiguous copy of x."""
    N, C, H, W = x.shape
    cols = np.empty((C * kh * kw, N, OH, OW), x.dtype)
    im2col(np.ascontiguousarray(x), kh, kw, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1],
           cols)
    return cols


@numba.njit(cache=True)
def nchw_bias(prod, bias, out):
    """out[n, o] = prod[o, n] + bias[o]: the product's (O, N, OH*OW) layout to (N, O, OH*OW), adding the
    bias on the way (one pass instead of a transposing copy and a broadcast add)."""
    O, N, L = prod.shape
    for n in range(N):
        for o in range(O):
            b = bias[o]
            src = prod[o, n]
            dst = out[n, o]
            for k in range(L):
                dst[k] = src[k] + b


def input_columns(x, kh, kw, stride, padding, dilation):
    """`columns` of x for a kh x kw kernel: (C*kh*kw, N, OH, OW)."""
    OH = conv_out_size(x.shape[2], kh, stride[0], padding[0], dilation[0])
    OW = conv_out_size(x.shape[3], kw, stride[1], padding[1], dilation[1])
    return columns(x, kh, kw, stride, padding, dilation, OH, OW)


def conv2d_forward(x, w, stride, padding, dilation, groups, bias=None):
    return forward_from_columns(input_columns(x, w.shape[2], w.shape[3], stride, padding, dilation), w, groups, bias)


def forward_from_columns(cols, w, groups, bias=None):
    """The convolution's output (N, O, OH, OW) from the input's `columns`."""
    O, Cg, kh, kw = w.shape
    N, OH, OW = cols.shape[1:]
    cols = cols.reshape(groups, Cg * kh * kw, N * OH * OW)
    prod = np.matmul(w.reshape(groups, O // groups, Cg * kh * kw), cols)         # (g, Og, N*OH*OW)
    if bias is None:
        return np.ascontiguousarray(prod.reshape(O, N, OH, OW).transpose(1, 0, 2, 3))
    out = np.empty((N, O, OH, OW), prod.dtype)
    nchw_bias(prod.reshape(O, N, OH * OW), bias.astype(prod.dtype, copy=False), out.reshape(N, O, OH * OW))
    return out


def _grouped_grad(g, groups):
    N, O, OH, OW = g.shape
    return np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, O // groups, N * OH * OW)


def conv2d_input_grad(g, w, input_shape, stride, padding, dilation, groups):
    N, C, H, W = input_shape
    O, Cg, kh, kw = w.shape
    OH, OW = g.shape[2], g.shape[3]
    wt = w.reshape(groups, O // groups, Cg * kh * kw).transpose(0, 2, 1)         # (g, K, Og)
    cols = np.matmul(wt, _grouped_grad(g, groups)).reshape(C * kh * kw, N, OH, OW)
    out = np.empty(input_shape, np.result_type(g.dtype, w.dtype))
    col2im(cols, kh, kw, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], out)
    return out


def conv2d_weight_grad(x, g, weight_shape, stride, padding, dilation, groups):
    kh, kw = weight_shape[2:]
    return weight_grad_from_columns(columns(x, kh, kw, stride, padding, dilation, g.shape[2], g.shape[3]), g,
                                    weight_shape, groups)


WGRAD_CHUNK = 4096            # positions per partial product of a small weight gradient (see below)


def weight_grad_from_columns(cols, g, weight_shape, groups):
    """The weight gradient from the input's `columns` and the output gradient g: (Og, M) @ (M, K) per group,
    a product with a small result and a long reduction (M = N*OH*OW). OpenBLAS (this machine) runs it fastest
    with the larger of K and Og as the rows of the result, and, for a small result, summed over chunks of 4096
    positions: the CNN bench's first layer (16 x 9 from 16384 positions, chunked) 192 -> 87 us on one thread,
    253 -> 116 on two; its second (32 x 144 from 4096, not chunked: chunks gave nothing on one thread)
    602 -> 396 us, 554 -> 329. The 1024-value limit for chunks lies between those two measured shapes."""
    O, Cg, kh, kw = weight_shape
    N, OH, OW = cols.shape[1:]
    K, M = Cg * kh * kw, N * OH * OW
    cols = cols.reshape(groups, K, M)
    gg = _grouped_grad(g, groups)                                                # (g, Og, M)
    a, b = (cols, gg) if K >= O // groups else (gg, cols)
    step = WGRAD_CHUNK if K * (O // groups) <= 1024 else M
    dw = np.matmul(a[:, :, :step], b[:, :, :step].transpose(0, 2, 1))
    for i in range(step, M, step):
        dw += np.matmul(a[:, :, i:i + step], b[:, :, i:i + step].transpose(0, 2, 1))
    if a is cols:
        dw = dw.transpose(0, 2, 1)                                               # (g, Og, K)
    return np.ascontiguousarray(dw).reshape(weight_shape)
