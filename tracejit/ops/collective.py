"""Collective communication as ops: a nonblocking `*_start` and the `comm_wait` that completes it.

A start op hands its input to the process's communication thread (tracejit/distributed/_mpi.py) and returns the
array the result will arrive in; `comm_wait` blocks until it has (with the group's timeout) and returns it. Only
the wait reads a start's output, so between the two the program keeps computing: in a traced DDP step the
start of each gradient bucket's all-reduce is placed where the bucket's last gradient is computed and every
wait after the whole backward, and the backward's remaining kernels run while the buckets travel.

Eagerly the same ops run through `apply` (tracejit.distributed's in-place collectives copy the waited result
back into the caller's tensor). Attributes: `group` is the process group's id (a process-wide counter: 0 is the
world of the first init_process_group), `size` its number of ranks where the result's shape depends on it. They
are not differentiable (as torch.distributed's), never constant-folded or merged (kind "collective": each call
is a message to the other ranks), and run on CPU tensors.
"""
from .registry import AVal, defop


def _c10d():
    from ..distributed import c10d
    return c10d


def _same(x, **attrs):
    return AVal(x.shape, x.dtype)


def _gathered(x, group, size):
    return AVal((size,) + tuple(x.shape), x.dtype)


def _scattered(x, reduce_op, group, size):
    if not x.shape or x.shape[0] != size:
        raise RuntimeError(f"reduce_scatter: the input's first dimension must be the group's size {size}, got "
                           f"shape {list(x.shape)}")
    return AVal(tuple(x.shape[1:]), x.dtype)


defop("all_reduce_start", lambda x, reduce_op, group: _c10d().start("all_reduce", x, op=reduce_op, group=group), _same,
      kind="collective")
defop("broadcast_start", lambda x, src, group: _c10d().start("broadcast", x, src=src, group=group), _same,
      kind="collective")
defop("all_gather_start", lambda x, group, size: _c10d().start("all_gather", x, group=group), _gathered,
      kind="collective")
defop("reduce_scatter_start", lambda x, reduce_op, group, size: _c10d().start("reduce_scatter", x, op=reduce_op,
                                                                                  group=group),
      _scattered, kind="collective")
defop("comm_wait", lambda p: _c10d().wait(p), _same, kind="collective")
