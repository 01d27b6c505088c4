"""A small GPT written in PyTorch's API the way nanoGPT writes it; `define(torch)` builds the classes from the
library it is given, so the same source runs on PyTorch and on tracejit (`import tracejit as torch`).

Token and position embeddings, pre-LayerNorm blocks of causal self-attention (one Linear(C, 3C) split into
q, k, v; heads by view + transpose; `q @ k^T * scale`, a `tril` buffer with `masked_fill(-inf)`, softmax,
`(att @ v).transpose(1, 2).contiguous().view(B, T, C)`) or, with `sdpa=True`, one
`F.scaled_dot_product_attention(q, k, v, is_causal=True)`; a GELU MLP; a final LayerNorm; a linear head;
`F.cross_entropy(logits.view(-1, V), targets.view(-1))`.
"""
import math
from dataclasses import dataclass


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    sdpa: bool = False


def define(torch):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
            self.n_head, self.n_embd, self.sdpa = cfg.n_head, cfg.n_embd, cfg.sdpa
            self.register_buffer("bias", torch.tril(torch.ones(cfg.block_size, cfg.block_size))
                                 .view(1, 1, cfg.block_size, cfg.block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.ln_1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention(cfg)
            self.ln_2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = MLP(cfg)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
            self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    return GPT


def make_step(lib, model, lr=1e-3, weight_decay=0.1, fwd=None):
    """The issue's training step for `model` of library `lib` (tracejit or torch): forward,
    zero_grad(set_to_none=True), backward, AdamW step; returns the detached loss. `fwd` runs the forward in
    place of `model` (a torch.compile'd model; a compiled module has no truth value, hence `is None`)."""
    opt = lib.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    fwd = model if fwd is None else fwd

    def step(x, y):
        logits, loss = fwd(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def copy_weights(src, dst, to_dst):
    """Load `src` model's parameters and buffers into `dst` (another library's model of the same config);
    `to_dst(numpy array)` makes a tensor of dst's library."""
    dst.load_state_dict({k: to_dst(v.detach().cpu().numpy().copy()) for k, v in src.state_dict().items()})


def batches(data, n, batch_size, block_size, seed):
    """`n` (x, y) pairs of int64 numpy arrays [batch_size, block_size] from a 1-D token array, y = x shifted."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ix = rng.integers(0, len(data) - block_size - 1, batch_size)
        out.append((np.stack([data[i:i + block_size] for i in ix]), np.stack([data[i + 1:i + 1 + block_size]
                                                                               for i in ix])))
    return out
