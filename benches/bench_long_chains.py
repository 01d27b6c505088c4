"""Long chains of transcendental ops: ten rounds of `x = u(x * 0.7 + 0.2)` (30 ops, 10 of them u) for u = tanh,
exp, sigmoid, and exp and tanh alternating (5 of each: the 30-op chain with 5 tanh and 5 exp), float32 on 1024
elements (per-call cost) and on 1M (the loop), one thread per system.

A fused loop of many vmath calls is the case the code generator splits into stages over tiles (codegen.stages);
the rows' notes give the time per element per op (median / elements / 10: one op = one round, u with its
multiply and add, as issue 18 counts them). Systems: numpy, tracejit traced,
torch.compile and jax.jit where they work; checked against numpy first, interleaved rounds, medians.

    python benches/bench_long_chains.py [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

from bench_user_chains import systems  # noqa: E402  (numpy, traced, torch.compile, jax.jit)

ROUNDS, SCALE, SHIFT = 10, 0.7, 0.2
CHAINS = ("tanh", "exp", "sigmoid", "exp/tanh")
SIZES = (1024, 1 << 20)


def chain(lib, u):
    fs = {"tanh": [lib.tanh], "exp": [lib.exp], "sigmoid": [lib.sigmoid], "exp/tanh": [lib.exp, lib.tanh]}[u]

    def f(x):
        for i in range(ROUNDS):
            x = fs[i % len(fs)](x * SCALE + SHIFT)
        return x
    return f


def run(quick=False):
    """For `tracejit bench`: each chain at each size, checked then timed (interleaved rounds, medians)."""
    H.pin_threads()
    rows = []
    for n in SIZES[:1] if quick else SIZES:
        a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        for u in (("exp/tanh",) if quick else CHAINS):
            notes = {}
            fns = systems(lambda L: chain(L, u), [a], quick, notes)
            name = f"10 x {u}(x*0.7+0.2)"
            H.check_same({k: f() for k, f in fns.items()}, rtol=1e-4, atol=1e-5, label=f"long_chains {name} {n}")
            rs = H.compare(fns, "long_chains", name, f"{n}", baseline="numpy", repeat=5 if quick else 15,
                           min_sample=0.01 if quick else 0.05)
            for r in rs:
                r.note = f"{r.median / n / ROUNDS * 1e9:.2f} ns/el/op"
            rows += rs + [H.Result("long_chains", name, k, f"{n}", None, note=v) for k, v in notes.items()]
    return rows


def main():
    from tracejit.bench import print_table
    rows = run(quick="--quick" in sys.argv)
    print_table(rows)
    print()
    for r in rows:
        if r.median is not None:
            print(f"{r.name} {r.size} {r.system}: {r.note}")


if __name__ == "__main__":
    main()
