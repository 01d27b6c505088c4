"""MultiheadAttention and the Transformer layers (encoder, decoder, both), with PyTorch's parameters, state_dict
names, initialization, masks and layouts (batch_first or sequence first, unbatched inputs), built from the
registry's ops: the projections are linear ops, the attention F.scaled_dot_product_attention (one op, forward and
backward) unless the weights are asked for."""
import copy

from ... import _dtype as D, creation as C
from ...ops.linalg import matmul
from ...ops.shape_ops import cat, triu
from .. import functional as F, init
from ..parameter import Parameter
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's output projection (PyTorch's name for it; a Linear)."""


def _float_mask(mask, name, dtype):
    """An additive float mask: a bool mask's True entries -inf (not attended), a float mask as it is."""
    if mask is None:
        return None
    if mask.dtype == D.bool_:
        return C.zeros(mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask.to(dtype)


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        f = dict(dtype=dtype, device=device)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(C.empty((3 * embed_dim, embed_dim), **f))
            for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(n, None)
        else:
            self.q_proj_weight = Parameter(C.empty((embed_dim, embed_dim), **f))
            self.k_proj_weight = Parameter(C.empty((embed_dim, self.kdim), **f))
            self.v_proj_weight = Parameter(C.empty((embed_dim, self.vdim), **f))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(C.empty(3 * embed_dim, **f))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **f)
        if add_bias_kv:
            self.bias_k = Parameter(C.empty((1, 1, embed_dim), **f))
            self.bias_v = Parameter(C.empty((1, 1, embed_dim), **f))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _projections(self):
        E = self.embed_dim
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            ws = (w[:E], w[E:2 * E], w[2 * E:])
        else:
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        b = self.in_proj_bias
        bs = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        return ws, bs

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                               "method `generate_square_subsequent_mask` to create this mask.")
        batched = query.dim() == 3
        if not batched:                        # (L, E): one sequence
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:                 # computed batch first; (L, N, E) transposed to it otherwise
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        q, k, v = (t.transpose(0, 1) for t in (query, key, value))       # (N, L or S, E)
        N, L, E = q.shape
        H, D = self.num_heads, self.head_dim
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        (wq, wk, wv), (bq, bk, bv) = self._projections()
        q, k, v = F.linear(q, wq, bq), F.linear(k, wk, bk), F.linear(v, wv, bv)
        S = k.shape[1]
        mask = _float_mask(attn_mask, "attn_mask", q.dtype)
        if mask is not None:
            want = {2: (L, S), 3: (N * H, L, S)}.get(mask.dim())
            if want is None:
                raise RuntimeError(f"attn_mask's dimension {mask.dim()} is not supported")
            if tuple(mask.shape) != want:
                raise RuntimeError(f"The shape of the {mask.dim()}D attn_mask is {tuple(mask.shape)}, but should be "
                                   f"{want}.")
            mask = mask.reshape(1, 1, L, S) if mask.dim() == 2 else mask.reshape(N, H, L, S)
        kpm = _float_mask(key_padding_mask, "key_padding_mask", q.dtype)
        if kpm is not None and tuple(kpm.shape) != (N, S):
            raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got {tuple(kpm.shape)}")
        if self.bias_k is not None:            # one more key and value, attended by every query
            k = cat([k, self.bias_k.expand(N, 1, E)], 1)
            v = cat([v, self.bias_v.expand(N, 1, E)], 1)
            mask = None if mask is None else F.pad(mask, (0, 1))
            kpm = None if kpm is None else F.pad(kpm, (0, 1))
        q, k, v = (t.reshape(N, t.shape[1], H, D).transpose(1, 2) for t in (q, k, v))     # (N, H, len, D)
        if self.add_zero_attn:
            k = cat([k, C.zeros((N, H, 1, D), dtype=k.dtype)], 2)
            v = cat([v, C.zeros((N, H, 1, D), dtype=v.dtype)], 2)
            mask = None if mask is None else F.pad(mask, (0, 1))
            kpm = None if kpm is None else F.pad(kpm, (0, 1))
        if kpm is not None:
            kpm = kpm.reshape(N, 1, 1, kpm.shape[-1])
            mask = kpm if mask is None else mask + kpm
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:    # (a row that sees no key: NaN here, zeros by the SDPA op below: both as PyTorch)
            weights = F.softmax(matmul(q, k.transpose(-2, -1)) * (D ** -0.5) + (0.0 if mask is None else mask),
                                dim=-1)
            if p > 0.0:
                weights = F.dropout(weights, p)
            out = matmul(weights, v)
            if average_attn_weights:
                weights = weights.mean(dim=1)
            if not batched:
                weights = weights.squeeze(0)
        else:
            if mask is not None and mask.shape[:2] != (N, H):
                mask = mask.expand(N, H, L, k.shape[2])
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        out = self.out_proj(out.transpose(1, 2).reshape(N, L, E))
        if not batched:
            return out.squeeze(0), weights
        return (out if self.batch_first else out.transpose(0, 1)), weights


def _activation(a):
    """TransformerEncoderLayer's `activation`: "relu", "gelu" or a callable."""
    if callable(a):
        return a
    if a in ("relu", "gelu"):
        return getattr(F, a)
    raise RuntimeError(f"activation should be relu/gelu, not {a}")


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class _Layer(Module):
    """What an encoder layer (BLOCKS = 2: self-attention, the feed-forward block, a LayerNorm and a Dropout each)
    and a decoder layer (3: cross-attention too) have in common; modules registered in PyTorch's order."""
    BLOCKS = 2

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        f = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **f)
        if self.BLOCKS == 3:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                     batch_first=batch_first, **f)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **f)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **f)
        self.norm_first = norm_first
        for k in range(1, self.BLOCKS + 1):
            setattr(self, f"norm{k}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **f))
        for k in range(1, self.BLOCKS + 1):
            setattr(self, f"dropout{k}", Dropout(dropout))
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        last = self.dropout2 if self.BLOCKS == 2 else self.dropout3
        return last(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_Layer):
    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_Layer):
    BLOCKS = 3

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for mod in self.layers:
            x = mod(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for mod in self.layers:
            x = mod(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                    memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=bool(tgt_is_causal),
                    memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        f = dict(layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                 device=device, dtype=dtype)
        ln = dict(eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, **f), num_encoder_layers,
            LayerNorm(d_model, **ln))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, **f), num_decoder_layers,
            LayerNorm(d_model, **ln))
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask: -inf above the diagonal, 0 elsewhere."""
        return triu(C.full((sz, sz), float("-inf"), dtype=dtype), diagonal=1)
