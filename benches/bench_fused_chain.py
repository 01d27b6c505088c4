"""Fused elementwise chain tanh(x*w+b)*sigmoid(x)+0.5*x*x, float32, at 4M and 16M elements; and (in
`tracejit bench`) the chain's sum with its gradients wrt x, w, b at 1M and 4M.

Systems: numpy, tracejit eager, tracejit traced (numba backend), torch eager, torch.compile and jax.jit
(jax.jit(jax.grad(loss, argnums=(0, 1, 2))) for the gradients) where they work here. Every system may use every
core, also under `tracejit bench` (which pins the other benchmarks to one thread): torch gets os.cpu_count()
threads, jax its default CPU thread pool (about one thread per core), numba os.cpu_count() threads for the traced
kernels' prange loops ("tracejit traced serial" is the same program without threads). All systems are first checked to compute the same numbers; then each is
timed (median of repeated runs, interleaved rounds) and compared as a ratio to the traced tracejit in the same
run.

    python benches/bench_fused_chain.py [--sizes 4M,16M] [--repeat 15]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("JAX_PLATFORMS", "cpu")      # jax on the CPU also where a GPU plugin is installed
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tracejit  # noqa: E402


def np_chain(x, w, b):
    return np.tanh(x * w + b) * (1 / (1 + np.exp(-x))) + np.float32(0.5) * x * x


def tj_chain(x, w, b):
    return tracejit.tanh(x * w + b) * tracejit.sigmoid(x) + 0.5 * x * x


def load_jax(notes, H=None):
    """jax at its default thread count (like torch here, which gets os.cpu_count() threads), or None with the
    reason in `notes`. H: the harness under `tracejit bench` (it honours --compare and gives jax back its default
    threads when an earlier benchmark pinned them); standalone, jax is simply imported."""
    if H is not None:
        if not H.wanted("jax"):
            return None
        jax, why = H.try_jax(threads=None)
    else:
        try:
            import jax
            why = ""
        except ImportError:
            jax, why = None, "unavailable: not installed"
    if jax is None:
        notes.append(f"jax {why}")
    return jax


def jax_chain(jax):
    jnp = jax.numpy
    return lambda x, w, b: jnp.tanh(x * w + b) * jax.nn.sigmoid(x) + 0.5 * x * x


def systems(n, H=None):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    out = {"numpy": lambda: np_chain(x, w, b)}
    tx, tw, tb = (tracejit.tensor(a) for a in (x, w, b))
    out["tracejit eager"] = lambda: tj_chain(tx, tw, tb).numpy()
    traced = tracejit.trace(tj_chain, backend="numba")
    out["tracejit traced (numba)"] = lambda: traced(tx, tw, tb).numpy()
    from tracejit.backends.numba_cpu import codegen
    par, codegen.PAR_MIN = codegen.PAR_MIN, 1 << 62        # the same kernel without threads
    serial = tracejit.trace(lambda x, w, b: tj_chain(x, w, b), backend="numba")
    serial(tx, tw, tb)
    codegen.PAR_MIN = par
    out["tracejit traced serial"] = lambda: serial(tx, tw, tb).numpy()
    notes = []
    try:
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
        px, pw, pb = (torch.from_numpy(a) for a in (x, w, b))

        def t_chain(x, w, b):
            return torch.tanh(x * w + b) * torch.sigmoid(x) + 0.5 * x * x
        out["torch eager"] = lambda: t_chain(px, pw, pb).numpy()
        try:
            tc = torch.compile(t_chain)
            tc(px, pw, pb)
            out["torch.compile"] = lambda: tc(px, pw, pb).numpy()
        except Exception as e:  # no compiler toolchain, etc.
            notes.append(f"torch.compile unavailable: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    except ImportError:
        notes.append("torch not installed")
    jax = load_jax(notes, H)
    if jax is not None:
        jx, jw, jb = (jax.numpy.asarray(a) for a in (x, w, b))
        jc = jax.jit(jax_chain(jax))
        out["jax.jit"] = lambda: np.asarray(jc(jx, jw, jb).block_until_ready())
    return out, notes


def np_chain_grads(x, w, b):
    """d/dx, d/dw, d/db of sum(chain), by hand."""
    t = np.tanh(x * w + b)
    s = 1 / (1 + np.exp(-x))
    dz = s * (1 - t * t)
    return np.concatenate([dz * w + t * s * (1 - s) + x, dz * x, dz])


def grad_systems(n, H=None):
    """The chain's loss (its sum) and the gradients of x, w, b: a training step's shape."""
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    out = {"numpy": lambda: np_chain_grads(x, w, b)}
    ts = [tracejit.tensor(a, requires_grad=True) for a in (x, w, b)]

    def tj_loss_grads(x, w, b):
        return tracejit.autograd.grad(tj_chain(x, w, b).sum(), (x, w, b))

    def grads_of(gs):
        return np.concatenate([g.detach().numpy() for g in gs])

    def backward_outside(f):
        def go():
            for t in ts:
                t.grad = None
            f(*ts).sum().backward()
            return grads_of([t.grad for t in ts])
        return go
    out["tracejit eager"] = backward_outside(tj_chain)
    inside = tracejit.trace(tj_loss_grads, backend="numba")
    out["tracejit traced (grad inside)"] = lambda: grads_of(inside(*ts))
    out["tracejit traced, y.sum().backward()"] = backward_outside(tracejit.trace(tj_chain, backend="numba"))
    notes = []
    try:
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
        ps = [torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, b)]

        def t_chain(x, w, b):
            return torch.tanh(x * w + b) * torch.sigmoid(x) + 0.5 * x * x

        def torch_step(f):
            def go():
                for p in ps:
                    p.grad = None
                f(*ps).sum().backward()
                return np.concatenate([p.grad.numpy() for p in ps])
            return go
        out["torch eager"] = torch_step(t_chain)
        try:
            tc = torch.compile(t_chain)
            torch_step(tc)()
            out["torch.compile"] = torch_step(tc)
        except Exception as e:
            notes.append(f"torch.compile unavailable: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    except ImportError:
        notes.append("torch not installed")
    jax = load_jax(notes, H)
    if jax is not None:
        js = [jax.numpy.asarray(a) for a in (x, w, b)]
        chain = jax_chain(jax)
        jg = jax.jit(jax.grad(lambda x, w, b: chain(x, w, b).sum(), argnums=(0, 1, 2)))
        out["jax.jit"] = lambda: np.concatenate([np.asarray(g) for g in jax.block_until_ready(jg(*js))])
    return out, notes


def run(quick=False):
    """For `tracejit bench`: the chain at several sizes, then its loss and gradients, through the shared harness
    (checked, then timed)."""
    import harness as H
    H.pin_threads(os.cpu_count() or 1)      # all cores for every system here (see the docstring)
    try:
        return _run(H, quick)
    finally:
        H.pin_threads()


def _run(H, quick):
    out = []
    workloads = [("fused_chain", "tanh(x*w+b)*sigmoid(x)+0.5*x*x", systems, 1e-5, 4,
                  [1 << 10, 1 << 20] if quick else [1 << 10, 1 << 16, 1 << 20, 1 << 22, 1 << 24]),
                 ("fused_chain_grad", "sum(chain) and its grads wrt x, w, b", grad_systems, 1e-4, 6,
                  [1 << 20] if quick else [1 << 20, 1 << 22])]
    for bench, name, make, tol, arrays_moved, sizes in workloads:
        for n in sizes:
            fns, notes = make(n, H)
            if quick:
                fns.pop("torch.compile", None)
            H.check_same({k: f() for k, f in fns.items()}, rtol=tol, atol=tol, label=f"{bench} n={n}")
            out += H.compare(fns, bench, name, f"{n}", baseline="tracejit eager", repeat=5 if quick else 15,
                             min_sample=0.01 if quick else 0.05, work={"bytes": arrays_moved * 4 * n},
                             roof_loop=None)
            for line in notes:
                out.append(H.Result(bench, "-", line, f"{n}", None, note=line))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4M,16M")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    for s in args.sizes.split(","):
        n = int(float(s.rstrip("M")) * (1 << 20)) if s.endswith("M") else int(s)
        fns, notes = systems(n)
        ref = fns["numpy"]()
        for name, f in fns.items():          # same numbers first (also warms every system up)
            r = f()
            err = float(np.max(np.abs(r.astype(np.float64) - ref)))
            if not np.allclose(r, ref, rtol=1e-5, atol=1e-5):
                raise SystemExit(f"{name} differs from numpy at n={n}: max abs err {err:.3g}")
        times = {k: [] for k in fns}
        for _ in range(args.repeat):
            for name, f in fns.items():
                t = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        base = med["tracejit traced (numba)"]
        print(f"\nn = {s} ({n} float32), median of {args.repeat}, {os.cpu_count()} cpus; all agree with numpy (1e-5)")
        for k, v in med.items():
            print(f"  {k:26s} {v * 1e3:9.2f} ms   {v / base:6.2f}x traced")
        for line in notes:
            print("  note:", line)


if __name__ == "__main__":
    main()
