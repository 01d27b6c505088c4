"""Runs a fused graph: a precomputed plan of closures over a flat list of slots.

Fused nodes call their generated numba kernels; every other node (matmul -> numpy BLAS, reductions,
indexing, random...) runs with its registry `impl`. Kernel outputs that are not returned to the caller
live in buffers allocated once per compiled graph and reused by every call (intermediates whose lifetimes
do not overlap share memory: passes/buffers.py plans it); outputs returned to the
caller are allocated fresh when the caller still holds the previous call's array (or a view of it), and
reused when it does not (reference count): a fresh 64 MiB array costs more than the math. If a returned value turns out to be a
view of a reused buffer (a reshape of an intermediate, say), it is copied before it is returned.
"""
import logging
import os
import time
from sys import getrefcount

import numpy as np
from numba import get_num_threads

from ..._keep import REFCOUNTS_EXACT, Keeper
from ... import config
from ...ir.graph import Value
from ...passes import buffers
from . import codegen, direct, workers
from .codegen import generate
from .rt import NoAliasCompiler
from .gemm import GEMM_ACC
from .. import diskcache as _cache


class CompiledGraph:
    """`donate`: {output index: input index} of outputs that replace an input (an in-place update such as
    `p -= lr * p.grad`, functionalized): a kernel may write such an output straight into the input's array
    (see _donations), so the caller's copy back is skipped and no fresh array is allocated."""

    def __init__(self, graph, fastmath=False, donate=None, warm=True):
        self.graph = graph
        self._donated = _donations(graph, donate) if donate else {}
        self.kernels = []          # (name, KernelSource, dispatcher)
        self._sources = {}         # generate's memo: kernel structure -> KernelSource
        self._pending = []         # kernels to compile before the first call: see warm_kernels
        slot = {}

        def slot_of(v):
            if id(v) not in slot:
                slot[id(v)] = len(slot)
            return slot[id(v)]

        in_slots = [slot_of(v) for v in graph.inputs]
        template_items = [(slot_of(v), a) for v, a in graph.consts.items()]
        for n in graph.nodes:
            for o in n.outputs:
                slot_of(o)
        # kernels read constants through their own C-contiguous, writable copies: numba's dispatcher types a
        # read-only or strided array (a broadcast constant: autodiff's ones for sum's backward) in Python, tens
        # of microseconds per call, and its loop does not vectorize. Big ones stay as they are (memory).
        kslot = dict(slot)                   # the slots fused steps read: copies instead of such constants
        for v, a in graph.consts.items():
            if isinstance(a, np.ndarray) and a.size <= _CONST_COPY_MAX and a.ndim and \
                    not (a.flags.c_contiguous and a.flags.writeable) and \
                    any(n.op.kind == "fused" and any(i is v for i in n.inputs) for n in graph.nodes):
                kslot[id(v)] = slot[("kernel copy", id(v))] = len(slot)
                template_items.append((kslot[id(v)], np.array(a, order="C")))
        out_vals = [v for v in graph.outputs]
        returned = set(id(v) for v in out_vals if isinstance(v, Value))
        # a reshape's elements in order are its input's (op.reshapes): fused steps read through them to the
        # array under them (kernels take their operands flat), and a reshape only fused steps read is skipped
        # (the ResNet step's [C] <-> [1, C, 1, 1] views of its batch-norm parameters and their gradients: 38 of
        # 75 view nodes, ~3 us each a call)
        self._root = {}            # id(value read through reshapes) -> the value under them
        readers = {}
        for n in graph.nodes:
            for i in n.inputs:
                readers.setdefault(id(i), []).append(n)
            if n.op.reshapes:
                self._root[id(n.outputs[0])] = self._root.get(id(n.inputs[0]), n.inputs[0])
                kslot[id(n.outputs[0])] = kslot[id(self._root[id(n.outputs[0])])]
        skipped = {id(n) for n in graph.nodes if n.op.reshapes and id(n.outputs[0]) not in returned and
                   all(m.op.kind == "fused" for m in readers.get(id(n.outputs[0]), ()))}
        self._bufids = set()       # ids of every intermediate buffer ever allocated (for the alias check)
        self._buf_specs = []       # per buffer: the buffer plan's request (numpy dtype, shape, value or None, node)
        # per call: may donated outputs be written into their inputs' arrays (no two inputs share memory)?
        self._ok_slot = None
        if self._donated:
            self._ok_slot = slot[("donation ok",)] = len(slot)
        self._nslots = len(slot)
        self._pool = []            # free buffer sets: one per concurrent call (normally exactly one)
        # keep each returned array, to reuse it when the caller dropped it. Off for a backward program with small
        # outputs: its gradients usually become a leaf's .grad, which takes over an array nobody else holds
        # (the engine copies one we keep), and a small allocation is cheaper than that copy
        self.keep_returned = REFCOUNTS_EXACT      # (else never reused: see tracejit/_keep.py)
        steps = []
        for k, n in enumerate(graph.nodes):
            if id(n) in skipped:
                steps.append(_skip)
            elif n.op.kind == "fused":
                steps.append(self._fused_step(n, k, kslot, returned, fastmath))
            elif n.op is GEMM_ACC and id(n.outputs[0]) in self._donated:
                steps.append(self._gemm_step(n, slot))
            else:
                steps.append(_impl_step(n, slot))
        self._steps = steps         # one per node of the graph
        self._slot = slot
        self._template = [None] * len(slot)
        for s, a in template_items:
            self._template[s] = a
        self._in_slots = in_slots
        outs = []
        for v in out_vals:
            if isinstance(v, Value):
                outs.append((True, slot[id(v)], v.producer is not None and v.producer.op.kind != "fused"))
            else:
                outs.append((False, v, False))
        self._outs = outs
        self._check_alias = bool(self._buf_specs) and any(c for _, _, c in outs)
        self.plan = buffers.plan(graph, self._buf_specs, share=config.share_buffers)
        self._pool.append(self._alloc())
        if warm:
            warm_kernels([self])

    def _fused_step(self, n, at, slot, returned, fastmath):
        k = len(self.kernels)
        ks = generate(n, f"fused_{k}", fastmath, self._sources)
        mod = _cache.load_module(ks.code, "kernel")
        name = n.op.name
        if ks.size * ks.par_weight >= codegen.PAR_MIN and ks.parallel_ok and not _may_raise(n):
            disp = _by_threads(mod)
            self.kernels.append((name, ks, mod.kernel_par if get_num_threads() > 1 else mod.kernel))
        else:
            disp = mod.kernel
            self.kernels.append((name, ks, disp))
        in_slots = [slot[id(v)] for v in n.inputs]
        out_slots = [slot[id(o)] for o in n.outputs]
        extra = ks.extra_args
        size = ks.size
        # outputs: reused buffers (intermediates) or fresh arrays (returned to the caller)
        # a buffer lives in two env slots after the values: flat array, then its N-d view
        fixed, donor = [], []
        for o in n.outputs:
            u = self._donated.get(id(o))
            donor.append(slot[id(u)] if u is not None and ks.mode != "rows" and
                         ks.in_kinds[next(j for j, i in enumerate(n.inputs) if i is u)] == "full" else None)
            if id(o) in returned:
                fixed.append(None)
            else:
                fixed.append(self._nslots + 2 * len(self._buf_specs))
                self._buf_specs.append((np.dtype(o.dtype.np), tuple(o.shape), o, at))
        specs = [(o.dtype.np, o.shape) for o in n.outputs]
        scratch = []               # the kernel's scratch arrays: intermediate buffers too, passed after the inputs
        for dt, length in ks.scratch:
            scratch.append(self._nslots + 2 * len(self._buf_specs))
            self._buf_specs.append((np.dtype(dt), (length,), None, at))
        calls = [disp]      # what the steps call: warm_kernels may put a direct kernel first (_first)
        self._pending.append((name, self.kernels[-1][2], n, ks, mod, calls))    # (the variant for now)
        # 1-d operands go to the kernel as they are (reshape(-1) of a 1-d array is the same array, ~0.1 us);
        # those not made by a kernel (arguments, cotangents, numpy ops' results) may be views: see _operand
        flat_in = all(len(self._root.get(id(v), v).shape) == 1 for v in n.inputs)
        ins = [(slot[id(v)], v.producer is None or v.producer.op.kind != "fused") for v in n.inputs]
        ins += [(s, False) for s in scratch]
        in_slots += scratch
        if flat_in and not any(c for _, c in ins):
            def operands(env):
                return [env[s] for s in in_slots]
        elif flat_in:
            def operands(env):
                out = [env[s] for s in in_slots]
                for j, (_, c) in enumerate(ins):
                    if c:
                        f = out[j].flags
                        if not (f.c_contiguous and f.writeable):
                            out[j] = _operand(out[j])
                return out
        else:
            def operands(env):
                return [_operand(env[s]) if c else env[s].reshape(-1) for s, c in ins]
        plan = [(j, s, f, dt, shp, len(shp) == 1, d)
                for j, (s, f, (dt, shp), d) in enumerate(zip(out_slots, fixed, specs, donor))]

        if len(n.outputs) == 1 and fixed[0] is not None:
            fb, = fixed
            o0 = out_slots[0]

            def step(env):
                try:
                    calls[0](*operands(env), env[fb], *extra)
                except Exception as e:
                    raise _kernel_error(name, e) from None
                env[o0] = env[fb + 1]
            return step

        last = [Keeper() for _ in out_slots]      # the array each returned output got last call
        ok = self._ok_slot

        def step(env):
            flats = []
            for j, s, f, dt, shp, one_d, d in plan:
                if d is not None and env[ok]:
                    a = env[d]          # the array of the input this output replaces, when the kernel can take it
                    if type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable:
                        env[s] = a
                        flats.append(a if one_d else a.reshape(-1))
                        continue
                if f is None:
                    # reuse last call's array when nobody else holds it (nor a view of it): refs are
                    # the keeper's, `a` and getrefcount's argument
                    a = last[j].a
                    if a is None or getrefcount(a) > 3:
                        a = np.empty(shp, dt)
                        if self.keep_returned:
                            last[j].keep(a)
                    env[s] = a
                    flats.append(a if one_d else a.reshape(-1))
                else:
                    env[s] = env[f + 1]
                    flats.append(env[f])
            try:
                calls[0](*operands(env), *flats, *extra)
            except Exception as e:
                raise _kernel_error(name, e) from None
        return step

    def _gemm_step(self, n, slot):
        """gemm_acc whose output replaces its P input (a donated weight): BLAS adds the product into P's own
        array when this call may write it (see _donations), else the node runs as usual (into a copy)."""
        (ps, as_, bs), o = [slot[id(v)] for v in n.inputs], slot[id(n.outputs[0])]
        alpha, impl, ok = n.attrs["alpha"], n.op.impl, self._ok_slot

        def step(env):
            p = env[ps]
            env[o] = impl(p, env[as_], env[bs], alpha=alpha, out=p if env[ok] else None)
        return step

    def _alloc(self):
        arenas = [np.empty(size, dt) for dt, size in self.plan.arenas]
        self._bufids.update(map(id, arenas))
        bufs = []
        for (_, shape, _, _), a in zip(self._buf_specs, self.plan.where):
            b = arenas[a][:int(np.prod(shape, dtype=np.int64))]
            bufs += [b, b.reshape(shape)]
        return bufs

    def __call__(self, arrays):
        return self._run(arrays, None)

    def step_times(self, arrays):
        """(seconds of each step of one call, one step per node of the graph; the outputs): for `explain`."""
        times = []
        return times, self._run(arrays, times)

    def _run(self, arrays, times):
        if len(arrays) != len(self._in_slots):      # (zip below would drop or leave inputs silently)
            raise RuntimeError(f"tracejit: the compiled program takes {len(self._in_slots)} inputs, got "
                               f"{len(arrays)} (a tracejit bug; please report it)")
        # a call takes a buffer set from the pool (a concurrent call finds it empty and gets its own)
        pool = self._pool
        try:
            bufs = pool.pop()
        except IndexError:
            bufs = self._alloc()
        env = self._template + bufs
        for s, a in zip(self._in_slots, arrays):
            env[s] = a
        if self._ok_slot is not None:
            env[self._ok_slot] = _distinct_memory(arrays)
        if times is None:
            for step in self._steps:
                step(env)
        else:
            for step in self._steps:
                t0 = time.perf_counter()
                step(env)
                times.append(time.perf_counter() - t0)
        res = [env[x] if is_slot else x for is_slot, x, _ in self._outs]
        if self._check_alias:
            ids = self._bufids
            for j, (is_slot, _, check) in enumerate(self._outs):
                if check:
                    b = res[j]
                    while isinstance(b, np.ndarray):
                        if id(b) in ids:
                            res[j] = res[j].copy()
                            break
                        b = b.base
        pool.append(bufs)
        return res

    def source(self):
        """The generated source of every kernel, for reading."""
        return "\n\n".join(ks.source for _, ks, _ in self.kernels)


def _donations(graph, donate):
    """{id(output value): input value} for the outputs of `donate` ({output index: input index}) a fused node
    may write into the input's own array: the input has the output's shape and dtype, is read by no node after
    that one and is not an output itself (saved for a backward, say), and the output is returned once. Inside
    the kernel each element of the input is then read before the same element is written (checked by the
    caller: an elementwise loop, the input read at the output's index, not a row kernel's passes); a gemm_acc
    node adds its product into its P input (BLAS reads C where it writes it)."""
    # the last read of an input counts reads through anything that may alias it (a view; a collective's handle,
    # through which the communication thread reads it until the wait); one an output may alias is read after
    # the call (passes/buffers.py)
    last_use, _ = buffers.lifetimes(graph)
    where = {id(n): k for k, n in enumerate(graph.nodes)}
    out_ids = [id(v) for v in graph.outputs if isinstance(v, Value)]
    res = {}
    for j, i in donate.items():
        v, u = graph.outputs[j], graph.inputs[i]
        n = getattr(v, "producer", None)
        if n is None or out_ids.count(id(v)) != 1 or id(u) in out_ids or \
                not (n.op.kind == "fused" or (n.op is GEMM_ACC and n.inputs[0] is u)):
            continue
        if tuple(v.shape) == tuple(u.shape) and v.dtype == u.dtype and last_use.get(id(u)) == where[id(n)]:
            res[id(v)] = u
    return res


def _distinct_memory(arrays):
    """No two of the input arrays are the same memory or views of it: a donated input's array must not be
    read again through another input after its kernel wrote it (arguments that alias each other then get
    the copy back, as if the program ran on copies)."""
    owners = [a if a.base is None else a.base for a in arrays if type(a) is np.ndarray]
    return len(set(map(id, owners))) == len(owners)


def _operand(a):
    """`a` flattened as kernels are compiled for: C-contiguous and writeable, else a copy. A view (an
    expanded cotangent such as sum's backward `ones`, a strided slice, a read-only array) would make numba
    type the call in Python (tens of us), compile another specialization at call time, and run it without
    vectorizing (a stride-0 cotangent of 4M elements: 70 ms instead of a 3 ms copy and a 10 ms kernel)."""
    f = a.flags
    if f.c_contiguous and f.writeable:
        return a.reshape(-1)
    return np.array(a, order="C").reshape(-1)


def _skip(env):
    pass


def _impl_step(n, slot):
    impl, attrs = n.op.impl, n.attrs
    args = [(True, slot[id(i)]) if isinstance(i, Value) else (False, i) for i in n.inputs]
    outs = [slot[id(o)] for o in n.outputs]
    if n.op.nout == 1:
        o0 = outs[0]
        if all(a[0] for a in args):
            ss = [a[1] for a in args]
            if attrs:
                def step(env):
                    env[o0] = impl(*[env[s] for s in ss], **attrs)
            else:
                def step(env):
                    env[o0] = impl(*[env[s] for s in ss])
            return step

        def step(env):
            env[o0] = impl(*[env[x] if isv else x for isv, x in args], **attrs)
        return step

    def step(env):
        res = impl(*[env[x] if isv else x for isv, x in args], **attrs)
        for s, r in zip(outs, res):
            env[s] = r
    return step


_CONST_COPY_MAX = 1 << 16     # elements


def _by_threads(mod):
    """A large kernel's dispatcher chosen per call: its prange variant where the calling thread may use more
    than one numba thread (numba.set_num_threads is per thread and may change between calls), else the serial
    one. One thread gains nothing from the prange variant, and it compiles ~3x slower."""
    serial, par = mod.kernel, mod.kernel_par

    def disp(*args):
        return (par if get_num_threads() > 1 and workers.ready(par) else serial)(*args)
    return disp


def _may_raise(n):
    """A fused node with an integer division: its kernel raises on a zero divisor, which numba's parallel
    loops swallow silently, so it runs serially (integer division does not vectorize anyway)."""
    return any(b.op.int_div_raises and b.outputs[0].dtype.np.kind in "iub"
               for b in getattr(n.attrs.get("body"), "nodes", ()))


def warm_kernels(graphs):
    """Compile the kernels of these CompiledGraphs now (at trace time), each on one-element arrays of its
    dtypes; several at once, in forked helpers, when enough of them are not in the disk cache (workers.py). A
    serial kernel numba has not compiled before is lowered by direct.py where it can (in a fraction of numba's
    time; in the helpers too), and runs that way until numba, in a background helper, has compiled it."""
    jobs, later, names, firsts = [], [], {}, {}
    # (a direct kernel runs until numba's, compiled by a background helper, is ready: none without helpers)
    first_tier = config.direct_kernels and workers.max_helpers() > 0 and hasattr(os, "fork")
    for g in graphs:
        for name, disp, n, ks, mod, calls in g._pending:
            serial = mod.kernel
            args = _warm_args(n, ks)
            if disp is not serial:      # a prange variant: the serial kernel now, the variant in the background
                later.append((disp, args))
                names[id(disp)] = name
            # (a kernel that may raise, an integer division by zero, is numba's: it raises numba's error)
            d = _direct_job(mod, ks, args) if first_tier and not _may_raise(n) and \
                workers._needs_compiling(serial) else None
            if d is not None:
                firsts.setdefault(d[0], (d, []))[1].append((name, serial, args, calls))
            else:
                jobs.append((name, serial, args, len(ks.code)))
        g._pending = []
    serials = []
    for name, serial, args in _lower_all(list(firsts.values()), jobs):
        if id(serial) not in names:
            serials.append((serial, args))
            names[id(serial)] = name
    later = serials + later             # (numba's serial kernels first: what one thread calls)
    claim, wait = workers.fork_compile([(disp, args, size) for _, disp, args, size in jobs])
    done = set()
    try:
        for i in claim():
            _warm(*jobs[i][:3])
            done.add(i)
    finally:
        wait()                  # (also when a kernel of ours failed: no helper outlives this call)
    for i in range(len(jobs)):
        if i not in done:
            _warm(*jobs[i][:3])
    for disp, args in workers.compile_later(later):
        _warm(names[id(disp)], disp, args)


def _direct_job(mod, ks, args):
    """(key, lower, file, argument types, size) of the direct kernel of `mod.kernel` for these arguments, or None
    where direct.py does not take this kernel (numba's options other than the generated kernels' usual ones)."""
    serial = mod.kernel
    opts = {k: v for k, v in serial.targetoptions.items() if v is not None}
    if set(opts) - {"cache", "nogil", "error_model", "no_cfunc_wrapper", "nopython", "pipeline_class"} or \
            opts.get("error_model") != "numpy":
        return None             # (fastmath, ...: numba's)
    try:
        argtys = direct.arg_types(args)
    except direct.Unsupported:
        return None
    noalias = opts.get("pipeline_class") is NoAliasCompiler
    key = direct.key(ks.code, argtys, noalias)

    def lower():
        with workers.vector_interleave(serial):
            return direct.lower_kernel(ks.code, mod.__dict__, "kernel", argtys, noalias=noalias)
    folder = os.path.dirname(getattr(mod, "__file__", "") or "")      # (beside the kernel module: "" if uncached)
    return key, lower, folder and os.path.join(folder, f"tj_direct_{key}.bin"), argtys, len(ks.code)


def _lower_all(firsts, jobs):
    """Lowers the direct kernels (in forked helpers too, which leave them in the cache folder) and puts each
    in front of its calls; a kernel direct.py does not handle goes to `jobs` (numba's). Returns the (name, numba
    kernel, args) that run a direct kernel."""
    todo = []
    for (key, lower, path, argtys, size), users in firsts:
        if key in _DIRECT:
            continue
        k = path and direct.load(path, key, argtys)
        if k:
            _DIRECT[key] = k
            _STATS["direct_loaded"] += 1
            continue
        todo.append(((key, lower, path, argtys, size), users))

    def run(i):         # (in a helper)
        (key, lower, path, _, _), _ = todo[i]
        try:
            direct.save(lower(), path)
        except direct.Unsupported:
            pass

    def save(k, path):
        try:
            direct.save(k, path)
        except OSError:         # (a read-only or full cache folder: the next process lowers it again)
            pass

    claim, wait = workers.fork_compile([(d[0], None, d[4]) for d, _ in todo], run=run) \
        if all(d[2] for d, _ in todo) else (lambda: iter(range(len(todo))), lambda: None)
    mine = set()
    try:
        for i in claim():
            mine.add(i)
            (key, lower, path, _, _), _ = todo[i]
            try:
                _DIRECT[key] = lower()
                _STATS["direct"] += 1
            except direct.Unsupported as e:
                _unsupported(e)
                continue
            if path:
                save(_DIRECT[key], path)
    finally:
        wait()
    for i, ((key, lower, path, argtys, _), _) in enumerate(todo):
        if i not in mine:
            k = path and direct.load(path, key, argtys)
            if not k:
                try:
                    k = lower()
                except direct.Unsupported as e:
                    _unsupported(e)
                    continue
                if path:
                    save(k, path)
            _DIRECT[key] = k
            _STATS["direct"] += 1
    fronted = []
    for (key, *_), users in firsts:
        k = _DIRECT.get(key)
        for name, serial, args, calls in users:
            if k is None:
                jobs.append((name, serial, args, 0))
            else:
                _first(k, serial, calls, key)
                fronted.append((name, serial, args))
    return fronted


def _unsupported(e):
    logging.getLogger("tracejit").debug("tracejit: numba compiles a kernel direct.py does not lower: %s", e)


def _first(first, serial, calls, key):
    """The direct kernel `first` in front of `calls` until numba's `serial` is ready (then dropped from _DIRECT:
    a later program finds numba's kernel in the cache)."""
    numba_call = calls[0]
    if _CHECK_DIRECT:
        first = _checked(first, serial)

    def call(*a):
        if workers.ready(serial):
            calls[0] = numba_call
            _DIRECT.pop(key, None)
            return numba_call(*a)
        try:
            return first(*a)
        except direct.Mismatch:         # (other argument types than at trace time: numba compiles them)
            _STATS["direct_mismatch"] += 1
            return numba_call(*a)
    calls[0] = call


_DIRECT = {}        # direct.key -> its DirectKernel
_CHECK_DIRECT = os.environ.get("TRACEJIT_CHECK_DIRECT") == "1"


def _checked(first, serial):
    """(TRACEJIT_CHECK_DIRECT=1, for testing) the direct kernel, each call checked against numba's kernel on
    copies of the arguments: every array the same bits."""
    def twin(x, roots):          # x in a copy of the memory it views (arguments may share memory)
        root = x
        while isinstance(root.base, np.ndarray):
            root = root.base
        if id(root) not in roots:
            roots[id(root)] = np.frombuffer(bytearray(np.ascontiguousarray(root).view(np.uint8).tobytes()),
                                            np.uint8) if root.flags.c_contiguous else None
        r = roots[id(root)]
        if r is None:
            return x.copy()
        off = x.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        return r[off:off + x.nbytes].view(x.dtype)

    def call(*a):
        roots = {}
        b = [twin(x, roots) if isinstance(x, np.ndarray) else x for x in a]
        first(*a)
        with workers.vector_interleave(serial):     # (as the background helper compiles it)
            serial(*b)
        for x, y in zip(a, b):
            if isinstance(x, np.ndarray) and not np.array_equal(x.view(np.uint8), y.view(np.uint8)):
                raise AssertionError(f"direct kernel differs from numba's: {serial.py_func.__globals__['__file__']}")
    return call


def _warm_args(n, ks):
    args = [np.ones(1, v.dtype.np) for v in n.inputs] + [np.empty(length, dt) for dt, length in ks.scratch] + \
        [np.empty(1, o.dtype.np) for o in n.outputs]
    k = len(ks.extra_args) - ks.n_params
    # dims, strides and offsets 0 (the call only compiles: no loop over a dim runs, no window or placed operand is
    # read or written outside these one-element arrays); the graph's float scalars as they are
    return args + [0] * k + list(ks.extra_args[k:])


def _warm(name, disp, args):
    fresh = not disp.signatures
    try:
        with workers.vector_interleave(disp):
            disp(*args)
    except Exception as e:
        err = _kernel_error(name, e)
        if isinstance(err, _cache.KernelCompileError):
            raise err from None
        # (it compiled, then raised on the made-up warm-up values: the real call raises if its data is bad)
    if fresh:
        st = disp.stats
        _STATS["compiled"] += sum(st.cache_misses.values())
        _STATS["loaded"] += sum(st.cache_hits.values())


_STATS = {"compiled": 0, "loaded": 0, "direct": 0, "direct_loaded": 0, "direct_mismatch": 0}


def compile_stats():
    """Kernels numba compiled in this process, kernels it loaded from the disk cache; kernels direct.py lowered
    (here or in helpers), direct kernels loaded from the disk cache, calls a direct kernel refused (arguments of
    other types: numba's kernel ran)."""
    return dict(_STATS)


def _kernel_error(name, e):
    if isinstance(e, ZeroDivisionError):
        # an integer division or modulo by zero inside a kernel (rt.py raises it): PyTorch's error and eager's
        return RuntimeError("ZeroDivisionError")
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    from numba.core.errors import NumbaError
    if not isinstance(e, NumbaError):
        # the kernel compiled and raised while running (a check in the generated code, a runtime helper's error,
        # memory): an error of this call's data, not of the compiler
        return RuntimeError(f"{name}: {type(e).__name__}: {first}")
    return _cache.KernelCompileError(
        f"tracejit: the numba kernel {name} failed ({type(e).__name__}: {first}). This is a tracejit bug; "
        f"please report it. To run this function anyway, use @tracejit.trace(..., backend=\"interpreter\").")
