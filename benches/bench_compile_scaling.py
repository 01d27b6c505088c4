"""Compile time per IR node, stage by stage, as programs grow: a stage whose cost is not linear in the
program shows as a column that rises down a workload's rows.

Workloads (each a first call of `@tracejit.trace`, in this process, numba's disk cache in a fresh folder):

- chain N: a chain of elementwise ops on a [64] tensor (`x = tanh(x) * 0.5 + x`, 3 ops a link), forward and
  the derived backward;
- lstm T: the hand-written LSTM training step of issue 24 (an nn.Module cell of two nn.Linear, chunk(4),
  sigmoid/tanh gates, a Python loop over T steps, a linear head, cross-entropy, backward, SGD step; batch 32,
  input 32, hidden 64), unrolled;
- scan T: the same model with its loop over time written as `torch.scan(cell_step, (h, c), x)`: one loop node of
  the program, its body and its backward's body traced and compiled once, whatever T is;
- gpt L: a small GPT written with nn.Linear/nn.LayerNorm and a hand-written causal attention (batch 4,
  sequence 32, width 64, 4 heads), L layers, a training step.

Columns: the traced graph's nodes, the fused kernels compiled (those of loop bodies included), the first call's
wall time, a steady call's (the third: the second traces again, the parameters' .grad having become tensors).
Stages: trace (running the function on tracers, its inner autograd excluded), autodiff (the autograd engine
on tracers: the loss.backward() inside, and the derived outer backward), the graph passes (simplify, cse,
dce, partition), backend passes (gemm, conv columns), fusion, plan (code generation and the executor's
buffer plan: CompiledGraph), numba (compiling the kernels; depends on the kernels' number and size, not on
the graph) and print (the graph's text). Each is shown in microseconds per node of the traced graph.

    python benches/bench_compile_scaling.py [--quick] [--only chain,lstm,scan,gpt]
"""
import argparse
import functools
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# a fresh cache folder even when TRACEJIT_CACHE_DIR is set: the numba column is a compilation, not a cache read
os.environ["TRACEJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tj-scaling-")
import harness as H  # noqa: E402  (thread pinning, the repository on sys.path, the CPU's name)

import numpy as np  # noqa: E402

import tracejit as torch  # noqa: E402
import tracejit.autograd.engine as _engine  # noqa: E402
import tracejit.backends.numba_cpu as _nb  # noqa: E402
import tracejit.passes as _passes  # noqa: E402

nn, F = torch.nn, torch.nn.functional
STAGES = ("trace", "autodiff", "simplify", "cse", "dce", "partition", "backend", "fusion", "plan", "numba", "print")
SIZES = {"chain": (1000, 10000, 100000), "lstm": (16, 64, 256, 1024), "scan": (16, 64, 256, 1024),
         "gpt": (2, 6, 12, 24)}
QUICK = {"chain": (1000, 10000), "lstm": (16, 64, 256), "scan": (16, 256), "gpt": (2, 6)}


class Clock:
    """Wall time per stage; a stage inside another is subtracted from the outer one."""

    def __init__(self):
        self.t = dict.fromkeys(STAGES, 0.0)
        self.stack = []

    def wrap(self, stage, fn):
        @functools.wraps(fn)
        def timed(*a, **k):
            t0 = time.perf_counter()
            self.stack.append(0.0)
            try:
                return fn(*a, **k)
            finally:
                inner = self.stack.pop()
                dt = time.perf_counter() - t0
                self.t[stage] = self.t.get(stage, 0.0) + dt - inner      # (a new pass: a new column)
                if self.stack:
                    self.stack[-1] += dt
        return timed


CLOCK = Clock()


def _instrument():
    c = CLOCK
    _engine.run_backward = c.wrap("autodiff", _engine.run_backward)
    _passes.DEFAULT_PASSES = tuple(c.wrap(p.__name__, p) for p in _passes.DEFAULT_PASSES)
    _passes.partition = c.wrap("partition", _passes.partition)
    _passes.dce = c.wrap("dce", _passes.dce)
    _nb.gemm_updates = c.wrap("backend", _nb.gemm_updates)
    _nb.product_sums = c.wrap("backend", _nb.product_sums)
    _nb.shared_columns = c.wrap("backend", _nb.shared_columns)
    _nb.fusion = c.wrap("fusion", _nb.fusion)
    _nb.CompiledGraph = c.wrap("plan", _nb.CompiledGraph)
    _nb.warm_kernels = c.wrap("numba", _nb.warm_kernels)


def chain(n):
    links = max(1, n // 8)            # ~3 forward and ~5 backward nodes a link
    x = torch.randn(64, requires_grad=True)

    def f(x):
        for _ in range(links):
            x = torch.tanh(x) * 0.5 + x
        return x.sum()

    def call(fn):
        x.grad = None
        fn(x).backward()
    return f, call


def lstm(steps, B=32, I=32, H=64, C=10, scan=False):
    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.ih, self.hh = nn.Linear(I, 4 * H), nn.Linear(H, 4 * H)

        def forward(self, x, h, c):
            i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell, self.head = Cell(), nn.Linear(H, C)

        def forward(self, x):
            h = c = torch.zeros(B, H)
            if scan:
                (h, c), _ = torch.scan(lambda hc, xt: (self.cell(xt, *hc), hc[0]), (h, c), x)
            else:
                for t in range(x.shape[0]):
                    h, c = self.cell(x[t], h, c)
            return self.head(h)

    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((steps, B, I), dtype=np.float32))
    y = torch.tensor(rng.integers(0, C, B))

    def f(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return f, lambda fn: fn(x, y)


def gpt(layers, B=4, T=32, D=64, heads=4, V=96):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x, mask):
            q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
            q, k, v = (t.reshape(B, T, heads, D // heads).transpose(1, 2) for t in (q, k, v))
            a = torch.softmax((q @ k.transpose(-2, -1)) * (D // heads) ** -0.5 + mask, -1)
            x = x + self.proj((a @ v).transpose(1, 2).reshape(B, T, D))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V)

        def forward(self, idx, mask):
            x = self.emb(idx) + self.pos(torch.arange(T))
            for b in self.blocks:
                x = b(x, mask)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    idx = torch.tensor(rng.integers(0, V, (B, T)))
    tgt = torch.tensor(rng.integers(0, V, (B * T,)))
    mask = torch.tensor(np.triu(np.full((T, T), -1e9, np.float32), 1))

    def f(idx, tgt, mask):
        opt.zero_grad()
        loss = F.cross_entropy(model(idx, mask).reshape(B * T, V), tgt)
        loss.backward()
        opt.step()
        return loss.detach()
    return f, lambda fn: fn(idx, tgt, mask)


def measure(work, size):
    make = {"chain": chain, "lstm": lstm, "scan": functools.partial(lstm, scan=True), "gpt": gpt}[work]
    f, call = make(size)
    CLOCK.t = dict.fromkeys(STAGES, 0.0)
    t0 = time.perf_counter()
    fn = torch.trace(CLOCK.wrap("trace", f))
    call(fn)
    total = time.perf_counter() - t0
    entry = [e for es in fn.cache.values() for e in es][-1]    # the last compiled: its traced graph's nodes
    n = len(entry.graphs["traced"].nodes)
    call(fn)                    # (the second call traces again: the parameters' .grad went from None to tensors)
    t = time.perf_counter()
    call(fn)
    steady = time.perf_counter() - t
    t = time.perf_counter()
    for g in (entry.fwd, entry.bwd):
        if g is not None:
            g.text()
    CLOCK.t["print"] = time.perf_counter() - t
    kernels = sum(_kernels(c) for c in (entry.fwd_fn, entry.bwd_fn) if c)
    return dict(work=work, size=size, nodes=n, kernels=kernels, total_s=total, steady_ms=steady * 1e3,
                stages=list(CLOCK.t),
                **{k: v / n * 1e6 for k, v in CLOCK.t.items()})


def _kernels(compiled):
    """Fused kernels of a compiled program, those of its loops' compiled bodies included."""
    return sum(1 if nd.op.kind == "fused" else _kernels(nd.attrs["body"]) if hasattr(nd.attrs.get("body"), "graph")
               else 0 for nd in compiled.graph.nodes)


def table(rows):
    stages = list(STAGES) + sorted({k for r in rows for k in r.get("stages", ())} - set(STAGES))
    head = f"{'workload':<12}{'nodes':>8}{'kernels':>8}{'first call':>11}{'steady':>10}  " + \
        "".join(f"{s[:8]:>9}" for s in stages)
    lines = ["us per traced-graph node, by stage (first call of @trace; numba: disk cache empty)", head]
    for r in rows:
        lines.append(f"{r['work'] + ' ' + str(r['size']):<12}{r['nodes']:>8}{r['kernels']:>8}{r['total_s']:>10.2f}s"
                     f"{r.get('steady_ms', 0.0):>8.1f}ms  "
                     + "".join(f"{r.get(s, 0.0):>9.1f}" for s in stages))
    return "\n".join(lines)


def run(quick=False, only=("chain", "lstm", "scan", "gpt")):
    _instrument()
    rows = []
    for work in only:
        for size in (QUICK if quick else SIZES)[work]:
            rows.append(measure(work, size))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="chain,lstm,scan,gpt")
    a = ap.parse_args()
    print(f"CPU: {H.machine_line(H.machine())}, {os.cpu_count()} cores (shared machine: absolute times are noisy)")
    print(table(run(a.quick, a.only.split(","))))
