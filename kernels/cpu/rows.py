"""Reductions of one row held in a small scratch array: what generated row kernels call after each inner loop.

The generated loop writes the reduced operand of each element to a scratch row (vectorizable: no loop-
carried dependency), then one of these reduces it. Only the sums get a fast-math flag: `reassoc` lets LLVM
vectorize them in float64; max and min need none (below).
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

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


def _prefetcher(write, locality):
    @intrinsic
    def fetch(typingctx, a, i):
        if not isinstance(a, types.Array) or a.ndim != 1 or not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fn = builder.module.declare_intrinsic("llvm.prefetch", [ptr.type],
                                                  ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]))
            builder.call(fn, [ptr, i32(write), i32(locality), i32(1)])          # (1: data, not code)
            return context.get_dummy_value()
        return types.none(a, i), codegen
    return fetch


# prefetch_l2(a, i) asks the core to fetch the cache line of a[i] (a 1-d array) into its outer cache levels, for
# reading in a few microseconds (not displacing what is in use now); no effect on the result. Row kernels over
# segments (a batch-norm's channel: one segment per image, far apart in memory) fetch the segment after next while
# they work on one: each new segment started a new stream the hardware prefetcher needed a few lines to follow.
# prefetch_write: a line about to be written (fetched without a shared copy).
prefetch_l2, prefetch_write = _prefetcher(0, 2), _prefetcher(1, 2)
