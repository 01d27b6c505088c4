"""The nanoGPT-style model of examples/gpt_model.py (PyTorch's API, unchanged source), at a tiny size: the
whole AdamW training step (forward, zero_grad(set_to_none=True), backward, step) eagerly and traced gives
PyTorch's losses and parameters over a few steps, from the same weights and batches."""
import os
import sys

import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from gpt_model import GPTConfig, batches, copy_weights, define, make_step  # noqa: E402


@pytest.mark.parametrize("sdpa", [False, True], ids=["masked_fill_softmax", "sdpa"])
def test_gpt_step_traced_equals_eager_equals_torch(sdpa):
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, sdpa=sdpa)
    ref = define(torch)(cfg)
    models = [define(tj)(cfg) for _ in range(2)]
    for m in models:
        copy_weights(ref, m, tj.tensor)
    # the numba backend compiles the classic attention's step; the sdpa one runs on the reference interpreter
    # (its attention is one op either way), which keeps this test's compile time down
    steps = [make_step(torch, ref), make_step(tj, models[0]),
             tj.trace(make_step(tj, models[1]), backend="interpreter" if sdpa else None)]
    data = np.random.default_rng(0).integers(0, cfg.vocab_size, 400)
    for x, y in batches(data, 4, 3, cfg.block_size, seed=1):
        losses = [float(steps[0](torch.tensor(x), torch.tensor(y)))]
        losses += [float(s(tj.tensor(x), tj.tensor(y))) for s in steps[1:]]
        np.testing.assert_allclose(losses[1:], [losses[0]] * 2, rtol=1e-5)
    want = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    for m in models:
        for k, v in m.state_dict().items():
            v, w = v.numpy(), want[k]
            if k.endswith("c_attn.bias"):
                # the keys' bias has a zero gradient (softmax ignores a shift of a row): AdamW moves it by
                # rounding noise / (|noise| + eps), up to lr per step and differently in every library
                C = cfg.n_embd
                np.testing.assert_allclose(v[C:2 * C], w[C:2 * C], atol=4 * 1e-3)
                v, w = np.delete(v, np.s_[C:2 * C]), np.delete(w, np.s_[C:2 * C])
            np.testing.assert_allclose(v, w, rtol=1e-4, atol=2e-6, err_msg=k)
