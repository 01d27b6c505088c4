"""DistributedDataParallel: one model replica per process, gradients averaged over the ranks during backward.

As PyTorch's: at construction the parameters and buffers of rank 0 are broadcast to every rank; the parameters
(in reverse order of `module.parameters()`, roughly the order backward produces their gradients) are cut into
buckets of `bucket_cap_mb` MiB (the first one 1 MiB); when the last gradient of a bucket has been accumulated
(a post-accumulate-grad hook on each parameter) the bucket's gradients are flattened into one tensor and its
all-reduce (ReduceOp.AVG) starts without blocking, in bucket order, while backward goes on computing the
gradients of earlier layers; when backward has finished (an engine callback) every bucket is waited for and each
parameter's `.grad` becomes its averaged gradient. `no_sync()` skips all that for gradient accumulation.

Inside `@tracejit.trace` the same code runs on tracers: each bucket's all-reduce is an `all_reduce_start` node
placed right after the node that computes the bucket's last gradient and a `comm_wait` node after the whole
backward, so the compiled step keeps computing while buckets travel.

Differences from PyTorch: buckets keep their first assignment (PyTorch rebuilds them once from the order in which
gradients arrived in the first iteration); `gradient_as_bucket_view`, `static_graph` and `device_ids` are accepted
and change nothing; with `find_unused_parameters=True` inside a traced step, a parameter unused on every rank gets
a zero gradient (eagerly its .grad stays as it was, as in PyTorch: that needs the ranks' answers as values).
"""
from contextlib import contextmanager

from ...autograd import engine
from ...autograd.grad_mode import no_grad
from ...autograd.graph import AccumulateGrad
from ..._state import STATE
from ..._tensor import Tensor
from ..modules.module import Module

MiB = 1024 * 1024
FIRST_BUCKET_BYTES = 1 * MiB      # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


def _dist():
    from ... import distributed
    return distributed


def bucket_assignment(params, bucket_cap_mb=None):
    """Lists of indices into `params`: reverse parameter order, one dtype per bucket, a bucket closed when it holds
    at least its cap: `bucket_cap_mb` MiB (default 25; the first bucket's 1 MiB when it is left at the default, so
    the last layers' gradients start travelling early, as PyTorch)."""
    buckets, open_ = [], {}          # dtype -> (indices, bytes)
    cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * MiB)
    first = FIRST_BUCKET_BYTES if bucket_cap_mb is None else cap
    for i in reversed(range(len(params))):
        p = params[i]
        idx, size = open_.get(p.dtype, ([], 0))
        idx.append(i)
        size += p.numel() * p.dtype.itemsize
        limit = first if not buckets else cap
        if size >= limit:
            buckets.append(idx)
            open_.pop(p.dtype, None)
        else:
            open_[p.dtype] = (idx, size)
    buckets.extend(idx for idx, _ in open_.values())
    return buckets


class _Iteration:
    """What one backward of a synchronized step has done so far."""

    def __init__(self, buckets, unused):
        self.missing = [set(idx) - unused for idx in buckets]    # per bucket: gradients not arrived yet
        self.next = 0                # the next bucket to start (buckets start in order on every rank)
        self.works = [None] * len(buckets)
        self.unused = unused         # parameter indices no output depends on (find_unused_parameters)
        self.callback_queued = False


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, init_sync=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None, skip_all_reduce_unused_params=False):
        super().__init__()
        dist = _dist()
        if not dist.is_initialized():
            raise ValueError("Default process group has not been initialized, please make sure to call "
                             "init_process_group.")
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        self.module = module
        self.process_group = process_group
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * MiB)
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.world_size = dist.get_world_size(process_group)
        seen = set()
        self._params = []
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._params.append(p)
        self._buckets = bucket_assignment(self._params, bucket_cap_mb)
        self._bucket_of = {}
        for b, idx in enumerate(self._buckets):
            for i in idx:
                self._bucket_of[i] = b
        self._verify_same_model()
        if init_sync:
            with no_grad():
                self._broadcast(list(module.parameters()) + list(module.buffers()))
        self._iter = None
        self._hooks = [p.register_post_accumulate_grad_hook(self._make_hook(i)) for i, p in enumerate(self._params)]

    # ------------------------------------------------------------------ construction helpers
    def _verify_same_model(self):
        """Every rank must wrap the same parameters (PyTorch's _verify_param_shape_across_processes)."""
        dist = _dist()
        from ...creation import tensor, zeros
        mine = tensor([len(self._params), sum(p.numel() for p in self._params)])
        every = [zeros(2, dtype=mine.dtype) for _ in range(self.world_size)]
        dist.all_gather(every, mine, group=self.process_group)
        for r, t in enumerate(every):
            n, size = t.tolist()
            if (n, size) != tuple(mine.tolist()):
                raise RuntimeError(f"DDP expects same model across all ranks, but Rank {dist.get_rank()} has "
                                   f"{len(self._params)} params ({mine.tolist()[1]} values), while rank {r} has "
                                   f"inconsistent {n} params ({size} values).")

    def _broadcast(self, tensors):
        """Rank 0's values of `tensors` to every rank: one message per dtype (coalesced, as PyTorch)."""
        dist = _dist()
        from ...ops.shape_ops import cat
        src = dist.get_global_rank(self.process_group, 0) if self.process_group is not None else 0
        by_dtype = {}
        for t in tensors:
            if t is not None and t.numel():
                by_dtype.setdefault(t.dtype, []).append(t)
        for ts in by_dtype.values():
            flat = cat([t.reshape(-1) for t in ts])
            dist.broadcast(flat, src=src, group=self.process_group)
            o = 0
            for t in ts:
                n = t.numel()
                t.copy_(flat[o:o + n].view(t.shape))
                o += n

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers and self.require_forward_param_sync:
            bufs = list(self.module.buffers())
            if bufs and self.world_size > 1:
                with no_grad():
                    self._broadcast(bufs)
        out = self.module(*inputs, **kwargs)
        if STATE.grad_enabled and self.require_backward_grad_sync:
            unused = self._unused(out) if self.find_unused_parameters else set()
            self._iter = _Iteration(self._buckets, unused)
        else:
            self._iter = None
        return out

    def _unused(self, out):
        """Parameters no output's autograd graph reaches (PyTorch's search in prepare_for_backward)."""
        roots, stack = [], [out]
        while stack:
            o = stack.pop()
            if isinstance(o, Tensor):
                if o.grad_fn is not None:
                    roots.append(o.grad_fn)
            elif isinstance(o, (list, tuple)):
                stack.extend(o)
            elif isinstance(o, dict):
                stack.extend(o.values())
        reached, seen = set(), set()
        while roots:
            node = roots.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if type(node) is AccumulateGrad:
                reached.add(id(node.variable))
            roots.extend(e[0] for e in node.next_functions if e is not None)
        return {i for i, p in enumerate(self._params) if id(p) not in reached}

    # ------------------------------------------------------------------ backward
    def _make_hook(self, i):
        def hook(p):
            it = self._iter
            if it is None:
                return
            if not it.callback_queued:
                it.callback_queued = True
                engine.queue_callback(self._finish)
            b = self._bucket_of[i]
            it.missing[b].discard(i)
            self._start_ready(it)
        return hook

    def _start_ready(self, it):
        while it.next < len(self._buckets) and not it.missing[it.next]:
            self._start(it, it.next)
            it.next += 1

    def _start(self, it, b):
        dist = _dist()
        from ...creation import zeros
        from ...ops.shape_ops import cat
        parts = []
        for i in self._buckets[b]:
            p = self._params[i]
            g = p.grad
            parts.append(g.reshape(-1) if g is not None else zeros(p.numel(), dtype=p.dtype))
        with no_grad():
            flat = cat(parts) if len(parts) > 1 else parts[0]       # (one gradient: reduced where it is)
            it.works[b] = (flat, dist.all_reduce(flat, dist.ReduceOp.AVG, group=self.process_group, async_op=True))

    def _finish(self):
        """After backward: start what is left (unused parameters), wait for every bucket, write the .grads."""
        it, self._iter = self._iter, None
        if it is None:
            return
        if it.next < len(self._buckets):
            missing = sorted(i for b in range(it.next, len(self._buckets)) for i in it.missing[b])
            if missing and not self.find_unused_parameters:
                names = {id(p): n for n, p in self.module.named_parameters()}
                raise RuntimeError(
                    "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                    "indicates that your module has parameters that were not used in producing loss. You can enable "
                    "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                    "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
                    "participate in calculating loss.\nParameter indices which did not receive grad for rank "
                    f"{_dist().get_rank()}: {' '.join(map(str, missing))}\nParameter names: "
                    f"{', '.join(names.get(id(self._params[i]), '?') for i in missing)}")
            for b in range(it.next, len(self._buckets)):
                it.missing[b].clear()
            self._start_ready(it)
        keep = None
        if self.find_unused_parameters and STATE.tracer is None:
            keep = self._globally_unused(it.unused)
        with no_grad():
            for b, (flat, work) in enumerate(it.works):
                work.wait()
                o = 0
                for i in self._buckets[b]:
                    p = self._params[i]
                    n = p.numel()
                    if keep is None or i not in keep:
                        p.grad = flat[o:o + n].view(p.shape)
                    o += n

    def _globally_unused(self, unused):
        """Of the parameters unused here, those unused on every rank (their .grad is left alone)."""
        dist = _dist()
        from ...creation import tensor
        used = tensor([0 if i in unused else 1 for i in range(len(self._params))])
        dist.all_reduce(used, dist.ReduceOp.MAX, group=self.process_group)
        return {i for i, u in enumerate(used.tolist()) if not u}

    @contextmanager
    def no_sync(self):
        """Gradients of backwards run inside accumulate locally; the first synchronized backward averages them."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def __getstate__(self):
        raise RuntimeError("DistributedDataParallel cannot be pickled; save `ddp.module.state_dict()` instead")
