"""One function, two faces: run it eagerly (define-by-run, a grad_fn graph per call) and traced (captured once,
backward derived symbolically, fused numba kernels), check they agree, and time both.

    python examples/eager_vs_traced.py [--n 1000000] [--repeat 20]
"""
import argparse
import statistics
import time

import tracejit as torch


def loss_fn(x, w, b):
    """An elementwise-heavy loss: eager runs ~10 numpy ops (and as many in the backward); traced fuses them."""
    h = torch.tanh(x * w + b) * torch.sigmoid(x) + 0.5 * x * x
    return (h * h).mean()


def timed(fn, repeat):
    fn()                                    # warm up (the traced face compiles on its first call)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    x = torch.randn(a.n)
    w = torch.randn(a.n, requires_grad=True)
    b = torch.zeros(a.n, requires_grad=True)

    traced = torch.trace(loss_fn)
    t0 = time.perf_counter()
    traced(x, w, b)
    first = time.perf_counter() - t0

    def step(f):
        def run():
            w.grad = b.grad = None
            loss = f(x, w, b)
            loss.backward()
            return loss
        return run

    # the same numbers first
    le = step(loss_fn)()
    ge = (w.grad.clone(), b.grad.clone())
    lt = step(traced)()
    gt = (w.grad.clone(), b.grad.clone())
    same = torch.allclose(le, lt, rtol=1e-5) and all(torch.allclose(p, q, rtol=1e-4, atol=1e-9) for p, q in zip(ge, gt))
    print(f"loss eager {le.item():.7f}  traced {lt.item():.7f}  same loss and grads: {same}")

    te = timed(step(loss_fn), a.repeat)
    tt = timed(step(traced), a.repeat)
    print(f"\nforward + backward on {a.n:,} float32 elements (median of {a.repeat}):")
    print(f"  eager   {te * 1e3:8.2f} ms   (every op runs alone and allocates its result)")
    print(f"  traced  {tt * 1e3:8.2f} ms   (first call, trace + compile: {first:.2f} s)")
    print(f"  speedup {te / tt:8.2f}x")
    gs = traced.graph(x, w, b)
    nf = sum(1 for n in gs.compiled_forward.nodes if n.op.kind == "fused") if gs.compiled_forward else 0
    nb = sum(1 for n in gs.compiled_backward.nodes if n.op.kind == "fused") if gs.compiled_backward else 0
    print(f"\nthe traced program: forward {len(gs.forward.nodes)} IR nodes -> {nf} fused kernel(s); "
          f"backward {len(gs.backward.nodes)} IR nodes -> {nb} fused kernel(s)")
    print("see them with: tracejit explain examples.eager_vs_traced:loss_fn --inputs \"f32[64] f32[64] f32[64]\"")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
