"""tanh and sigmoid without a division, A/B against vmath's: both compute g = 1/d (d = 1 + h) and then correct it
by its exact residual (1 - g*d, one FMA), which squares g's relative error. So g may come from a seed of the
exponent bits (K - bits(d), ~4 bits) and two Newton steps (4 FMAs, ~16 bits) instead of a divide: the correction
brings it to float32's precision. Whether that is faster depends on the CPU's divider (a 512-bit vdivps is slow
on Intel cores). This script checks the variants' accuracy (max ulp against float64 over 4M points, special
values) and times ten rounds of u(x * 0.7 + 0.2) on 1M floats, one thread, alternated, medians in ns/el/op.

    python benches/bench_vmath_recip.py [--rounds 25]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import llvmlite.binding as ll  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, types  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from tracejit.backends.numba_cpu import codegen  # noqa: E402
from tracejit.kernels.cpu import vmath as V  # noqa: E402

_K = 0x7EF311C3      # bits(1/d) ~ K - bits(d) for normal d > 0: relative error < 12.5%


@intrinsic
def _recip_seed(typingctx, d):
    if d != types.float32:
        return None

    def codegen_(context, builder, sig, args):
        i32 = ir.IntType(32)
        bits = builder.sub(ir.Constant(i32, _K), builder.bitcast(args[0], i32))
        return builder.bitcast(bits, ir.FloatType())
    return types.float32(d), codegen_


@njit(fastmath={"contract"}, error_model="numpy", forceinline=True)
def _recip(d):
    """~1/d to ~14 bits: the exponent seed and two Newton steps y += y * (1 - d*y)."""
    y = _recip_seed(d)
    y = y + y * (V._F_1 - d * y)
    return y + y * (V._F_1 - d * y)


@njit(fastmath={"contract"}, error_model="numpy", forceinline=True)
def tanh_nr(x):
    a = V._fabs(x)
    a = V._F_TANH_HI if a > V._F_TANH_HI else a
    a2 = a + a
    t = a2 * V._F_LOG2E + V._F_TANH_RND
    n = t - V._F_TANH_RND
    q = V._expm1_poly_f32(a2 - n * V._F_LN2)
    s = V._pow2_rounded(t)
    h = q * s + (s - V._F_HALF)
    d = h + V._F_1
    g = _recip(d)
    g = g + V._residual_f32(V._F_1 - g, g, h) * g       # (one more exact-residual step: g to ~28 bits)
    omg = V._F_1 - g
    res = V._residual_f32(omg, g, h)
    return V._or_sign(omg - res * g, x)


@njit(fastmath={"contract"}, error_model="numpy", forceinline=True)
def sigmoid_nr(x):
    e = V._exp_nonpos_f32(-V._fabs(x))
    g = _recip(V._F_1 + e)
    g = g + V._residual_f32(V._F_1 - g, g, e) * g
    omg = V._F_1 - g
    res = V._residual_f32(omg, g, e)
    return res * V._xor_sign(g, x) + V._sign_select(x, g, omg)


K0, K1 = np.float32(0.7), np.float32(0.2)


def _chain(u):
    @njit(error_model="numpy", nogil=True)
    def chain(x, w):
        """Ten rounds per tile of 1024 floats (in L1), one short loop per round: the code generator's stages."""
        for lo in range(0, x.size, 1024):
            m = min(1024, x.size - lo)
            for i in range(m):
                w[np.uint64(lo + i)] = u(x[np.uint64(lo + i)] * K0 + K1)
            for _ in range(9):
                for i in range(m):
                    w[np.uint64(lo + i)] = u(w[np.uint64(lo + i)] * K0 + K1)
    return chain


def _apply(u):
    @njit(error_model="numpy", nogil=True)
    def apply(x, w):
        for i in range(x.size):
            w[i] = u(x[i])
    return apply


def _ulp(y, ref):
    r32 = ref.astype(np.float32)
    fin = np.isfinite(r32) & (r32 != 0)
    sp = np.spacing(np.abs(r32[fin])).astype(np.float64)
    same = np.array_equal(np.isnan(y), np.isnan(r32)) and np.array_equal(y[~fin], r32[~fin], equal_nan=True) and \
        np.array_equal(np.signbit(y[r32 == 0]), np.signbit(r32[r32 == 0]))
    return float((np.abs(y[fin].astype(np.float64) - ref[fin]) / sp).max()), same


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=25)
    a = p.parse_args()
    H.pin_threads(1)
    ic = codegen.interleave()
    ll.set_option("", f"-force-vector-interleave={ic}")         # as the code generator compiles such loops
    print(H.machine_line(H.machine()), f"interleave {ic}")
    rng = np.random.default_rng(1)
    xs = np.concatenate([np.linspace(-110, 30, 3_000_000, dtype=np.float32),
                         rng.standard_normal(1_000_000).astype(np.float32) * 8,
                         np.array([0, -0.0, np.inf, -np.inf, np.nan, -88, -87.3, -103, 1e-30, -1e-30, 9.1, -9.1],
                                  np.float32)])
    x64 = xs.astype(np.float64)
    with np.errstate(over="ignore"):
        refs = {"tanh": np.tanh(x64), "sigmoid": 1 / (1 + np.exp(-x64))}
    fns = {("tanh", "vmath"): V.tanh_f32, ("tanh", "newton"): tanh_nr,
           ("sigmoid", "vmath"): V.sigmoid_f32, ("sigmoid", "newton"): sigmoid_nr}
    x = rng.standard_normal(1 << 20).astype(np.float32)
    chains, outs = {}, {}
    for (name, kind), u in fns.items():
        w = np.empty_like(xs)
        _apply(u)(xs, w)
        err, same = _ulp(w, refs[name])
        print(f"{name:8} {kind:7} max {err:.3f} ulp, special values {'as numpy' if same else 'DIFFER'}")
        c = _chain(u)
        outs[name, kind] = np.empty_like(x)
        c(x, outs[name, kind])
        chains[name, kind] = c
    for name in ("tanh", "sigmoid"):
        np.testing.assert_allclose(outs[name, "newton"], outs[name, "vmath"], rtol=3e-6, atol=1e-7)
    ts = {k: [] for k in chains}
    w = np.empty_like(x)
    for _ in range(a.rounds):
        for k, c in chains.items():
            t = time.perf_counter()
            c(x, w)
            ts[k].append(time.perf_counter() - t)
    for k, v in ts.items():
        print(f"{k[0]:8} {k[1]:7} min {min(v) / x.size / 10 * 1e9:.3f} median {np.median(v) / x.size / 10 * 1e9:.3f} "
              f"ns/el/op")


if __name__ == "__main__":
    main()
