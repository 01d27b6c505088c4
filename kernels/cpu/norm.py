"""Normalizations of the rows of a [N, D] array, each a pass over the rows: layer normalization, softmax and
log_softmax, forward and backward, what eager layer_norm, softmax and log_softmax run (ops/nn_ops.py); and batch
norm's training forward and backward, channel by channel. Row statistics and sums are accumulated in float64."""
import numpy as np
from numba import njit

from .rows import rmax, rsum, rsumsq
from .vmath import vexp, vlog


@njit(nogil=True, cache=True)
def layer_norm_rows(x, w, b, eps, y, mean, rstd):
    """y = (x - mean) * rstd * w + b row by row, with the row's mean and 1 / sqrt(biased variance + eps) written
    to mean[i] and rstd[i]."""
    n, d = x.shape
    for i in range(n):
        row = x[i]
        m = rsum(row, d) / d
        r = 1.0 / np.sqrt(rsumsq(row, d, m) / d + eps)
        for j in range(d):
            y[i, j] = (row[j] - m) * r * w[j] + b[j]
        mean[i] = m
        rstd[i] = r


@njit(nogil=True, cache=True, fastmath={"reassoc"})
def layer_norm_rows_backward(g, x, mean, rstd, w, gx, gw, gb):
    """The gradients of layer_norm_rows: gx = rstd * (g w - mean(g w) - xhat * mean(g w xhat)) with
    xhat = (x - mean) * rstd, gw = the column sums of g * xhat, gb = those of g."""
    n, d = x.shape
    sw = np.zeros(d)
    sb = np.zeros(d)
    for i in range(n):
        m, r = np.float64(mean[i]), np.float64(rstd[i])
        s1 = 0.0
        s2 = 0.0
        for j in range(d):
            xh = (x[i, j] - m) * r
            gj = np.float64(g[i, j])
            gw_ = gj * w[j]
            s1 += gw_
            s2 += gw_ * xh
            sw[j] += gj * xh
            sb[j] += gj
        s1 /= d
        s2 /= d
        for j in range(d):
            xh = (x[i, j] - m) * r
            gx[i, j] = (g[i, j] * w[j] - s1 - xh * s2) * r
    for j in range(d):
        gw[j] = sw[j]
        gb[j] = sb[j]


@njit(nogil=True, cache=True, fastmath={"reassoc"})
def batch_norm_channels(x, w, b, eps, y, mean, var):
    """Training batch norm over (N, C, L) arrays, channel by channel: the channel's mean and biased variance (two
    passes, float64 sums) into mean[c] and var[c], then y = (x - mean) / sqrt(var + eps) * w + b (w, b: size 0
    for none)."""
    N, C, L = x.shape
    cnt = N * L
    for c in range(C):
        s1 = 0.0
        for n in range(N):
            for j in range(L):
                s1 += x[n, c, j]
        m = s1 / cnt
        s2 = 0.0
        for n in range(N):
            for j in range(L):
                d = x[n, c, j] - m
                s2 += d * d
        v = s2 / cnt
        k = 1.0 / np.sqrt(v + eps)
        if w.size:
            k *= w[c]
        o = b[c] - m * k if b.size else -m * k
        for n in range(N):
            for j in range(L):
                y[n, c, j] = x[n, c, j] * k + o
        mean[c] = m
        var[c] = v


@njit(nogil=True, cache=True, fastmath={"reassoc"})
def batch_norm_backward_channels(g, x, mean, invstd, scale, gx, sums):
    """Training batch norm's backward over (N, C, L) arrays, channel by channel: the sums of g and of g * xhat
    (xhat = (x - mean) * invstd) into sums[0] and sums[1], then gx = (g - mean(g) - xhat * mean(g * xhat)) *
    scale, both passes over the channel's N runs of L."""
    N, C, L = x.shape
    cnt = N * L
    for c in range(C):
        m, r = mean[c], invstd[c]
        s1 = 0.0
        s2 = 0.0
        for n in range(N):
            for j in range(L):
                gj = np.float64(g[n, c, j])
                s1 += gj
                s2 += gj * ((x[n, c, j] - m) * r)
        a, b, k = s1 / cnt, s2 / cnt * r, scale[c]
        for n in range(N):
            for j in range(L):
                gx[n, c, j] = (g[n, c, j] - a - (x[n, c, j] - m) * b) * k
        sums[0, c] = s2
        sums[1, c] = s1


@njit(nogil=True, cache=True)
def softmax_rows(x, out):
    """out = exp(x - row max) / row sum, row by row, the shift and exp in the arrays' dtype (a row holding +inf or
    NaN, or only -inf, gives NaN, as PyTorch)."""
    n, d = x.shape
    t = np.zeros(3, x.dtype)    # the row's max, 1 / sum (rmax and rsum give float64) and 0 in the arrays' dtype
    z = t[2]
    for i in range(n):
        row, o = x[i], out[i]
        t[0] = rmax(row, d)
        m = t[0]
        # exp(-inf) = 0 put in by a second loop, not computed: exp's underflow path costs ~2.5x and a causal mask
        # makes half the entries -inf (in one loop LLVM folds the two selects back into exp(-inf))
        for j in range(d):
            v = row[j] - m
            o[j] = vexp(v if v != -np.inf else z)
        for j in range(d):
            o[j] = z if row[j] - m == -np.inf else o[j]
        t[1] = 1.0 / rsum(o, d)
        r = t[1]
        for j in range(d):
            o[j] = o[j] * r     # (times the reciprocal, as PyTorch)


@njit(nogil=True, cache=True, fastmath={"reassoc"})
def softmax_rows_backward(g, y, out):
    """The gradient of softmax_rows given its output y: out = y * (g - the row sum of g * y)."""
    n, d = y.shape
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += np.float64(g[i, j]) * y[i, j]
        for j in range(d):
            out[i, j] = y[i, j] * (g[i, j] - s)


@njit(nogil=True, cache=True, fastmath={"reassoc"})
def log_softmax_rows(x, out):
    """out = (x - row max) - log(row sum of exp(x - row max)), row by row (NaN rows as softmax_rows)."""
    n, d = x.shape
    for i in range(n):
        row, o = x[i], out[i]
        m = rmax(row, d)
        for j in range(d):
            o[j] = row[j] - m
        s = 0.0
        for j in range(d):
            s += vexp(o[j])
        lse = vlog(s)
        for j in range(d):
            o[j] = o[j] - lse


@njit(nogil=True, cache=True, fastmath={"reassoc"})
def log_softmax_rows_backward(g, y, out):
    """The gradient of log_softmax_rows given its output y: out = g - exp(y) * the row sum of g."""
    n, d = y.shape
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += g[i, j]
        for j in range(d):
            out[i, j] = g[i, j] - vexp(y[i, j]) * s
