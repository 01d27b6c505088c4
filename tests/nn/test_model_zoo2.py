"""The eight architectures of examples/model_zoo2.py (GPT-2, BERT encoder, packed LSTM LM, DCGAN, EfficientNet
MBConv, GNN message passing, top-2 MoE, RealNVP), written in PyTorch's API, the same code run with `torch` and with
`tracejit`. From PyTorch's weights (its state_dict loaded strictly), one training-mode forward and backward: the loss
and every parameter's gradient equal PyTorch's, eagerly and traced. Below them, regression tests for the tracejit bugs
these models found."""
import os
import sys

import numpy as np
import pytest

import tracejit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from model_zoo2 import models  # noqa: E402


NAMES = [m[0] for m in models(tracejit)]
XFAIL = {}


def _args(lib, args):
    """numpy arrays as `lib` tensors; other arguments (a tuple of lengths) as they are."""
    return [lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("name", NAMES)
def test_model_matches_pytorch(name, traced):
    torch = pytest.importorskip("torch")
    if (name, traced) in XFAIL:
        pytest.xfail(XFAIL[name, traced])
    i = NAMES.index(name)
    _, TM, inputs, tloss = models(torch)[i]
    _, JM, _, jloss = models(tracejit)[i]
    torch.manual_seed(0)
    tm, jm = TM(), JM()
    jm.load_state_dict({k: tracejit.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    args = inputs()
    tl = tloss(tm(*_args(torch, args)))
    tl.backward()

    def step(*xs):
        loss = jloss(jm(*xs))
        loss.backward()
        return loss.detach()
    jl = (tracejit.trace(step) if traced else step)(*_args(tracejit, args))
    np.testing.assert_allclose(jl.numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-6)
    tg = dict(tm.named_parameters())
    assert sorted(tg) == sorted(k for k, _ in jm.named_parameters())
    scale = max(np.abs(p.grad.numpy()).max() for p in tm.parameters() if p.grad is not None)
    for k, p in jm.named_parameters():
        assert (p.grad is None) == (tg[k].grad is None), k
        if p.grad is not None:
            err = np.abs(p.grad.numpy() - tg[k].grad.numpy()).max() / scale
            assert err < 2e-5, (k, err)
    tb = dict(tm.named_buffers())
    for k, b in jm.named_buffers():                               # BatchNorm running statistics after the step
        np.testing.assert_allclose(b.numpy(), tb[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
