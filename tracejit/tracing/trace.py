"""@trace: capture a function once per input signature into a static graph, compile it, cache it.

A call computes the signature (shapes, dtypes, requires_grad of tensor arguments, grad mode, static
values), then either runs the cached program or traces: tracer tensors flow through the user's code,
every op becomes an IR node, tensors read from outside are lifted to inputs, in-place updates are
functionalized. The backward graph is derived symbolically at trace time, so outputs carry a
`CompiledFunctionBackward` grad_fn that runs the compiled backward program.
"""
import functools
import gc
import logging
import threading
import time
import weakref

import numpy as np

from .. import config
from .._state import STATE
from .._tensor import Tensor
from ..autograd.graph import Node, edge_of
from ..ir.verify import verify
from .errors import TraceError
from .pytree import OutLeaf, collect, flatten, unflatten
from .tracer import TraceContext

log = logging.getLogger("tracejit")
# Threads (see README "Threads"): tracing state and grad mode are per thread (_state.py); a lifted tensor is a
# tracer in the tracing thread only (tracer.py); one trace and compilation runs at a time in the process, and a
# thread that waited for it looks its signature up again, so each signature is compiled once.
TRACE_LOCK = threading.RLock()
PER_SIGNATURE = 4   # compiled programs kept per argument signature (they differ in guarded reads)


# ----------------------------------------------------------------------------- compiled entries

def _named(fn, where, err):
    """The TypeError of a bad argument, saying which argument it is."""
    return TypeError(f"{getattr(fn, '__name__', 'traced function')}(): {where}: {err}".replace(": @trace:", ":"))


class Entry:
    """One compiled signature: forward program, optional backward program, guards on what it read."""

    def __init__(self):
        self.sources = []        # per forward input: (kind 'data'|'grad', argument index or weakref(tensor))
        self.guards = []         # per source: (shape, dtype, requires_grad, grad_is_none) at trace time
        self.modules = []        # (weakref(module), training)
        self.values = []         # (dict, key, value): Python values read through guarded dicts
        self.writeback = []      # (source index, 'data' | 'grad' | 'grad_none') per extra forward output
        self.out_tree = None
        self.n_out = 0
        self.out_rg = []         # which user outputs get a grad_fn
        self.diff_inputs = []    # source indices the backward differentiates with respect to
        self.diff_meta = ((), ())  # their shapes and dtypes (for the engine)
        self.fwd = self.bwd = self.joint = None
        self.fwd_fn = self.bwd_fn = None
        self.n_saved = 0
        self.graphs = {}
        self.compile_time = 0.0
        self.one_shot = False
        self.on_device = False   # compiled for cuda: every tensor it reads must be there
        self.plain = False       # reads only its tensor arguments, in order, guarded by the signature alone
        self.single = False      # returns one tensor, writes nothing back

    def finish(self, n_leaves):
        """Precompute what a call may skip (after build_entry filled the entry)."""
        # every guard on an argument's data (shape, dtype, requires_grad, device) is part of the signature key:
        # an entry that reads nothing else (no lifted tensors, no .grad, no module modes or Python values)
        # needs no check beyond finding its key
        self.plain = (len(self.sources) == n_leaves and not self.modules and not self.values
                      and all(kind == "data" and src == i and g[3] is None
                              for i, ((kind, src), g) in enumerate(zip(self.sources, self.guards))))
        self.single = isinstance(self.out_tree, OutLeaf) and not self.writeback and self.n_out == 1

    def resolve(self, leaves):
        """The tensors behind the sources for this call (owners, for .grad sources), or a reason."""
        ts = []
        for kind, src in self.sources:
            t = leaves[src] if isinstance(src, int) else src()
            if t is None or t._data is None:
                return None, "a tensor the function reads was freed"
            ts.append(t)
        return ts, None

    def check(self, leaves):
        ts, why = self.resolve(leaves)
        if why:
            return why, None
        for (kind, _), t, (shape, dtype, rg, grad_none) in zip(self.sources, ts, self.guards):
            if kind == "grad":
                g = t._grad
                if g is None or tuple(g.shape) != shape or g.dtype is not dtype:
                    return "the .grad of a tensor the function reads changed", None
                continue
            if tuple(t._data.shape) != shape or t.dtype is not dtype:
                return "the shape/dtype of a tensor the function reads changed", None
            if (type(t._data) is not np.ndarray) != self.on_device and t._data.ndim:
                return "a tensor the function reads moved to another device", None
            if t._requires_grad != rg:
                return "requires_grad of a tensor the function reads changed", None
            if grad_none is not None and (t._grad is None) != grad_none:
                return "whether .grad is None changed for a tensor the function reads", None
        for ref, training in self.modules:
            m = ref()
            if m is None or m.training != training:
                return "a module's train()/eval() mode changed", None
        for container, key, value in self.values:
            now = dict.get(container, key)
            if now != value or type(now) is not type(value):
                return f"a Python value the function read changed ({key!r}: {value!r} -> {now!r})", None
        return None, ts


class CompiledFunctionBackward(Node):
    def __init__(self, entry, saved, inputs, versions):
        super().__init__()
        self.entry = entry
        self.saved = saved
        self.inputs = inputs
        self.versions = versions
        self.nout = len(entry.out_rg)
        self.shapes, self.dtypes = entry.diff_meta

    def apply(self, grads):
        e = self.entry
        if self.saved is None:
            from ..autograd.graph import FREED_MSG, FreedGraphError
            raise FreedGraphError(FREED_MSG)
        if len(grads) == 1 and grads[0] is not None and len(e.out_rg) == 1:
            cts = grads
        else:
            from ..creation import zeros
            # one gradient per output that requires grad (out_rg), in that order
            outs_meta = [e.fwd.outputs[i] for i in e.out_rg]
            cts = [g if g is not None else zeros(o.shape, dtype=o.dtype) for g, o in zip(grads, outs_meta)]
        if STATE.grad_enabled:
            # create_graph: replay the joint graph eagerly, so the gradient is itself differentiable
            for t, v in zip(self.inputs, self.versions):
                if t._version.v != v:
                    raise RuntimeError("one of the variables needed for gradient computation has been modified "
                                       "by an inplace operation (an input of a traced function)")
            from ..backends.interpreter import replay
            ins = [t if k == "data" else t._grad for (k, _), t in zip(e.sources, self.inputs)]
            res = replay(e.joint, ins + list(cts))
            return tuple(res[len(res) - len(e.diff_inputs):])
        arrays = self.saved + [c._data for c in cts]
        return tuple(Tensor._wrap(a) for a in e.bwd_fn(arrays))

    def release(self):
        self.saved = None

    def name(self):
        return "CompiledFunctionBackward"


class TracedFunction:
    def __init__(self, fn, static_argnums=(), static_argnames=(), backend=None, max_cache_size=None, name=None,
                 check=None):
        from . import check as _check
        self.fn = fn
        self.check = _check.ENABLED if check is None else bool(check)   # see tracing/check.py
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        self.backend_name = backend
        self.max_cache_size = max_cache_size if max_cache_size is not None else config.cache_size_limit
        self.cache = {}          # signature -> [Entry]
        self.traces = 0
        self.hits = 0
        self._last_sig = None
        self.__name__ = name or getattr(fn, "__name__", type(fn).__name__)
        functools.update_wrapper(self, fn, updated=()) if hasattr(fn, "__name__") else None

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        bound = self.__dict__.setdefault("_bound", weakref.WeakKeyDictionary()) if _weakrefable(obj) else {}
        tf = bound.get(obj)
        if tf is None:
            tf = TracedFunction(functools.partial(self.fn, obj), tuple(i - 1 for i in self.static_argnums if i > 0),
                                self.static_argnames, self.backend_name, self.max_cache_size, self.__name__,
                                self.check)
            if _weakrefable(obj):
                bound[obj] = tf
        return tf

    # ------------------------------------------------------------------ signature
    def _signature(self, args, kwargs):
        leaves = []
        key = [STATE.grad_enabled]
        for i, a in enumerate(args):
            try:
                key.append(flatten(a, leaves, i in self.static_argnums))
            except TypeError as e:
                raise _named(self, f"argument {i} ({_param_name(self.fn, i)})", e) from None
        for k in sorted(kwargs):
            try:
                key.append((k, flatten(kwargs[k], leaves, k in self.static_argnames)))
            except TypeError as e:
                raise _named(self, f"argument {k!r}", e) from None
        return tuple(key), leaves

    def __call__(self, *args, **kwargs):
        if STATE.tracer is not None:   # called from inside another trace: inline it
            return self.fn(*args, **kwargs)
        if kwargs or self.static_argnums:
            key, leaves = self._signature(args, kwargs)
        else:
            # the common call: positional tensors on the CPU. Builds the key _signature would build.
            key = [STATE.grad_enabled]
            for a in args:
                if type(a) is not Tensor or type(a._data) is not np.ndarray or not a._data.flags.c_contiguous:
                    key, leaves = self._signature(args, kwargs)
                    break
                d = a._data
                key.append(("T", d.shape, d.dtype, a._requires_grad))
            else:
                key = tuple(key)
                leaves = args
        es = self.cache.get(key)
        if es is not None:
            e = es[0]
            if e.plain:
                self.hits += 1
                if e.single and not e.bwd_fn:
                    return Tensor._wrap(e.fwd_fn([t._data for t in leaves])[0])
                return self._run(e, leaves)
            for e in es:
                why, ts = e.check(leaves)
                if why is None:
                    self.hits += 1
                    return self._run(e, ts)
        leaves = list(leaves)
        with TRACE_LOCK:
            # (threads: one traces at a time; one that waited finds what the other compiled for its signature)
            for e in self.cache.get(key, ()):
                why, ts = e.check(leaves)
                if why is None:
                    break
            else:
                e = self._compile(args, kwargs, key, leaves)
                ts = e.resolve(leaves)[0]
                if e.one_shot:      # it creates the state the next trace lifts: run it before another traces
                    return self._run(e, ts)
                if self.check:      # the first call of a signature, compared with an eager run
                    from .check import checked_call
                    return checked_call(self, e, ts, args, kwargs)
        return self._run(e, ts)

    # ------------------------------------------------------------------ tracing + compiling
    def _why(self, key, leaves):
        if not self.cache:
            return "first call"
        if key in self.cache:
            return self.cache[key][-1].check(leaves)[0] or "a guard failed"
        old = self._last_sig
        if old is None:
            return "new signature"
        if old[0] != key[0]:
            return "grad mode changed"
        for i, (a, b) in enumerate(zip(old[1:], key[1:])):
            if a != b:
                return f"argument {i} changed: {_describe(a)} -> {_describe(b)}"
        return "number of arguments changed"

    def _compile(self, args, kwargs, key, leaves):
        same = self.cache.get(key)
        if same and len(same) >= PER_SIGNATURE:
            # guards on what the function reads (a scheduler's learning rate, .grad presence, train/eval)
            # failed again for this signature: drop its oldest program rather than grow without bound
            same.pop(0)
        n_entries = sum(len(v) for v in self.cache.values())
        if n_entries >= self.max_cache_size:
            raise TraceError(f"{self.__name__}: {n_entries} compiled signatures reached the cache limit "
                             f"(tracejit.config.cache_size_limit = {self.max_cache_size}). The function is being "
                             f"retraced for every new shape or static value: {self._why(key, leaves)}. Pad inputs to a few "
                             f"fixed shapes, stop passing changing Python values, or raise the limit.")
        log.info("tracejit: tracing %s (%s)", self.__name__, self._why(key, leaves))
        t0 = time.perf_counter()
        entry = build_entry(self.fn, args, kwargs, leaves, self.backend_name)
        entry.finish(len(leaves))
        entry.compile_time = time.perf_counter() - t0
        self.traces += 1
        if entry.one_shot:
            # this call created state that later calls will read (e.g. the optimizer's first step): run this
            # program once and trace again next time, when that state exists and is lifted
            log.info("tracejit: %s created persistent tensors (e.g. optimizer state) on this call; the program "
                     "runs once and the next call traces again", self.__name__)
        else:
            self.cache.setdefault(key, []).append(entry)
        self._last_sig = key
        return entry

    # ------------------------------------------------------------------ running
    def _run(self, entry, ts):
        if entry.plain:
            arrays = [t._data for t in ts]
        else:
            arrays = [t._data if k == "data" else t._grad._data for (k, _), t in zip(entry.sources, ts)]
        outs = entry.fwd_fn(arrays)
        n = entry.n_out
        user = [Tensor._wrap(a) for a in outs[:n]] if n != 1 else [Tensor._wrap(outs[0])]
        k, arg_ids = n, None
        for src, kind in entry.writeback:
            t = src if kind in ("adopt", "escaped") else ts[src]
            if kind == "grad_none":
                t._grad = None
                continue
            a = outs[k]
            k += 1
            if kind == "data":
                if a is not t._data:        # (a kernel wrote it in place: see CompiledGraph's donate)
                    _copy_back(t._data, a)
                t._version.v += 1
            elif kind == "adopt":
                _copy_back(t._data, a)
                t._version.v += 1
            elif kind == "escaped":
                t._data, t._value = (np.array(a) if isinstance(a, np.ndarray) else a.copy()), None
            else:
                if arg_ids is None:
                    arg_ids = set(map(id, arrays))
                t._grad = Tensor._wrap(a.copy() if id(a) in arg_ids else a)
        if entry.bwd_fn is not None and STATE.grad_enabled:
            diff = [ts[i] for i in entry.diff_inputs]
            if any(t._requires_grad for t in diff):
                node = CompiledFunctionBackward(entry, list(outs[k:k + entry.n_saved]), ts,
                                                [t._version.v for t in ts])
                node.edges = tuple([edge_of(t) for t in diff])
                for nr, i in enumerate(entry.out_rg):
                    u = user[i]
                    u._requires_grad = True
                    u.grad_fn = node
                    u._output_nr = nr
        if entry.single:
            return user[0]
        return unflatten(entry.out_tree, iter(user))

    # ------------------------------------------------------------------ introspection
    def graph(self, *args, **kwargs):
        """The graphs compiled for these arguments (forward, backward, joint), tracing if needed."""
        key, leaves = self._signature(args, kwargs)
        with TRACE_LOCK:
            for e in self.cache.get(key, ()):
                if e.check(leaves)[0] is None:
                    return GraphSet(e)
            return GraphSet(self._compile(args, kwargs, key, leaves))

    def cache_info(self):
        return {"entries": sum(len(v) for v in self.cache.values()), "traces": self.traces, "hits": self.hits,
                "limit": self.max_cache_size}

    def clear_cache(self):
        self.cache.clear()


def _param_name(fn, i):
    import inspect
    try:
        ps = [p.name for p in inspect.signature(getattr(fn, "forward", fn)).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return repr(ps[i]) if i < len(ps) else "*args"
    except (TypeError, ValueError):
        return "?"


def _weakrefable(obj):
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


def _describe(k):
    if isinstance(k, tuple) and k and k[0] == "T":
        from .._dtype import from_numpy_dtype
        return f"{from_numpy_dtype(np.dtype(k[2])).name}{list(k[1])}" + (" requires_grad" if k[3] else "")
    if isinstance(k, tuple) and k and k[0] == "V":
        return repr(k[2])
    return str(k)[:60]


class GraphSet:
    def __init__(self, e):
        self.forward = e.fwd
        self.backward = e.bwd
        self.joint = e.joint
        self.traced = e.graphs.get("traced")
        self.entry = e
        # what the backend runs, after its own passes (fusion: fused_k nodes with their bodies)
        self.compiled_forward = getattr(e.fwd_fn, "graph", None)
        self.compiled_backward = getattr(e.bwd_fn, "graph", None)

    def text(self):
        fwd, bwd = self.compiled_forward or self.forward, self.compiled_backward or self.backward
        parts = [fwd.text("forward" + (" (compiled)" if fwd is not self.forward else ""))]
        if self.backward is not None:
            parts.append(bwd.text("backward" + (" (compiled)" if bwd is not self.backward else "")))
        return "\n\n".join(parts)

    def __str__(self):
        return self.text()

    __repr__ = __str__


# ----------------------------------------------------------------------------- the pipeline

def run_passes(g, passes=None):
    from ..passes import DEFAULT_PASSES
    for p in (DEFAULT_PASSES if passes is None else passes):
        g = p(g)
        if config.verify_ir:
            verify(g)
    return g


def _copy_back(dst, a):
    if isinstance(dst, np.ndarray):
        np.copyto(dst, a if isinstance(a, np.ndarray) else a.to_host())   # (a CPU scalar of a cuda graph)
    else:
        dst.copy_from(a)        # a device array


def _on_device(ts):
    """True when the tensors live on cuda; a RuntimeError when they are on different devices."""
    kinds = {type(t._data) is not np.ndarray and not isinstance(t._data, np.ndarray) for t in ts
             if t._data is not None and t._data.ndim}        # 0-d CPU tensors are scalars anywhere (PyTorch)
    if len(kinds) > 1:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
                           "and cpu! (a traced function's arguments and the tensors it reads)")
    return kinds == {True}


def build_entry(fn, args, kwargs, leaves, backend_name=None):
    # Python's cyclic GC would walk the growing heap of tracers and IR nodes over and over (fusion of the
    # 15.9k-node LSTM step of benches/bench_compile_scaling.py: 5.7-6.7 s with it, 2.2-2.6 s without, on a loaded
    # AMD EPYC); the cycles made here are left to the collections after it is on again
    was = gc.isenabled()
    gc.disable()
    try:
        return _build_entry(fn, args, kwargs, leaves, backend_name)
    finally:
        if was:
            gc.enable()


def _build_entry(fn, args, kwargs, leaves, backend_name=None):
    """The stages: trace the function (and derive its backward) -> guards on what it read -> the program
    (passes, forward/backward partition) -> the backend's callables."""
    e = Entry()
    g, n_fwd, n_ct, slots, grad_touched = _record(e, fn, args, kwargs, leaves)
    _guard(e, leaves, slots, grad_touched)
    _program(e, g, n_fwd, n_ct)
    _compile_programs(e, slots, backend_name)
    return e


def _record(e, fn, args, kwargs, leaves):
    """Run `fn` on tracers: the joint graph (outputs, then written-back values, then the gradients of the
    differentiable inputs when a backward is derived), with what `e` needs to run it."""
    ctx = TraceContext()
    if _on_device(leaves):
        from .._tensor import device as _device
        ctx.device = _device("cuda", 0)      # what tracers report as their .device
    with ctx:
        for i, t in enumerate(leaves):
            ctx.add_argument(t, f"arg{i}")
        out = fn(*args, **kwargs)
        outs = []
        e.out_tree = collect(out, outs)
        for o in outs:
            ctx.value_of(o)
            if o._data is not None:      # an output made inside without ops: a constant
                ctx.ensure_tracer(o)
        o = None                         # (no local may keep a tracer alive: see ctx.escaped below)
        g = ctx.graph
        e.n_out = len(outs)
        out_vals = [o._value for o in outs]
        # what the function changed: the values and .grad of the tensors it received or read
        wb_vals = []
        for i, sl in enumerate(ctx.slots):
            t = sl.tensor
            if sl.kind != "data":
                continue
            if t._value is not ctx.initial[id(t)]:
                e.writeback.append((i, "data"))
                wb_vals.append(t._value)
            g0, v0 = ctx.initial_grad[id(t)]
            if t._grad is None:
                if g0 is not None:
                    e.writeback.append((i, "grad_none"))
            elif t._grad is not g0 or (v0 is not None and t._grad._value is not v0):
                ctx.ensure_tracer(t._grad)
                e.writeback.append((i, "grad"))
                wb_vals.append(t._grad._value)
        # tensors created inside and updated in place (new optimizer state...): written once, after this run
        for t, _ in ctx.adopted:
            e.writeback.append((t, "adopt"))
            wb_vals.append(t._value)
        e.one_shot = bool(ctx.adopted)
        # the backward of the whole function, derived now on the same tracers
        diff_pos = [i for i, s in enumerate(ctx.slots) if s.kind == "data" and s.tensor._requires_grad]
        e.out_rg = [i for i, o in enumerate(outs) if o._requires_grad]
        cts = grads = []
        if STATE.grad_enabled and diff_pos and e.out_rg:
            n_in, n_nodes = len(g.inputs), len(g.nodes)
            try:
                from ..autograd.graph import FreedGraphError
                from ..passes.autodiff import differentiate
                cts, grads = differentiate([outs[i] for i in e.out_rg], [ctx.slots[i].tensor for i in diff_pos])
            except FreedGraphError:
                log.info("tracejit: %s: no outer backward (the graph was freed by a backward inside)", fn)
                e.out_rg, cts, grads = [], [], []
                # what the failed derivation added: its cotangent inputs and the nodes it recorded before failing
                del g.inputs[n_in:], g.input_names[n_in:], g.nodes[n_nodes:]
        e.diff_inputs = diff_pos if grads else []
        e.diff_meta = (tuple(tuple(ctx.slots[i].tensor.shape) for i in e.diff_inputs),
                       tuple(ctx.slots[i].tensor.dtype for i in e.diff_inputs))
        grad_vals = [ctx.value_of(x) for x in grads]
        e.modules = [(weakref.ref(m), tr) for m, tr in ctx.modules.values()]
        e.values = list(ctx.value_guards.values())
        slots = list(ctx.slots)
        grad_touched = ctx.grad_touched
        n_ct = len(cts)
        del out, outs, grads, cts
    # results the function stored on Python objects (e.g. SGD's first momentum buffer) become real tensors. The
    # objects of the trace are young (the collector is off while building): a collection of the youngest
    # generation frees their cycles (~20 ms); the full one (~0.1 s: numba's objects too) only if some seem alive
    gc.collect(0)
    escaped = ctx.escaped()
    if escaped:
        gc.collect()
        escaped = ctx.escaped()
    for t in escaped:
        e.writeback.append((t, "escaped"))
        wb_vals.append(t._value)
        e.one_shot = True
    g.outputs = out_vals + wb_vals + grad_vals
    g.output_names = [f"out{i}" for i in range(len(out_vals))] + [f"writeback{i}" for i in range(len(wb_vals))] \
        + [f"grad{i}" for i in range(len(grad_vals))]
    return g, len(out_vals) + len(wb_vals), n_ct, slots, grad_touched


def _guard(e, leaves, slots, grad_touched):
    """Where each input comes from at call time, and what it looked like now (the guards)."""
    arg_index = {id(t): j for j, t in enumerate(leaves)}
    for sl in slots:
        t = sl.tensor
        if sl.kind == "grad":
            owner = t.__dict__.pop("_grad_of")
            e.guards.append((tuple(t._data.shape), t.dtype, None, None))
        else:
            owner = t
            e.guards.append((tuple(t._data.shape), t.dtype, t._requires_grad,
                             (t._grad is None) if id(t) in grad_touched else None))
        j = arg_index.get(id(owner))
        e.sources.append((sl.kind, j if j is not None else weakref.ref(owner)))


def _program(e, g, n_fwd, n_ct):
    """The passes on the traced graph, then its forward and backward programs."""
    from .. import passes as P
    if config.verify_ir:
        verify(g)
    e.graphs["traced"] = g
    joint = run_passes(g)
    if e.diff_inputs:
        e.joint = joint
        e.fwd, e.bwd, e.n_saved = P.partition(joint, n_fwd, n_ct)
        e.fwd, e.bwd = P.dce(e.fwd), P.dce(e.bwd)
    else:
        e.fwd = joint
        e.joint = None


def _compile_programs(e, slots, backend_name):
    """The backend's callables for the programs: the CUDA one when the tensors are on cuda."""
    from ..backends import get_backend
    e.on_device = _on_device([sl.tensor for sl in slots])
    if e.on_device:             # the graph runs where its tensors are
        from ..backends.numba_cuda import cuda_backend
        backend = cuda_backend(backend_name)
    else:
        backend = get_backend(backend_name)
    # the new value of an input updated in place may be written into that input's array (see CompiledGraph)
    donate, k = {}, e.n_out
    for src, kind in e.writeback:
        if kind != "grad_none":
            if kind == "data":
                donate[k] = src
            k += 1
    e.fwd_fn, e.bwd_fn = backend.compile_pair(e.fwd, e.bwd, donate)


def trace(fn=None, *, static_argnums=(), static_argnames=(), backend=None, max_cache_size=None, check=None):
    """Compile `fn` (a function or an nn.Module) per input signature. Usable as @trace, @trace(...), trace(fn).
    check=True (or TRACEJIT_CHECK=1): the first call of each signature is compared with an eager run
    (tracing/check.py)."""
    if fn is None:
        return lambda f: trace(f, static_argnums=static_argnums, static_argnames=static_argnames, backend=backend,
                               max_cache_size=max_cache_size, check=check)
    if isinstance(fn, TracedFunction):
        return fn
    return TracedFunction(fn, static_argnums, static_argnames, backend, max_cache_size, check=check)


def make_graph(fn, *args, **kwargs):
    """Like jax.make_jaxpr: the forward IR graph `fn` captures for these arguments (nothing is compiled)."""
    leaves = []
    for a in args:
        flatten(a, leaves)
    for k in sorted(kwargs):
        flatten(kwargs[k], leaves)
    ctx = TraceContext()
    with TRACE_LOCK, ctx:
        for i, t in enumerate(leaves):
            ctx.add_argument(t, f"arg{i}")
        out = fn(*args, **kwargs)
        outs = []
        collect(out, outs)
        ctx.graph.outputs = [ctx.value_of(o) for o in outs]
        ctx.graph.output_names = [f"out{i}" for i in range(len(outs))]
    return ctx.graph
