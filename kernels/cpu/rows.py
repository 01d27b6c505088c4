"""Reductions of one row held in a small scratch array: what generated row kernels call after each inner loop.

The generated loop writes the reduced operand of each element to a scratch row (vectorizable: no loop-
carried dependency), then one of these reduces it. Only these small loops get fast-math flags: `reassoc`
lets LLVM vectorize the float64 sums; the max/min loops may assume no NaN (`nnan`) because a separate,
flag-free loop looks for NaN first, so the result propagates NaN exactly as numpy's amax/amin do.
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


@njit(**_MAX)
def _max_no_nan(t, n):
    # 16 running maxima: LLVM does not vectorize a single running max here, but does this (2x faster)
    acc = np.full(16, -np.inf, dtype=t.dtype)
    n16 = n - n % 16
    for c in range(0, n16, 16):
        for k in range(16):
            x = t[c + k]
            acc[k] = x if x > acc[k] else acc[k]
    m = -np.inf
    for k in range(16):
        m = acc[k] if acc[k] > m else m
    for c in range(n16, n):
        m = t[c] if t[c] > m else m
    return m


@njit(**_MAX)
def _min_no_nan(t, n):
    acc = np.full(16, np.inf, dtype=t.dtype)
    n16 = n - n % 16
    for c in range(0, n16, 16):
        for k in range(16):
            x = t[c + k]
            acc[k] = x if x < acc[k] else acc[k]
    m = np.inf
    for k in range(16):
        m = acc[k] if acc[k] < m else m
    for c in range(n16, n):
        m = t[c] if t[c] < m else m
    return m


@njit(**_PLAIN)
def rmax(t, n):
    """max of t[:n] as float64; NaN if any element is NaN, -inf if n == 0."""
    return np.nan if _has_nan(t, n) else float(_max_no_nan(t, n))


@njit(**_PLAIN)
def rmin(t, n):
    """min of t[:n] as float64; NaN if any element is NaN, inf if n == 0."""
    return np.nan if _has_nan(t, n) else float(_min_no_nan(t, n))
