"""The code generator's loop knobs, A/B in one process: ten rounds of `x = u(x * 0.7 + 0.2)` (bench_long_chains'
chains) traced once per configuration of `backends/numba_cpu/codegen`'s module settings (INTERLEAVE: vectors per
loop iteration; STAGE_HEAVY / STAGE_MAX: costly calls per stage; TILE), checked against the default's result,
then timed in alternated rounds on one thread. Prints ns per element per op (min and median) for each chain and
configuration, and the core clock measured by a loop of dependent FMAs. For choosing defaults per CPU (issue 18):

    python benches/bench_interleave.py [--chains exp,tanh] [--size N] [--rounds 25] \
        [--configs '[{}, {"INTERLEAVE": 4}, {"INTERLEAVE": 8}]']

`{}` is the default for this CPU; listing it twice shows the noise. TRACEJIT_VECTOR_BITS=256 (set before the
run) gives the AVX2 kernels on an AVX-512 CPU.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

import tracejit as tj  # noqa: E402
from tracejit.backends.numba_cpu import codegen  # noqa: E402
from bench_long_chains import chain  # noqa: E402

KNOBS = ("INTERLEAVE", "STAGE_HEAVY", "STAGE_MAX", "TILE")


@numba.njit(fastmath={"contract"})
def _fma_chain(n, a, b, x):
    for _ in range(n):
        x = x * a + b
    return x


def clock_ghz():
    """Cycles per second of one core, from a chain of dependent FMAs (4 cycles each on current x86 cores)."""
    _fma_chain(10, 0.5, 0.1, 1.0)
    n, best = 50_000_000, float("inf")
    for _ in range(3):
        t = time.perf_counter()
        _fma_chain(n, 0.999, 0.001, 1.0)
        best = min(best, time.perf_counter() - t)
    return 4 * n / best / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--chains", default="exp,tanh,sigmoid,exp/tanh")
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--rounds", type=int, default=25)
    p.add_argument("--configs", default='[{}, {"INTERLEAVE": 2}, {"INTERLEAVE": 4}, {"INTERLEAVE": 8}, {}]')
    a = p.parse_args()
    configs = json.loads(a.configs)
    for c in configs:
        bad = set(c) - set(KNOBS)
        if bad:
            sys.exit(f"unknown knob(s) {sorted(bad)}: choose from {KNOBS}")
    H.pin_threads(1)
    print(H.machine_line(H.machine()), f"~{clock_ghz():.2f} GHz (FMA latency loop)",
          f"default interleave {codegen.interleave()}")
    defaults = {k: getattr(codegen, k) for k in KNOBS}
    x = tj.tensor(np.random.default_rng(0).standard_normal(a.size, dtype=np.float32))
    fns = {}
    for u in a.chains.split(","):
        ref = None
        for i, c in enumerate(configs):
            for k in KNOBS:
                setattr(codegen, k, c.get(k, defaults[k]))
            f = tj.trace(chain(tj, u))
            t = time.perf_counter()
            r = f(x).numpy()
            ct = time.perf_counter() - t
            if ref is None:
                ref = r
            np.testing.assert_allclose(r, ref, rtol=1e-5, atol=1e-6, err_msg=f"{u} {c}")
            fns[(u, i)] = (f, ct)
    for k in KNOBS:
        setattr(codegen, k, defaults[k])
    ts = {k: [] for k in fns}
    reps = max(1, (1 << 22) // a.size)
    for _ in range(a.rounds):
        for k, (f, _) in fns.items():
            t = time.perf_counter()
            for _ in range(reps):
                f(x)
            ts[k].append((time.perf_counter() - t) / reps)
    scale = 1e9 / a.size / 10
    print(f"{'chain':9} {'config':34} {'min':>7} {'median':>7}  ns/el/op   (first call s)")
    for (u, i), v in ts.items():
        print(f"{u:9} {json.dumps(configs[i]):34} {min(v) * scale:7.3f} {np.median(v) * scale:7.3f}"
              f"            ({fns[(u, i)][1]:.1f})")


if __name__ == "__main__":
    main()
