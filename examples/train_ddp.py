"""Data-parallel training on MPI: an MLP on generated spirals, one model replica per process.

    mpiexec -n 2 python examples/train_ddp.py [--epochs 5] [--mode both]

Each rank reads its share of every epoch (DistributedSampler), DistributedDataParallel averages the gradients
over the ranks during backward, and every rank ends with the same weights, eagerly and with the whole step
traced (`--mode traced`: the bucket all-reduces are nodes of the compiled program; `--show-graph` prints them).
Started without mpiexec it runs as a job of one process. Nothing is downloaded.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # one thread per process: the ranks share the machine's cores

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracejit as torch  # noqa: E402
import tracejit.distributed as dist  # noqa: E402
import tracejit.nn.functional as F  # noqa: E402
from tracejit import nn  # noqa: E402
from tracejit.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from tracejit.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402
from train_mlp import spirals  # noqa: E402


def train(mode, args, data):
    r, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)             # (DDP makes every rank start from rank 0's weights anyway)
    model = nn.Sequential(nn.Linear(2, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 5))
    ddp = DDP(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed, drop_last=True)
    # the global batch is split over the ranks: the same updates as one process with --batch-size
    loader = DataLoader(data, batch_size=args.batch_size // n, sampler=sampler, drop_last=True)

    def step(x, y):
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    run = torch.trace(step) if mode == "traced" else step
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)              # a new shuffle each epoch, the same on every rank
        total = torch.zeros(())
        for x, y in loader:
            total += run(x, y)
        dist.all_reduce(total, dist.ReduceOp.AVG)
        if r == 0:
            print(f"  [{mode}] epoch {epoch + 1}/{args.epochs}: mean loss over ranks "
                  f"{total.item() / len(loader):.4f}", flush=True)
    secs = time.perf_counter() - t0
    # every rank holds the same weights: compare a checksum
    s = torch.tensor([float(sum(p.detach().double().sum() for p in model.parameters()))], dtype=torch.float64)
    every = [torch.zeros(1, dtype=torch.float64) for _ in range(n)]
    dist.all_gather(every, s)
    assert all(abs(e.item() - s.item()) <= 1e-6 * max(1.0, abs(s.item())) for e in every), every
    if r == 0:
        print(f"  [{mode}] {secs:.2f} s on {n} process{'es' if n > 1 else ''}; weights identical on every rank "
              f"(checksum {s.item():.6f})")
        if mode == "traced" and args.show_graph:
            x, y = next(iter(loader))
            print("\n".join(line for line in str(run.graph(x, y)).splitlines()
                            if "all_reduce_start" in line or "comm_wait" in line))
    return s.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64, help="global batch (split over the ranks)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["eager", "traced", "both"], default="both")
    ap.add_argument("--show-graph", action="store_true", help="print the traced step's all-reduce nodes")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("mpi")
    xs, ys, what = spirals()
    data = TensorDataset(torch.tensor(xs), torch.tensor(ys))
    if dist.get_rank() == 0:
        print(f"{len(data)} samples ({what}), {dist.get_world_size()} process(es), global batch {args.batch_size}")
    sums = {m: train(m, args, data) for m in (["eager", "traced"] if args.mode == "both" else [args.mode])}
    if len(sums) == 2 and dist.get_rank() == 0:
        print(f"eager and traced weights agree: {abs(sums['eager'] - sums['traced']) < 1e-3 * max(1, abs(sums['eager']))}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
