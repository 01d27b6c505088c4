"""DDP on N ranks with batch B/N each ends with the parameters 1 process gets with batch B (20 steps of SGD with
momentum and of Adam), eagerly or traced (argv[1]); no_sync accumulation; find_unused_parameters.
Every rank also computes the 1-process reference itself (eagerly, from rank 0's initial weights)."""
import datetime
import hashlib
import sys

import numpy as np

import tracejit as torch
import tracejit.distributed as dist
import tracejit.nn as nn
import tracejit.nn.functional as F
from tracejit.nn.parallel import DistributedDataParallel as DDP

MODE = sys.argv[1]
torch.set_num_threads(1)
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=120))
r, n = dist.get_rank(), dist.get_world_size()
B, STEPS, CAP = 12, 20, 0.0002           # 0.0002 MiB: the MLP's 6 parameters make 3 buckets
rng = np.random.default_rng(0)
X = rng.standard_normal((STEPS, B, 6)).astype(np.float32)
Y = rng.integers(0, 3, (STEPS, B))


def mlp(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def make_opt(kind, params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9) if kind == "sgd" else torch.optim.Adam(params, lr=0.01)


def train(model, opt, batches, traced):
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    f = torch.trace(step) if traced else step
    for x, y in batches:
        f(torch.tensor(x), torch.tensor(y))
    return f


def params(m):
    return [p.detach().numpy().copy() for p in m.parameters()]


def same(a, b, what):
    for i, (p, q) in enumerate(zip(a, b)):
        err = np.abs(p - q).max()
        assert np.allclose(p, q, rtol=1e-5, atol=2e-6), f"rank {r} {what}: parameter {i} differs by {err}"


b = B // n
for kind in ("sgd", "adam"):
    ref = mlp(0)
    train(ref, make_opt(kind, ref.parameters()), [(X[s], Y[s]) for s in range(STEPS)], False)
    model = mlp(r)                                    # different weights on every rank: DDP broadcasts rank 0's
    ddp = DDP(model, bucket_cap_mb=CAP)
    assert ddp._buckets == [[5, 4, 3], [2], [1, 0]], ddp._buckets
    same(params(model), params(mlp(0)), "after the broadcast")
    f = train(ddp, make_opt(kind, ddp.parameters()),
              [(X[s][r * b:(r + 1) * b], Y[s][r * b:(r + 1) * b]) for s in range(STEPS)], MODE == "traced")
    same(params(model), params(ref), f"{MODE} {kind} after {STEPS} steps")
    if MODE == "traced":
        # one compiled program per rank holding the bucket all-reduces as nodes, each start before its wait
        gs = f.graph(torch.tensor(X[0][:b]), torch.tensor(Y[0][:b]))
        text = str(gs)
        assert text.count("= all_reduce_start") == 3 and text.count("= comm_wait") == 3, text
        # as compiled: the first bucket starts while backward's products are still to run; waits follow all starts
        names = [nd.op.name for nd in gs.compiled_forward.nodes]
        starts = [i for i, nm in enumerate(names) if nm == "all_reduce_start"]
        waits = [i for i, nm in enumerate(names) if nm == "comm_wait"]
        last_matmul = max(i for i, nm in enumerate(names) if nm == "matmul")
        assert starts[0] < last_matmul and max(starts) < min(waits), names
        # every rank compiled the same program (they compiled it at once, into one disk cache)
        digest = torch.tensor([int.from_bytes(hashlib.sha256(str(gs).encode()).digest()[:7], "little")])
        every = [torch.zeros_like(digest) for _ in range(n)]
        dist.all_gather(every, digest)
        assert len({int(e.item()) for e in every}) == 1, "ranks compiled different programs"
        assert f.traces <= 3, f.traces          # (Adam's and momentum's first step create state: one retrace)

# no_sync: gradients of two micro-batches accumulate locally, the synchronized backward averages their sum
ref = mlp(0)
for h in range(2):
    F.cross_entropy(ref(torch.tensor(X[0][h * B // 2:(h + 1) * B // 2])),
                    torch.tensor(Y[0][h * B // 2:(h + 1) * B // 2])).backward()
ddp = DDP(mlp(r), bucket_cap_mb=CAP)
hb = b // 2
mine = [(X[0][r * hb + h * B // 2:(r + 1) * hb + h * B // 2], Y[0][r * hb + h * B // 2:(r + 1) * hb + h * B // 2])
        for h in range(2)] if b % 2 == 0 else None
if mine is not None:
    with ddp.no_sync():
        F.cross_entropy(ddp(torch.tensor(mine[0][0])), torch.tensor(mine[0][1])).backward()
    local = [p.grad.numpy().copy() for p in ddp.parameters()]
    F.cross_entropy(ddp(torch.tensor(mine[1][0])), torch.tensor(mine[1][1])).backward()
    same([p.grad.numpy() for p in ddp.parameters()], [p.grad.numpy() for p in ref.parameters()], "no_sync")
    assert any(not np.allclose(a, p.grad.numpy()) for a, p in zip(local, ddp.parameters()))

# find_unused_parameters: a layer no output uses keeps .grad None; without the flag, PyTorch's error


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.unused = mlp(0), nn.Linear(3, 3)

    def forward(self, x):
        return self.body(x)


torch.manual_seed(0)
ddp = DDP(TwoHeads(), bucket_cap_mb=CAP, find_unused_parameters=True)
F.cross_entropy(ddp(torch.tensor(X[0][:b])), torch.tensor(Y[0][:b])).backward()
assert ddp.module.unused.weight.grad is None and ddp.module.body[0].weight.grad is not None
ddp = DDP(TwoHeads(), bucket_cap_mb=CAP)
try:
    F.cross_entropy(ddp(torch.tensor(X[0][:b])), torch.tensor(Y[0][:b])).backward()
    raise AssertionError("an unused parameter without find_unused_parameters did not raise")
except RuntimeError as e:
    assert "find_unused_parameters=True" in str(e) and "unused.weight" in str(e), e

dist.barrier()
dist.destroy_process_group()
sys.stdout.write(f"OK {r}\n")   # one write: pieces from several ranks must not interleave
sys.stdout.flush()
