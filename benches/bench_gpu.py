"""GPU benchmarks (numba.cuda backend): needs an NVIDIA GPU; without one it prints "no GPU available" and exits 0.

1. Fused elementwise chain tanh(x*w+b)*sigmoid(x)+0.5*x*x (float32; 3 inputs + 1 output = 16 bytes per
   element, 128M elements) against a device-to-device copy (cudaMemcpy, 8 bytes per element): the bandwidth roof. Systems:
   the copy, tracejit's copy kernel (`clone`), tracejit eager (one kernel per op) and traced (one fused
   kernel). Each row reports GB/s and its fraction of the copy's bandwidth (the target for the traced chain:
   >= 0.7).
2. One MLP training step (784-1024-10, cross entropy, SGD with momentum, batch 1024): eager GPU against
   traced GPU (a whole forward + backward + update as planned kernels on preallocated device buffers).

Every system is first checked against numpy / eager CPU (benches/harness.check_same); then timed with
interleaved rounds, each call followed by cuda.synchronize(), as medians (benches/harness.compare).

    python benches/bench_gpu.py [--quick] [--sim-smoke]

--sim-smoke runs the same code at tiny sizes under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): it checks
the script, not the speed (its timings mean nothing).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402,F401  (puts the repository root on sys.path)
import numpy as np  # noqa: E402


def gpu_ready(allow_sim=False):
    import tracejit
    return tracejit.cuda.is_available() and (allow_sim or not tracejit.cuda.simulator())


# ----------------------------------------------------------------------------------------------- chain

def np_chain(x, w, b):
    return np.tanh(x * w + b) * (1 / (1 + np.exp(-x))) + np.float32(0.5) * x * x


def tj_chain(x, w, b):
    import tracejit
    return tracejit.tanh(x * w + b) * tracejit.sigmoid(x) + 0.5 * x * x


def bench_chain(n, repeat):
    import tracejit
    from numba import cuda
    from harness import check_same, compare
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    tx, tw, tb = (tracejit.tensor(a, device="cuda") for a in (x, w, b))
    traced = tracejit.trace(tj_chain)
    check_same({"numpy": np_chain(x, w, b), "tracejit eager GPU": tj_chain(tx, tw, tb).cpu(),
                "tracejit traced GPU": traced(tx, tw, tb).cpu()}, rtol=1e-5, atol=1e-6, label="gpu chain")
    src = tracejit.tensor(x, device="cuda")
    dst = tracejit.empty(n, device="cuda")
    np.testing.assert_array_equal(src.clone().cpu().numpy(), x)
    dst._data.buf.copy_to_device(src._data.buf)
    np.testing.assert_array_equal(dst.cpu().numpy(), x)

    def synced(f):
        def g():
            f()
            cuda.synchronize()
        return g
    fns = {
        "d2d copy (roof)": synced(lambda: dst._data.buf.copy_to_device(src._data.buf)),
        "tracejit copy kernel": synced(lambda: src.clone()),
        "tracejit eager GPU": synced(lambda: tj_chain(tx, tw, tb)),
        "tracejit traced GPU": synced(lambda: traced(tx, tw, tb)),
    }
    size = f"{n >> 20}M f32" if n >= 1 << 20 else f"{n} f32"
    rows = compare(fns, "gpu", "chain", size, baseline="tracejit eager GPU", repeat=repeat)
    moved = {"d2d copy (roof)": 8 * n, "tracejit copy kernel": 8 * n, "tracejit eager GPU": None,
             "tracejit traced GPU": 16 * n}
    copy_bw = 8 * n / next(r.median for r in rows if r.system == "d2d copy (roof)")
    for r in rows:
        nbytes = moved[r.system]
        if nbytes:
            bw = nbytes / r.median
            r.extra["GBps"] = bw / 1e9
            r.roofs["d2d copy"] = bw / copy_bw
    eager = next(r for r in rows if r.system == "tracejit eager GPU")
    eager.note = "eager: one kernel and one temporary per op (8 ops), so no single byte count: no roof fraction"
    return rows


# ----------------------------------------------------------------------------------------------- MLP step

def _mlp(device, sizes):
    import tracejit
    import tracejit.nn as nn
    tracejit.manual_seed(0)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1]).to(device)


def _step_fn(model, opt):
    import tracejit.nn.functional as F

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def bench_mlp(batch, sizes, repeat):
    import tracejit
    from numba import cuda
    from harness import check_same, compare
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0]), dtype=np.float32)
    y = rng.integers(0, sizes[-1], batch)
    runs = {}
    for name, device, traced in (("tracejit eager CPU", "cpu", False), ("tracejit eager GPU", "cuda", False),
                                 ("tracejit traced GPU", "cuda", True)):
        model = _mlp(device, sizes)
        opt = tracejit.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        step = _step_fn(model, opt)
        if traced:
            step = tracejit.trace(step)
        tx, ty = tracejit.tensor(x, device=device), tracejit.tensor(y, device=device)
        losses = [step(tx, ty).item() for _ in range(3)]       # the traced one compiles here
        runs[name] = (step, tx, ty, losses, [p.detach().cpu() for p in model.parameters()])
    check_same({k: (v[3], v[4]) for k, v in runs.items()}, rtol=2e-4, atol=2e-5, reference="tracejit eager CPU",
               label="gpu mlp step")

    def synced(step, tx, ty):
        def g():
            step(tx, ty)
            cuda.synchronize()
        return g
    fns = {k: synced(*runs[k][:3]) for k in ("tracejit eager GPU", "tracejit traced GPU")}
    size = f"batch {batch}, {'-'.join(map(str, sizes))}"
    return compare(fns, "gpu", "mlp_step", size, baseline="tracejit eager GPU", repeat=repeat)


# ----------------------------------------------------------------------------------------------- driver

def run(quick=False, sim=False):
    if not gpu_ready(allow_sim=sim):
        print("no GPU available")
        return []
    if sim:
        return bench_chain(64, 3) + bench_mlp(8, (6, 5, 3), 3)
    # large enough that a kernel (~1 ms at 3 TB/s) dwarfs the Python launch overhead (~0.1 ms)
    n = (1 << 24) if quick else (1 << 27)
    return bench_chain(n, 7 if quick else 15) + bench_mlp(1024, (784, 1024, 10), 7 if quick else 15)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sim-smoke", action="store_true", help="tiny sizes under NUMBA_ENABLE_CUDASIM=1")
    a = ap.parse_args()
    rows = run(a.quick, a.sim_smoke)
    if not rows:
        return 0
    import tracejit
    print(f"device: {tracejit.cuda.get_device_name()}")
    print(f"{'workload':10} {'system':24} {'size':30} {'median':>11} {'GB/s':>8} {'of copy':>8} {'speedup':>8}")
    for r in rows:
        gb = r.extra.get("GBps")
        frac = r.roofs.get("d2d copy")
        print(f"{r.name:10} {r.system:24} {r.size:30} {r.median * 1e3:9.3f}ms "
              f"{'' if gb is None else f'{gb:8.1f}':>8} {'' if frac is None else f'{frac:8.0%}':>8} "
              f"{r.speedup:7.2f}x")
        if r.note:
            print(f"{'':36}{r.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
