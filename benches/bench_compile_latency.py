"""Compile latency: what the first call of a traced function costs, and what the caches save.

For each workload (an elementwise chain, forward + backward; an MLP training step; the example CNN's training
step, whose 13 kernels are mostly BatchNorm row kernels):

- fresh install (the CNN step): as cold, and numba's cache of the library's own kernels (kernels/cpu) empty too,
  as after an install or on another CPU (`tracejit precompile` fills it once; cold assumes it filled);
- cold: a fresh Python process with an empty TRACEJIT_CACHE_DIR; the first call traces, runs the passes,
  generates the kernels and lowers them with tracejit/backends/numba_cpu/direct.py (in parallel: forked helpers
  on the spare cores take a share, see workers.py), while a background helper has numba compile them into the
  cache (TRACEJIT_DIRECT_KERNELS=0: numba compiles them for the first call; TRACEJIT_COMPILE_WORKERS=0: one
  process, numba's compile); the steady call of that process is timed right after, on what runs by then;
- disk cache: a second fresh process with the same cache folder (numba loads the machine code);
- warm retrace: in a process that has already compiled it, `tracejit.trace` of a new function object with
  the same body (tracing + passes + code generation; the kernel modules are found in memory);
- torch.compile cold / disk cache (a fresh TORCHINDUCTOR_CACHE_DIR) for the chain, when it works here.

Each row is the first call's wall time (median over the processes); notes give the import time, the steady
call time and the whole process time. Every process prints its result, checked against numpy first.

    python benches/bench_compile_latency.py [--quick]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

ROOT = H.ROOT

# The child: import, build inputs, first call (trace + compile + run), steady calls, a warm retrace.
CHILD = r'''
import json, os, sys, time, statistics
t0 = time.perf_counter()
import numpy as np
SYSTEM, WORK, REPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
if SYSTEM == "torch":
    import torch as lib
    torch = lib
    torch.set_num_threads(1)
    F = torch.nn.functional
    compile_ = lambda f: torch.compile(f, dynamic=False)
else:
    import tracejit as lib
    F = lib.nn.functional
    compile_ = lib.trace
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)

def make():
    if WORK == "chain":
        arrs = [rng.standard_normal(4096, dtype=np.float32) for _ in range(3)]
        ts = [lib.tensor(a, requires_grad=True) for a in arrs]
        def f(x, w, b):
            return (lib.tanh(x * w + b) * lib.sigmoid(x) + 0.5 * x * x).sum()
        def call(fn):
            for t in ts:
                t.grad = None
            loss = fn(*ts)
            loss.backward()
            return [float(loss)] + [float(t.grad.sum()) for t in ts]
        return f, call
    if WORK == "cnn_step":         # the example CNN's training step (benches/bench_cnn_step.py): 13 kernels
        sys.path.insert(0, "benches")
        import bench_cnn_step as C
        lib.manual_seed(0)
        model = C.make_model(lib)
        xn = rng.standard_normal((C.BATCH, 1, C.SIZE, C.SIZE), dtype=np.float32)
        cx, cy = lib.tensor(xn), lib.tensor(rng.integers(0, C.CLASSES, C.BATCH))
        return C.make_step(lib, model), lambda fn: [float(fn(cx, cy))]
    sizes = (64, 128, 128, 10)
    ps = []
    for i, o in zip(sizes[:-1], sizes[1:]):
        ps += [lib.tensor(rng.uniform(-0.1, 0.1, (i, o)).astype(np.float32), requires_grad=True),
               lib.tensor(np.zeros(o, np.float32), requires_grad=True)]
    x = lib.tensor(rng.standard_normal((32, sizes[0]), dtype=np.float32))
    y = lib.tensor(rng.integers(0, 10, 32))
    def f(x, y):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = F.relu(h @ ps[i] + ps[i + 1])
        loss = F.cross_entropy(h @ ps[-2] + ps[-1], y)
        loss.backward()
        with lib.no_grad():
            for p in ps:
                p -= 0.01 * p.grad
                p.grad = None
        return loss.detach()
    def call(fn):
        return [float(fn(x, y))]
    return f, call

f, call = make()
cf = compile_(f)
t = time.perf_counter()
first_value = call(cf)
first = time.perf_counter() - t
steady = []
for _ in range(2 * REPS + 1):
    t = time.perf_counter()
    call(cf)
    steady.append(time.perf_counter() - t)
res = {"import": t_import, "first": first, "steady": statistics.median(steady), "value": first_value}
if SYSTEM == "tracejit":
    warm = []
    for _ in range(REPS):
        g, call2 = make()                      # a new function object, same body: traced again
        cg = compile_(g)
        t = time.perf_counter()
        call2(cg)
        warm.append(time.perf_counter() - t)
    res["warm"] = statistics.median(warm)
    try:
        from tracejit.backends import diskcache
        info = diskcache.cache_info()
        res["cache"] = {k: info.get(k) for k in ("entries", "compiled", "cache_hits", "compiled_by_helpers")}
        from tracejit.backends.numba_cpu.executor import compile_stats
        res["cache"]["direct"] = compile_stats()["direct"]
    except Exception:
        pass
res["process"] = time.perf_counter() - t0
print("RESULT " + json.dumps(res))
'''


SIZES = {"chain": "4096", "mlp_step": "32x64-128-128-10", "cnn_step": "64x1x16x16"}


def reference(work):
    """numpy values of the first call (loss and grad sums; for the MLP, the first loss); for the CNN, the first
    loss of its step run eagerly by tracejit, built as the child builds it."""
    rng = np.random.default_rng(0)
    if work == "cnn_step":
        import bench_cnn_step as C
        import tracejit
        tracejit.manual_seed(0)
        model = C.make_model(tracejit)
        xn = rng.standard_normal((C.BATCH, 1, C.SIZE, C.SIZE), dtype=np.float32)
        y = rng.integers(0, C.CLASSES, C.BATCH)
        return [float(C.make_step(tracejit, model)(tracejit.tensor(xn), tracejit.tensor(y)))]
    if work == "chain":
        x, w, b = (rng.standard_normal(4096, dtype=np.float32).astype(np.float64) for _ in range(3))
        t = np.tanh(x * w + b)
        s = 1 / (1 + np.exp(-x))
        loss = (t * s + 0.5 * x * x).sum()
        dt = (1 - t * t) * s
        gx = dt * w + t * s * (1 - s) + x
        return [loss, gx.sum(), (dt * x).sum(), dt.sum()]
    sizes = (64, 128, 128, 10)
    ps = []
    for i, o in zip(sizes[:-1], sizes[1:]):
        ps += [rng.uniform(-0.1, 0.1, (i, o)).astype(np.float32), np.zeros(o, np.float32)]
    x = rng.standard_normal((32, sizes[0]), dtype=np.float32)
    y = rng.integers(0, 10, 32)
    h = x.astype(np.float64)
    for i in range(0, len(ps) - 2, 2):
        h = np.maximum(h @ ps[i] + ps[i + 1], 0)
    z = h @ ps[-2] + ps[-1]
    m = z.max(1, keepdims=True)
    lse = np.log(np.exp(z - m).sum(1)) + m[:, 0]
    return [float(np.mean(lse - z[np.arange(32), y]))]


def child(system, work, cache_dir, extra_env=None, reps=3):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    env.update({"TRACEJIT_CACHE_DIR": cache_dir, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "NUMBA_NUM_THREADS": "1", "PYTHONPATH": ROOT + os.pathsep + env.get("PYTHONPATH", "")})
    env.update(extra_env or {})
    r = subprocess.run([sys.executable, "-c", CHILD, system, work, str(reps)], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
    raise RuntimeError(f"{system} {work} child failed (exit {r.returncode}): {tail[:200]}")


def _row(work, system, runs, key="first", baseline="tracejit cold"):
    xs = [r[key] for r in runs]
    where = f"median of {len(xs)} process{'es' if len(xs) > 1 else ''}" if key == "first" else \
        f"median of {len(xs)} retraces"
    imp = statistics.median(r["import"] for r in runs)
    steady = statistics.median(r["steady"] for r in runs)
    note = f"{where}; import {imp:.2f} s, steady call {H.fmt_time(steady)}"
    if key == "first":
        note += f", whole process {statistics.median(r['process'] for r in runs):.1f} s"
    if "cache" in runs[-1] and key == "first":
        c = runs[-1]["cache"]
        h = c.get("compiled_by_helpers") or 0
        note += (f", direct.py lowered {c.get('direct') or 0} kernels, numba compiled {c.get('compiled')} in the "
                 f"process and {h} in forked helpers, loaded {(c.get('cache_hits') or 0) - h} from an earlier "
                 f"process")
    return H.summarize("compile_latency", work, system, SIZES[work], xs,
                       baseline=baseline, note=note)


def run(quick=False):
    reps = 1 if quick else 3
    works = ("chain",) if quick else ("chain", "mlp_step", "cnn_step")
    out, notes = [], {}
    for work in works:
        values = {"tracejit eager" if work == "cnn_step" else "numpy": reference(work)}
        cold, disk = [], []
        for _ in range(reps):
            d = tempfile.mkdtemp(prefix="tj-cold-")
            try:
                cold.append(child("tracejit", work, d, reps=reps))
                disk.append(child("tracejit", work, d, reps=reps))
            finally:
                shutil.rmtree(d, ignore_errors=True)
        values["tracejit cold"] = cold[0]["value"]
        values["tracejit disk cache"] = disk[0]["value"]
        rows = [_row(work, "tracejit cold (empty cache, new process)", cold),
                _row(work, "tracejit disk cache (new process)", disk),
                _row(work, "tracejit warm retrace (same process)", cold + disk, key="warm")]
        if work == "cnn_step" and not quick:    # numba's cache of the library's own kernels empty too
            d, nd = tempfile.mkdtemp(prefix="tj-fresh-"), tempfile.mkdtemp(prefix="tj-fresh-numba-")
            try:
                fresh = [child("tracejit", work, d, {"NUMBA_CACHE_DIR": nd}, reps=1)]
            finally:
                shutil.rmtree(d, ignore_errors=True)
                shutil.rmtree(nd, ignore_errors=True)
            values["tracejit fresh install"] = fresh[0]["value"]
            rows.append(_row(work, "tracejit fresh install (no cache at all, new process)", fresh))
        if work == "chain" and H.wanted("torch"):
            refs = H.references()
            if quick:
                notes["torch.compile"] = "skipped in --quick (a cold compile takes ~15 s here)"
            elif refs["torch.compile"] != "works":
                notes["torch.compile"] = refs["torch.compile"]
            else:
                d = tempfile.mkdtemp(prefix="tj-inductor-")
                try:
                    env = {"TORCHINDUCTOR_CACHE_DIR": d}
                    tc = [child("torch", work, os.path.join(d, "tj"), env)]
                    td = [child("torch", work, os.path.join(d, "tj"), env)]
                    values["torch.compile cold"] = tc[0]["value"]
                    values["torch.compile disk cache"] = td[0]["value"]
                    rows += [_row(work, "torch.compile cold (empty cache, new process)", tc),
                             _row(work, "torch.compile disk cache (new process)", td)]
                except Exception as e:
                    notes["torch.compile"] = f"unavailable: {e}"
                finally:
                    shutil.rmtree(d, ignore_errors=True)
        H.check_same(values, rtol=1e-4, atol=1e-4, label=f"compile_latency/{work} (first call's values)")
        base = rows[0].median
        for r in rows:
            r.checked = True
            r.speedup = base / r.median
            r.baseline = rows[0].system
        out += rows
    for k, v in notes.items():
        out.append(H.Result("compile_latency", "chain", k, SIZES["chain"], None, note=v))
    return out


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
