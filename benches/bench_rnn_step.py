"""One training step of PyTorch's `nn.LSTM` over a long sequence: nn.LSTM(32, 64) and a linear head on the last
output, batch 32, 1000 time steps (200 with --quick), cross-entropy, SGD. tracejit runs the recurrence as one
`scan` loop node (traced once, compiled once, whatever the length); PyTorch eager runs its native LSTM.

Two rows: the steady step (tracejit traced vs torch eager, interleaved, medians; the first step's loss and
updated parameters checked equal first) and the first traced call in a new process with an empty kernel cache
(trace, passes, kernel compilation and the run). tracejit eager is not timed: its Python loop over 1000 steps
is a define-by-run graph of ~20,000 nodes (seconds per step).

    python benches/bench_rnn_step.py [--quick]
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402

BATCH, INPUT, HIDDEN, CLASSES, LR = 32, 32, 64, 10, 0.1


def make_model(lib):
    class Model(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = lib.nn.LSTM(INPUT, HIDDEN)
            self.head = lib.nn.Linear(HIDDEN, CLASSES)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[-1])
    return Model()


def make_step(lib, model):
    opt = lib.optim.SGD(model.parameters(), lr=LR)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def data(steps):
    rng = np.random.default_rng(0)
    return rng.standard_normal((steps, BATCH, INPUT), dtype=np.float32), rng.integers(0, CLASSES, BATCH)


# the first call, timed in a new process (its imports done before the clock starts) with an empty cache
CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import harness as H
H.pin_threads(1)
import tracejit
import bench_rnn_step as B
tracejit.manual_seed(0)
steps = int(sys.argv[2])
xn, yn = B.data(steps)
step = tracejit.trace(B.make_step(tracejit, B.make_model(tracejit)))
x, y = tracejit.tensor(xn), tracejit.tensor(yn)
t = time.perf_counter()
step(x, y).item()
print(time.perf_counter() - t)
"""


def first_call(steps):
    env = dict(os.environ, TRACEJIT_CACHE_DIR=tempfile.mkdtemp(prefix="tj-rnn-"))
    r = subprocess.run([sys.executable, "-c", CHILD, os.path.dirname(os.path.abspath(__file__)), str(steps)],
                       capture_output=True, text=True, env=env, timeout=600)
    if r.returncode:
        raise RuntimeError(f"the first-call child failed: {r.stderr.strip().splitlines()[-1:]}")
    return float(r.stdout.split()[-1])


def run(quick=False):
    steps = 200 if quick else 1000
    H.pin_threads(1)
    size = f"T={steps} B={BATCH} {INPUT}->{HIDDEN}"
    xn, yn = data(steps)
    tracejit.manual_seed(0)
    model = make_model(tracejit)
    init = {k: np.array(v.numpy()) for k, v in model.state_dict().items()}
    step = tracejit.trace(make_step(tracejit, model))
    tx, ty = tracejit.tensor(xn), tracejit.tensor(yn)
    firsts = {"tracejit traced": (step(tx, ty), *[p.detach().numpy().copy() for p in model.parameters()])}
    systems = {"tracejit traced": lambda: step(tx, ty)}
    notes = {}
    refs = H.references()
    if H.wanted("torch") and not refs["torch"].startswith("unavailable"):
        import torch
        H.pin_threads(1)
        tm = make_model(torch)
        tm.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
        tstep = make_step(torch, tm)
        px, py = torch.from_numpy(xn), torch.from_numpy(yn)
        firsts["torch eager"] = (tstep(px, py), *[p.detach().numpy().copy() for p in tm.parameters()])
        systems["torch eager"] = lambda: tstep(px, py)
    elif H.wanted("torch"):
        notes["torch"] = refs["torch"]
    H.check_same(firsts, rtol=1e-4, atol=1e-5, reference="tracejit traced" if len(firsts) == 1 else "torch eager",
                 label="rnn_step (loss, parameters after one step)")
    base = "torch eager" if "torch eager" in systems else "tracejit traced"
    out = H.compare(systems, "rnn_step", "sgd step", size, baseline=base, repeat=5 if quick else 9, min_sample=0.1)
    t0 = time.perf_counter()
    first = first_call(steps)
    out.append(H.Result("rnn_step", "first call", "tracejit traced", size, first,
                        note=f"new process, empty kernel cache ({time.perf_counter() - t0:.1f} s with its imports)"))
    for k, v in notes.items():
        out.append(H.Result("rnn_step", "sgd step", k, size, None, note=v))
    return out


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
