"""Benchmark tracejit.kernels.cpu.vmath against numpy and against numba + libm.

For exp, tanh, sigmoid and log on N float32 values (default 4M) it times

* numpy      : the ufunc(s) writing into a preallocated output (``out=``;
               sigmoid as 4 in-place ufunc calls)
* numba-libm : an njit loop calling ``math.exp`` / ``math.tanh`` / ``math.log``
               (scalar libm calls: the pip llvmlite has no SVML)
* numba-vmath: the same loop calling ``vmath.vexp`` / ``vmath.vtanh`` / ...

after checking that the three results agree, and prints the median time of
each (over --repeat runs, in ns per element) and the ratios numpy/vmath and libm/vmath.

Usage:  python benches/bench_vmath.py [--n 4194304] [--repeat 21]
                                      [--dtype float32|float64] [--cpu-time]
                                      [--isa 512,256,128]

The header names the vector instruction set the loops are compiled for (tracejit.kernels.cpu.vector_info()).
``--isa`` runs the benchmark once per TRACEJIT_VECTOR_BITS value the CPU has (512: AVX-512, 256: AVX2,
128: SSE4.2), each in its own process. ``--cpu-time`` times by the process's CPU time (a shared machine's waits
for a core not counted); ``--n 16384`` keeps the data in L1/L2 (compute, not memory, is timed).
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

from tracejit.kernels.cpu import vmath  # noqa: E402


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


CLOCK = [time.perf_counter]


def median_time(fn, x, out, repeat):
    fn(x, out)  # warm up (and compile)
    clock = CLOCK[0]
    loops = max(1, (1 << 22) // x.size)       # small n: several calls per sample
    ts = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(loops):
            fn(x, out)
        ts.append((clock() - t0) / loops)
    return float(np.median(ts))


def per_isa(isas):
    """This benchmark once per TRACEJIT_VECTOR_BITS value the host has, each in a fresh process."""
    import subprocess
    import llvmlite.binding as ll
    have = ll.get_host_cpu_features().flatten().split(",")
    need = {"512": "+avx512f", "256": "+avx2", "128": "+sse4.2"}
    argv = [a for i, a in enumerate(sys.argv[1:]) if a != "--isa" and not a.startswith("--isa=")
            and (i == 0 or sys.argv[i] != "--isa")]       # (a child given --isa would start children again)
    for bits in isas:
        if need.get(bits) not in have:
            print(f"TRACEJIT_VECTOR_BITS={bits}: this CPU has no {need.get(bits, '?')[1:]}: skipped\n")
            continue
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_CPU", "TRACEJIT_VECTOR"))}
        env["TRACEJIT_VECTOR_BITS"] = bits
        subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, env=env, check=True)
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--dtype", default="float32",
                    choices=["float32", "float64"])
    ap.add_argument("--cpu-time", action="store_true", help="time by the process's CPU time")
    ap.add_argument("--isa", default=None, help="comma-separated TRACEJIT_VECTOR_BITS values: one run each")
    args = ap.parse_args()
    if args.isa:
        return per_isa(args.isa.split(","))
    if args.cpu_time:
        CLOCK[0] = time.process_time
    dtype = np.dtype(args.dtype).type
    rng = np.random.default_rng(0)
    kernels = make_kernels(dtype)
    tol = 4.0  # ulps; numpy's own float32 SIMD exp/log are up to ~3.5 ulp off

    from tracejit.kernels.cpu import vector_info
    vi = vector_info()
    print(f"vmath bench: n={args.n} {args.dtype}, median of {args.repeat} "
          f"runs ({'CPU' if args.cpu_time else 'wall'} time), numba {__import__('numba').__version__}, "
          f"numpy {np.__version__}; LLVM host CPU {vi['llvm_cpu']}, {vi['isa']} {vi['vector_bits']}-bit vectors")
    hdr = (f"{'op':8s} {'numpy':>9s} {'libm':>9s} {'vmath':>9s}"
           f" {'numpy/vmath':>12s} {'libm/vmath':>11s}"
           f" {'ulp(vm,np)':>11s} {'ulp(libm,np)':>13s}")
    print("times: ns per element")
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
        ns = 1e9 / args.n           # per element
        print(f"{op:8s} {t_np * ns:9.3f} {t_libm * ns:9.3f} "
              f"{t_vm * ns:9.3f} {t_np / t_vm:12.2f} {t_libm / t_vm:11.2f}"
              f" {u_vm:11.2f} {u_libm:13.2f}")


if __name__ == "__main__":
    main()
