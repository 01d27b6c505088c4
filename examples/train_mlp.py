"""Train an MLP classifier, eagerly, with tracejit's PyTorch-style API.

Data: scikit-learn's 8x8 digits if scikit-learn is installed, else a generated 5-arm spiral (2-D points,
5 classes, not linearly separable). Nothing is downloaded.

    python examples/train_mlp.py [--epochs 20] [--batch-size 64] [--lr 3e-3]
"""
import os

# Small models: one BLAS thread is faster than several (and on a busy 2-core machine, much faster: threads
# that wait for each other spin). Set OPENBLAS_NUM_THREADS yourself to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracejit as torch  # noqa: E402
from tracejit import nn  # noqa: E402
from tracejit.utils.data import DataLoader, TensorDataset, random_split  # noqa: E402
from _common import run_modes  # noqa: E402


def spirals(n_per_class=600, classes=5, noise=0.15, seed=0):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        theta = np.linspace(0, 3.0, n_per_class) + c * 2 * math.pi / classes + rng.normal(0, noise, n_per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], 1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64), "generated spirals"


def dataset():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        return spirals()
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64), "sklearn digits"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--hidden", type=int, default=128)
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
    classes = int(Y.max()) + 1
    print(f"data: {name}, {len(train_set)} train / {len(test_set)} test samples, {X.shape[1]} features, "
          f"{classes} classes")

    def build():
        model = nn.Sequential(
            nn.Linear(X.shape[1], args.hidden), nn.ReLU(),
            nn.Linear(args.hidden, args.hidden), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(args.hidden, classes),
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        # a new LR retraces the traced step (~0.1 s) but compiles nothing: the LR is a kernel argument
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=max(1, args.epochs // 3), gamma=0.5)
        return model, optimizer, nn.CrossEntropyLoss(), scheduler

    run_modes(args.mode, args.seed, build, train_loader, test_loader, args.epochs)


if __name__ == "__main__":
    main()
