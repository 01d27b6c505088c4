"""Every collective against a numpy reference computed from all ranks' (deterministic) inputs; run by
tests/distributed/test_c10d.py under mpiexec -n 2 and -n 3. Prints `OK <rank>` at the end."""
import datetime
import sys
import warnings

import numpy as np

import tracejit as torch
import tracejit.distributed as dist
from tracejit.ops.registry import OPS, AVal
from tracejit import _dtype as D

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
r, n = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"


def data(rank, shape=(2, 3), dtype=np.float32):
    return (np.arange(np.prod(shape)).reshape(shape) * (rank + 1) + rank).astype(dtype)


def close(t, want, what):
    got = t.numpy() if isinstance(t, torch.Tensor) else t
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    assert np.allclose(got, want, rtol=1e-6), (what, got, want)


every = [data(q) for q in range(n)]
for op, ref in ((dist.ReduceOp.SUM, sum(every)), (dist.ReduceOp.AVG, sum(every) / np.float32(n)),
                (dist.ReduceOp.MAX, np.max(every, 0)), (dist.ReduceOp.MIN, np.min(every, 0)),
                (dist.ReduceOp.PRODUCT, np.prod(every, 0))):
    t = torch.tensor(data(r))
    v = t._version.v
    assert dist.all_reduce(t, op) is None
    close(t, ref.astype(np.float32), op)
    assert t._version.v == v + 1
ints = [data(q, dtype=np.int64) for q in range(n)]
t = torch.tensor(data(r, dtype=np.int64))
dist.all_reduce(t, dist.ReduceOp.BXOR)
close(t, np.bitwise_xor.reduce(ints, 0), "bxor")
t = torch.tensor(data(r, dtype=np.int64))
try:
    dist.all_reduce(t, dist.ReduceOp.AVG)
    raise AssertionError("AVG of an int tensor did not raise")
except RuntimeError as e:
    assert "floating point" in str(e)
t = torch.tensor([r == 0, False])
dist.all_reduce(t)
close(t, np.array([True, False]), "bool sum = or")
# a non-contiguous tensor: the result lands in its own (strided) memory
base = torch.tensor(data(r, (3, 4)))
tt = base.t()
dist.all_reduce(tt)
close(base, sum(data(q, (3, 4)) for q in range(n)), "strided")

# async: the result is there after wait(), and is_completed says so
t = torch.tensor(data(r))
w = dist.all_reduce(t, async_op=True)
assert w.wait() is True and w.is_completed()
close(t, sum(every), "async")

for src in range(n):
    b = torch.tensor(data(r))
    dist.broadcast(b, src=src)
    close(b, data(src), f"broadcast from {src}")
b = torch.tensor(data(r))
dist.broadcast(b, group_src=n - 1)
close(b, data(n - 1), "broadcast group_src")

outs = [torch.zeros(2, 3) for _ in range(n)]
dist.all_gather(outs, torch.tensor(data(r)))
for q in range(n):
    close(outs[q], data(q), f"all_gather {q}")
big = torch.zeros(2 * n, 3)
dist.all_gather_into_tensor(big, torch.tensor(data(r)))
close(big, np.concatenate(every), "all_gather_into_tensor")

o = torch.zeros(2, 3)
dist.reduce_scatter(o, [torch.tensor(data(r * n + q)) for q in range(n)])
close(o, sum(data(p * n + r) for p in range(n)), "reduce_scatter")
o = torch.zeros(2, 3)
dist.reduce_scatter_tensor(o, torch.tensor(np.concatenate([data(r * n + q) for q in range(n)])), dist.ReduceOp.MAX)
close(o, np.max([data(p * n + r) for p in range(n)], 0), "reduce_scatter_tensor max")

gl = [torch.zeros(2, 3) for _ in range(n)] if r == n - 1 else None
dist.gather(torch.tensor(data(r)), gl, dst=n - 1)
if r == n - 1:
    for q in range(n):
        close(gl[q], data(q), f"gather {q}")
s = torch.zeros(2, 3)
dist.scatter(s, [torch.tensor(data(10 + q)) for q in range(n)] if r == 0 else None, src=0)
close(s, data(10 + r), "scatter")
red = torch.tensor(data(r))
dist.reduce(red, dst=0)
close(red, sum(every) if r == 0 else data(r), "reduce")

# the shape rules of the collective ops agree with what they return (tests/ops cannot run them: no MPI there)
x = torch.tensor(data(r))
for name, arg, attrs in (("all_reduce_start", x, dict(reduce_op="SUM", group=0)),
                         ("broadcast_start", x, dict(src=0, group=0)),
                         ("all_gather_start", x, dict(group=0, size=n)),
                         ("reduce_scatter_start", torch.tensor(np.stack([data(q) for q in range(n)])),
                          dict(reduce_op="SUM", group=0, size=n))):
    p = OPS[name].impl(arg.numpy(), **attrs)
    m = OPS[name].meta(AVal(arg.shape, arg.dtype), **attrs)
    res = OPS["comm_wait"].impl(p)
    assert (tuple(m.shape), m.dtype) == (res.shape, D.from_numpy_dtype(res.dtype)), (name, m, res.shape)

# groups: ranks {0, n-1} (every rank calls new_group; the others are not members)
g = dist.new_group([0, n - 1])
if r in (0, n - 1):
    assert dist.get_world_size(g) == 2 and dist.get_rank(g) == (0 if r == 0 else 1)
    t = torch.tensor(data(r))
    dist.all_reduce(t, group=g)
    close(t, data(0) + data(n - 1), "group all_reduce")
    assert dist.get_process_group_ranks(g) == [0, n - 1]
else:
    assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dist.all_reduce(torch.ones(2), group=g) is None
    assert any("does not belong to the given group" in str(c.message) for c in caught), caught

# inside @trace: the collectives are nodes of the compiled program, and it computes what eager computes
@torch.trace
def f(x):
    y = x * 2
    dist.all_reduce(y)
    w = dist.all_reduce(x, dist.ReduceOp.MAX, async_op=True)
    z = y + 1
    w.wait()
    return z + x


@torch.trace
def g(x):
    b = x + 0
    dist.broadcast(b, src=n - 1)
    gathered = torch.zeros(n * 2, 3)
    dist.all_gather_into_tensor(gathered, x * 1)
    scattered = torch.zeros(2, 3)
    dist.reduce_scatter_tensor(scattered, torch.cat([x * (q + 1) for q in range(n)]))
    return b, gathered, scattered


x0 = torch.tensor(data(r))
for _ in range(2):
    x = x0.clone()
    got = f(x)
    close(got, (2 * sum(every) + 1 + np.max(every, 0)).astype(np.float32), "traced")
    close(x, np.max(every, 0), "traced in-place write-back")
    b, gathered, scattered = g(x0)
    close(b, data(n - 1), "traced broadcast")
    close(gathered, np.concatenate(every), "traced all_gather")
    close(scattered, sum(every) * np.float32(r + 1), "traced reduce_scatter")


# a collective on a view: the result lands in the base, traced as eagerly
@torch.trace
def on_view(x):
    dist.all_reduce(x[0])
    return x * 1


want = data(r)
want[0] = sum(every)[0]
for _ in range(2):
    x = x0.clone()
    close(on_view(x), want, "traced all_reduce of a view")
    close(x, want, "traced all_reduce of a view: the argument")


# a start that sends a view of an argument, which a kernel then updates in place before the wait: the kernel must
# not write into the argument's array (donation) while the communication thread still reads it
@torch.trace
def sends_view(x):
    out = torch.zeros(n * 6)
    w = dist.all_gather_into_tensor(out, x.view(-1), async_op=True)
    x.mul_(2)
    w.wait()
    return out


x = x0.clone()
close(sends_view(x), np.concatenate(every).reshape(-1), "traced all_gather of a view")
close(x, 2 * data(r), "updated after the start")
assert not sends_view.graph(x0.clone()).entry.fwd_fn._donated


# a collective whose result only rank 0 returns: every rank's program still sends it (dead code elimination keeps
# collectives; rank 0 would wait for the others until the timeout)
@torch.trace
def rank0_reports(x):
    s = x * 1
    dist.all_reduce(s)
    return s if r == 0 else x + 0


close(rank0_reports(x0), sum(every) if r == 0 else data(r), "a collective's result returned on rank 0 only")

text = str(torch.make_graph(f.fn, x0.clone()))
assert text.count("all_reduce_start") == 2 and text.count("comm_wait") == 2, text
text = str(torch.make_graph(g.fn, x0.clone()))
for name in ("broadcast_start", "all_gather_start", "reduce_scatter_start"):
    assert text.count(name) == 1, text

dist.barrier()
dist.destroy_process_group()
assert not dist.is_initialized()
sys.stdout.write(f"OK {r}\n")   # one write: pieces from several ranks must not interleave
sys.stdout.flush()
