"""Train a small ResNet (BasicBlocks with residual adds, a strided 1x1-conv downsample, BatchNorm, ReLU, global
average pooling, a linear head) on generated colour images, eagerly and with the whole step traced, from one seed.

Data: 16x16 RGB images of ten kinds of shapes (examples/train_cnn.py's generator) in a random colour on a
noisy background. Nothing is downloaded.

    python examples/train_resnet.py [--epochs 3] [--batch-size 64] [--mode both|eager|traced]
    python examples/train_resnet.py --check-torch [--steps 20]   # losses and running stats vs PyTorch

`make_resnet(nn)` builds the model from any library with PyTorch's nn API (tracejit.nn or torch.nn): the
benchmark benches/bench_resnet_step.py and the tests build both from this one definition.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # small models: see examples/train_cnn.py

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracejit as torch  # noqa: E402
from tracejit import nn  # noqa: E402


def make_resnet(nn, widths=(16, 32, 64), blocks=(1, 1, 1), in_channels=3, classes=10):
    """A CIFAR-style ResNet: a 3x3 stem, then per stage `blocks` BasicBlocks (the first of stages 2.. strided,
    its shortcut a strided 1x1 conv + BN), global average pooling and a linear head."""

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False),
                                      nn.BatchNorm2d(widths[0]), nn.ReLU(inplace=True))
            layers, cin = [], widths[0]
            for i, (w, n) in enumerate(zip(widths, blocks)):
                for j in range(n):
                    layers.append(BasicBlock(cin, w, 2 if i > 0 and j == 0 else 1))
                    cin = w
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(self.pool(x).flatten(1))

    return ResNet()


def colour_shapes(n=2560, size=16, seed=0):
    """(images [n, 3, size, size] float32, labels [n] int64): train_cnn's shapes, each in a random colour."""
    from train_cnn import SHAPES, draw
    rng = np.random.default_rng(seed)
    y = rng.integers(0, len(SHAPES), n)
    masks = np.stack([draw(SHAPES[k], size, rng) for k in y])[:, None]            # [n, 1, s, s]
    colour = rng.uniform(0.3, 1.0, (n, 3, 1, 1)).astype(np.float32)
    x = masks * colour + rng.normal(0, 0.2, (n, 3, size, size)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def check_against_torch(steps, batch, lr, seed):
    """`steps` SGD steps in tracejit eager, tracejit traced and PyTorch from the same weights and batches: the
    largest relative loss differences and the largest running-statistic differences, each also against PyTorch in
    float64, beside PyTorch float32's own distance from its float64 run and from itself without oneDNN (its other
    convolution algorithm): the scale float32 rounding grows to over the steps."""
    import torch as pt
    torch.manual_seed(seed)
    ref = make_resnet(nn)
    x, y = colour_shapes(steps * batch, seed=seed)
    runs = {}
    for name in ("tracejit eager", "tracejit traced", "torch", "torch float64", "torch without oneDNN"):
        lib = pt if name.startswith("torch") else torch
        dtype = lib.float64 if name == "torch float64" else lib.float32
        model = make_resnet(lib.nn).to(dtype)
        model.load_state_dict({k: lib.tensor(v.numpy()).to(dtype) if v.is_floating_point() else lib.tensor(v.numpy())
                               for k, v in ref.state_dict().items()})
        opt = lib.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        loss_fn = lib.nn.CrossEntropyLoss()

        def step(xb, yb, model=model, opt=opt, loss_fn=loss_fn):
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            return loss.detach()
        if name == "tracejit traced":
            step = torch.trace(step)
        onednn = pt.backends.mkldnn.enabled
        pt.backends.mkldnn.enabled = name != "torch without oneDNN"
        try:
            losses = [float(step(lib.tensor(x[i * batch:(i + 1) * batch]).to(dtype),
                                 lib.tensor(y[i * batch:(i + 1) * batch]))) for i in range(steps)]
        finally:
            pt.backends.mkldnn.enabled = onednn
        stats = {k: v.numpy().astype(np.float64) for k, v in model.state_dict().items() if "running" in k}
        runs[name] = (np.array(losses), stats)
    lt = runs["torch"][0]
    print(f"{steps} SGD steps (batch {batch}) from the same weights and batches; torch losses {lt[0]:.5f} .. "
          f"{lt[-1]:.5f}")
    out = {}
    for name in ("tracejit eager", "tracejit traced", "torch without oneDNN"):
        lo, so = runs[name]
        diffs = []
        for against in ("torch", "torch float64"):
            la, sa = runs[against]
            diffs += [float(np.max(np.abs(lo - la) / np.abs(la))),
                      max(float(np.max(np.abs(so[k] - sa[k]) / (1 + np.abs(sa[k])))) for k in sa)]
        out[name] = tuple(diffs[:2])
        print(f"{name:>20}: max relative loss difference {diffs[0]:.2e} (to float64: {diffs[2]:.2e}), max "
              f"running-stat difference {diffs[1]:.2e} ({diffs[3]:.2e})")
    l64 = runs["torch float64"][0]
    print(f"{'torch float32':>20}: to float64: max relative loss difference {np.max(np.abs(lt - l64) / l64):.2e}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--images", type=int, default=2560, help="generated images (a fifth held out for testing)")
    ap.add_argument("--mode", choices=["eager", "traced", "both"], default="both")
    ap.add_argument("--check-torch", action="store_true", help="compare --steps steps with PyTorch and exit")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    if args.check_torch:
        check_against_torch(args.steps, args.batch_size, args.lr, args.seed)
        return

    from tracejit.utils.data import DataLoader, TensorDataset
    from _common import run_modes
    x, y = colour_shapes(args.images, seed=args.seed)
    n_test = len(x) // 5
    train = TensorDataset(torch.from_numpy(x[n_test:]), torch.from_numpy(y[n_test:]))
    test = TensorDataset(torch.from_numpy(x[:n_test]), torch.from_numpy(y[:n_test]))
    g = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, drop_last=True, generator=g)
    test_loader = DataLoader(test, batch_size=256)
    print(f"data: generated 16x16 colour shapes, {len(train)} train / {len(test)} test images, 10 classes")

    def build():
        model = make_resnet(nn)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
        return model, opt, nn.CrossEntropyLoss(), None

    run_modes(args.mode, args.seed, build, train_loader, test_loader, args.epochs)


if __name__ == "__main__":
    main()
