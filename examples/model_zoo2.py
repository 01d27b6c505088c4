"""Eight more architectures written in PyTorch's API, in the form of examples/model_zoo.py (`models(torch)` or
`models(tracejit)`): a GPT-2 style decoder (token and position embeddings, pre-LN blocks, causal attention both by
F.scaled_dot_product_attention(is_causal=True) and by a registered tril mask buffer, GELU(approximate='tanh'),
lm_head tied to wte), a BERT-style encoder (nn.TransformerEncoder with a src_key_padding_mask, token type embeddings,
CLS and masked-mean pooling), an LSTM language model (2 layers, batch_first, pack_padded_sequence with unsorted
lengths, pad_packed_sequence), a DCGAN generator and discriminator pair (ConvTranspose2d, BatchNorm2d, LeakyReLU,
Tanh, both losses), an EfficientNet-style MBConv stack (SiLU, squeeze-excitation, depthwise convs), a message-passing
GNN (an edge index tensor, index_add_ and scatter_add aggregation, symmetric degree normalization), a top-2
Mixture-of-Experts layer (router softmax, topk, per-expert gather of a fixed capacity of tokens and index_add back,
a load-balancing loss) and a RealNVP flow (masked affine couplings, log-determinant from the log-scales,
torch.distributions.Normal base log_prob).

Each entry is (name, model class, inputs() -> arguments (numpy arrays become tensors; other values, such as a tuple of
sequence lengths, are passed as they are), loss(output) -> scalar). tests/nn/test_model_zoo2.py checks them against
PyTorch.
"""
import numpy as np


def models(torch):
    nn, F = torch.nn, torch.nn.functional

    class GPTBlock(nn.Module):
        def __init__(self, d, heads, ctx, sdpa):
            super().__init__()
            self.heads, self.sdpa = heads, sdpa
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
            if not sdpa:
                self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx), persistent=False)

        def attn(self, x):
            B, T, C = x.size()
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                       for t in self.c_attn(x).split(C, dim=2))
            if self.sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                a = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
                a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                y = F.softmax(a, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        def __init__(self, vocab=32, ctx=8, d=32, heads=4):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.h = nn.ModuleList([GPTBlock(d, heads, ctx, True), GPTBlock(d, heads, ctx, False)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx, targets):
            pos = torch.arange(0, idx.size(1), dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    class BERT(nn.Module):
        def __init__(self, vocab=30, d=32, heads=4, layers=2, maxlen=16, classes=3):
            super().__init__()
            self.tok = nn.Embedding(vocab, d, padding_idx=0)
            self.pos, self.typ = nn.Embedding(maxlen, d), nn.Embedding(2, d)
            self.norm = nn.LayerNorm(d, eps=1e-12)
            layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.pooler = nn.Linear(d, d)
            self.cls = nn.Linear(2 * d, classes)

        def forward(self, ids, segments):
            pad = ids == 0
            pos = torch.arange(ids.size(1)).unsqueeze(0).expand_as(ids)
            x = self.enc(self.norm(self.tok(ids) + self.pos(pos) + self.typ(segments)), src_key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).to(x.dtype)
            mean = (x * keep).sum(1) / keep.sum(1)
            return self.cls(torch.cat([torch.tanh(self.pooler(x[:, 0])), mean], dim=-1))

    class LSTMLM(nn.Module):
        def __init__(self, vocab=20, e=8, h=16):
            super().__init__()
            self.emb = nn.Embedding(vocab, e, padding_idx=0)
            self.rnn = nn.LSTM(e, h, num_layers=2, batch_first=True)
            self.out = nn.Linear(h, vocab)

        def forward(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(self.emb(x), lengths, batch_first=True, enforce_sorted=False)
            out, (h, c) = self.rnn(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
            logits = self.out(out[:, :-1])
            nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), ignore_index=0)
            return nll + 0.1 * (h.pow(2).mean() + c.pow(2).mean())

    class DCGAN(nn.Module):
        def __init__(self, nz=8, ngf=8, ndf=8):
            super().__init__()
            self.G = nn.Sequential(
                nn.ConvTranspose2d(nz, 2 * ngf, 4, 1, 0, bias=False), nn.BatchNorm2d(2 * ngf), nn.ReLU(True),
                nn.ConvTranspose2d(2 * ngf, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
                nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())
            self.D = nn.Sequential(
                nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, 2 * ndf, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * ndf), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(2 * ndf, 1, 4, 1, 0, bias=False), nn.Sigmoid(), nn.Flatten())
            self.bce = nn.BCELoss()

        def forward(self, z, real):
            fake = self.G(z)
            d_real, d_fake = self.D(real), self.D(fake.detach())
            loss_d = self.bce(d_real, torch.ones_like(d_real)) + self.bce(d_fake, torch.zeros_like(d_fake))
            d_gen = self.D(fake)
            return loss_d + self.bce(d_gen, torch.full_like(d_gen, 1.0))

    class MBConv(nn.Module):
        def __init__(self, i, o, k, stride, expand):
            super().__init__()
            h = i * expand
            layers = [nn.Conv2d(i, h, 1, bias=False), nn.BatchNorm2d(h), nn.SiLU()] if expand != 1 else []
            self.body = nn.Sequential(*layers, nn.Conv2d(h, h, k, stride, k // 2, groups=h, bias=False),
                                      nn.BatchNorm2d(h), nn.SiLU(inplace=True))
            s = max(1, i // 4)
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(h, s, 1), nn.SiLU(), nn.Conv2d(s, h, 1),
                                    nn.Sigmoid())
            self.proj = nn.Sequential(nn.Conv2d(h, o, 1, bias=False), nn.BatchNorm2d(o))
            self.residual = stride == 1 and i == o
            self.drop = nn.Dropout(0.0)

        def forward(self, x):
            y = self.body(x)
            y = self.proj(y * self.se(y))
            return x + self.drop(y) if self.residual else y

    class EfficientNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
            self.blocks = nn.Sequential(MBConv(8, 8, 3, 1, 1), MBConv(8, 12, 3, 2, 4), MBConv(12, 12, 5, 1, 4))
            self.head = nn.Sequential(nn.Conv2d(12, 32, 1, bias=False), nn.BatchNorm2d(32), nn.SiLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0), nn.Linear(32, 10))

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))

    class GNN(nn.Module):
        def __init__(self, i=8, h=16, o=4):
            super().__init__()
            self.lin1 = nn.Linear(i, h)
            self.msg = nn.Linear(2 * h, h)
            self.lin2 = nn.Linear(h, o)

        def forward(self, x, edge_index):
            n = x.size(0)
            loops = torch.arange(n)
            src, dst = torch.cat([edge_index[0], loops]), torch.cat([edge_index[1], loops])
            deg = torch.zeros(n, dtype=x.dtype).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
            norm = deg[src].rsqrt() * deg[dst].rsqrt()
            h = self.lin1(x)
            h = F.relu(torch.zeros_like(h).index_add_(0, dst, h[src] * norm.unsqueeze(1)))
            m = self.msg(torch.cat([h[src], h[dst] - h[src]], dim=1))
            agg = torch.zeros_like(h).scatter_add(0, dst.unsqueeze(1).expand_as(m), m) / deg.unsqueeze(1)
            return self.lin2(F.relu(agg) + h)

    class MoE(nn.Module):
        def __init__(self, d=16, h=32, experts=4, k=2, capacity=6):
            super().__init__()
            self.k, self.capacity = k, capacity
            self.router = nn.Linear(d, experts, bias=False)
            self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))
                                         for _ in range(experts))

        def forward(self, x):
            B, T, D = x.shape
            tokens = x.reshape(-1, D)
            probs = F.softmax(self.router(tokens), dim=-1)
            top_p, top_i = probs.topk(self.k, dim=-1)
            gates = torch.zeros_like(probs).scatter(1, top_i, top_p / top_p.sum(-1, keepdim=True))
            out = torch.zeros_like(tokens)
            for e, expert in enumerate(self.experts):
                w, idx = gates[:, e].topk(self.capacity)     # the expert's highest-weighted tokens, up to capacity
                out = out.index_add(0, idx, expert(tokens[idx]) * w.unsqueeze(1))
            frac = F.one_hot(top_i[:, 0], len(self.experts)).float().mean(0)
            aux = len(self.experts) * (frac * probs.mean(0)).sum()
            return x + out.view(B, T, D), aux

    class Coupling(nn.Module):
        def __init__(self, d, h, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.net = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2 * d))
            self.rescale = nn.Parameter(torch.ones(d))

        def forward(self, x):
            xm = x * self.mask
            s, t = self.net(xm).chunk(2, dim=-1)
            s = self.rescale * torch.tanh(s) * (1 - self.mask)
            y = xm + (1 - self.mask) * (x * torch.exp(s) + t)
            return y, s.sum(-1)

    class RealNVP(nn.Module):
        def __init__(self, d=4, h=16, n=4):
            super().__init__()
            self.layers = nn.ModuleList(Coupling(d, h, ((torch.arange(d) + i) % 2).float()) for i in range(n))

        def forward(self, x):
            logdet = torch.zeros(x.size(0))
            for layer in self.layers:
                x, ld = layer(x)
                logdet = logdet + ld
            base = torch.distributions.Normal(torch.zeros(x.size(1)), torch.ones(x.size(1)))
            return -(base.log_prob(x).sum(-1) + logdet).mean()

    rng = np.random.default_rng(0)

    def ids(shape, high, low=1):
        return rng.integers(low, high, shape)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def padded(lengths, t, vocab):
        x = ids((len(lengths), t), vocab)
        for row, n in enumerate(lengths):
            x[row, n:] = 0
        return x

    edges = np.array([[0, 1, 1, 2, 3, 4, 5, 5, 6, 2], [1, 0, 2, 1, 4, 3, 6, 0, 5, 6]])
    return [
        ("GPT-2", GPT2, lambda: (ids((2, 8), 32, 0), ids((2, 8), 32, 0)), lambda y: y),
        ("BERT encoder", BERT, lambda: (padded([7, 4, 5], 7, 30), np.array([[0] * 4 + [1] * 3] * 3)),
         lambda y: y.log_softmax(-1)[:, 1].mean()),
        ("LSTM LM packed", LSTMLM, lambda: (padded([4, 6, 2], 6, 20), (4, 6, 2)), lambda y: y),
        ("DCGAN", DCGAN, lambda: (normal(2, 8, 1, 1), np.tanh(normal(2, 3, 16, 16))), lambda y: y),
        ("EfficientNet MBConv", EfficientNet, lambda: (normal(2, 3, 16, 16),), lambda y: y.logsumexp(1).mean()),
        ("GNN message passing", GNN, lambda: (normal(7, 8), edges), lambda y: y.log_softmax(-1)[:, 0].mean()),
        ("MoE top-2", MoE, lambda: (normal(2, 8, 16),), lambda y: y[0].pow(2).mean() + 0.01 * y[1]),
        ("RealNVP flow", RealNVP, lambda: (normal(8, 4),), lambda y: y),
    ]
