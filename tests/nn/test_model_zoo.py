"""The ten architectures of examples/model_zoo.py (UNet, MobileNetV3-style, ResNeXt block, ViT, ConvNeXt block,
DenseNet, WaveNet, GRU seq2seq with attention, VAE, Swin window attention), written in PyTorch's API, the same code
run with `torch` and with `tracejit` (the module namespace passed in). From PyTorch's weights (its state_dict loaded
strictly: the same names), one training-mode forward and backward: the loss and every parameter's gradient equal
PyTorch's, eagerly and traced."""
import os
import sys

import numpy as np
import pytest

import tracejit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from model_zoo import models  # noqa: E402


NAMES = [m[0] for m in models(tracejit)]


def _args(lib, args):
    """numpy arrays as `lib` tensors; other arguments (a tuple of lengths) as they are."""
    return [lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args]


def load_from_torch(jm, tm):
    """PyTorch module tm's state_dict loaded (strictly) into tracejit module jm."""
    jm.load_state_dict({k: tracejit.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def check_model(models, i, traced):
    """Zoo entry i (`models(lib)`, see examples/model_zoo.py) from PyTorch's weights: one training-mode forward and
    backward, the loss, every parameter's gradient and the buffers after it (BatchNorm's running statistics) equal
    PyTorch's, eagerly or traced."""
    torch = pytest.importorskip("torch")
    _, TM, inputs, tloss = models(torch)[i]
    _, JM, _, jloss = models(tracejit)[i]
    torch.manual_seed(0)
    tm, jm = TM(), JM()
    load_from_torch(jm, tm)
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
    # gradients relative to the largest one: a bias followed by BatchNorm has a gradient of exactly zero in exact
    # arithmetic, float32 rounding noise in both libraries
    scale = max(np.abs(p.grad.numpy()).max() for p in tm.parameters() if p.grad is not None)
    for k, p in jm.named_parameters():
        assert (p.grad is None) == (tg[k].grad is None), k          # (WaveNet's last residual conv gets none)
        if p.grad is not None:
            err = np.abs(p.grad.numpy() - tg[k].grad.numpy()).max() / scale
            assert err < 2e-5, (k, err)
    tb = dict(tm.named_buffers())
    for k, b in jm.named_buffers():
        np.testing.assert_allclose(b.numpy(), tb[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("name", NAMES)
def test_model_matches_pytorch(name, traced):
    check_model(models, NAMES.index(name), traced)
