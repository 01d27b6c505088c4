"""One AdamW training step of the nanoGPT-style model of examples/gpt_model.py (PyTorch's API, the same source
in every system): batch 16, sequence 64, width 128, 4 heads, 2 blocks, vocabulary 65; the step is forward,
zero_grad(set_to_none=True), backward, AdamW(lr=1e-3, weight_decay=0.1).step().

Systems: tracejit eager, tracejit traced (the whole step under @trace), torch eager, torch.compile(model) (the
model compiled, the optimizer eager, as the issue's user wrote it; not in --quick). Every system starts from the
same weights and sees the same batches; before timing, the losses of two steps and every parameter after them
are checked equal (the keys' bias, whose gradient is zero up to rounding, moves by rounding noise under Adam:
it is compared to within the two steps' learning rate). A timed call is one step on a fixed batch.

    python benches/bench_gpt_step.py [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402
from gpt_model import GPTConfig, batches, copy_weights, define, make_step  # noqa: E402

CFG = GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=128)
BATCH, LR = 16, 1e-3


def _params(model):
    """Parameters after the checked steps; the keys' bias rows of c_attn left out (compared separately)."""
    out, kb = [], []
    C = CFG.n_embd
    for k, v in model.state_dict().items():
        a = np.array(v.detach().numpy())
        if k.endswith("c_attn.bias"):
            kb.append(a[C:2 * C])
            a = np.delete(a, np.s_[C:2 * C])
        out.append(a)
    return out, kb


def run(quick=False):
    H.pin_threads()
    data = np.random.default_rng(0).integers(0, CFG.vocab_size, 20000)
    (x0, y0), (x1, y1) = batches(data, 2, BATCH, CFG.block_size, seed=1)
    size = f"B{BATCH} T{CFG.block_size} C{CFG.n_embd} H{CFG.n_head} L{CFG.n_layer}"
    tracejit.manual_seed(0)
    init = define(tracejit)(CFG)
    systems, firsts, keybias, notes = {}, {}, {}, {}

    def prepare(name, lib, model, step, x, y):
        copy_weights(init, model, lib.tensor)
        losses = [float(step(x[0], y[0])), float(step(x[1], y[1]))]
        ps, kb = _params(model)
        firsts[name] = (np.array(losses), *ps)
        keybias[name] = kb
        systems[name] = lambda: step(x[0], y[0])

    tx = [tracejit.tensor(x0), tracejit.tensor(x1)]
    ty = [tracejit.tensor(y0), tracejit.tensor(y1)]
    for name in ("tracejit eager", "tracejit traced"):
        model = define(tracejit)(CFG)
        step = make_step(tracejit, model, lr=LR)
        prepare(name, tracejit, model, tracejit.trace(step) if name.endswith("traced") else step, tx, ty)

    refs = H.references()
    if H.wanted("torch") and not refs["torch"].startswith("unavailable"):
        import torch
        H.pin_threads()
        px = [torch.from_numpy(x0), torch.from_numpy(x1)]
        py = [torch.from_numpy(y0), torch.from_numpy(y1)]
        names = ["torch eager"] + ([] if quick else ["torch.compile"])
        if quick:
            notes["torch.compile"] = "skipped in --quick (compiling takes tens of seconds here)"
        for name in names:
            model = define(torch)(CFG)
            fwd = None
            if name == "torch.compile":
                ok, why = H.torch_compile_works()
                if not ok:
                    notes[name] = why
                    continue
                fwd = torch.compile(model, dynamic=False)
            try:
                prepare(name, torch, model, make_step(torch, model, lr=LR, fwd=fwd), px, py)
            except Exception as e:
                notes[name] = f"unavailable: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    elif H.wanted("torch"):
        notes["torch"] = refs["torch"]

    H.check_same(firsts, rtol=1e-4, atol=1e-5, label="gpt_step (2 losses, parameters)")
    H.check_same(keybias, rtol=0, atol=2 * LR, label="gpt_step (keys' bias: zero gradient, Adam moves it by noise)")
    repeat, min_sample = (5, 0.05) if quick else (21, 0.2)
    out = H.compare(systems, "gpt_step", "adamw step", size, baseline="tracejit eager", repeat=repeat,
                    min_sample=min_sample)
    for k, v in notes.items():
        out.append(H.Result("gpt_step", "adamw step", k, size, None, note=v))
    return out


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
