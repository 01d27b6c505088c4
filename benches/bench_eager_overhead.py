"""Per-op eager overhead: tracejit eager vs numpy vs PyTorch eager (where `import torch` works).

Workloads (float32): add, mul, exp, relu, sum, matmul [n/40, 40] @ [40, 40], a 10-op elementwise chain,
and forward+backward of a small expression (tanh(x * w + b) ** 2 summed, grads of x and w), at n = 1e3
and 1e6 elements, with and without requires_grad on the tensor inputs. numpy has no autograd: its row
is the same computation (for fwd+bwd, the gradient written out by hand).

Every system's result is checked against numpy's (harness.check_same: rtol 1e-4, atol 1e-5) before
anything is timed. Each row interleaves the systems batch by batch (so machine noise hits them alike), a batch loops
the call until it lasts >= ~5 ms, and the table reports the median (and min) per-call time over the
batches, plus the ratios tracejit/numpy and tracejit/torch measured in the same run. All systems run
single-threaded (harness.pin_threads(1): OpenBLAS, torch, numba): these machines have 2 shared cores.
`run()` (used by `tracejit bench`) returns one dict per row, times in microseconds.

Usage:  python benches/bench_eager_overhead.py [--quick] [--json out.json]
"""
import argparse
import json
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import harness  # noqa: E402  (first: sets the thread variables before numpy loads, puts the repo on sys.path)

import numpy as np  # noqa: E402

import tracejit  # noqa: E402

try:
    import torch
except Exception:  # torch is an optional reference system
    torch = None

SIZES = (1_000, 1_000_000)
K = 40  # matmul inner/outer width: [n/K, K] @ [K, K]


# ----------------------------------------------------------------------------- workloads
# workloads() gives each system the same inputs (made once, outside the timed calls) and returns zero-argument
# callables; what they return (arrays, tensors or tuples of them) is compared by harness.check_same.

def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    m = rng.uniform(-1, 1, (n // K, K)).astype(np.float32)
    w = rng.uniform(-1, 1, (K, K)).astype(np.float32)
    return {"a": a, "b": b, "m": m, "w": w}


def _chain_np(a, b):
    t = a * b
    t = t + a
    t = t * np.float32(0.5)
    t = np.tanh(t)
    t = t - b
    t = t * t
    t = t + np.float32(1.0)
    t = np.sqrt(t)
    t = np.log(t)
    return t * a


def _chain_tensor(lib, a, b):
    t = a * b
    t = t + a
    t = t * 0.5
    t = lib.tanh(t)
    t = t - b
    t = t * t
    t = t + 1.0
    t = lib.sqrt(t)
    t = lib.log(t)
    return t * a


def _fwdbwd_np(x, w, b):
    t = np.tanh(x * w + b)
    loss = (t * t).sum()
    d = np.float32(2) * t * (np.float32(1) - t * t)
    return loss, d * w, d * x


def _make_fwdbwd_tensor(x, w, b):
    def f():
        x.grad = None
        w.grad = None
        t = (x * w + b).tanh()
        loss = (t * t).sum()
        loss.backward()
        return loss.detach(), x.grad, w.grad
    return f


def workloads(n, rg, lib_name):
    """{op: callable} for one system ('numpy', 'tracejit', 'torch') at size n, requires_grad rg."""
    arr = _inputs(n)
    if lib_name == "numpy":
        a, b, m, w = arr["a"], arr["b"], arr["m"], arr["w"]
        zero = np.float32(0)
        out = {
            "add": lambda: a + b,
            "mul": lambda: a * b,
            "exp": lambda: np.exp(a),
            "relu": lambda: np.maximum(a, zero),
            "sum": lambda: a.sum(),
            "matmul": lambda: m @ w,
            "chain10": lambda: _chain_np(a, b),
        }
        if rg:
            out["fwd+bwd"] = lambda: _fwdbwd_np(a, b, np.float32(0.1))
        return out

    lib = tracejit if lib_name == "tracejit" else torch
    relu = lib.relu
    t = {k: lib.tensor(v.copy(), requires_grad=rg) for k, v in arr.items()}
    a, b, m, w = t["a"], t["b"], t["m"], t["w"]
    out = {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "exp": lambda: a.exp(),
        "relu": lambda: relu(a),
        "sum": lambda: a.sum(),
        "matmul": lambda: m @ w,
        "chain10": lambda: _chain_tensor(lib, a, b),
    }
    if rg:
        out["fwd+bwd"] = _make_fwdbwd_tensor(a, b, 0.1)
    return out


OPS = ("add", "mul", "exp", "relu", "sum", "matmul", "chain10", "fwd+bwd")


# ----------------------------------------------------------------------------- timing

class _CpuLoad:
    """Share of both cores used by other processes during a measurement (from /proc/stat)."""

    def __enter__(self):
        self.t0, self.own0, self.w0 = self._busy(), time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.w0
        busy = self._busy() - self.t0 if self.t0 is not None else None
        own = time.process_time() - self.own0
        ncpu = os.cpu_count() or 1
        self.bg = None if busy is None or wall <= 0 else max(0.0, (busy - own) / (wall * ncpu) * 100)
        return False

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                parts = f.readline().split()[1:]
            vals = [int(x) for x in parts]
            return (sum(vals) - vals[3] - vals[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait
        except (OSError, ValueError):
            return None


def _wait_quiet(max_wait, threshold=25.0, window=0.5):
    """Wait (at most max_wait s) until other processes use < threshold % of the CPUs; returns their last %."""
    deadline = time.perf_counter() + max_wait
    while True:
        with _CpuLoad() as load:
            time.sleep(window)
        if load.bg is None or load.bg < threshold or time.perf_counter() >= deadline:
            return load.bg


def _loops_for(fn, target):
    """How many calls make one batch last about `target` seconds."""
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        dt = time.perf_counter() - t0
        if dt >= target / 4 or loops >= 1 << 20:
            return max(1, int(loops * target / max(dt, 1e-9)))
        loops *= 4


def _time_row(fns, batches, target):
    """Median and min per-call seconds for each system; batches interleave the systems."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    loops = {k: _loops_for(fn, target) for k, fn in fns.items()}
    samples = {k: [] for k in fns}
    perf = time.perf_counter
    for _ in range(batches):
        for k, fn in fns.items():
            n = loops[k]
            t0 = perf()
            for _ in range(n):
                fn()
            samples[k].append((perf() - t0) / n)
    return {k: (statistics.median(v), min(v)) for k, v in samples.items()}


# ----------------------------------------------------------------------------- the benchmark

def run(quick=False, ops=OPS, sizes=SIZES, verbose=True):
    """Check, time and print; returns one dict per (op, n, requires_grad) row (times in microseconds)."""
    threads = harness.pin_threads(1)
    batches, target, max_wait = (5, 0.002, 0.0) if quick else (21, 0.005, 30.0)
    with_torch = torch is not None and harness.wanted("torch")
    systems = ["numpy", "tracejit"] + (["torch"] if with_torch else [])
    say = print if verbose else (lambda *a, **k: None)
    say(f"eager per-op overhead: float32, numpy {np.__version__}, tracejit {tracejit.__version__}, "
        f"torch {torch.__version__ if with_torch else 'not measured'}")
    say(f"threads: {', '.join(f'{k} {v}' for k, v in threads.items())}; {batches} batches of >= "
        f"{target * 1e3:.0f} ms per system per row, systems interleaved; median (min) per call")
    if max_wait:
        say(f"each row first waits (<= {max_wait:.0f} s) for other processes to use < 25% CPU; "
            f"bg% = their share while timed")
    say("correctness: every system checked against numpy (harness.check_same, rtol=1e-4 atol=1e-5) before timing\n")
    head = (f"{'op':<9}{'n':>9} {'grad':>5} {'numpy us':>16} {'tracejit us':>16} {'torch us':>16} "
            f"{'tj/np':>7} {'tj/torch':>8} {'bg%':>4}")
    say(head)
    say("-" * len(head))
    rows = []
    for n in sizes:
        for rg in (False, True):
            per_sys = {s: workloads(n, rg, s) for s in systems}
            for op in ops:
                if op not in per_sys["numpy"]:
                    continue
                fns = {s: per_sys[s][op] for s in systems}
                harness.check_same({s: fns[s]() for s in systems}, rtol=1e-4, atol=1e-5,
                                   label=f"eager_overhead {op} n={n} requires_grad={rg}")
                if max_wait:
                    _wait_quiet(max_wait)
                with _CpuLoad() as load:
                    t = _time_row(fns, batches, target)
                row = {"op": op, "n": n, "requires_grad": rg, "bg_percent": load.bg}
                for s in systems:
                    row[f"{s}_us"] = t[s][0] * 1e6
                    row[f"{s}_min_us"] = t[s][1] * 1e6
                row["tracejit_over_numpy"] = t["tracejit"][0] / t["numpy"][0]
                row["tracejit_over_torch"] = t["tracejit"][0] / t["torch"][0] if with_torch else None
                rows.append(row)
                say(_fmt(row))
    if with_torch:
        small = [r["tracejit_over_torch"] for r in rows if r["n"] == min(sizes)]
        say(f"\nn={min(sizes)}: tracejit/torch median over ops {statistics.median(small):.2f}x "
            f"(range {min(small):.2f}-{max(small):.2f}x); goal <= 2x")
    return rows


def _fmt(row):
    def cell(s):
        if f"{s}_us" not in row:
            return f"{'-':>16}"
        return f"{_num(row[f'{s}_us']):>8} ({_num(row[f'{s}_min_us'])})".rjust(16)
    tt = row["tracejit_over_torch"]
    bg = row["bg_percent"]
    return (f"{row['op']:<9}{row['n']:>9} {('yes' if row['requires_grad'] else 'no'):>5} {cell('numpy')} "
            f"{cell('tracejit')} {cell('torch')} {row['tracejit_over_numpy']:>6.2f}x "
            f"{(f'{tt:.2f}x' if tt is not None else '-'):>8} {(f'{bg:.0f}' if bg is not None else '-'):>4}")


def _num(us):
    return f"{us:.2f}" if us < 10 else f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter batches")
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of " + ",".join(OPS))
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--json", help="also write the rows to this file")
    a = p.parse_args(argv)
    rows = run(quick=a.quick, ops=tuple(a.ops.split(",")), sizes=tuple(int(s) for s in a.sizes.split(",")))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
