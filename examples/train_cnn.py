"""Train a small CNN (Conv2d, BatchNorm2d, MaxPool2d, Dropout), eagerly, with tracejit's PyTorch-style API.

Data: scikit-learn's 8x8 digits if scikit-learn is installed, else generated 16x16 images of ten kinds of
shapes (bars, diagonals, crosses, boxes, rings, ...) at random positions and sizes, with noise. Nothing is
downloaded.

    python examples/train_cnn.py [--epochs 8] [--batch-size 64] [--lr 2e-3]
"""
import os

# Small models: one BLAS thread is faster than several (and on a busy 2-core machine, much faster: threads
# that wait for each other spin). Set OPENBLAS_NUM_THREADS yourself to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracejit as torch  # noqa: E402
from tracejit import nn  # noqa: E402
from tracejit.utils.data import DataLoader, TensorDataset, random_split  # noqa: E402
from _common import run_modes  # noqa: E402

SHAPES = ["hbar", "vbar", "diag", "anti", "plus", "x", "box", "filled", "ring", "corner"]


def draw(kind, size, rng):
    img = np.zeros((size, size), np.float32)
    s = int(rng.integers(6, 12))                       # shape extent
    r0, c0 = rng.integers(0, size - s + 1, 2)          # top-left corner
    rr, cc = np.mgrid[0:s, 0:s]
    m = {
        "hbar": rr == s // 2,
        "vbar": cc == s // 2,
        "diag": rr == cc,
        "anti": rr + cc == s - 1,
        "plus": (rr == s // 2) | (cc == s // 2),
        "x": (rr == cc) | (rr + cc == s - 1),
        "box": (rr == 0) | (cc == 0) | (rr == s - 1) | (cc == s - 1),
        "filled": np.ones((s, s), bool),
        "ring": np.abs(np.hypot(rr - (s - 1) / 2, cc - (s - 1) / 2) - (s - 1) / 2.4) < 0.8,
        "corner": ((rr == 0) & (cc < s)) | ((cc == 0) & (rr < s)),
    }[kind]
    img[r0:r0 + s, c0:c0 + s][m] = 1.0
    return img


def shapes_dataset(n=3000, size=16, noise=0.25, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, len(SHAPES), n)
    x = np.stack([draw(SHAPES[k], size, rng) for k in y])
    x += rng.normal(0, noise, x.shape).astype(np.float32)
    return x[:, None].astype(np.float32), y.astype(np.int64), f"generated {size}x{size} shapes"


def dataset():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        return shapes_dataset()
    d = load_digits()
    return (d.images[:, None] / 16.0).astype(np.float32), d.target.astype(np.int64), "sklearn digits (8x8)"


class SmallCNN(nn.Module):
    def __init__(self, size, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * (size // 4) ** 2, 64), nn.ReLU(), nn.Dropout(0.25),
                                  nn.Linear(64, classes))

    def forward(self, x):
        return self.head(self.features(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["eager", "traced", "both"], default="both",
                    help="train eagerly, with the whole step traced (@tracejit.trace), or both side by side")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    X, Y, name = dataset()
    full = TensorDataset(torch.from_numpy(X), torch.from_numpy(Y))
    n_test = len(full) // 5
    train_set, test_set = random_split(full, [len(full) - n_test, n_test], generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True, generator=g)
    test_loader = DataLoader(test_set, batch_size=256)
    print(f"data: {name}, {len(train_set)} train / {len(test_set)} test images of {X.shape[2]}x{X.shape[3]}, "
          f"{int(Y.max()) + 1} classes")

    def build():
        model = SmallCNN(X.shape[2], int(Y.max()) + 1)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
        scheduler = None  # a scheduler's new LR would retrace the traced step each epoch (see README)
        return model, optimizer, nn.CrossEntropyLoss(), scheduler

    run_modes(args.mode, args.seed, build, train_loader, test_loader, args.epochs)


if __name__ == "__main__":
    main()
