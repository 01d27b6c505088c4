"""A tiny ResNet (examples/train_resnet.py's make_resnet: residual adds, a strided 1x1 downsample, BatchNorm,
in-place ReLU, global average pooling): 3 SGD steps traced = eager = PyTorch, losses, weights and running stats."""
import os
import sys

import numpy as np
import pytest

import tracejit as tj

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))
from train_resnet import make_resnet  # noqa: E402

torch = pytest.importorskip("torch")


def _train(lib, init, batches, traced=False):
    model = make_resnet(lib.nn, widths=(4, 8), blocks=(1, 1), classes=3)
    model.load_state_dict({k: lib.tensor(v.numpy()) for k, v in init.items()})
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    if traced:
        step = tj.trace(step)
    losses = [float(step(lib.tensor(x), lib.tensor(y))) for x, y in batches]
    return losses, {k: v.numpy().astype(np.float64) for k, v in model.state_dict().items()}


def test_three_steps_traced_equal_eager_equal_torch():
    tj.manual_seed(0)
    init = make_resnet(tj.nn, widths=(4, 8), blocks=(1, 1), classes=3).state_dict()
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((6, 3, 8, 8)).astype(np.float32), rng.integers(0, 3, 6)) for _ in range(3)]
    ref_losses, ref_state = _train(torch, init, batches)
    for traced in (False, True):
        losses, state = _train(tj, init, batches, traced)
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5 if not traced else 1e-4)
        for k, v in ref_state.items():
            np.testing.assert_allclose(state[k], v, rtol=1e-4, atol=1e-5, err_msg=f"{k} (traced={traced})")
    assert ref_state["layers.1.downsample.1.num_batches_tracked"] == 3
