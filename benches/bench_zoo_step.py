"""One SGD training step of four of examples/model_zoo.py's architectures (a UNet, a MobileNetV3-style net, a ViT,
a ConvNeXt block), batch 32 (the zoo's inputs repeated), in every system: tracejit eager and traced, torch eager,
torch.compile (not in --quick). The same model code in each (PyTorch's API), PyTorch's copy from tracejit's
initial weights; the first step's loss and parameters checked equal before timing.

    python benches/bench_zoo_step.py [--quick]
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(os.path.dirname(here), "examples"))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402

import tracejit  # noqa: E402
from model_zoo import models  # noqa: E402

BATCH = 32
MODELS = ("UNet", "MobileNetV3-ish", "ViT", "ConvNeXt block")


def _step(lib, model, loss_fn):
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(*xs):
        opt.zero_grad()
        loss = loss_fn(model(*xs))
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def _params(model):
    return [np.array(p.detach().numpy()) for p in model.parameters()]


def run(quick=False):
    H.pin_threads()
    out = []
    names = [m[0] for m in models(tracejit)]
    refs = H.references()
    have_torch = H.wanted("torch") and not refs["torch"].startswith("unavailable")
    for name in MODELS:
        i = names.index(name)
        _, JM, inputs, jloss = models(tracejit)[i]
        args = tuple(np.repeat(a, BATCH // a.shape[0], 0) for a in inputs())
        size = f"B{BATCH} " + "x".join(map(str, args[0].shape[1:]))
        tracejit.manual_seed(0)
        init = JM().state_dict()
        systems, firsts, notes = {}, {}, {}
        targs = [tracejit.tensor(a) for a in args]
        for sysname in ("tracejit eager", "tracejit traced"):
            model = JM()
            model.load_state_dict(init)
            step = _step(tracejit, model, jloss)
            if sysname.endswith("traced"):
                step = tracejit.trace(step)
            firsts[sysname] = (step(*targs), *_params(model))
            systems[sysname] = lambda step=step: step(*targs)
        if have_torch:
            import torch
            H.pin_threads()
            _, TM, _, tloss = models(torch)[i]
            pargs = [torch.from_numpy(a) for a in args]
            for sysname in ["torch eager"] + ([] if quick else ["torch.compile"]):
                model = TM()
                model.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in init.items()})
                step = _step(torch, model, tloss)
                if sysname == "torch.compile":
                    ok, why = H.torch_compile_works()
                    if not ok:
                        notes[sysname] = why
                        continue
                    step = torch.compile(step, dynamic=False)
                try:
                    firsts[sysname] = (step(*pargs), *_params(model))
                    systems[sysname] = lambda step=step: step(*pargs)
                except Exception as e:
                    notes[sysname] = f"unavailable: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            if quick:
                notes["torch.compile"] = "skipped in --quick"
        elif H.wanted("torch"):
            notes["torch"] = refs["torch"]
        H.check_same(firsts, rtol=1e-4, atol=1e-5, label=f"zoo_step {name} (loss, parameters)")
        repeat, min_sample = (5, 0.05) if quick else (15, 0.1)
        out += H.compare(systems, "zoo_step", name, size, baseline="tracejit eager", repeat=repeat,
                         min_sample=min_sample)
        for k, v in notes.items():
            out.append(H.Result("zoo_step", name, k, size, None, note=v))
    return out


if __name__ == "__main__":
    from tracejit.bench import print_table
    print_table(run(quick="--quick" in sys.argv))
