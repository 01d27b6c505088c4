"""Benchmark kernels.cpu.vmath against numpy and against numba + libm.

For exp, tanh, sigmoid and log on N float32 values (default 4M) it times

* numpy      : the ufunc(s) writing into a preallocated output (``out=``;
               sigmoid as 4 in-place ufunc calls)
* numba-libm : an njit loop calling ``math.exp`` / ``math.tanh`` / ``math.log``
               (scalar libm calls: the pip llvmlite has no SVML)
* numba-vmath: the same loop calling ``vmath.vexp`` / ``vmath.vtanh`` / ...

after checking that the three results agree, and prints the median time of
each (over --repeat runs) and the ratios numpy/vmath and libm/vmath.

Usage:  python benches/bench_vmath.py [--n 4194304] [--repeat 21]
                                      [--dtype float32|float64]
"""

import argparse
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from numba import njit  # noqa: E402

from kernels.cpu import vmath  # noqa: E402


def make_kernels(dtype):
    one = dtype(1.0)

    @njit(error_model="numpy")
    def libm_exp(x, out):
        for i in range(x.size):
            out[i] = math.exp(x[i])

    @njit(error_model="numpy")
    def libm_tanh(x, out):
        for i in range(x.size):
            out[i] = math.tanh(x[i])

    @njit(error_model="numpy")
    def libm_sigmoid(x, out):
        for i in range(x.size):
            out[i] = one / (one + math.exp(-x[i]))

    @njit(error_model="numpy")
    def libm_log(x, out):
        for i in range(x.size):
            out[i] = math.log(x[i])

    @njit(error_model="numpy")
    def vm_exp(x, out):
        for i in range(x.size):
            out[i] = vmath.vexp(x[i])

    @njit(error_model="numpy")
    def vm_tanh(x, out):
        for i in range(x.size):
            out[i] = vmath.vtanh(x[i])

    @njit(error_model="numpy")
    def vm_sigmoid(x, out):
        for i in range(x.size):
            out[i] = vmath.vsigmoid(x[i])

    @njit(error_model="numpy")
    def vm_log(x, out):
        for i in range(x.size):
            out[i] = vmath.vlog(x[i])

    def np_exp(x, out):
        np.exp(x, out=out)

    def np_tanh(x, out):
        np.tanh(x, out=out)

    def np_sigmoid(x, out):
        np.negative(x, out=out)
        np.exp(out, out=out)
        np.add(out, one, out=out)
        np.reciprocal(out, out=out)

    def np_log(x, out):
        np.log(x, out=out)

    return {
        "exp": (np_exp, libm_exp, vm_exp),
        "tanh": (np_tanh, libm_tanh, vm_tanh),
        "sigmoid": (np_sigmoid, libm_sigmoid, vm_sigmoid),
        "log": (np_log, libm_log, vm_log),
    }


def inputs(op, n, dtype, rng):
    if op == "log":
        return np.exp(rng.uniform(-20, 20, n)).astype(dtype)
    return rng.uniform(-10, 10, n).astype(dtype)


def max_ulp(a, b):
    """max distance between two same-dtype arrays in units of b's spacing"""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(np.max(np.abs(a64 - b64) / np.spacing(np.abs(b))
                        .astype(np.float64)))


def median_time(fn, x, out, repeat):
    fn(x, out)  # warm up (and compile)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(x, out)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--dtype", default="float32",
                    choices=["float32", "float64"])
    args = ap.parse_args()
    dtype = np.dtype(args.dtype).type
    rng = np.random.default_rng(0)
    kernels = make_kernels(dtype)
    tol = 4.0  # ulps; numpy's own float32 SIMD exp/log are up to ~3.5 ulp off

    print(f"vmath bench: n={args.n} {args.dtype}, median of {args.repeat} "
          f"runs, numba {__import__('numba').__version__}, "
          f"numpy {np.__version__}")
    hdr = (f"{'op':8s} {'numpy ms':>9s} {'libm ms':>9s} {'vmath ms':>9s}"
           f" {'numpy/vmath':>12s} {'libm/vmath':>11s}"
           f" {'ulp(vm,np)':>11s} {'ulp(libm,np)':>13s}")
    print(hdr)
    print("-" * len(hdr))
    for op, (f_np, f_libm, f_vm) in kernels.items():
        x = inputs(op, args.n, dtype, rng)
        outs = [np.empty_like(x) for _ in range(3)]
        for f, o in zip((f_np, f_libm, f_vm), outs):
            f(x, o)
        u_vm = max_ulp(outs[2], outs[0])
        u_libm = max_ulp(outs[1], outs[0])
        if not (u_vm <= tol and u_libm <= tol):
            raise SystemExit(f"{op}: results disagree (vmath vs numpy "
                             f"{u_vm} ulp, libm vs numpy {u_libm} ulp)")
        t_np, t_libm, t_vm = (median_time(f, x, o, args.repeat)
                              for f, o in zip((f_np, f_libm, f_vm), outs))
        print(f"{op:8s} {t_np * 1e3:9.2f} {t_libm * 1e3:9.2f} "
              f"{t_vm * 1e3:9.2f} {t_np / t_vm:12.2f} {t_libm / t_vm:11.2f}"
              f" {u_vm:11.2f} {u_libm:13.2f}")


if __name__ == "__main__":
    main()
