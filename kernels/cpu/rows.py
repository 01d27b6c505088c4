"""Reductions of one row held in a small scratch array: what generated row kernels call after each inner loop.

The generated loop writes the reduced operand of each element to a scratch row (vectorizable: no loop-
carried dependency), then one of these reduces it. Only the sums get a fast-math flag: `reassoc` lets LLVM
vectorize them in float64; max and min need none (below).
"""
import numpy as np
from numba import njit

from .vmath import llvm_float_intrinsic

_SUM = dict(fastmath={"reassoc"}, nogil=True, cache=True)
_PLAIN = dict(nogil=True, cache=True)


@njit(**_SUM)
def rsum(t, n):
    """sum of t[:n], accumulated in float64."""
    s = 0.0
    for c in range(n):
        s += t[c]
    return s


@njit(**_SUM)
def rsumsq(t, n, m):
    """sum of (t[c] - m)**2 over t[:n], in float64 (the second pass of a variance)."""
    s = 0.0
    for c in range(n):
        d = t[c] - m
        s += d * d
    return s


# LLVM's IEEE 754-2019 maximum/minimum: NaN if either operand is NaN (numpy's amax/amin), -0.0 < +0.0, and a
# running reduction of them vectorizes with no fast-math flags. A compare-and-select running max does not
# (numba puts no flags on the select), not even unrolled by hand into 8 maxima: 2.4x slower on a 4096x1024
# float32 softmax's shift (1.53 vs 0.64 ms, one thread), plus a separate NaN scan for amax.
rmaximum = llvm_float_intrinsic("llvm.maximum", 2)       # (generated softmax loops call it too)
_minimum = llvm_float_intrinsic("llvm.minimum", 2)


@njit(**_PLAIN)
def rmax(t, n):
    """max of t[:n] as float64; NaN if any element is NaN, -inf if n == 0. One vectorized pass."""
    if n == 0:
        return -np.inf
    m = t[0]
    for c in range(1, n):
        m = rmaximum(m, t[c])
    return m


@njit(**_PLAIN)
def rmin(t, n):
    """min of t[:n] as float64; NaN if any element is NaN, inf if n == 0."""
    if n == 0:
        return np.inf
    m = t[0]
    for c in range(1, n):
        m = _minimum(m, t[c])
    return m
