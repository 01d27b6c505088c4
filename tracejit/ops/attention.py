"""Scaled dot-product attention as one op (PyTorch's `F.scaled_dot_product_attention`), and its backward as one.

softmax(q @ k^T * scale + mask) @ v over the last two dims of [..., L, E] queries, [..., S, E] keys and
[..., S, Ev] values. The kernels run in blocks of query rows, so that the [..., L, S] score matrix is never
in memory at once when it is large: per block the scores, their softmax and the product with v (forward),
and the scores again, dV, dP, dS, dQ and the block's share of dK (backward: the probabilities are recomputed
from q and k, as flash attention does, instead of being kept from the forward). Each block's row of scores
is complete, so the softmax is exact (no online rescaling needed across key blocks). With `is_causal` a block
of rows reads only the keys its last row sees (half the products of a long sequence).

`is_causal` is PyTorch's: a query i sees the keys j <= i (the top-left triangle, also when L != S). A boolean
mask says which scores take part, a float mask is added to them. A row that sees no key gives zeros (and
zero gradients), as PyTorch's CPU kernel does.
"""
import math

import numpy as np

from ..kernels.cpu.blas import np_matmul
from .registry import AVal, apply, defop, OPS

BLOCK_ELEMENTS = 1 << 19       # scores per block (2 MiB of float32): the block's rows of every batch and head


def _rows_per_block(batch, S):
    return max(1, min(1 << 30, BLOCK_ELEMENTS // max(1, batch * S)))


def _scores(q, k, mask, is_causal, scale, r0, r1):
    """Scaled scores of query rows r0:r1 with the mask applied ([..., r1 - r0, S])."""
    s = np_matmul(q[..., r0:r1, :], np.swapaxes(k, -1, -2))
    s *= s.dtype.type(scale)
    if is_causal:
        S = k.shape[-2]
        allowed = np.arange(S)[None, :] <= np.arange(r0, r1)[:, None]
        s = np.where(allowed, s, -np.inf).astype(s.dtype, copy=False)
    elif mask is not None:
        m = mask[..., r0:r1, :] if mask.ndim >= 2 and mask.shape[-2] != 1 else mask
        if m.dtype == np.bool_:
            s = np.where(m, s, -np.inf).astype(s.dtype, copy=False)
        else:
            s = s + m.astype(s.dtype, copy=False)
    return s


def _probs(s):
    """Row softmax of scores; a row of -inf only (no key to see) gives zeros."""
    mx = np.max(s, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0).astype(s.dtype, copy=False)
    e = np.exp(s - mx)
    tot = np.sum(e, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, e / tot, 0).astype(s.dtype, copy=False)


def _sdpa_np(q, k, v, mask=None, *, is_causal, scale):
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    L, S = q.shape[-2], k.shape[-2]
    out = np.empty(lead + (L, v.shape[-1]), np.result_type(q, k, v))
    step = _rows_per_block(int(np.prod(lead, dtype=np.int64)), S)
    for r0 in range(0, L, step):
        r1 = min(L, r0 + step)
        s1 = min(S, r1) if is_causal else S         # causal: rows r0:r1 see no key from r1 on
        out[..., r0:r1, :] = np_matmul(_probs(_scores(q, k[..., :s1, :], mask, is_causal, scale, r0, r1)),
                                       v[..., :s1, :])
    return out


def _sdpa_backward_np(q, k, v, out, g, mask=None, *, is_causal, scale):
    L, S = q.shape[-2], k.shape[-2]
    lead = out.shape[:-2]
    dq = np.empty(lead + q.shape[-2:], q.dtype)
    dk = np.zeros(lead + k.shape[-2:], k.dtype)
    dv = np.zeros(lead + v.shape[-2:], v.dtype)
    step = _rows_per_block(int(np.prod(lead, dtype=np.int64)), S)
    sc = q.dtype.type(scale)
    for r0 in range(0, L, step):
        r1 = min(L, r0 + step)
        s1 = min(S, r1) if is_causal else S         # causal: rows r0:r1 see no key from r1 on
        kb, vb = k[..., :s1, :], v[..., :s1, :]
        p = _probs(_scores(q, kb, mask, is_causal, scale, r0, r1))
        gb = g[..., r0:r1, :]
        dv[..., :s1, :] += np_matmul(np.swapaxes(p, -1, -2), gb)
        dp = np_matmul(gb, np.swapaxes(vb, -1, -2))
        dp -= np.sum(gb * out[..., r0:r1, :], axis=-1, keepdims=True)      # rowsum(P * dP) = rowsum(dO * O)
        ds = p * dp
        ds *= sc
        dq[..., r0:r1, :] = np_matmul(ds, kb)
        dk[..., :s1, :] += np_matmul(np.swapaxes(ds, -1, -2), q[..., r0:r1, :])
    return dq, dk, dv       # over the broadcast batch dims: the engine sums them back to each input's shape


def _meta(q, k, v, mask=None, *, is_causal, scale):
    from .registry import broadcast_shapes
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value must have at least 2 dimensions")
    if q.shape[-1] != k.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: the last dim of query ({q.shape[-1]}) and key "
                           f"({k.shape[-1]}) must match")
    if k.shape[-2] != v.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key ({k.shape[-2]}) and value ({v.shape[-2]}) must have "
                           f"the same sequence length")
    if not (q.dtype is k.dtype is v.dtype) or not q.dtype.is_floating_point:
        raise RuntimeError(f"Expected query, key, and value to have the same floating point dtype, but got "
                           f"query.dtype: {q.dtype.name}, key.dtype: {k.dtype.name}, and value.dtype: {v.dtype.name}")
    lead = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        broadcast_shapes(mask.shape, lead + (q.shape[-2], k.shape[-2]))
    return AVal(lead + (q.shape[-2], v.shape[-1]), q.dtype)


def _probs_ops(q, k, mask, is_causal, scale):
    """The attention probabilities through differentiable ops (double backward; a float mask's gradient)."""
    from ..creation import ones
    from .elementwise import where
    from .nn_ops import softmax
    from .shape_ops import tril
    s = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        mask = tril(ones(q.shape[-2], k.shape[-2])) > 0
    if mask is not None:
        s = where(mask, s, float("-inf")) if mask.dtype.name == "bool" else s + mask
    p = softmax(s, -1)
    return where(p == p, p, 0.0)            # rows that see no key: zeros, as the kernel gives


def _vjp(c, g):
    from .._state import STATE
    from . import reduction as R
    ins = c.inputs
    q, k, v = ins[:3]
    mask = ins[3] if len(ins) > 3 else None
    a = c.attrs
    mask_grad = mask is not None and c.edges[3] is not None
    if STATE.grad_enabled or mask_grad:
        # create_graph (the gradient is differentiated again) or a float mask that requires grad (rare): the
        # rule through ops; otherwise the one backward op below
        p = _probs_ops(q, k, mask, a["is_causal"], a["scale"])
        dv = p.transpose(-2, -1) @ g
        dp = g @ v.transpose(-2, -1)
        ds = p * (dp - R.sum(dp * p, -1, keepdim=True))
        dsc = ds * a["scale"]
        return dsc @ k, dsc.transpose(-2, -1) @ q, dv, (ds if mask_grad else None)
    return apply(OPS["sdpa_backward"], q, k, v, c.out, g, *ins[3:], **a) + (None,) * (len(ins) - 3)


defop("scaled_dot_product_attention", _sdpa_np, _meta, _vjp, saves="io",
      grad_name="ScaledDotProductAttentionBackward0")


def _bwd_meta(q, k, v, out, g, mask=None, *, is_causal, scale):
    lead = tuple(out.shape[:-2])
    return AVal(lead + q.shape[-2:], q.dtype), AVal(lead + k.shape[-2:], k.dtype), AVal(lead + v.shape[-2:], v.dtype)


# no VJP of its own: a gradient that is differentiated again takes the rule through ops (see _vjp)
defop("sdpa_backward", _sdpa_backward_np, _bwd_meta, None, nout=3, saves="")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """PyTorch's `F.scaled_dot_product_attention`: one op (dropout_p > 0 runs the ops it stands for)."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa=True is not supported by tracejit")
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    _meta(query, key, value, attn_mask, is_causal=is_causal, scale=scale)      # eager mode checks as tracing does
    if dropout_p > 0.0:
        from ..nn.functional import dropout
        return dropout(_probs_ops(query, key, attn_mask, is_causal, scale), dropout_p, True) @ value
    args = (query, key, value) if attn_mask is None else (query, key, value, attn_mask)
    return apply(OPS["scaled_dot_product_attention"], *args, is_causal=bool(is_causal), scale=scale)
