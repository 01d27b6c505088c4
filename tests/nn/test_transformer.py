"""nn.MultiheadAttention and the Transformer layers: PyTorch's state_dict names and numbers (values and every
gradient, from the same weights), its masks and layouts, traced = eager, and its errors."""
import numpy as np
import pytest

import tracejit as tj


def _copy_from_torch(tm, jm):
    sd = {k: tj.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
    assert set(jm.state_dict()) == set(sd), set(jm.state_dict()) ^ set(sd)
    jm.load_state_dict(sd)


def _close(a, b, tol=2e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kw", [{}, {"bias": False}, {"add_bias_kv": True, "add_zero_attn": True},
                                {"kdim": 6, "vdim": 5}], ids=["plain", "no_bias", "bias_kv_zero_attn", "kdim_vdim"])
def test_multihead_attention_matches_pytorch(batch_first, kw):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first, **kw)
    jm = tj.nn.MultiheadAttention(8, 2, batch_first=batch_first, **kw)
    _copy_from_torch(tm, jm)
    rng = np.random.default_rng(0)
    L, S, N = 4, 5, 3
    shape = (lambda n, e: (N, n, e)) if batch_first else (lambda n, e: (n, N, e))
    q, k, v = (rng.standard_normal(shape(n, e)).astype(np.float32)
               for n, e in ((L, 8), (S, kw.get("kdim", 8)), (S, kw.get("vdim", 8))))
    kpm = np.zeros((N, S), bool)
    kpm[0, -2:] = True
    masks = [{}, {"key_padding_mask": kpm, "attn_mask": np.triu(np.ones((L, S), bool), 2)},
             {"attn_mask": rng.standard_normal((N * 2, L, S)).astype(np.float32),
              "key_padding_mask": np.where(kpm, -1e4, 0.0).astype(np.float32)}]
    for need_weights in (True, False):
        for mask in masks:
            tin = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
            jin = [tj.tensor(a, requires_grad=True) for a in (q, k, v)]
            to, tw = tm(*tin, need_weights=need_weights, **{n: torch.tensor(a) for n, a in mask.items()})
            jo, jw = jm(*jin, need_weights=need_weights, **{n: tj.tensor(a) for n, a in mask.items()})
            _close(jo, to)
            assert (jw is None) == (tw is None)
            if tw is not None:
                _close(jw, tw)
            to.square().sum().backward()
            jo.square().sum().backward()
            for a, b in zip(jin, tin):
                _close(a.grad, b.grad, 1e-4)
            for (n1, p1), (n2, p2) in zip(tm.named_parameters(), jm.named_parameters()):
                assert n1 == n2
                _close(p2.grad, p1.grad, 1e-4)
                p1.grad = p2.grad = None


def test_multihead_attention_per_head_weights_and_unbatched_input():
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    tm, jm = torch.nn.MultiheadAttention(8, 4), tj.nn.MultiheadAttention(8, 4)
    _copy_from_torch(tm, jm)
    x = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)      # (L, E): one sequence
    to, tw = tm(*[torch.tensor(x)] * 3, average_attn_weights=False)
    jo, jw = jm(*[tj.tensor(x)] * 3, average_attn_weights=False)
    assert tuple(jo.shape) == (5, 8) and tuple(jw.shape) == (4, 5, 5)
    _close(jo, to)
    _close(jw, tw)


@pytest.mark.parametrize("batch_first, norm_first, activation", [(True, False, "relu"), (False, True, "gelu")])
def test_transformer_matches_pytorch_eager_and_traced(batch_first, norm_first, activation):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    kw = dict(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32, dropout=0.0,
              batch_first=batch_first, norm_first=norm_first, activation=activation)
    tm, jm = torch.nn.Transformer(**kw), tj.nn.Transformer(**kw)
    _copy_from_torch(tm, jm)
    rng = np.random.default_rng(0)
    N, S, T = 2, 5, 4
    src = rng.standard_normal((N, S, 16) if batch_first else (S, N, 16)).astype(np.float32)
    tgt = rng.standard_normal((N, T, 16) if batch_first else (T, N, 16)).astype(np.float32)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(T)
    jmask = tj.nn.Transformer.generate_square_subsequent_mask(T)
    _close(jmask, tmask)
    kpm = np.zeros((N, S), bool)
    kpm[1, -1] = True

    def run(m, lib, mask, s, t):
        return m(s, t, tgt_mask=mask, src_key_padding_mask=lib.tensor(kpm), memory_key_padding_mask=lib.tensor(kpm),
                 tgt_is_causal=True)

    to = run(tm, torch, tmask, torch.tensor(src), torch.tensor(tgt))
    to.square().sum().backward()
    jo = run(jm, tj, jmask, tj.tensor(src), tj.tensor(tgt))
    _close(jo, to)
    loss = jo.square().sum()
    loss.backward()
    grads = {}
    for (n1, p1), (n2, p2) in zip(tm.named_parameters(), jm.named_parameters()):
        assert n1 == n2
        _close(p2.grad, p1.grad, 1e-4)
        grads[n2], p2.grad = p2.grad.numpy().copy(), None

    @tj.trace
    def step(s, t):
        lt = run(jm, tj, jmask, s, t).square().sum()
        lt.backward()
        return lt

    for _ in range(2):          # the second call runs the compiled program
        for p in jm.parameters():
            p.grad = None
        np.testing.assert_allclose(float(step(tj.tensor(src), tj.tensor(tgt))), float(loss), rtol=1e-5)
        for n, p in jm.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), grads[n], rtol=1e-4, atol=1e-5)


def test_encoder_layers_are_copies_and_dropout_follows_train_and_eval():
    layer = tj.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5, batch_first=True)
    enc = tj.nn.TransformerEncoder(layer, num_layers=3, norm=tj.nn.LayerNorm(8))
    assert len(enc.layers) == 3 and enc.layers[0] is not layer
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    np.testing.assert_array_equal(enc.layers[2].linear1.weight.detach().numpy(), layer.linear1.weight.detach().numpy())
    x = tj.randn(2, 6, 8)
    tj.manual_seed(0)
    a = enc(x)
    tj.manual_seed(1)
    assert not np.allclose(enc(x).detach().numpy(), a.detach().numpy())       # dropout draws differ
    enc.eval()
    np.testing.assert_array_equal(enc(x).detach().numpy(), enc(x).detach().numpy())


def test_errors_are_pytorchs():
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        tj.nn.MultiheadAttention(10, 3)
    m = tj.nn.MultiheadAttention(8, 2)
    x = tj.randn(4, 2, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match=r"shape of the 2D attn_mask is \(3, 4\), but should be \(4, 4\)"):
        m(x, x, x, attn_mask=tj.zeros(3, 4))
    with pytest.raises(AssertionError, match="key_padding_mask shape"):
        m(x, x, x, key_padding_mask=tj.zeros(4, 2).bool())
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        tj.nn.TransformerEncoderLayer(8, 2, activation="tanh")
