"""Runs a fused graph on the GPU: a plan of closures launching kernels on device buffers.

Compile time (once per signature): the fusion pass (the CPU backend's), one generated `@cuda.jit` kernel per
fused group (`codegen.py`, loaded through the disk cache), constants uploaded, and device buffers allocated
for the values the plan writes (fused outputs, matmul/reduction/softmax results; those whose lifetimes do not
overlap share memory: passes/buffers.py). A call then only launches
kernels: no host round trip between them, no allocation for intermediates (concurrent calls from threads
take turns: they share the planned buffers). Values returned to the caller get
their buffer back on the next call when the caller dropped them (reference count), else a fresh one.

A fused group whose body ends in `sum` epilogues (the CPU backend accumulates those inside its loop) is run
as its elementwise kernel writing the summands, then the shared-memory reduction kernel. Other nodes run
their CUDA implementation (`ops.py`); views cost nothing.
"""
import threading
from sys import getrefcount

import numpy as np

from ..._keep import REFCOUNTS_EXACT
from ... import config
from ...ir.graph import Value
from ...passes import buffers
from . import array as A
from .array import CudaArray

class CompiledCudaGraph:
    device = "cuda"

    def __init__(self, graph):
        self.graph = graph
        self.kernels = []            # (name, CudaKernelSource, module)
        slot = {}

        def slot_of(v):
            if id(v) not in slot:
                slot[id(v)] = len(slot)
            return slot[id(v)]

        self._in_slots = [slot_of(v) for v in graph.inputs]
        consts = [(slot_of(v), a) for v, a in graph.consts.items()]
        for n in graph.nodes:
            for o in n.outputs:
                slot_of(o)
        returned = {id(v) for v in graph.outputs if isinstance(v, Value)}
        self._bufs = {}              # id(buffer) of every planned buffer (the alias check)
        self._requests = []          # (numpy dtype, shape, value or None, node index) per planned buffer
        self._planned = []           # the planned buffers, in the order of the requests
        self._steps = []
        for k, n in enumerate(graph.nodes):
            if n.op.kind == "fused":
                self._steps.append(self._fused_step(n, k, slot, returned))
            else:
                self._steps.append(self._op_step(n, k, slot, returned))
        self.plan = buffers.plan(graph, self._requests, share=config.share_buffers)
        arenas = [A.empty((size,), dt).buf for dt, size in self.plan.arenas]
        for (_, shape, _, _), a in zip(self._requests, self.plan.where):
            b = A.CudaArray(arenas[a][:max(int(np.prod(shape, dtype=np.int64)), 1)], shape)
            self._bufs[id(b.buf)] = True
            self._planned.append(b)
        self._template = [None] * len(slot)
        for s, a in consts:
            self._template[s] = A.from_host(np.asarray(a))
        self._outs = [(True, slot[id(v)]) if isinstance(v, Value) else (False, v) for v in graph.outputs]
        self._lock = threading.Lock()    # the planned buffers serve one call at a time

    # ------------------------------------------------------------------ buffers
    def _buffer(self, v, at, returned, scratch=False):
        """A getter for the buffer of value v, written by node `at`: planned (see passes/buffers.py), or per call
        for returned values nobody holds. A scratch buffer is read by that node alone."""
        if id(v) not in returned:
            j = len(self._requests)
            self._requests.append((np.dtype(v.dtype.np), tuple(v.shape), None if scratch else v, at))
            planned = self._planned
            return lambda: planned[j]
        last = [None]
        shape, dt = v.shape, v.dtype.np

        def get():
            b = last[0]
            # refs: `last`, `b` and getrefcount's argument; more means a tensor still holds it
            if b is None or not REFCOUNTS_EXACT or getrefcount(b) > 3 or getrefcount(b.buf) > 2:
                b = A.empty(shape, dt)
                last[0] = b
            return b
        return get

    # ------------------------------------------------------------------ fused kernels
    def _fused_step(self, n, at, slot, returned):
        from .eager import load, run
        from .ops import IMPLS
        body = n.attrs["body"].nodes
        sums = [m for m in body if m.op.name == "sum"]
        ew = [m for m in body if m.op.name != "sum"]
        made = {id(o) for m in ew for o in m.outputs}
        kouts = [o for o in n.outputs if id(o) in made]
        for m in sums:                                   # the summands become kernel outputs
            x = m.inputs[0]
            if id(x) in made and all(x is not o for o in kouts):
                kouts.append(x)
        in_slots = [slot[id(v)] for v in n.inputs]
        name = f"fused_{len(self.kernels)}"
        from ...ir.graph import format_node
        mod, ks = load(list(n.inputs), kouts, ew, name, header=[format_node(m) for m in body]) if ew else (None, None)
        if mod is not None:
            self.kernels.append((n.op.name, ks, mod))
        getters = []
        for o in kouts:
            if id(o) in slot:
                getters.append((slot[id(o)], self._buffer(o, at, returned)))
            else:                                        # a summand used only by its sum: a scratch buffer
                getters.append((None, self._buffer(o, at, (), scratch=True)))
        local = {id(o): k for k, o in enumerate(kouts)}
        reds = []
        for m in sums:
            x, o = m.inputs[0], m.outputs[0]
            src = ("k", local[id(x)]) if id(x) in local else ("s", slot[id(x)])
            reds.append((src, slot[id(o)], self._buffer(o, at, returned), dict(m.attrs)))
        sum_impl = IMPLS["sum"]

        def step(env):
            ins = [env[s] for s in in_slots]
            outs = []
            for s, get in getters:
                b = get()
                outs.append(b)
                if s is not None:
                    env[s] = b
            if mod is not None:
                run(mod, ins, outs)
            for (kind, j), s, get, attrs in reds:
                x = outs[j] if kind == "k" else env[j]
                env[s] = sum_impl(x, attrs["dims"], attrs["keepdim"], attrs.get("dtype"), out=get())
        return step

    # ------------------------------------------------------------------ other nodes
    def _op_step(self, n, at, slot, returned):
        from .eager import dispatch
        from .ops import CHECKED, IMPLS, OUT_VARIANT
        op, attrs = n.op, dict(n.attrs)
        args = [(True, slot[id(i)]) if isinstance(i, Value) else (False, i) for i in n.inputs]
        outs = [slot[id(o)] for o in n.outputs]
        if op.name in CHECKED:     # the bounds check reads a flag back: skipped inside compiled graphs
            attrs["_check"] = False
        if op.name in OUT_VARIANT and len(outs) == 1:
            get = self._buffer(n.outputs[0], at, returned)
            impl = IMPLS[op.name]
            o0 = outs[0]

            def step(env):
                env[o0] = impl(*[env[x] if isv else x for isv, x in args], out=get(), **attrs)
            return step
        if op.random or not any(isv for isv, _ in args):
            # no device operand (random draws, constants made inside): computed on the host, uploaded
            def step(env):
                res = op.impl(*[env[x] if isv else x for isv, x in args], **attrs)
                res = (res,) if op.nout == 1 else res
                for s, r in zip(outs, res):
                    env[s] = A.from_host(np.asarray(r))
            return step
        impl = IMPLS.get(op.name)
        if impl is not None and op.name in CHECKED:
            def step(env):
                env[outs[0]] = impl(*[env[x] if isv else x for isv, x in args], **attrs)
            return step

        def step(env):
            res = dispatch(op, [env[x] if isv else x for isv, x in args], attrs)
            if op.nout == 1:
                env[outs[0]] = res
            else:
                for s, r in zip(outs, res):
                    env[s] = r
        return step

    # ------------------------------------------------------------------ running
    def __call__(self, arrays):
        with self._lock:
            return self._call(arrays)

    def _call(self, arrays):
        env = list(self._template)
        for s, a in zip(self._in_slots, arrays):
            env[s] = a if type(a) is CudaArray else A.from_host(np.asarray(a))
        for step in self._steps:
            step(env)
        res = []
        for is_slot, x in self._outs:
            if not is_slot:
                res.append(x)
                continue
            a = env[x]
            if type(a) is CudaArray and id(a.buf) in self._bufs:    # a view of a planned buffer: copy it out
                a = a.copy()
            res.append(a)
        return res

    def source(self):
        return "\n\n".join(ks.source for _, ks, _ in self.kernels)
