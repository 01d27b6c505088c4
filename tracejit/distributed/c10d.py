"""torch.distributed's process groups and collectives, on MPI (mpi4py).

Rank and world size come from MPI (`mpiexec -n N python train.py`); `init_method`, `world_size`, `rank` and the
RANK / WORLD_SIZE environment variables are accepted where PyTorch takes them and must agree with MPI. Tensor
collectives go through the registry's collective ops (tracejit/ops/collective.py), so they run eagerly and,
inside `@tracejit.trace`, become nodes of the compiled program; gather, scatter and barrier run eagerly only.
"""
import datetime
import itertools
import os
import warnings

import numpy as np

from .._state import STATE
from .._tensor import Tensor
from . import _mpi

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)     # PyTorch's default_pg_timeout


class ReduceOp:
    """torch.distributed.ReduceOp: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR."""

    class RedOpType:
        __slots__ = ("name",)

        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return f"<RedOpType.{self.name}>"

        def __eq__(self, other):
            return isinstance(other, ReduceOp.RedOpType) and other.name == self.name

        def __hash__(self):
            return hash(self.name)


_REDUCE_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")
for _n in _REDUCE_OPS:
    setattr(ReduceOp, _n, ReduceOp.RedOpType(_n))


class Backend(str):
    MPI = "mpi"
    GLOO = "gloo"
    NCCL = "nccl"

    def __new__(cls, name):
        return str.__new__(cls, name.lower())


class ProcessGroup:
    """A set of ranks with its own MPI communicator. `rank()`/`size()` are this process's rank in it and its size."""

    def __init__(self, comm, gid, ranks, timeout, name):
        self.comm = comm
        self.id = gid
        self.ranks = ranks                 # global ranks, in group-rank order
        self.timeout = timeout
        self.name = name
        self.broken = False
        self.global_rank = _world["rank"]
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def __repr__(self):
        return f"<ProcessGroup {self.name} ranks={self.ranks}>"


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = object()


group = GroupMember

_world = {"rank": -1, "size": -1, "worker": None, "groups": {}, "seq": itertools.count()}
_gids = itertools.count()


# ----------------------------------------------------------------------------- set-up

def is_available():
    return True


def is_mpi_available():
    return _mpi.available()


def is_gloo_available():
    return False


def is_nccl_available():
    return False


def is_initialized():
    return GroupMember.WORLD is not None


def _seconds(timeout):
    if timeout is None:
        return DEFAULT_TIMEOUT.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {type(timeout).__name__}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join the job's default group. Run the script under `mpiexec -n N`: rank and size come from MPI."""
    if is_initialized():
        raise ValueError("trying to initialize the default process group twice!")
    name = str(backend or "mpi").lower()
    if name not in ("mpi", "cpu:mpi"):
        raise RuntimeError(f"tracejit.distributed implements only the 'mpi' backend (got backend={backend!r}): "
                           f"start the script with mpiexec and use init_process_group('mpi')")
    if init_method is not None and store is not None:
        raise ValueError("Cannot specify both init_method and store.")
    secs = _seconds(timeout)
    MPI = _mpi.load()
    comm = MPI.COMM_WORLD
    r, n = comm.Get_rank(), comm.Get_size()
    # what PyTorch would take from the arguments or the environment must agree with what MPI says
    for what, given, env, actual in (("rank", rank, "RANK", r), ("world_size", world_size, "WORLD_SIZE", n)):
        if given is not None and given != -1 and int(given) != actual:
            raise ValueError(f"init_process_group: {what}={given} but MPI started this process as {what} {actual} "
                             f"(the mpi backend takes rank and world size from mpiexec)")
        if given in (None, -1) and os.environ.get(env) not in (None, "") and int(os.environ[env]) != actual:
            raise ValueError(f"init_process_group: environment variable {env}={os.environ[env]} but MPI started this "
                             f"process as {what} {actual}")
    if n > 1:
        # tracejit forks helper processes to compile kernels (backends/numba_cpu/workers.py); in an MPI job the
        # other ranks use the cores, and fork after MPI_Init is unsafe: off unless the environment asks for them
        os.environ.setdefault("TRACEJIT_COMPILE_WORKERS", "0")
    _world.update(rank=r, size=n, worker=_mpi.Worker(), seq=itertools.count())
    world = ProcessGroup(comm.Dup(), next(_gids), list(range(n)), secs, group_name or "WORLD")
    _world["groups"] = {world.id: world}
    GroupMember.WORLD = world
    _mpi.install_abort_hook()


def destroy_process_group(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if not is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    pg = GroupMember.WORLD if group is None else group
    if pg.id not in _world["groups"]:
        raise ValueError("Invalid process group specified")
    if pg is not GroupMember.WORLD:
        del _world["groups"][pg.id]
        _submit(pg, "COMM_FREE", pg.comm.Free, check=False).finish()
        return
    for g in list(_world["groups"].values()):
        if not g.broken:
            _submit(g, "COMM_FREE", g.comm.Free, check=False).finish()
    _world["worker"].stop()
    _world.update(rank=-1, size=-1, worker=None, groups={})
    GroupMember.WORLD = None
    _mpi.remove_abort_hook()


def _default():
    if not is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return GroupMember.WORLD


def _group(group):
    """The group to run on, or None when this rank is not in it (PyTorch warns and does nothing)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if group is None or group is GroupMember.WORLD:
        return _default()
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup (from new_group) or None, got {type(group).__name__}")
    _default()
    return group


def get_rank(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).rank()


def get_world_size(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).size()


def get_backend(group=None):
    _group(group)
    return Backend.MPI


def get_process_group_ranks(group):
    return list(_group(group).ranks)


def get_global_rank(group, group_rank):
    return _group(group).ranks[group_rank]


def get_group_rank(group, global_rank):
    g = _group(group)
    if global_rank not in g.ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {g}")
    return g.ranks.index(global_rank)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of these global ranks (all of them when None). Every rank must call it, in the same order."""
    world = _default()
    ranks = sorted(range(world.size()) if ranks is None else {int(r) for r in ranks})
    for r in ranks:
        if not 0 <= r < world.size():
            raise ValueError(f"Invalid rank {r}: ranks must be in [0, {world.size()}) (world size {world.size()})")
    MPI = _mpi.load()
    gid = next(_gids)
    member = world.rank() in ranks
    box = {}

    def split():
        box["comm"] = world.comm.Split(0 if member else MPI.UNDEFINED, ranks.index(world.rank()) if member else 0)
    _submit(world, "NEW_GROUP", split).finish()
    if not member:
        return GroupMember.NON_GROUP_MEMBER
    secs = world.timeout if timeout is None else _seconds(timeout)
    pg = ProcessGroup(box["comm"], gid, ranks, secs, group_desc or f"group{gid}")
    _world["groups"][gid] = pg
    return pg


# ----------------------------------------------------------------------------- jobs and pending results

def _submit(pg, what, fn, check=True):
    if check and pg.broken:
        raise RuntimeError(f"[Rank {pg.global_rank}] process group {pg.name} is broken: an earlier collective timed "
                           f"out or failed; destroy it (or end the job)")
    return _world["worker"].submit(_mpi.Job(fn, what, pg, next(_world["seq"])))


_PENDING = {}        # id(result array) -> (array, Job): a start op's result, until its comm_wait


def start(kind, x, group, op=None, src=None):
    """The impl of the `*_start` ops: queue the collective, return the array its result arrives in."""
    pg = _world["groups"].get(group) if is_initialized() else None
    if pg is None:
        _default()
        raise RuntimeError(f"{kind}: process group {group} does not exist on this rank (destroyed?)")
    if not isinstance(x, np.ndarray):
        raise RuntimeError(f"tracejit.distributed: {kind} supports CPU tensors only; move the tensor with .cpu()")
    send = np.ascontiguousarray(x)
    comm = pg.comm
    if kind == "all_reduce":
        _mpi.check_reduce(send, op)
        recv = np.empty_like(send)

        def fn():
            _mpi.reduce_into(comm, send, recv, op)
    elif kind == "broadcast":
        recv = send.copy() if pg.rank() == src else np.empty_like(send)

        def fn():
            _mpi.complete(comm.Ibcast(_bytes(recv), root=src))
    elif kind == "all_gather":
        recv = np.empty((pg.size(),) + send.shape, send.dtype)

        def fn():
            _mpi.complete(comm.Iallgather(_bytes(send), _bytes(recv)))
    elif kind == "reduce_scatter":
        _mpi.check_reduce(send, op)
        recv = np.empty(send.shape[1:], send.dtype)

        def fn():
            mop, avg = _mpi.mpi_op(op)
            if send.dtype == np.bool_ or send.dtype == np.float16:      # (rare): a full reduction, then our row
                full = np.empty_like(send)
                _mpi.reduce_into(comm, send, full, op)
                recv[...] = full[pg.rank()]
                return
            _mpi.complete(comm.Ireduce_scatter_block(send, recv, op=mop))
            if avg:
                np.divide(recv, pg.size(), out=recv)
    else:
        raise AssertionError(kind)
    job = _submit(pg, kind.upper(), fn)
    _PENDING[id(recv)] = (recv, job)
    return recv


def wait(p):
    """The impl of `comm_wait`: block until the start op that made `p` has its result in it."""
    entry = _PENDING.pop(id(p), None)
    if entry is None:
        return p             # (already waited for)
    entry[1].finish()
    return p


def _bytes(a):
    """A C-contiguous array as raw bytes for MPI calls that only move data (any dtype, bool and half too)."""
    return a.reshape(-1).view(np.uint8)


# ----------------------------------------------------------------------------- Work

class Work:
    """What a collective with async_op=True returns: `wait()` blocks until its result is in the tensors."""

    def __init__(self, finish, job=None, results=()):
        self._finish = finish
        self._job = job
        self._results = list(results)

    def wait(self, timeout=None):
        if self._finish is not None:
            f, self._finish = self._finish, None
            if self._job is not None:
                self._job.finish(None if timeout is None else _seconds(timeout))
            f()
        return True

    def is_completed(self):
        if self._finish is None:
            return True
        return self._job is not None and self._job.done.is_set()

    def is_success(self):
        return self.is_completed() and (self._job is None or self._job.error is None)

    def result(self):
        return self._results

    def synchronize(self):
        self.wait()

    def exception(self):
        return None if self._job is None else self._job.error


def _done(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


# ----------------------------------------------------------------------------- tensor collectives

def _check_tensor(t, name):
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor\n"
                        f"             but got {type(t)} instead.")


def _check_list(ts, name):
    if not isinstance(ts, (list, tuple)) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor]\n"
                        f"             but got {type(ts)} instead.")


def _op_name(op):
    if isinstance(op, ReduceOp.RedOpType):
        return op.name
    if isinstance(op, str) and op.upper() in _REDUCE_OPS:
        return op.upper()
    raise ValueError(f"op must be a torch.distributed.ReduceOp, got {op!r}")


def _not_member(name):
    g = GroupMember.WORLD
    warnings.warn(f"Running {name} on global rank {-1 if g is None else g.rank()} which does not belong to the "
                  f"given group.", stacklevel=3)


def _write(t, res):
    """Put a collective's result into tensor `t` (functionalized when tracing)."""
    if STATE.tracer is not None:
        if tuple(res.shape) != tuple(t.shape):       # (an all_gather's (size, ...) result into a flat output)
            res = res.reshape(t.shape)
        if res.dtype is not t.dtype:
            res = res.to(t.dtype)
        STATE.tracer.write(t, res)       # (a view's update lands in its base, as any in-place op's)
    else:
        np.copyto(t._data, res._data.reshape(t._data.shape), casting="unsafe")
    t._version.v += 1


def _ops():
    from ..ops.registry import OPS, apply
    return OPS, apply


def _run(start_name, t, write, async_op, **attrs):
    """apply the start op, then (now, or at Work.wait) its comm_wait and `write(result)`."""
    OPS, apply = _ops()
    p = apply(OPS[start_name], t, **attrs)

    def finish():
        write(apply(OPS["comm_wait"], p))
    return _done(Work(finish), async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    _check_tensor(tensor, "tensor")
    opn = _op_name(op)
    pg = _group(group)
    if pg is None:
        return _not_member("all_reduce")
    return _run("all_reduce_start", tensor, lambda r: _write(tensor, r), async_op, reduce_op=opn, group=pg.id)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return _not_member("broadcast")
    root = _root(pg, src, group_src, "src")
    return _run("broadcast_start", tensor, lambda r: _write(tensor, r), async_op, src=root, group=pg.id)


def _root(pg, glob, local, what, default=None):
    """The root's rank in the group, from its global rank or its group rank (PyTorch's _canonicalize_group_rank)."""
    if glob is None and local is None:
        glob = default
    if glob is not None and local is not None:
        raise ValueError("Can't specify both group_rank and global_rank")
    if local is None:
        if glob is None:
            raise ValueError("Must specify global_rank or group_rank")
        if glob not in pg.ranks:
            raise ValueError(f"Global rank {glob} is not part of group {pg}")
        return pg.ranks.index(glob)
    if not 0 <= local < pg.size():
        raise ValueError(f"group_{what} {local} is out of range for a group of size {pg.size()}")
    return local


def all_gather(tensor_list, tensor, group=None, async_op=False):
    _check_list(tensor_list, "tensor_list")
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return _not_member("all_gather")
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list must hold one tensor per rank ({pg.size()}), got {len(tensor_list)}")
    for t in tensor_list:
        if t.numel() != tensor.numel():
            raise ValueError(f"all_gather: every output tensor must have the input's {tensor.numel()} elements, "
                             f"got shape {list(t.shape)}")

    def write(r):
        for i, t in enumerate(tensor_list):
            _write(t, r[i])
    return _run("all_gather_start", tensor, write, async_op, group=pg.id, size=pg.size())


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    pg = _group(group)
    if pg is None:
        return _not_member("all_gather_into_tensor")
    if output_tensor.numel() != pg.size() * input_tensor.numel():
        raise ValueError(f"all_gather_into_tensor: output tensor size must be equal to world_size * input tensor "
                         f"size ({pg.size()} * {input_tensor.numel()}), got {output_tensor.numel()}")
    return _run("all_gather_start", input_tensor, lambda r: _write(output_tensor, r), async_op, group=pg.id,
                size=pg.size())


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    _check_tensor(output, "output")
    _check_list(input_list, "input_list")
    pg = _group(group)
    if pg is None:
        return _not_member("reduce_scatter")
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list must hold one tensor per rank ({pg.size()}), got "
                         f"{len(input_list)}")
    from ..ops.shape_ops import stack
    x = stack([t.reshape(output.shape) for t in input_list])
    return _run("reduce_scatter_start", x, lambda r: _write(output, r), async_op, reduce_op=_op_name(op), group=pg.id,
                size=pg.size())


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _group(group)
    if pg is None:
        return _not_member("reduce_scatter_tensor")
    if input.numel() != pg.size() * output.numel():
        raise ValueError(f"reduce_scatter_tensor: input tensor size must be equal to world_size * output tensor "
                         f"size ({pg.size()} * {output.numel()}), got {input.numel()}")
    x = input.reshape((pg.size(),) + tuple(output.shape))
    return _run("reduce_scatter_start", x, lambda r: _write(output, r), async_op, reduce_op=_op_name(op), group=pg.id,
                size=pg.size())


# ----------------------------------------------------------------------------- rooted and eager-only collectives

def _eager_only(name):
    if STATE.tracer is not None:
        from ..tracing.errors import trace_error
        raise trace_error(f"torch.distributed.{name}", "call it outside the traced function (inside @trace, "
                          "all_reduce, broadcast, all_gather and reduce_scatter are supported)")


def _host(t):
    return np.ascontiguousarray(t._data)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    _eager_only("reduce")
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return _not_member("reduce")
    root, opn = _root(pg, dst, group_dst, "dst", 0), _op_name(op)
    send = _host(tensor)
    _mpi.check_reduce(send, opn)
    recv = np.empty_like(send)

    def fn():
        _mpi.reduce_into(pg.comm, send, recv, opn)      # (an all-reduce: only the root keeps the result)
    job = _submit(pg, "REDUCE", fn)
    return _done(Work(lambda: _write(tensor, Tensor._wrap(recv)) if pg.rank() == root else None, job), async_op)


def _rooted(name, tensor, tensors, list_name, role, group, glob, local, what):
    """gather's and scatter's checks: (group, root's group rank, whether this rank is the root), or None when this
    rank is not in the group. Only the root passes the list (one tensor per rank)."""
    _eager_only(name)
    _check_tensor(tensor, "tensor")
    if tensors:
        _check_list(tensors, list_name)
    pg = _group(group)
    if pg is None:
        return None
    root = _root(pg, glob, local, what, 0)
    me = pg.rank() == root
    if me and (not tensors or len(tensors) != pg.size()):
        raise ValueError(f"Argument ``{list_name}`` must be specified on {role} rank.")
    if not me and tensors:
        raise ValueError(f"Argument ``{list_name}`` must NOT be specified on non-{role} ranks.")
    return pg, root, me


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    got = _rooted("gather", tensor, gather_list, "gather_list", "destination", group, dst, group_dst, "dst")
    if got is None:
        return _not_member("gather")
    pg, root, me = got
    send = _host(tensor)
    recv = np.empty((pg.size(),) + send.shape, send.dtype) if me else None

    def fn():
        _mpi.complete(pg.comm.Igather(_bytes(send), _bytes(recv) if me else None, root=root))

    def finish():
        if me:
            for i, t in enumerate(gather_list):
                _write(t, Tensor._wrap(recv[i]))
    return _done(Work(finish, _submit(pg, "GATHER", fn)), async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    got = _rooted("scatter", tensor, scatter_list, "scatter_list", "source", group, src, group_src, "src")
    if got is None:
        return _not_member("scatter")
    pg, root, me = got
    recv = np.empty(tuple(tensor.shape), tensor.dtype.np)
    send = np.stack([_host(t).reshape(recv.shape) for t in scatter_list]) if me else None

    def fn():
        _mpi.complete(pg.comm.Iscatter(_bytes(send) if me else None, _bytes(recv), root=root))
    return _done(Work(lambda: _write(tensor, Tensor._wrap(recv)), _submit(pg, "SCATTER", fn)), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    _eager_only("barrier")
    pg = _group(group)
    if pg is None:
        return _not_member("barrier")
    return _done(Work(lambda: None, _submit(pg, "BARRIER", lambda: _mpi.complete(pg.comm.Ibarrier()))), async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    _eager_only("monitored_barrier")
    pg = _group(group)
    if pg is None:
        return _not_member("monitored_barrier")
    _submit(pg, "BARRIER", lambda: _mpi.complete(pg.comm.Ibarrier())).finish(None if timeout is None else _seconds(timeout))
