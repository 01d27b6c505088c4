"""The MPI backend: mpi4py, driven by one communication thread per process (as PyTorch's ProcessGroupMPI).

Every MPI call of this process runs on that thread, in the order the program issued them, so all ranks issue
their collectives in the same order, and a collective started with `async_op=True` (or by DDP during backward)
proceeds while the calling thread computes: mpi4py releases the GIL inside MPI calls and tracejit's kernels and
BLAS release it too. A caller waits for a job with the group's timeout; a job that does not finish in time
raises (PyTorch's watchdog error), and an uncaught exception on any rank aborts the whole job (MPI_Abort), so
a failing rank ends `mpiexec` with its error printed instead of leaving the others blocked in a collective.
"""
import os
import queue
import sys
import threading
import time
import traceback

import numpy as np

MPI = None          # mpi4py.MPI once loaded

INSTALL = ("tracejit.distributed's 'mpi' backend needs mpi4py and an MPI library: pip install 'tracejit[mpi]' "
           "(mpi4py and mpich); on a cluster, install mpi4py built against the site's MPI instead")


def load():
    global MPI
    if MPI is None:
        try:
            from mpi4py import MPI as _MPI
        except ImportError as e:
            raise ImportError(INSTALL + f" ({e})") from e
        MPI = _MPI
    return MPI


def available():
    try:
        load()
        return True
    except ImportError:
        return False


# ----------------------------------------------------------------------------- jobs on the communication thread

class Job:
    """One MPI call (or a few) run on the communication thread; `finish` waits for it."""
    __slots__ = ("fn", "what", "group", "seq", "start", "done", "error")

    def __init__(self, fn, what, group, seq):
        self.fn, self.what, self.group, self.seq = fn, what, group, seq
        self.start = time.monotonic()
        self.done = threading.Event()
        self.error = None

    def finish(self, timeout=None):
        t = self.group.timeout if timeout is None else timeout
        if not self.done.wait(t):
            ms = int((time.monotonic() - self.start) * 1000)
            self.group.broken = True
            raise RuntimeError(f"[Rank {self.group.global_rank}] Watchdog caught collective operation timeout: "
                               f"WorkMPI(SeqNum={self.seq}, OpType={self.what}, group={self.group.name}) ran for {ms} "
                               f"milliseconds before timing out (timeout={t:g} s; another rank may have failed or "
                               f"be waiting in a different collective)")
        if self.error is not None:
            raise RuntimeError(f"[Rank {self.group.global_rank}] MPI {self.what} failed: "
                               f"{type(self.error).__name__}: {self.error}") from self.error


class Worker:
    def __init__(self):
        self.q = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="tracejit-mpi", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            job = self.q.get()
            if job is None:
                return
            try:
                job.fn()
            except BaseException as e:      # handed to whoever waits for it
                job.error = e
            job.fn = None
            job.done.set()

    def submit(self, job):
        self.q.put(job)
        return job

    def stop(self):
        self.q.put(None)
        self.thread.join(timeout=10)


def complete(req):
    """Wait for a nonblocking MPI request by polling it, sleeping between polls once it is not done at once.
    A blocking MPI call would busy-wait on its core for the other ranks (MPICH spins); polling leaves the core to
    the computation of this rank (and, on a machine with fewer cores than ranks, of the others)."""
    for _ in range(32):
        if req.Test():
            return
    while not req.Test():
        time.sleep(POLL_S)


POLL_S = 50e-6


# ----------------------------------------------------------------------------- reductions

_NUMERIC = set("fiu")


def mpi_op(op):
    """(MPI reduction, divide by the size afterwards) for a ReduceOp name."""
    M = load()
    return {"SUM": (M.SUM, False), "AVG": (M.SUM, True), "PRODUCT": (M.PROD, False), "MIN": (M.MIN, False),
            "MAX": (M.MAX, False), "BAND": (M.BAND, False), "BOR": (M.BOR, False), "BXOR": (M.BXOR, False)}[op]


def check_reduce(arr, op):
    """PyTorch's rules for a reduction's dtype, as errors before anything is sent."""
    k = arr.dtype.kind
    if op == "AVG" and k != "f":
        raise RuntimeError(f"ReduceOp.AVG is only supported for floating point tensors, got {arr.dtype}")
    if op in ("BAND", "BOR", "BXOR") and k not in "iub":
        raise RuntimeError(f"ReduceOp.{op} is only supported for integer and bool tensors, got {arr.dtype}")
    if k not in _NUMERIC and k != "b":
        raise RuntimeError(f"tracejit.distributed: unsupported dtype {arr.dtype} for a reduction")


def reduce_into(comm, send, recv, op):
    """Allreduce `send` into `recv` (C-contiguous arrays of one dtype) with ReduceOp name `op`."""
    M = load()
    if send.dtype == np.bool_:         # PyTorch: SUM/MAX of bools is OR, PRODUCT/MIN is AND
        s8, r8 = send.view(np.uint8), recv.view(np.uint8)
        complete(comm.Iallreduce(s8, r8, op=M.LAND if op in ("PRODUCT", "MIN", "BAND") else
                                 (M.LXOR if op == "BXOR" else M.LOR)))
        return
    if send.dtype == np.float16:       # (no MPI type for half): reduce in float32
        r32 = np.empty(recv.shape, np.float32)
        reduce_into(comm, send.astype(np.float32), r32, op)
        recv[...] = r32
        return
    mop, avg = mpi_op(op)
    complete(comm.Iallreduce(send, recv, op=mop))
    if avg:
        recv /= comm.Get_size()


# ----------------------------------------------------------------------------- failing ranks end the job

_hook = {"prev": None}


def install_abort_hook():
    """An uncaught exception on this rank prints its traceback, then aborts every rank of the job (MPI_Abort):
    the others may be blocked in a collective this rank will never join. TRACEJIT_DIST_ABORT=0 turns it off."""
    if _hook["prev"] is not None or os.environ.get("TRACEJIT_DIST_ABORT", "1") == "0":
        return
    prev = sys.excepthook

    def hook(tp, value, tb):
        # One write, then a moment before MPI_Abort: mpiexec forwards each rank's stderr through its own process,
        # and the abort tears that down; a traceback written piece by piece (PYTHONUNBUFFERED) lost its last lines.
        size = MPI.COMM_WORLD.Get_size()
        try:
            if prev is sys.__excepthook__:
                text = "".join(traceback.format_exception(tp, value, tb))
            else:
                prev(tp, value, tb)
                text = ""
            if size > 1:
                text += (f"tracejit.distributed: rank {MPI.COMM_WORLD.Get_rank()} raised {tp.__name__}; aborting all "
                         f"{size} ranks (MPI_Abort)\n")
            sys.stdout.flush()
            sys.stderr.write(text)
            sys.stderr.flush()
            if size > 1:
                time.sleep(0.5)
        finally:
            if size > 1:
                MPI.COMM_WORLD.Abort(1)

    _hook["prev"] = prev
    sys.excepthook = hook


def remove_abort_hook():
    if _hook["prev"] is not None:
        sys.excepthook = _hook["prev"]
        _hook["prev"] = None
