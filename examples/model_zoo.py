"""Ten architectures written in PyTorch's API, for any library that has it (`models(torch)` or
`models(tracejit)`): a UNet (ConvTranspose2d, skip concatenations), a MobileNetV3-style net (depthwise convs,
squeeze-excitation, Hardswish/ReLU6/Hardsigmoid), a ResNeXt block (groups, dilation), a ViT (patch conv, class
token, pre-norm TransformerEncoder), a ConvNeXt block (7x7 depthwise, channels-last LayerNorm and Linear, layer
scale), a DenseNet (concatenated features, AvgPool2d), a WaveNet (dilated causal Conv1d, gated units), a GRU
seq2seq with attention (bidirectional GRU, GRUCell, bmm, masked_fill), a VAE (reparameterization, KL, BCE with
logits) and Swin window attention (roll, window views, a relative position bias gathered by a buffer of indices).

Each entry is (name, model class, inputs() -> numpy arrays at a small size, loss(output) -> scalar).
tests/nn/test_model_zoo.py checks them against PyTorch; benches/bench_zoo_step.py times their training steps.
"""
import numpy as np


def models(torch):
    nn, F = torch.nn, torch.nn.functional

    class UNet(nn.Module):
        def __init__(self, c=8):
            super().__init__()

            def block(i, o):
                return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o),
                                     nn.ReLU(inplace=True), nn.Conv2d(o, o, 3, padding=1, bias=False),
                                     nn.BatchNorm2d(o), nn.ReLU(inplace=True))
            self.d1, self.d2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
            self.pool = nn.MaxPool2d(2)
            self.u2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
            self.b2 = block(4 * c, 2 * c)
            self.u1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
            self.b1 = block(2 * c, c)
            self.out = nn.Conv2d(c, 2, 1)

        def forward(self, x):
            x1 = self.d1(x)
            x2 = self.d2(self.pool(x1))
            m = self.mid(self.pool(x2))
            y = self.b2(torch.cat([self.u2(m), x2], dim=1))
            y = self.b1(torch.cat([self.u1(y), x1], dim=1))
            return self.out(y)

    class SE(nn.Module):
        def __init__(self, c, r=4):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Conv2d(c, c // r, 1), nn.ReLU(), nn.Conv2d(c // r, c, 1), nn.Hardsigmoid())

        def forward(self, x):
            return x * self.fc(self.pool(x))

    class InvertedResidual(nn.Module):
        def __init__(self, i, o, stride, expand):
            super().__init__()
            h = i * expand
            self.use_res = stride == 1 and i == o
            self.conv = nn.Sequential(
                nn.Conv2d(i, h, 1, bias=False), nn.BatchNorm2d(h), nn.Hardswish(),
                nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(inplace=True),
                SE(h), nn.Conv2d(h, o, 1, bias=False), nn.BatchNorm2d(o))

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
            self.blocks = nn.Sequential(InvertedResidual(8, 8, 1, 2), InvertedResidual(8, 16, 2, 3),
                                        InvertedResidual(16, 16, 1, 2))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(1), nn.Dropout(0.0), nn.Linear(16, 10))

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))

    class ResNeXtBlock(nn.Module):
        def __init__(self, c=16, groups=4, dilation=2):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 1, bias=False)
            self.n1 = nn.BatchNorm2d(c)
            self.c2 = nn.Conv2d(c, c, 3, padding=dilation, dilation=dilation, groups=groups, bias=False)
            self.n2 = nn.BatchNorm2d(c)
            self.c3 = nn.Conv2d(c, c, 1, bias=False)
            self.n3 = nn.BatchNorm2d(c)

        def forward(self, x):
            y = F.relu(self.n1(self.c1(x)))
            y = F.relu(self.n2(self.c2(y)))
            y = self.n3(self.c3(y))
            return F.relu(y + x)

    class ViT(nn.Module):
        def __init__(self, img=16, patch=4, dim=32, depth=2, heads=4, classes=10):
            super().__init__()
            self.patch = nn.Conv2d(3, dim, patch, stride=patch)
            n = (img // patch) ** 2
            self.cls = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
            layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.enc = nn.TransformerEncoder(layer, depth)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            x = self.enc(x)
            return self.head(self.norm(x)[:, 0])

    class ConvNeXtBlock(nn.Module):
        def __init__(self, dim=16):
            super().__init__()
            self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.pw1 = nn.Linear(dim, 4 * dim)
            self.act = nn.GELU()
            self.pw2 = nn.Linear(4 * dim, dim)
            self.gamma = nn.Parameter(1e-1 * torch.ones(dim))

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.pw2(self.act(self.pw1(self.norm(y))))
            y = (self.gamma * y).permute(0, 3, 1, 2)
            return x + y

    class DenseNet(nn.Module):
        def __init__(self, c0=8, growth=4, layers=3):
            super().__init__()
            self.stem = nn.Conv2d(3, c0, 3, padding=1)
            self.layers = nn.ModuleList()
            c = c0
            for _ in range(layers):
                self.layers.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(),
                                                 nn.Conv2d(c, growth, 3, padding=1, bias=False)))
                c += growth
            self.trans = nn.Sequential(nn.BatchNorm2d(c), nn.Conv2d(c, c // 2, 1), nn.AvgPool2d(2, 2))
            self.fc = nn.Linear(c // 2, 10)

        def forward(self, x):
            feats = [self.stem(x)]
            for layer in self.layers:
                feats.append(layer(torch.cat(feats, 1)))
            y = self.trans(torch.cat(feats, 1))
            return self.fc(F.adaptive_avg_pool2d(y, 1).view(y.size(0), -1))

    class WaveNet(nn.Module):
        def __init__(self, c=8, layers=3):
            super().__init__()
            self.inp = nn.Conv1d(1, c, 1)
            self.filt = nn.ModuleList(nn.Conv1d(c, c, 2, dilation=2 ** i) for i in range(layers))
            self.gate = nn.ModuleList(nn.Conv1d(c, c, 2, dilation=2 ** i) for i in range(layers))
            self.res = nn.ModuleList(nn.Conv1d(c, c, 1) for _ in range(layers))
            self.out = nn.Conv1d(c, 4, 1)

        def forward(self, x):
            x = self.inp(x)
            skip = 0
            for i, (f, g, r) in enumerate(zip(self.filt, self.gate, self.res)):
                d = 2 ** i
                xp = F.pad(x, (d, 0))
                z = torch.tanh(f(xp)) * torch.sigmoid(g(xp))
                skip = skip + z
                x = x + r(z)
            return self.out(F.relu(skip))

    class Seq2Seq(nn.Module):
        def __init__(self, vocab=20, e=8, h=16):
            super().__init__()
            self.emb = nn.Embedding(vocab, e, padding_idx=0)
            self.enc = nn.GRU(e, h, batch_first=True, bidirectional=True)
            self.bridge = nn.Linear(2 * h, h)
            self.dec = nn.GRUCell(e + 2 * h, h)
            self.attn = nn.Linear(h, 2 * h, bias=False)
            self.out = nn.Linear(h, vocab)

        def forward(self, src, tgt):
            mask = src == 0
            enc, hN = self.enc(self.emb(src))
            h = torch.tanh(self.bridge(torch.cat([hN[0], hN[1]], dim=-1)))
            logits = []
            for t in range(tgt.size(1)):
                score = torch.bmm(enc, self.attn(h).unsqueeze(2)).squeeze(2).masked_fill(mask, float("-inf"))
                ctx = (F.softmax(score, dim=1).unsqueeze(2) * enc).sum(1)
                h = self.dec(torch.cat([self.emb(tgt[:, t]), ctx], dim=1), h)
                logits.append(self.out(h))
            return torch.stack(logits, 1)

    class VAE(nn.Module):
        def __init__(self, d=16, z=4):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(d, 32), nn.LeakyReLU(0.2))
            self.mu, self.logvar = nn.Linear(32, z), nn.Linear(32, z)
            self.dec = nn.Sequential(nn.Linear(z, 32), nn.ELU(), nn.Linear(32, d))

        def forward(self, x, eps):
            h = self.enc(x)
            mu, logvar = self.mu(h), self.logvar(h)
            zz = mu + eps * torch.exp(0.5 * logvar)
            rec = F.binary_cross_entropy_with_logits(self.dec(zz), x, reduction="sum")
            kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
            return (rec + kld) / x.size(0)

    class SwinAttn(nn.Module):
        def __init__(self, dim=16, ws=4, heads=2):
            super().__init__()
            self.ws, self.heads = ws, heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, heads))
            coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
            rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
            rel[:, :, 0] += ws - 1
            rel[:, :, 1] += ws - 1
            rel[:, :, 0] *= 2 * ws - 1
            self.register_buffer("idx", rel.sum(-1))

        def forward(self, x):
            B, H, W, C = x.shape
            ws = self.ws
            x = torch.roll(x, shifts=(-ws // 2, -ws // 2), dims=(1, 2))
            w = x.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)
            qkv = self.qkv(w).reshape(w.shape[0], ws * ws, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = (q * (C // self.heads) ** -0.5) @ k.transpose(-2, -1)
            a = a + self.table[self.idx.view(-1)].view(ws * ws, ws * ws, -1).permute(2, 0, 1).unsqueeze(0)
            o = (a.softmax(-1) @ v).transpose(1, 2).reshape(w.shape[0], ws * ws, C)
            o = self.proj(o).view(B, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
            return torch.roll(o, shifts=(ws // 2, ws // 2), dims=(1, 2))

    rng = np.random.default_rng(0)

    def img(n=2, c=3, s=16):
        return rng.standard_normal((n, c, s, s)).astype(np.float32)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return [
        ("UNet", UNet, lambda: (img(),), lambda y: (y ** 2).mean()),
        ("MobileNetV3-ish", MobileNet, lambda: (img(),), lambda y: y.logsumexp(1).mean()),
        ("ResNeXt block", ResNeXtBlock, lambda: (img(2, 16, 8),), lambda y: y.mean()),
        ("ViT", ViT, lambda: (img(),), lambda y: y.log_softmax(-1)[:, 0].mean()),
        ("ConvNeXt block", ConvNeXtBlock, lambda: (img(2, 16, 8),), lambda y: (y * y).sum()),
        ("DenseNet", DenseNet, lambda: (img(),), lambda y: y.abs().mean()),
        ("WaveNet", WaveNet, lambda: (normal(2, 1, 32),), lambda y: y.square().mean()),
        ("Seq2Seq GRU attn", Seq2Seq,
         lambda: (np.array([[3, 4, 5, 0], [6, 7, 0, 0]]), np.array([[1, 2, 3], [4, 5, 6]])),
         lambda y: y.logsumexp(-1).mean()),
        ("VAE", VAE, lambda: (rng.random((4, 16)).astype(np.float32), normal(4, 4)), lambda y: y),
        ("Swin window attn", SwinAttn, lambda: (normal(2, 8, 8, 16),), lambda y: y.pow(2).sum()),
    ]
