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
    """The adjoint of im2col: out[n, c, h, w] = sum of the cols entries that `columns` read from there."""
    N, C, H, W = out.shape
    col2im_images(cols.reshape(-1), cols.shape[2], cols.shape[3], kh, kw, sh, sw, ph, pw, dh, dw, out.reshape(-1),
                  C, H, W, 0, N)


@numba.njit(cache=True)
def col2im_images(src, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, o, C, H, W, n0, nb):
    """col2im of the columns `src` (C*kh*kw, nb, OH, OW), flat, into images n0 .. n0+nb of the flat (N, C, H, W)
    `o` (set, not added to). Flat offsets into both arrays, as unsigned integers: numba then checks no negative
    index, and creates no array view per output row (slices of these short rows cost more than the adds: 1.5-1.9x
    slower, from [144, 64, 8, 8] to [576, 32, 56, 56] columns)."""
    o[n0 * C * H * W:(n0 + nb) * C * H * W] = 0
    for c in range(C):
        for i in range(kh):
            hlo, hhi = _tap_range(i * dh - ph, sh, H, OH)
            for j in range(kw):
                row = (c * kh + i) * kw + j
                off = j * dw - pw
                lo, hi = _tap_range(off, sw, W, OW)
                for n in range(n0, n0 + nb):
                    sbase = (row * nb + n - n0) * OH * OW + lo
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
    """cols[(c*kh + i)*kw + j, n, oh, ow] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], 0 in the padding."""
    N, C, H, W = x.shape
    im2col_images(x.reshape(-1), C, H, W, 0, N, kh, kw, sh, sw, ph, pw, dh, dw, cols.reshape(-1), cols.shape[2],
                  cols.shape[3])


@numba.njit(cache=True)
def im2col_images(src, C, H, W, n0, nb, kh, kw, sh, sw, ph, pw, dh, dw, o, OH, OW):
    """im2col of images n0 .. n0+nb of the flat (N, C, H, W) `src` into the flat (C*kh*kw, nb, OH, OW) `o`:
    each output row is a run of zeros, a (strided) copy of one input row, zeros. Flat unsigned offsets as in
    col2im_images. 1.4-1.8x faster than numpy's strided copy out of a padded copy of x, which it replaced (minimum
    of 30 calls, one thread, on an AMD EPYC (LLVM host znver3, AVX2) shared and under load: [144, 64, 16, 16]
    columns 1.38 -> 0.89 ms, [288, 64, 8, 8] 1.26 -> 0.69, [576, 64, 4, 4] 1.15 -> 0.70, stride 2 [144, 64, 8, 8]
    0.57 -> 0.35-0.45).
    Stride 1 with OW == W (a 'same' convolution's rows): one shifted copy of the tap's whole plane (OH*OW entries,
    a vector loop; rows of OW = 16 are too short for LLVM's), then zeros over the taps that wrapped into a
    neighbouring row: [144, 64, 16, 16] 0.97 -> 0.44 ms, [288, 64, 8, 8] 0.70 -> 0.40, [576, 64, 4, 4] 0.67 -> 0.48
    (minimum of 25, same machine; in the traced step, where the columns go to memory, 0.9 -> 0.8)."""
    plane = sh == 1 and sw == 1 and OW == W
    for c in range(C):
        for i in range(kh):
            hlo, hhi = _tap_range(i * dh - ph, sh, H, OH)
            for j in range(kw):
                row = (c * kh + i) * kw + j
                off = j * dw - pw
                lo, hi = _tap_range(off, sw, W, OW)
                for n in range(n0, n0 + nb):
                    dbase = (row * nb + n - n0) * OH * OW
                    sbase = (n * C + c) * H * W + off
                    if plane:
                        a, b = hlo * OW + lo, (hhi - 1) * OW + hi
                        if hhi <= hlo or hi <= lo:
                            a = b = 0
                        for t in range(a):
                            o[np.uint64(dbase + t)] = 0
                        s0 = sbase + (i * dh - ph) * W
                        for t in range(a, b):
                            o[np.uint64(dbase + t)] = src[np.uint64(s0 + t)]
                        for t in range(b, OH * OW):
                            o[np.uint64(dbase + t)] = 0
                        for oh in range(hlo, hhi):        # the taps that wrapped into a neighbouring row
                            for t in range(lo):
                                o[np.uint64(dbase + oh * OW + t)] = 0
                            for t in range(hi, OW):
                                o[np.uint64(dbase + oh * OW + t)] = 0
                        continue
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


def _direct(a, b, check, groups, stride, padding, dilation, kernel, size, channels):
    """Whether convtile.py's direct convolution takes a product of the arrays a and b (`check`: its `direct` or
    `direct_input_grad`; channels: the convolution's (input, output) channels)."""
    return a.dtype == np.float32 and b.dtype == np.float32 and \
        check(a.dtype, groups, tuple(stride), tuple(padding), tuple(dilation), tuple(kernel), tuple(size), channels)


def conv2d_forward(x, w, stride, padding, dilation, groups, bias=None):
    from . import convtile
    out_size = [conv_out_size(x.shape[d], w.shape[d], stride[d - 2], padding[d - 2], dilation[d - 2]) for d in (2, 3)]
    if _direct(x, w, convtile.direct, groups, stride, padding, dilation, w.shape[2:], out_size, w.shape[1::-1]) and \
            (bias is None or bias.dtype == np.float32):
        return convtile.forward(x, w, bias, stride, padding, dilation)
    return forward_from_columns(input_columns(x, w.shape[2], w.shape[3], stride, padding, dilation), w, groups, bias)


# Per-image products (kernels/cpu/convgemm.py) from this many output positions per image (OH*OW) up; 0 takes them
# for every shape (tests), None for none. Measured in the ResNet bench's traced step (batch 64, one thread, AMD EPYC
# znver3, medians of 15 interleaved runs): the input gradient, per image, 16->16 3x3 at 16x16 2.65 -> 1.81 ms,
# 32->32 at 8x8 1.84 -> 1.48, strided 16->32 1.06 -> 0.96 (its columns stay in the cache for col2im, and g is not
# transposed); the weight gradient 32->32 at 8x8 1.23 -> 1.47 (worse: 64-position products), 3->16 at 16x16
# 0.57 -> 0.51; the forward 3->16 at 16x16 0.43 -> 0.37, 16->16 and the 8x8 layers within noise.
CHUNKED_FORWARD = 256
CHUNKED_INPUT_GRAD = 64
CHUNKED_WEIGHT_GRAD = 256


def _blas(dtype):
    """(gemm address, 1, 0): the first arguments of convgemm's kernels."""
    from .blas import gemm_address
    dt = np.dtype(dtype)
    return gemm_address(dt), dt.type(1), dt.type(0)


def _chunked(limit, positions, *arrays):
    """_blas's arguments when `positions` reach `limit`, the arrays share a float32/64 dtype numpy's OpenBLAS has
    a gemm for, and OpenBLAS runs one thread; else None. With more threads OpenBLAS splits each small per-image
    product across them, and the batch's one product is the one that parallelizes (two threads on the shared
    2-core machine, the ResNet step's input gradients: 17.6 ms batched, 52 ms per image)."""
    from .blas import blas_threads, gemm_address
    dt = arrays[0].dtype
    if limit is None or positions < limit or dt not in (np.float32, np.float64) or \
            any(a.dtype != dt for a in arrays) or not gemm_address(dt) or blas_threads() != 1:
        return None
    return _blas(dt)


def _images_on_threads(macs, *arrays):
    """_blas's arguments where numba has several threads and one image's product (`macs` multiply-adds) is below
    OpenBLAS's own threading size (blas.ONE_THREAD_MACS: it runs on the calling thread), so that the images'
    products can be shared among numba's threads; else None. A 1x1 strided 16->32 convolution of 64 16x16 images
    at two threads: the batch's one product (threaded by OpenBLAS) and its transposing copy 0.16-0.22 ms, one
    product per image on one thread 0.11-0.12 (AMD EPYC znver4)."""
    from .blas import ONE_THREAD_MACS, gemm_address
    dt = arrays[0].dtype
    if macs >= ONE_THREAD_MACS or numba.get_num_threads() < 2 or dt not in (np.float32, np.float64) or \
            any(a.dtype != dt for a in arrays) or not gemm_address(dt):
        return None
    return _blas(dt)


def _per_image(serial, twin, threaded, args):
    """One of convgemm's per-image kernels: its prange twin where the images are shared among numba's threads and
    the twin is compiled (in the background, at its first use), else the serial kernel (the same calls: the same
    bits)."""
    kern = serial
    if threaded:
        from tracejit.backends.numba_cpu.workers import when_compiled
        kern = when_compiled(twin, args) or serial
    kern(*args)


def _bias_arg(bias, dtype):
    return np.zeros(0, dtype) if bias is None else np.ascontiguousarray(bias, dtype)


def forward_from_columns(cols, w, groups, bias=None):
    """The convolution's output (N, O, OH, OW) from the input's `columns`."""
    O, Cg, kh, kw = w.shape
    N, OH, OW = cols.shape[1:]
    blas = _chunked(CHUNKED_FORWARD, OH * OW, cols, w)
    threaded = blas is None and N > 1 and _images_on_threads(O // groups * OH * OW * Cg * kh * kw, cols, w)
    if blas is not None or threaded:
        from .convgemm import forward_images, forward_images_par
        out = np.empty((N, O, OH, OW), cols.dtype)
        args = (*(blas or threaded), np.ascontiguousarray(cols), np.ascontiguousarray(w).reshape(O, -1), groups,
                _bias_arg(bias, cols.dtype), out)
        _per_image(forward_images, forward_images_par, threaded, args)
        return out
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
    from . import convtile
    if _direct(g, w, convtile.direct_input_grad, groups, stride, padding, dilation, w.shape[2:], input_shape[2:],
               w.shape[1::-1]):
        return convtile.input_grad(g, w, input_shape, tuple(stride), padding, dilation)
    N, C, H, W = input_shape
    O, Cg, kh, kw = w.shape
    OH, OW = g.shape[2], g.shape[3]
    blas = _chunked(CHUNKED_INPUT_GRAD, OH * OW, g, w)
    if blas is not None:
        from .convgemm import input_grad_images
        out = np.empty(input_shape, g.dtype)
        input_grad_images(*blas, np.ascontiguousarray(g), np.ascontiguousarray(w).reshape(O, -1), groups, kh, kw,
                          stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], out)
        return out
    wt = w.reshape(groups, O // groups, Cg * kh * kw).transpose(0, 2, 1)         # (g, K, Og)
    cols = np.matmul(wt, _grouped_grad(g, groups)).reshape(C * kh * kw, N, OH, OW)
    out = np.empty(input_shape, np.result_type(g.dtype, w.dtype))
    col2im(cols, kh, kw, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], out)
    return out


def conv2d_weight_grad(x, g, weight_shape, stride, padding, dilation, groups):
    from . import convtile
    if _direct(x, g, convtile.direct, groups, stride, padding, dilation, weight_shape[2:], g.shape[2:],
               weight_shape[1::-1]):
        return convtile.weight_grad(x, g, weight_shape, stride, padding, dilation)
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
    blas = _chunked(CHUNKED_WEIGHT_GRAD, OH * OW, cols, g)
    threaded = blas is None and N > 1 and _images_on_threads(O // groups * K * OH * OW, cols, g)
    if blas is not None or threaded:
        from .convgemm import weight_grad_images, weight_grad_images_par
        kmajor = K >= O // groups
        parts = min(N, numba.get_num_threads()) if threaded else 1      # (each part's sum added after, in order)
        out = np.empty((parts, groups, K, O // groups) if kmajor else (parts, groups, O // groups, K), cols.dtype)
        args = (*(blas or threaded), np.ascontiguousarray(cols), np.ascontiguousarray(g), groups, kmajor, out)
        _per_image(weight_grad_images, weight_grad_images_par, threaded, args)
        out = out[0] if parts == 1 else out.sum(0)
        return np.ascontiguousarray(out.transpose(0, 2, 1) if kmajor else out).reshape(weight_shape)
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
