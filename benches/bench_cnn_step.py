"""One training step of a small CNN (the model of examples/train_cnn.py without dropout), batch 64, 1x16x16
float32 images, 10 classes: conv3x3(16)-BN-ReLU-maxpool2, conv3x3(32)-BN-ReLU-maxpool2, linear 512-64-ReLU-10,
cross-entropy, SGD with momentum.

The same nn.Module code builds the model in every system (tracejit's API is PyTorch's); PyTorch's copy starts
from tracejit's initial weights. The loss and every updated parameter and BatchNorm running statistic after
the first step are checked equal before timing. Systems: tracejit eager, tracejit traced, torch eager,
torch.compile (not in --quick).

    python benches/bench_cnn_step.py [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402

BATCH, SIZE, CLASSES, LR = 64, 16, 10, 0.01


def make_model(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * (SIZE // 4) ** 2, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def make_step(lib, model):
    opt = lib.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def _state(lib_model):
    return [np.array(v.detach().numpy() if hasattr(v, "detach") else v) for k, v in lib_model.state_dict().items()
            if "num_batches" not in k]


def run(quick=False):
    return sgd_step_bench("cnn_step", make_model, 1, quick)


def sgd_step_bench(bench, make_model, channels, quick=False):
    """The bench of one SGD step (make_step) of `make_model(lib)` on a BATCH x channels x SIZE x SIZE batch in
    every system, each starting from tracejit's initial weights, the first step's loss, parameters and running
    statistics checked equal before timing (this bench's and bench_resnet_step.py's body)."""
    H.pin_threads()
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((BATCH, channels, SIZE, SIZE), dtype=np.float32)
    yn = rng.integers(0, CLASSES, BATCH)
    size = f"{BATCH}x{channels}x{SIZE}x{SIZE}"
    tracejit.manual_seed(0)
    init = make_model(tracejit).state_dict()
    systems, firsts, notes = {}, {}, {}
    tx, ty = tracejit.tensor(xn), tracejit.tensor(yn)
    for name in ("tracejit eager", "tracejit traced"):
        model = make_model(tracejit)
        model.load_state_dict(init)
        step = make_step(tracejit, model)
        if name.endswith("traced"):
            step = tracejit.trace(step)
        loss = step(tx, ty)
        firsts[name] = (loss, *_state(model))
        systems[name] = lambda step=step: step(tx, ty)

    refs = H.references()
    if H.wanted("torch") and not refs["torch"].startswith("unavailable"):
        import torch
        H.pin_threads()
        px, py = torch.from_numpy(xn), torch.from_numpy(yn)
        names = ["torch eager"] + ([] if quick else ["torch.compile"])
        if quick:
            notes["torch.compile"] = "skipped in --quick (compiling takes 10-20 s here)"
        for name in names:
            model = make_model(torch)
            model.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in init.items()})
            step = make_step(torch, model)
            if name == "torch.compile":
                ok, why = H.torch_compile_works()
                if not ok:
                    notes[name] = why
                    continue
                step = torch.compile(step, dynamic=False)
            try:
                firsts[name] = (step(px, py), *_state(model))
                systems[name] = lambda step=step: step(px, py)
            except Exception as e:
                notes[name] = f"unavailable: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    elif H.wanted("torch"):
        notes["torch"] = refs["torch"]

    H.check_same(firsts, rtol=1e-4, atol=1e-5, label=f"{bench} (loss, parameters, running stats)")
    repeat, min_sample = (5, 0.05) if quick else (15, 0.1)
    out = H.compare(systems, bench, "sgd step", size, baseline="tracejit eager", repeat=repeat,
                    min_sample=min_sample)
    for k, v in notes.items():
        out.append(H.Result(bench, "sgd step", k, size, None, note=v))
    return out


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
