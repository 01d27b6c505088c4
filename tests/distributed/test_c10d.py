"""tracejit.distributed: the API without MPI (errors), and every collective in mpiexec -n 2 / -n 3 jobs."""
import sys

import pytest

import tracejit as torch
import tracejit.distributed as dist
from tracejit.distributed import _mpi

from mpi_launch import check_ok, run_mpi


def test_without_mpi4py_init_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)      # import mpi4py now raises ImportError
    monkeypatch.setattr(_mpi, "MPI", None)
    assert not dist.is_mpi_available()
    with pytest.raises(ImportError, match=r"pip install 'tracejit\[mpi\]'"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()


def test_api_errors_before_init():
    assert dist.is_available() and not dist.is_initialized()
    for f in (dist.get_rank, dist.get_world_size, dist.destroy_process_group, dist.barrier):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            f()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.all_reduce(torch.ones(2))
    with pytest.raises(TypeError, match="Expected parameter `tensor` of type torch.Tensor"):
        dist.all_reduce([1.0])
    with pytest.raises(RuntimeError, match="only the 'mpi' backend"):
        dist.init_process_group("nccl")
    with pytest.raises(TypeError, match="timedelta"):
        dist.init_process_group("mpi", timeout=5)
    assert dist.get_rank(dist.GroupMember.NON_GROUP_MEMBER) == -1
    assert repr(dist.ReduceOp.SUM) == "<RedOpType.SUM>" and dist.ReduceOp.AVG != dist.ReduceOp.SUM


@pytest.mark.parametrize("n", [2, 3])
def test_collectives(n):
    """all_reduce (every ReduceOp, strided, bool, async), broadcast, all_gather(_into_tensor),
    reduce_scatter(_tensor), gather, scatter, reduce, new_group, barrier and a traced all_reduce, against numpy."""
    check_ok(n, run_mpi(n, "collectives.py", timeout=180))


def test_a_rank_that_raises_ends_the_job():
    rc, out, err, secs = run_mpi(2, "fail.py", "raise", timeout=120)
    assert rc != 0
    assert "The size of tensor a (2) must match the size of tensor b (3)" in err      # rank 1's own error
    assert "rank 1 raised RuntimeError; aborting all 2 ranks" in err
    assert "rank 0 finished" not in out


def test_a_collective_that_waits_too_long_times_out():
    rc, out, err, secs = run_mpi(2, "fail.py", "sleep", timeout=120)
    assert rc != 0
    assert "[Rank 0] Watchdog caught collective operation timeout" in err and "OpType=ALL_REDUCE" in err
    assert secs < 60          # the 2 s timeout, not rank 1's 100 s sleep
