"""The eight architectures of examples/model_zoo2.py (GPT-2, BERT encoder, packed LSTM LM, DCGAN, EfficientNet
MBConv, GNN message passing, top-2 MoE, RealNVP), written in PyTorch's API, the same code run with `torch` and with
`tracejit`. From PyTorch's weights (its state_dict loaded strictly), one training-mode forward and backward: the loss
and every parameter's gradient equal PyTorch's, eagerly and traced. Below them, regression tests for the tracejit bugs
these models found."""
import functools
import os
import sys

import numpy as np
import pytest

import tracejit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from model_zoo2 import models  # noqa: E402
from test_model_zoo import check_model, load_from_torch  # noqa: E402


NAMES = [m[0] for m in models(tracejit)]


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("name", NAMES)
def test_model_matches_pytorch(name, traced):
    check_model(models, NAMES.index(name), traced)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_lstm_proj_size_matches_pytorch(packed, traced):
    """LSTM's proj_size (was NotImplementedError): weight_hr_l{k} (P, H) projects h; h_0/h_n and the output have
    size P, c has hidden_size; 2 bidirectional layers, with a given (h_0, c_0), packed with unsorted lengths."""
    torch = pytest.importorskip("torch")
    kw = dict(input_size=4, hidden_size=6, num_layers=2, bidirectional=True, proj_size=3, batch_first=True)
    torch.manual_seed(0)
    tm, jm = torch.nn.LSTM(**kw), tracejit.nn.LSTM(**kw)
    assert [(k, tuple(v.shape)) for k, v in jm.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    assert repr(jm) == repr(tm)
    load_from_torch(jm, tm)
    rng = np.random.default_rng(1)
    x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in ((3, 5, 4), (4, 3, 3), (4, 3, 6)))

    def run(lib, m, x, h0, c0):
        if packed:
            x = lib.nn.utils.rnn.pack_padded_sequence(x, (5, 2, 4), batch_first=True, enforce_sorted=False)
        out, (h, c) = m(x, (h0, c0))
        if packed:
            out = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]
        loss = out.pow(2).sum() + h.sum() + c.pow(2).mean()
        loss.backward()
        return loss.detach()
    tl = run(torch, tm, *(torch.tensor(a) for a in (x, h0, c0)))
    jl = (tracejit.trace(functools.partial(run, tracejit, jm)) if traced else functools.partial(run, tracejit, jm))(
        *(tracejit.tensor(a) for a in (x, h0, c0)))
    np.testing.assert_allclose(jl.numpy(), tl.numpy(), rtol=1e-5)
    tg = dict(tm.named_parameters())
    for k, p in jm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tg[k].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_lstm_proj_size_errors_as_pytorch():
    torch = pytest.importorskip("torch")
    for lib in (torch, tracejit):
        with pytest.raises(ValueError, match="smaller than hidden_size"):
            lib.nn.LSTM(4, 3, proj_size=3)
        with pytest.raises(ValueError, match="positive integer or zero"):
            lib.nn.LSTM(4, 3, proj_size=-1)
        m = lib.nn.LSTM(4, 6, proj_size=2)
        with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 3, 2\), got \[1, 3, 6\]"):
            m(lib.zeros(5, 3, 4), (lib.zeros(1, 3, 6), lib.zeros(1, 3, 6)))
        with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 3, 6\), got \[1, 3, 2\]"):
            m(lib.zeros(5, 3, 4), (lib.zeros(1, 3, 2), lib.zeros(1, 3, 2)))


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_spectral_norm_matches_pytorch(traced):
    """nn.utils.spectral_norm (was missing), as an SNGAN discriminator uses it: weight_orig, weight_u, weight_v; in
    training each call runs the power iteration and updates u and v in place (traced: written back after the run);
    the loss, the gradients and u, v after two steps equal PyTorch's, then eval mode, then remove_spectral_norm."""
    torch = pytest.importorskip("torch")

    def build(lib):
        nn = lib.nn
        return nn.Sequential(nn.utils.spectral_norm(nn.Conv2d(3, 4, 3, 2, 1)), nn.LeakyReLU(0.2),
                             nn.utils.spectral_norm(nn.ConvTranspose2d(4, 2, 2, 2), n_power_iterations=2))
    torch.manual_seed(0)
    tm, jm = build(torch), build(tracejit)
    assert list(jm.state_dict()) == list(tm.state_dict())
    load_from_torch(jm, tm)
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 6)).astype(np.float32)

    def step(m, x):
        loss = m(x).pow(2).mean()
        loss.backward()
        return loss.detach()
    jstep = tracejit.trace(step) if traced else step
    for _ in range(2):
        tl, jl = step(tm, torch.tensor(x)), jstep(jm, tracejit.tensor(x))
        np.testing.assert_allclose(jl.numpy(), tl.numpy(), rtol=1e-5)
    tp = dict(tm.named_parameters())
    for k, p in jm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[k].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
    for k, b in jm.state_dict().items():
        np.testing.assert_allclose(b.numpy(), tm.state_dict()[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    tm.eval(), jm.eval()
    np.testing.assert_allclose(jm(tracejit.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    for lib, m in ((torch, tm), (tracejit, jm)):
        lib.nn.utils.remove_spectral_norm(m[0])
    assert list(jm.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(jm[0].weight.detach().numpy(), tm[0].weight.detach().numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        tracejit.nn.utils.spectral_norm(jm[2])
