"""DistributedDataParallel in mpiexec jobs (same parameters as one process with the whole batch, eager and
traced, N = 2 and 3), its bucket assignment, and what it builds on: post-accumulate-grad hooks, engine callbacks."""
import os

import pytest

import tracejit as torch
import tracejit.nn as nn
from tracejit.autograd import engine
from tracejit.nn.parallel.distributed import bucket_assignment

from mpi_launch import ROOT, check_ok, run_mpi


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_matches_one_process_with_the_whole_batch(n, tmp_path):
    """20 steps of SGD (momentum) and of Adam, eagerly and traced; no_sync; find_unused_parameters. With 2 ranks
    the traced run starts from an empty kernel cache, so both ranks compile the same kernels into it at once."""
    check_ok(n, run_mpi(n, "ddp_train.py", "eager", timeout=240))
    env = {"TRACEJIT_CACHE_DIR": str(tmp_path)} if n == 2 else None
    check_ok(n, run_mpi(n, "ddp_train.py", "traced", timeout=400, env=env))


def test_example_train_ddp():
    rc, out, err, _ = run_mpi(2, os.path.join(ROOT, "examples", "train_ddp.py"), "--epochs", "1", "--show-graph",
                              timeout=300)
    assert rc == 0, err[-3000:]
    assert "weights identical on every rank" in out and "eager and traced weights agree: True" in out, out
    assert "all_reduce_start" in out and "comm_wait" in out, out


def test_bucket_assignment():
    ps = [torch.zeros(100), torch.zeros(300), torch.zeros(50, dtype=torch.float64), torch.zeros(400), torch.zeros(10)]
    cap = 1200 / (1024 * 1024)                     # 1200 bytes
    # reverse order, one dtype per bucket, closed once it holds at least the cap; open ones at the end
    assert bucket_assignment(ps, cap) == [[4, 3], [1], [2], [0]]
    assert bucket_assignment(ps) == [[4, 3, 1, 0], [2]]           # 25 MiB (the first bucket 1 MiB)
    big = [torch.zeros(200_000), torch.zeros(200_000), torch.zeros(100_000)]
    assert bucket_assignment(big) == [[2, 1], [0]]                 # 1.2 MB: over the first bucket's 1 MiB
    assert bucket_assignment(big, 30) == [[2, 1, 0]] and bucket_assignment(big, 0.3) == [[2], [1], [0]]
    assert bucket_assignment([torch.zeros(300_000)] * 2) == [[1], [0]]      # default: first bucket 1 MiB


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def test_post_accumulate_grad_hook_and_queue_callback():
    m = _net()
    order, grads = [], {}
    for name, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: (order.append(name), grads.update({name: p.grad})))
    done = []

    def hook(p):
        if not done:
            engine.queue_callback(lambda: done.append(list(order)))
    h = m[0].weight.register_post_accumulate_grad_hook(hook)
    m(torch.randn(5, 3)).sum().backward()
    assert sorted(order) == sorted(n for n, _ in m.named_parameters())
    assert order.index("2.weight") < order.index("0.weight")         # backward reaches the last layer first
    assert all(grads[n] is p.grad for n, p in m.named_parameters())   # the hook sees the accumulated .grad
    assert done == [order]                                           # the callback ran once, after all hooks
    h.remove()
    with pytest.raises(RuntimeError, match="only be installed during backward"):
        engine.queue_callback(lambda: None)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (m[0].weight * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        torch.zeros(2).register_post_accumulate_grad_hook(lambda p: None)


def test_post_accumulate_grad_hook_like_torch():
    torch_ = pytest.importorskip("torch")
    seen = {}
    for lib in (torch, torch_):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        got = []
        w.register_post_accumulate_grad_hook(lambda p: got.append(p.grad.tolist()))
        (w * w).sum().backward()
        (3 * w).sum().backward()
        seen[lib.__name__] = got
    assert seen["tracejit"] == seen["torch"] == [[2.0, 4.0], [5.0, 7.0]]


def test_ddp_needs_a_process_group():
    from tracejit.nn.parallel import DistributedDataParallel
    with pytest.raises(ValueError, match="has not been initialized"):
        DistributedDataParallel(_net())
