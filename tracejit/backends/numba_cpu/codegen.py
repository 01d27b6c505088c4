"""Python source for one fused node: the registry's `expr` templates inlined into one loop.

The scalar code of each op (operands cast to its compute dtype, typed constants, kernel arguments for the
graph's Python floats) comes from `backends/scalar_code.py`, shared with the CUDA code generator; each value
is computed once per element. Layout:

- all operands have the output's shape (or one element): one flat loop over C-contiguous 1-D arrays
  (the host passes `a.reshape(-1)`), so signatures stay canonical and numba compiles each kernel once;
- otherwise nested loops over the output's dims with element strides (0 on broadcast dims) passed as ints.

A body with several costly calls (vmath's exp, tanh, sigmoid..., `rt.HEAVY`) runs in stages over tiles of
TILE elements (`stages`): one short loop per stage, each value a later stage reads kept in a scratch tile.
A long fused loop of such calls is latency-bound: its body is longer than the core's out-of-order window
(one 8-lane iteration of ten tanh is ~450 AVX2 instructions, ~700 cycles of dependent latency), so it runs one
vector of elements at a time; a stage's loop body is short enough for the core to overlap several iterations.
A large kernel with such calls also has LLVM interleave INTERLEAVE vectors per iteration of its loops, instruction
by instruction (a module constant VECTOR_INTERLEAVE, applied by workers.vector_interleave when it compiles).

Each module holds `kernel` (serial) and `kernel_par` (prange, for large outputs; numba compiles a variant
only when it is first called).
"""
import copy
import functools
import os
import re

import numpy as np

from ...ir.graph import Value
from ..scalar_code import const_namer, is_param, op_expression, operand_dtypes, param_namer

# elements from which the prange variant is used ("off": never; threads hurt on a busy 2-core machine)
_par = os.environ.get("TRACEJIT_PARALLEL_MIN", str(1 << 20))
PAR_MIN = 1 << 62 if _par == "off" else int(_par)
# a kernel with costly calls (rt.HEAVY: exp, erf, tanh...) takes its prange variant from PAR_MIN / HEAVY_PAR_WEIGHT
# elements (128k): its time is compute, which a second core halves, where a cheap kernel's is memory traffic
HEAVY_PAR_WEIGHT = 8
CHUNK = 8192     # elements per chunk of a kernel with full sums (its float64 scratch row stays in L2)
TILE = 1024      # elements per tile of a staged loop (its scratch tiles stay in L1)
STAGE_HEAVY = 1  # costly calls one after another in a stage (see stages)
STAGE_MAX = 4    # costly calls in a stage
# vectors LLVM's loop vectorizer interleaves in a kernel's loops with costly calls, from INTERLEAVE_MIN elements
# (workers.vector_interleave; 0: LLVM's own choice, which is one vector per iteration there). Ten rounds of
# u(x * 0.7 + 0.2) on 1M float32, one thread, ns per element per round, LLVM's choice / 4 / 8 (AMD EPYC znver4,
# AVX2; medians of 25 alternated runs): exp 0.71 / 0.44-0.46 / 0.46-0.51, tanh 0.86 / 0.53-0.55 / 0.46-0.48,
# sigmoid 0.92 / 0.60 / 0.52, exp and tanh alternating 0.80 / 0.48 / 0.45-0.48. The price is compile time: a kernel
# of ten such calls 1.8-2.4 s -> 2.6-2.7 (4) -> 3.3-3.6 s (8), hence not for small kernels. None: `interleave()`.
_IC = os.environ.get("TRACEJIT_INTERLEAVE", "").strip()
INTERLEAVE = int(_IC) if _IC else None
INTERLEAVE_MIN = 1 << 16


def interleave():
    """Vectors per loop iteration for loops of costly calls: INTERLEAVE where set, else chosen per CPU from
    bench_interleave.py's A/B (ten rounds of u(x * 0.7 + 0.2), 1M float32, one thread, medians, ns/el/op for exp,
    tanh, sigmoid, exp/tanh alternating):
    - AMD EPYC znver4 (AVX2, 256 bits): 4 vectors 0.44 / 0.54 / 0.60 / 0.48, 8 vectors 0.47 / 0.47 / 0.52 / 0.46;
    - Intel Xeon emeraldrapids at 512 bits: 4 vectors 0.39 / 0.56 / 0.59 / 0.47, 8 vectors 0.38 / 0.54 / 0.55 /
      0.45 (8 spills a few registers and is still as fast or faster); forced to 256 bits: 4 vectors 0.53 / 0.57 /
      0.62 / 0.54, 8 vectors 0.54 / 0.56 / 0.67 / 0.71.
    So 8, except on Intel (any CPU LLVM does not name znver) at 256 bits or less: 4. AMD with AVX-512 (znver4/5
    without a VM hiding it) is unmeasured and gets 8."""
    return INTERLEAVE if INTERLEAVE is not None else _interleave_for_cpu()


@functools.cache
def _interleave_for_cpu():
    from tracejit.kernels.cpu import vector_info
    info = vector_info()
    return 4 if info["vector_bits"] <= 256 and not info["llvm_cpu"].startswith("znver") else 8


_SUFFIX = {"float32": "_f32", "float64": "_f64"}
_TYPED_CALL = []          # the regex of rt.TYPED's generic names, made at first use (rt imports numba)


def typed_calls(text, cdt):
    """`exp(` -> `exp_f32(` (rt.TYPED) where the compute dtype is float32 or float64: those load from numba's disk
    cache, the generic names compile a dispatching overload in every process. An op_expression `post`."""
    sfx = _SUFFIX.get(cdt.np.name)
    if sfx is None:
        return text
    if not _TYPED_CALL:
        from .rt import TYPED
        names = sorted({k[:-4] for k in TYPED}, key=len, reverse=True)      # (exp_f32 -> exp)
        _TYPED_CALL.append(re.compile(r"(?<![\w.])(" + "|".join(names) + r")\("))
    return _TYPED_CALL[0].sub(lambda m: f"{m.group(1)}{sfx}(", text)


class KernelSource:
    """Source text plus what the host needs to call it. `code` is the module numba compiles: it names nothing
    of the graph (no value ids, shapes or kernel name), so kernels of the same structure (the SGD update of
    every parameter, a ReLU mask per layer) share one module and one compilation. `source` adds a header
    for readers: the kernel's name, shape and the IR body it was generated from."""

    def __init__(self, name, title, node, code, mode, in_kinds, extra_args, size, params=(), scratch=()):
        self.name = name
        self.title, self.node = title, node      # (the header, made when read: most kernels are never read)
        self.code = code
        self.mode = mode              # "flat", "nd", "chunks" or "rows"
        self.in_kinds = in_kinds      # per input: "full", "scalar", "bcast" (rows: "full", "row", "inner", "scalar")
        self.params = tuple(params)   # the typed values of the graph's float scalars (k0, k1, ...)
        # appended to each call: dims and strides, then the params as one float64 array `kp` (numba types one
        # array argument in C; 30 numpy scalars cost ~2.5 us per call)
        self.extra_args = tuple(extra_args) + ((np.array(params, np.float64),) if params else ())
        self.n_params = 1 if params else 0
        self.size = size
        self.par_weight = 1           # the prange variant runs from size * par_weight >= PAR_MIN (see rowgen)
        # (numpy dtype, length) of each scratch array the host passes after the inputs: kernels allocate nothing
        # (numba's np.empty/np.zeros compile ~0.1-0.2 s of overloads in every process); kernel_par allocates the
        # rows each of its tasks needs itself
        self.scratch = tuple((np.dtype(dt), max(int(n), 1)) for dt, n in scratch)   # (>= 1: _warm runs dims of 1)

    @property
    def source(self):
        return header(self.title, self.node) + self.code

    def renamed(self, name, node):
        """The same kernel for another fused node of the same structure (see generate)."""
        ks = copy.copy(self)
        ks.name, ks.node, ks.title = name, node, self.title.replace(f" {self.name}:", f" {name}:", 1)
        return ks

    def __str__(self):
        return self.source


def param_args(params):
    """(the kernel's parameter name for its params, the statements at the top of its body that unpack them
    with their dtypes: float64 holds every float32 value exactly)."""
    if not params:
        return [], []
    return ["kp"], [f"k{q} = kp[{q}]" if v.dtype == np.float64 else f"k{q} = np.{v.dtype.name}(kp[{q}])"
                    for q, v in enumerate(params)]


def generate(node, name, fastmath=False, memo=None):
    """The KernelSource of a fused node: a row kernel (rowgen) for a row group, else a loop kernel. With `memo`
    (a dict), a node of the same structure as one generated before (an unrolled loop's steps: 783 kernels of 12
    codes in a 256-step LSTM) reuses its KernelSource, renamed."""
    key = structure(node, fastmath) if memo is not None else None
    if key is not None and key in memo:
        return memo[key].renamed(name, node)
    if "rows" in node.attrs:
        from .rowgen import generate_rows
        ks = generate_rows(node, name, fastmath)
    else:
        ks = _LoopKernel(node).source(name, fastmath)
    if key is not None:
        memo[key] = ks
    return ks


def structure(node, fastmath):
    """Everything a fused node's kernel is generated from, value ids aside: its operands' and its body's shapes,
    dtypes, ops, attributes, constants and wiring."""
    at = {id(v): k for k, v in enumerate(node.inputs)}
    parts = [fastmath, repr(node.attrs.get("rows")), tuple((tuple(v.shape), v.dtype.name) for v in node.inputs)]
    for m in node.attrs["body"].nodes:
        ins = tuple(at[id(x)] if isinstance(x, Value) else (type(x).__name__, repr(x)) for x in m.inputs)
        for o in m.outputs:
            at[id(o)] = len(at)
        parts.append((m.op.name, ins, repr(sorted(m.attrs.items())),
                      tuple((tuple(o.shape), o.dtype.name) for o in m.outputs)))
    parts.append(tuple(at[id(o)] for o in node.outputs))
    return tuple(parts)


class _LoopKernel:
    """One elementwise group (with sum epilogues) as loops: the analysis in __init__ (operand kinds, loop mode,
    the body's statements, the nd loop's dims and strides, scratch arrays, stages), the text in `source`."""

    def __init__(self, node):
        body = node.attrs["body"]
        self.node, self.ins, self.outs = node, node.inputs, node.outputs
        # the loop runs over the shape of the group's elementwise values (sum outputs are smaller)
        self.shape = shape = next((m.outputs[0].shape for m in body.nodes
                                   if m.op.name != "sum" and m.op.places is None),
                                  self.outs[0].shape)
        self.size = int(np.prod(shape, dtype=np.int64))
        self.const, self.consts = const_namer()
        self.param, self.params = param_namer()
        # windows (fusion.is_window): views read in place; an input read only through them is a "window" input
        wins = [m for m in body.nodes if m.op.window is not None]
        direct = {id(x) for m in body.nodes if m.op.window is None for x in m.inputs}
        self.in_kinds = [("window" if id(v) not in direct and any(m.inputs[0] is v for m in wins) else
                          "full" if tuple(v.shape) == tuple(shape) else
                          "scalar" if int(np.prod(v.shape, dtype=np.int64)) == 1 else "bcast") for v in self.ins]
        sums = [m for m in body.nodes if m.op.name == "sum"]
        places = any(m.op.places is not None for m in body.nodes)
        if sums and "bcast" not in self.in_kinds and not wins and not places and \
                all(len(m.attrs["dims"]) == len(shape) for m in sums):
            self.mode = "chunks"     # every sum is a full reduction: flat chunks, each summed on its own
        else:
            self.mode = "nd" if "bcast" in self.in_kinds or sums or wins or places else "flat"
        # strided accesses, by their (element offset, element strides per loop dim), passed as ints (wo, ws): the
        # windows' loads (value name, input index, access) and the placed operands' stores (output index,
        # [(operand's value name, access)])
        self.strided, self.windows, self.places = [], [], []
        self._statements(body)
        self.r = len(shape)
        self.extra_names, self.extra_args = [], []
        self.last_stride = {}        # bcast input / accumulator -> its stride along the last dim (0 or 1)
        if self.mode == "chunks":
            self.extra_names.append("n")
            self.extra_args.append(self.size)
        elif self.mode == "nd":
            self._nd_arguments()
        self._scratch()
        self.parallel_ok = not self.reductions or self.mode == "chunks"    # nd sums: threads would race
        self.heavy = any(_heavy_calls(st) for st in self.stmts)
        self.plan = stages(self.stmts)
        self.tiles = []              # (scratch tile, dtype): the values a later stage reads
        if self.plan is not None:
            from numba.core import config
            threads = config.NUMBA_NUM_THREADS if self.parallel_ok and \
                self.size * par_weight(self.heavy) >= PAR_MIN else 1
            self.plan, self.tiles = plan_tiles(self.plan, self.stmts, self.stmt_dtypes,
                                               self.sink_names)
            self.scratch += [(w, TILE * threads, dt) for w, dt in self.tiles]

    def _statements(self, body):
        """One statement per body node (`v3 = ...`); a sum is an epilogue: accumulated in float64, stored after
        the loops (`reductions`: output index, value name, reduced dims)."""
        out_index = {id(o): k for k, o in enumerate(self.outs)}
        self.names = names = {id(v): f"x{j}" for j, v in enumerate(self.ins)}
        dtypes = {id(v): v.dtype for v in self.ins}
        self.stmts, self.stmt_dtypes, self.reductions = [], [], []
        for nd in body.nodes:
            if nd.op.window is not None:
                nm = names[id(nd.outputs[0])] = f"x{len(self.ins) + len(self.windows)}"     # (a load, named so)
                dtypes[id(nd.outputs[0])] = nd.outputs[0].dtype
                self.windows.append((nm, next(j for j, v in enumerate(self.ins) if v is nd.inputs[0]),
                                     len(self.strided)))
                self.strided.append(nd.op.window(nd))
                continue
            if nd.op.places is not None:
                at = len(self.strided)
                self.strided += nd.op.places(nd)
                self.places.append((out_index[id(nd.outputs[0])], [(names[id(x)], at + q)
                                                                   for q, x in enumerate(nd.inputs)]))
                continue
            if nd.op.name == "sum":
                self.reductions.append((out_index[id(nd.outputs[0])], names[id(nd.inputs[0])],
                                        tuple(nd.attrs["dims"])))
                continue
            text = op_expression(nd, names, dtypes, self.const, typed_calls, param=self.param)
            o = nd.outputs[0]
            nm = f"v{len(self.stmts)}"
            names[id(o)] = nm
            dtypes[id(o)] = o.dtype
            self.stmts.append(f"{nm} = {text}    # {nd.op.name}")
            self.stmt_dtypes.append(o.dtype.np)
        self.red_outs = set(k for k, _, _ in self.reductions)
        self.red_outs |= {k for k, _ in self.places}          # (outputs not stored at the loop's index)
        self.stores = [f"out{k}[{{gu}}] = {names[id(o)]}" for k, o in enumerate(self.outs) if k not in self.red_outs]
        self.sink_names = {names[id(o)] for k, o in enumerate(self.outs) if k not in self.red_outs} | \
            {src for _, src, _ in self.reductions} | {nm for _, ps in self.places for nm, _ in ps}

    def _nd_arguments(self):
        """The nd loop's dims (the output's, adjacent dims merged where no operand tells them apart) and the
        element strides of each broadcast input and each accumulator, passed as ints."""
        shape = self.shape
        groups = loop_dims(shape, [v.shape for v, kind in zip(self.ins, self.in_kinds) if kind == "bcast"],
                           [dims for _, _, dims in self.reductions],
                           [st for _, st in self.strided])
        self.lshape = lshape = [int(np.prod([shape[a] for a in g], dtype=np.int64)) for g in groups]
        self.reductions = [(k, src, tuple(i for i, g in enumerate(groups) if g[0] in dims))
                           for k, src, dims in self.reductions]
        self.r = r = len(lshape)
        self.extra_names += [f"d{a}" for a in range(r)]
        self.extra_args += lshape
        for j, (v, kind) in enumerate(zip(self.ins, self.in_kinds)):
            if kind != "bcast":
                continue
            full = (1,) * (len(shape) - v.ndim) + tuple(v.shape)
            vs = [int(np.prod([full[a] for a in g], dtype=np.int64)) for g in groups]
            st, acc = [0] * r, 1
            for a in range(r - 1, -1, -1):
                st[a] = 0 if vs[a] == 1 else acc
                acc *= vs[a]
            self.extra_names += [f"s{j}_{a}" for a in range(r)]
            self.extra_args += st
            self.last_stride[f"in{j}"] = st[-1]
        for k, (off, strides) in enumerate(self.strided):
            self.extra_names += [f"wo{k}"] + [f"ws{k}_{a}" for a in range(r)]
            self.extra_args += [off] + [strides[g[-1]] for g in groups]
            self.last_stride[f"w{k}"] = strides[groups[-1][-1]]
        for k, _, dims in self.reductions:
            st, acc = [0] * r, 1
            for a in range(r - 1, -1, -1):
                if a not in dims:
                    st[a] = acc
                    acc *= lshape[a]
            self.extra_names += [f"rs{k}_{a}" for a in range(r)]
            self.extra_args += st
            self.last_stride[f"acc{k}"] = st[-1]

    def _scratch(self):
        """(name, length, dtype) of the accumulators and scratch rows the host passes."""
        self.scratch = []
        for k, _, _ in self.reductions:
            if self.mode == "chunks":
                self.scratch += [(f"part{k}", -(-self.size // CHUNK), np.float64),
                                 (f"t{k}", min(CHUNK, self.size), np.float64)]
            else:
                self.scratch.append((f"acc{k}", int(np.prod(self.outs[k].shape, dtype=np.int64)), np.float64))
                if not self.last_stride[f"acc{k}"]:
                    self.scratch.append((f"t{k}", self.lshape[-1], np.float64))

    def source(self, name, fastmath):
        ins, outs = self.ins, self.outs
        kp_arg, self.kp_unpack = param_args(self.params)
        self.sig = ", ".join([f"in{j}" for j in range(len(ins))] + [t for t, _, _ in self.scratch] +
                             [f"out{k}" for k in range(len(outs))] + self.extra_names + kp_arg)
        base = njit_flags(fastmath)
        title = (f"# tracejit fused kernel {name}: {len(ins)} inputs -> {len(outs)} outputs, "
                 f"{outs[0].dtype.short}[{','.join(map(str, self.shape))}], {self.mode} loop")
        kernels = [self.kernel_fn("kernel", "range", base)]
        if self.parallel_ok:
            kernels.append(self.kernel_fn("kernel_par", "numba.prange", base + ", parallel=True"))
        imports = ["from tracejit.kernels.cpu.rows import rsum  # noqa: F401  (sums a scratch row)"] \
            if self.reductions else []
        consts = self.consts
        if self.mode == "chunks":
            consts["CHUNK"] = ("CHUNK", CHUNK)
        if self.plan is not None:
            consts["TILE"] = ("TILE", TILE)
        ic = interleave() if self.size >= INTERLEAVE_MIN and self.heavy else 0
        if ic:
            consts["VECTOR_INTERLEAVE"] = ("VECTOR_INTERLEAVE", ic)    # (read by workers.vector_interleave)
        ks = KernelSource(name, title, self.node, module_code(consts, kernels, imports), self.mode,
                          self.in_kinds, tuple(self.extra_args), self.size, self.params,
                          [(dt, n) for _, n, dt in self.scratch])
        ks.parallel_ok = self.parallel_ok
        ks.par_weight = par_weight(self.heavy)
        return ks

    def inner(self, ind, var, n, rng, loads, sinks, par):
        """The innermost loop, `for var in rng(n)`: `loads` [(name, template)] of the operands, the body, then
        `sinks` (templates: stores, summands). Templates index with {g} (an int expression) or {gu} (a whole
        index: unsigned where numba could not prove it non-negative). Staged (`plan`): a loop over tiles of
        TILE elements, in it one loop per stage."""
        plan, stmts = self.plan, self.stmts
        if plan is None:
            lines = [f"{ind}for {var} in {rng}({n}):"]
            body = [t.format(g=var, gu=var) for _, t in loads] + stmts + [t.format(g=var, gu=var) for t in sinks]
            return lines + [ind + "    " + b for b in body]
        lines = [f"{ind}for tt in {rng}(({n} + TILE - 1) // TILE):", f"{ind}    tlo = tt * TILE",
                 f"{ind}    tm = TILE if TILE < {n} - tlo else {n} - tlo"]
        at = "ii"
        if par and self.tiles:       # each thread its own scratch tiles
            lines.append(f"{ind}    tb = numba.get_thread_id() * TILE")
            at = "np.uint64(tb + ii)"
        g, gu = ("tlo + ii", "np.uint64(tlo + ii)")
        for q, (members, reload, spill) in enumerate(plan):
            last = q == len(plan) - 1
            used = _names_in([stmts[m] for m in members] + (sinks if last else []))
            body = [f"{v} = {w}[{at}]" for v, w in reload]
            body += [t.format(g=g, gu=gu) for x, t in loads if x in used]
            body += [stmts[m] for m in members] + [f"{w}[{at}] = {v}" for v, w in spill]
            if last:
                body += [t.format(g=g, gu=gu) for t in sinks]
            lines.append(f"{ind}    for ii in range(tm):")
            lines += [ind + "        " + b for b in body]
        return lines

    def kernel_fn(self, fname, rng, flags):
        lines = [f"@numba.njit({flags})", f"def {fname}({self.sig}):"] + ["    " + u for u in self.kp_unpack]
        for j, kind in enumerate(self.in_kinds):
            if kind == "scalar":
                lines.append(f"    x{j} = in{j}[0]")
        if self.mode == "chunks":
            return "\n".join(lines + self.chunk_loops(rng))
        for k, _, _ in self.reductions:
            lines += [f"    for j in range(acc{k}.size):", f"        acc{k}[j] = 0.0"]
        if self.mode == "flat":
            loads = [(f"x{j}", f"x{j} = in{j}[{{gu}}]") for j, kind in enumerate(self.in_kinds) if kind == "full"]
            lines += self.inner("    ", "i", "out0.size", rng, loads, self.stores, rng != "range")
        else:
            lines += self.nd_loops(rng)
        for k, _, _ in self.reductions:
            lines += [f"    for j in range(out{k}.size):", f"        out{k}[j] = acc{k}[j]"]
        return "\n".join(lines)

    def nd_loops(self, rng):
        in_kinds, reductions, last_stride = self.in_kinds, self.reductions, self.last_stride
        # outer dims: flat offsets of the output and of each broadcast input / accumulator
        lines, ind, last = [], "    ", self.r - 1
        for a in range(last):
            lines.append(f"{ind}for i{a} in {rng if a == 0 else 'range'}(d{a}):")
            ind += "    "
            lines.append(f"{ind}o{a} = " + (f"o{a - 1} * d{a} + i{a}" if a else "i0"))
            for j, kind in enumerate(in_kinds):
                if kind == "bcast":
                    lines.append(f"{ind}p{j}_{a} = " + (f"p{j}_{a - 1} + " if a else "") + f"i{a} * s{j}_{a}")
            for k, _, _ in reductions:
                lines.append(f"{ind}q{k}_{a} = " + (f"q{k}_{a - 1} + " if a else "") + f"i{a} * rs{k}_{a}")
            for k in range(len(self.strided)):
                lines.append(f"{ind}u{k}_{a} = " + (f"u{k}_{a - 1}" if a else f"wo{k}") + f" + i{a} * ws{k}_{a}")
        # the last dim: flat offsets as unsigned integers (numba checks no negative index then, which it
        # would on `in0[o + i]`, an offset it cannot prove non-negative, and the loop vectorizes; a slice per
        # row instead costs ~20% more compile time for the same machine code)
        n, pre, loads, accs, post = f"d{last}", [], [], [], []
        off = (lambda v: f"{v}_{last - 1}") if last else (lambda v: "0")
        at = (lambda start: f"np.uint64({start} + {{g}})")
        pre.append(f"ob = {f'o{last - 1} * d{last}' if last else '0'}")
        for j, kind in enumerate(in_kinds):
            if kind == "full" or (kind == "bcast" and last_stride[f"in{j}"]):
                loads.append((f"x{j}", f"x{j} = in{j}[{at('ob' if kind == 'full' else off(f'p{j}'))}]"))
            elif kind == "bcast":              # constant along the last dim
                pre.append(f"x{j} = in{j}[{off(f'p{j}')}]")
        def strided(k):         # access k's index (a unit last stride: a contiguous access, vectorized)
            step = "{g}" if last_stride[f"w{k}"] == 1 else f"({{g}}) * ws{k}_{last}"
            return f"np.uint64({f'u{k}_{last - 1}' if last else f'wo{k}'} + {step})"
        loads += [(nm, f"{nm} = in{j}[{strided(k)}]") for nm, j, k in self.windows]
        outs_ = [f"out{k}[{at('ob')}] = {self.names[id(o)]}" for k, o in enumerate(self.outs)
                 if k not in self.red_outs]
        outs_ += [f"out{k}[{strided(a)}] = {nm}" for k, ps in self.places for nm, a in ps]     # where each lands
        for k, src, _ in reductions:
            if last_stride[f"acc{k}"]:
                accs.append(f"acc{k}[{at(off(f'q{k}'))}] += {src}")
            else:       # the last dim is reduced: summands to a scratch row (a running sum would not vectorize)
                accs.append(f"t{k}[{{gu}}] = {src}")
                post.append(f"acc{k}[{off(f'q{k}')}] += rsum(t{k}, {n})")
        lines += [ind + s for s in pre]
        lines += self.inner(ind, f"i{last}", n, rng if last == 0 else "range", loads, outs_ + accs, rng != "range")
        return lines + [ind + s for s in post]

    def chunk_loops(self, rng):
        # CHUNK elements per iteration; a full sum adds up each chunk's summands from a scratch row (the
        # elementwise loop has no loop-carried dependency, so it vectorizes), keeps one partial sum per chunk,
        # and adds the partials in chunk order: the same result serially or in threads, whatever their number
        in_kinds, reductions = self.in_kinds, self.reductions
        lines = ["    nc = (n + CHUNK - 1) // CHUNK"]
        lines += [f"    for c in {rng}(nc):", "        lo = c * CHUNK",
                  "        m = CHUNK if CHUNK < n - lo else n - lo"]
        lines += [f"        f{j} = in{j}[lo:lo + m]" for j, kind in enumerate(in_kinds) if kind == "full"]
        lines += [f"        g{k} = out{k}[lo:lo + m]" for k in range(len(self.outs)) if k not in self.red_outs]
        if rng != "range":       # threads: each chunk its own scratch row
            lines += [f"        t{k} = np.empty(m, np.float64)" for k, _, _ in reductions]
        loads = [(f"x{j}", f"x{j} = f{j}[{{gu}}]") for j, kind in enumerate(in_kinds) if kind == "full"]
        sinks = [f"g{k}[{{gu}}] = {self.names[id(o)]}" for k, o in enumerate(self.outs) if k not in self.red_outs]
        sinks += [f"t{k}[{{gu}}] = {src}" for k, src, _ in reductions]
        lines += self.inner("        ", "i", "m", "range", loads, sinks, rng != "range")
        lines += [f"        part{k}[c] = rsum(t{k}, m)" for k, _, _ in reductions]
        return lines + [f"    out{k}[0] = rsum(part{k}, nc)" for k, _, _ in reductions]


_NAME = re.compile(r"\b[xv]\d+\b")
_HEAVY_CALL = []          # the regex of rt.HEAVY's names, made at first use


def _names_in(lines):
    """The operand and value names (x3, v12) the lines read or write."""
    return set(_NAME.findall("\n".join(t.split("#")[0] for t in lines)))


def _heavy_calls(text):
    """The number of costly calls (`rt.HEAVY`) in a statement."""
    if not _HEAVY_CALL:
        from .rt import HEAVY
        _HEAVY_CALL.append(re.compile(r"(?<![\w.])(" + "|".join(sorted(HEAVY, key=len, reverse=True)) + r")\("))
    return len(_HEAVY_CALL[0].findall(text.split("#")[0]))


def par_weight(heavy):
    """A kernel's weight against PAR_MIN (its prange variant runs from size * weight >= PAR_MIN)."""
    return HEAVY_PAR_WEIGHT if heavy else 1


def stages(stmts):
    """The body's statements (indices) per stage, or None when one stage takes them all. A new stage begins at a
    costly call (`rt.HEAVY`) that depends, within the current stage, on STAGE_HEAVY costly calls already, or
    that would be the stage's STAGE_MAX-th: a chain of dependent calls is latency-bound in one loop (split it),
    while independent ones (tanh(x * w + b) * sigmoid(x)) overlap in one loop and run slower apart (1.3x, the
    separate loops' stores and loads of the tile included)."""
    out, count, depth = [[]], 0, {}       # depth: value -> costly calls on its longest path inside the stage
    for q, st in enumerate(stmts):
        name, rhs = st.split(" = ", 1)
        rhs = rhs.split("#")[0]
        c = _heavy_calls(rhs)
        d = max([depth.get(v, 0) for v in _NAME.findall(rhs)] + [0]) + c
        if c and out[-1] and (d > STAGE_HEAVY or count + c > STAGE_MAX):     # (never an empty stage)
            out.append([])
            count, depth = 0, {}
            d = c
        out[-1].append(q)
        count += c
        depth[name] = d
    return out if len(out) > 1 else None


def plan_tiles(plan, stmts, dtypes, sink_names):
    """Per stage (statement indices, [(value, tile)] it reloads, [(value, tile)] it spills), and [(tile, dtype)].
    A value a later stage (or the last stage's stores) reads is spilled to a scratch tile of its dtype where it
    is computed; a tile is reused once every stage that reads its value has run."""
    stage_of = {stmts[m].split(" = ", 1)[0]: (q, dtypes[m]) for q, members in enumerate(plan) for m in members}
    reads = [_names_in([stmts[m].split(" = ", 1)[1] for m in members]) for members in plan]
    reads[-1] |= sink_names
    last_use = {v: q for q, used in enumerate(reads) for v in used if v in stage_of and stage_of[v][0] < q}
    free_at = []                 # per tile: (dtype, stage after which it is free)
    tile_of = {}
    for v in sorted(last_use, key=lambda v: (stage_of[v][0], int(v[1:]))):
        d, dt = stage_of[v]
        w = next((w for w, (t, f) in enumerate(free_at) if t == dt and f < d), None)
        if w is None:
            w = len(free_at)
            free_at.append(None)
        free_at[w] = (dt, last_use[v])
        tile_of[v] = f"w{w}"
    order = sorted(tile_of, key=lambda v: int(v[1:]))
    out = [(members, [(v, tile_of[v]) for v in order if stage_of[v][0] < q and v in reads[q]],
            [(v, tile_of[v]) for v in order if stage_of[v][0] == q]) for q, members in enumerate(plan)]
    return out, [(f"w{w}", dt) for w, (dt, _) in enumerate(free_at)]


def loop_dims(shape, bcast_shapes, reduced, strided=()):
    """The loop nest of an nd kernel: groups of the output's dims that loop as one. Size-1 dims are dropped,
    and neighbours merge when every operand treats them alike (an input broadcast along both or along
    neither, a sum reducing both or neither, a window's element strides (`strided`) contiguous across them):
    NCHW with per-channel parameters or statistics loops over (N, C, H*W), not over rows of W elements."""
    r = len(shape)
    flags = [[s[a] == 1 for a in range(r)] for s in ((1,) * (r - len(b)) + tuple(b) for b in bcast_shapes)]
    flags += [[a in dims for a in range(r)] for dims in reduced]
    groups = []
    for a in [a for a in range(r) if shape[a] != 1] or [r - 1]:
        if groups and all(f[a] == f[groups[-1][-1]] for f in flags) and \
                all(st[groups[-1][-1]] == st[a] * shape[a] for st in strided):
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


def njit_flags(fastmath):
    # no_cfunc_wrapper: a kernel is only called from Python, never as a first-class function (the ResNet step's 13
    # kernels compiled in 4.82 s instead of 5.15 one after another, AMD EPYC znver3)
    return ("cache=True, nogil=True, error_model='numpy', no_cfunc_wrapper=True" +
            (", fastmath=True" if fastmath else ""))


def header(title, node):
    """The comment above a kernel's code: its title and the fused body as IR text."""
    return "\n".join([title, "# generated from:"] + ["#   " + line for line in _body_lines(node)]) + "\n"


def module_code(consts, kernels, imports=()):
    """A kernel module: imports, typed constants, the kernel functions."""
    lines = [
        "import numpy as np",
        "import numba",
        "from tracejit.backends.numba_cpu.rt import *  # noqa: F401,F403  (the ops' scalar math)",
        *imports, ""] + [f"{n} = {v}" for n, v in consts.values()]
    for k in kernels:
        lines += ["", "", k]
    return "\n".join(lines) + "\n"


class _Param:
    def __repr__(self):
        return "k"


def _body_lines(node):
    """The body as IR text for the kernel's header; the numbers that are kernel arguments show as `k`."""
    from ...ir.graph import Node, format_node
    return [format_node(Node(m.op, [_Param() if not isinstance(i, Value) and is_param(m, i, c) else i
                                    for i, c in zip(m.inputs, operand_dtypes(m)[0])], m.attrs, m.outputs))
            for m in node.attrs["body"].nodes]
