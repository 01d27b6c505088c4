"""Reductions of one row held in a small scratch array: what generated row kernels call after each inner loop.

The generated loop writes the reduced operand of each element to a scratch row (vectorizable: no loop-
carried dependency), then one of these reduces it. Only these small loops get fast-math flags: `reassoc`
lets LLVM vectorize the float64 sums; the max/min loops may assume no NaN (`nnan`) because a separate,
flag-free loop looks for NaN first, so the result propagates NaN exactly as numpy's amax/amin do (softmax's
shift, `rshift`, skips that scan: a NaN reaches the row's sum and every result anyway).
"""
import numpy as np
from numba import njit

_SUM = dict(fastmath={"reassoc"}, nogil=True, cache=True)
_MAX = dict(fastmath={"reassoc", "nnan", "nsz"}, nogil=True, cache=True)
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


@njit(**_PLAIN)
def _has_nan(t, n):
    f = False
    for c in range(n):
        f |= t[c] != t[c]
    return f


@njit(inline="always", **_MAX)
def _hi(a, b):
    return a if a > b else b         # (not builtin max: its overload is one more compilation per dtype)


@njit(inline="always", **_MAX)
def _lo(a, b):
    return a if a < b else b


@njit(**_MAX)
def rshift(t, n):
    """max of t[:n], assuming no NaN (-inf if n == 0): 8 running maxima in registers, which LLVM vectorizes
    (a single running max it does not; maxima kept in an array run 1.5x slower). With a NaN in the row the
    result is unspecified: softmax's shift may use it as it is, since the NaN reaches the row's sum anyway."""
    if n == 0:
        return -np.inf
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = t[0]
    n8 = n - n % 8
    for c in range(0, n8, 8):
        a0, a1, a2, a3 = _hi(a0, t[c]), _hi(a1, t[c + 1]), _hi(a2, t[c + 2]), _hi(a3, t[c + 3])
        a4, a5, a6, a7 = _hi(a4, t[c + 4]), _hi(a5, t[c + 5]), _hi(a6, t[c + 6]), _hi(a7, t[c + 7])
    m = _hi(_hi(_hi(a0, a1), _hi(a2, a3)), _hi(_hi(a4, a5), _hi(a6, a7)))
    for c in range(n8, n):
        m = _hi(m, t[c])
    return m


@njit(**_MAX)
def _min_no_nan(t, n):
    if n == 0:
        return np.inf
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = t[0]
    n8 = n - n % 8
    for c in range(0, n8, 8):
        a0, a1, a2, a3 = _lo(a0, t[c]), _lo(a1, t[c + 1]), _lo(a2, t[c + 2]), _lo(a3, t[c + 3])
        a4, a5, a6, a7 = _lo(a4, t[c + 4]), _lo(a5, t[c + 5]), _lo(a6, t[c + 6]), _lo(a7, t[c + 7])
    m = _lo(_lo(_lo(a0, a1), _lo(a2, a3)), _lo(_lo(a4, a5), _lo(a6, a7)))
    for c in range(n8, n):
        m = _lo(m, t[c])
    return m


@njit(**_PLAIN)
def rmax(t, n):
    """max of t[:n] as float64; NaN if any element is NaN, -inf if n == 0."""
    return np.nan if _has_nan(t, n) else float(rshift(t, n))


@njit(**_PLAIN)
def rmin(t, n):
    """min of t[:n] as float64; NaN if any element is NaN, inf if n == 0."""
    return np.nan if _has_nan(t, n) else float(_min_no_nan(t, n))
