"""F.scaled_dot_product_attention: one registry op (and one backward op), PyTorch's signature and numbers.

Against PyTorch: no mask, causal (also with L != S), boolean and float masks (broadcast over batch and heads),
scale, rows that see no key; values and gradients of q, k, v (and of a float mask), eagerly and traced; the
blocked kernels (blocks of query rows) against one block; a float64 numpy reference that needs no torch."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as TF
from tracejit.ops import attention as A


def _ref64(q, k, v, mask=None, is_causal=False, scale=None):
    """softmax(q k^T * scale + mask) v in float64, straight from the definition."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if is_causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v


def _inputs(B=2, H=3, L=5, S=7, E=4, Ev=6, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in ((B, H, L, E), (B, H, S, E), (B, H, S, Ev))]


MASKS = {
    "none": lambda rng, L, S: (None, {}),
    "causal": lambda rng, L, S: (None, {"is_causal": True}),
    "bool": lambda rng, L, S: (np.concatenate([np.ones((L, 1), bool), rng.random((L, S - 1)) > 0.4], 1), {}),
    "float_per_head": lambda rng, L, S: (rng.standard_normal((3, L, S)).astype(np.float32), {}),
    "scale": lambda rng, L, S: (None, {"scale": 0.3}),
}


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("LS", [(5, 7), (6, 6), (7, 4)], ids=["L<S", "L=S", "L>S"])
def test_sdpa_forward_matches_float64_definition(mask, LS):
    L, S = LS
    q, k, v = _inputs(L=L, S=S)
    m, kw = MASKS[mask](np.random.default_rng(1), L, S)
    got = TF.scaled_dot_product_attention(tj.tensor(q), tj.tensor(k), tj.tensor(v),
                                          attn_mask=None if m is None else tj.tensor(m), **kw)
    np.testing.assert_allclose(got.numpy(), _ref64(q, k, v, m, **kw), rtol=2e-5, atol=2e-6)


def test_sdpa_blocks_equal_one_block(monkeypatch):
    """The kernels in blocks of query rows (forward and backward) compute what one block computes."""
    q, k, v = _inputs(L=13, S=9)
    g = np.random.default_rng(3).standard_normal((2, 3, 13, 6)).astype(np.float32)
    kw = dict(is_causal=True, scale=0.5)
    one = A._sdpa_np(q, k, v, **kw)
    one_b = A._sdpa_backward_np(q, k, v, one, g, **kw)
    monkeypatch.setattr(A, "BLOCK_ELEMENTS", 2 * 3 * 9 * 2)       # two query rows per block
    assert A._rows_per_block(6, 9) == 2
    np.testing.assert_allclose(A._sdpa_np(q, k, v, **kw), one, rtol=1e-6, atol=1e-7)
    for a, b in zip(A._sdpa_backward_np(q, k, v, one, g, **kw), one_b):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_sdpa_is_one_op_traced():
    q, k, v = (tj.tensor(a, requires_grad=True) for a in _inputs())
    g = tj.make_graph(lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    assert [n.op.name for n in g.nodes] == ["scaled_dot_product_attention"]


def test_sdpa_errors():
    q, k, v = (tj.tensor(a) for a in _inputs())
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        TF.scaled_dot_product_attention(q, k, v, attn_mask=tj.ones(5, 7) > 0, is_causal=True)
    with pytest.raises(RuntimeError, match="must match"):
        TF.scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(RuntimeError, match="same floating point dtype"):
        TF.scaled_dot_product_attention(q, k.double(), v)


# ----------------------------------------------------------------------------- against PyTorch

def _run(lib, F, arrays, m0, kw, traced=None):
    q, k, v = (lib.tensor(a, requires_grad=True) for a in arrays)
    m = None if m0 is None else lib.tensor(m0, requires_grad=m0.dtype != bool)

    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    o = (tj.trace(f, backend=traced) if traced else f)(q, k, v, m)
    w = lib.tensor(np.linspace(-1, 1, o.numel()).reshape(tuple(o.shape)).astype(np.float32))
    (o * w).sum().backward()
    return [o.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)] + \
        ([m.grad.numpy()] if m is not None and m.requires_grad else [])


@pytest.mark.parametrize("mask", list(MASKS) + ["row_sees_nothing"])
def test_sdpa_vs_torch_values_and_gradients(mask):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    L, S = 5, 7
    arrays = _inputs(L=L, S=S)
    if mask == "row_sees_nothing":
        m0, kw = np.ones((L, S), bool), {}
        m0[2] = False               # PyTorch's CPU kernel: zeros, and zero gradients
    else:
        m0, kw = MASKS[mask](np.random.default_rng(2), L, S)
    want = _run(torch, F, arrays, m0, kw)
    for traced in (None, "interpreter", "numba"):
        got = _run(tj, TF, arrays, m0, kw, traced)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{mask} {traced}")


def test_sdpa_broadcast_batch_dims_vs_torch():
    """q, k, v with different batch dims: the gradients are summed back to each input's shape."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5, 4), (1, 3, 7, 4), (3, 7, 6))]
    want = _run(torch, F, arrays, None, {"is_causal": True})
    assert [a.shape for a in want[1:]] == [a.shape for a in arrays]
    for traced in (None, "interpreter", "numba"):
        for a, b in zip(_run(tj, TF, arrays, None, {"is_causal": True}, traced), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=str(traced))


def test_sdpa_dropout_keeps_or_scales_each_probability():
    """dropout_p > 0: with v the identity the output is the dropped probabilities, each 0 or p / (1 - dropout_p)
    of the definition's (causal: the masked ones stay 0)."""
    q, k, _ = _inputs(L=6, S=6)
    v = np.broadcast_to(np.eye(6, dtype=np.float32), (2, 3, 6, 6)).copy()
    p = _ref64(q, k, v, is_causal=True)
    tj.manual_seed(0)
    got = TF.scaled_dot_product_attention(tj.tensor(q), tj.tensor(k), tj.tensor(v), dropout_p=0.25,
                                          is_causal=True).numpy()
    kept = got != 0
    assert 0.5 < kept[p > 0].mean() < 0.95 and not kept[p == 0].any()
    np.testing.assert_allclose(got[kept], p[kept] / 0.75, rtol=1e-5)


def test_sdpa_double_backward_vs_torch():
    """A gradient that is differentiated again takes the rule through ops. PyTorch's CPU kernel has no double
    backward: its reference is the definition written with its ops."""
    torch = pytest.importorskip("torch")
    arrays = _inputs(B=1, H=2, L=4, S=4, E=3, Ev=3)

    def torch_sdpa(q, k, v):
        s = (q @ k.transpose(-2, -1)) / np.sqrt(q.shape[-1])
        s = s.masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(s, -1) @ v
    res = []
    for lib, sdpa in ((torch, torch_sdpa), (tj, lambda q, k, v: TF.scaled_dot_product_attention(q, k, v,
                                                                                               is_causal=True))):
        q, k, v = (lib.tensor(a.astype(np.float64), requires_grad=True) for a in arrays)
        o = sdpa(q, k, v)
        (gq,) = lib.autograd.grad((o * o).sum(), q, create_graph=True)
        (gq * gq).sum().backward()
        res.append([t.grad.numpy() for t in (q, k, v)])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-9)
