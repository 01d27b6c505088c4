"""Reading what @trace made: the IR (like a jaxpr), the passes, the fused kernels and their numba source.

    python examples/read_ir_and_kernels.py [--dot out.dot]

The same in one command (and as a page with the graphs drawn):
    tracejit explain examples.read_ir_and_kernels:gelu_mlp --inputs "f32[16,8] f32[8,8] f32[8]" --html explain.html
"""
import argparse

import tracejit as torch


def gelu_mlp(x, w, b):
    h = x @ w + b
    g = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))   # tanh-GELU, all elementwise
    return (g * g).mean()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dot", help="also write the compiled forward graph as Graphviz DOT to this file")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    x = torch.randn(16, 8)
    w = torch.randn(8, 8, requires_grad=True)
    b = torch.zeros(8, requires_grad=True)

    print("1. tracejit.make_graph: the forward IR as captured (one line per node, SSA values %n:dtype[shape])")
    print(torch.make_graph(gelu_mlp, x, w, b).text())

    traced = torch.trace(gelu_mlp)
    traced(x, w, b)
    gs = traced.graph(x, w, b)
    print("\n2. traced.graph(...).forward / .backward: after autodiff, simplify, CSE, DCE and the forward/backward "
          "partition")
    print(gs.forward.text("forward"))
    print(gs.backward.text("backward"))

    print("\n3. what the numba backend runs: elementwise runs fused into kernels (fused_k, body indented)")
    print(gs.text())

    ex = torch.explain(gelu_mlp, x, w, b)
    print(f"\n4. the generated kernels ({len(ex.kernels)}): numba source, cached on disk by content hash")
    for prog, name, src in ex.kernels[:1]:
        print(f"# ---- [{prog}] {name}")
        print(src)
    if len(ex.kernels) > 1:
        print(f"... and {len(ex.kernels) - 1} more (tracejit explain shows them all)")

    print("\n5. one run, per step:")
    for prog, step, t in ex.timings:
        print(f"  [{prog:8s}] {t * 1e6:8.1f} us  {step}")
    if a.dot:
        with open(a.dot, "w") as f:
            f.write(gs.compiled_forward.to_dot("forward"))
        print(f"\nwrote {a.dot} (render with: dot -Tsvg {a.dot} > forward.svg)")
    ok = bool(ex.kernels) and any(n.op.kind == "fused" for n in gs.compiled_forward.nodes)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
