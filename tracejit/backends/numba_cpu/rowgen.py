"""Python source for a row kernel: a fused group around reductions over the trailing (inner) dims.

softmax, log_softmax, logsumexp, sum/mean/amax/amin/var over the last dims, with the elementwise work
before and after them (layer norm, the losses, their backward), become one kernel. The outer loop runs
over rows (prange for large inputs: rows are independent, nothing is shared); inside a row there is one
loop over the inner positions per reduction level: `x - max(x)` needs the row's max, so it is computed in
the loop after the one that finds the max. Each loop writes the operand of its reductions to a scratch
row (small, in L1) that `tracejit.kernels.cpu.rows` then reduces with vectorized loops; softmax's exp stays in
its scratch row for the output loop, or is written straight into the output row when the softmax is an
output, and scaled there. The softmax family over an input's rows finds the next row's max inside this
row's exp loop (software pipelining: the max is a memory-bound pass, the exp a compute-bound one; 4096x1024
float32 softmax 3.44 -> 2.30-2.43 ms with both). Other per-element values are recomputed in each loop that needs
them instead of being stored: elementwise math is cheaper than another pass over memory. Sums accumulate
in float64 (numpy sums float32 pairwise: both are within float32 rounding of the exact sum); max/min
propagate NaN like numpy.
"""
import re

import numpy as np

from ...ir.graph import Value
from ...passes.fusion import row_class
from ..scalar_code import const_namer, npname, op_expression, param_namer
from .codegen import KernelSource, _heavy_calls, module_code, njit_flags, par_weight, param_args, typed_calls

ROWS_PER_BLOCK = 8           # rows per task of the parallel loop (each task allocates its scratch rows)
# segmented rows (batch norm's: a channel's elements in every image) take their prange variant from PAR_MIN /
# SEGMENTED_PAR_WEIGHT elements: the ResNet bench's batch-norm kernels (262k elements) ran serially between two
# parallel convolutions (that step at two threads 17.8-19.0 -> 16.6-17.1 ms, AMD EPYC znver3, quiet). Rows of one
# segment (layer norm's, softmax's) keep PAR_MIN: with this weight too the GPT bench step at two threads measured
# 32.3-32.5 ms against 32.7-33.6 without (two runs each).
SEGMENTED_PAR_WEIGHT = 8
# segments ahead a segmented row's first pass over an input prefetches (0: none). The ResNet bench step's 14
# batch-norm row kernels, in place, one process, variants alternated over 60 rounds: one thread 4.01 ms without,
# 3.70 at 2 segments ahead, 3.81 at 4; two threads 3.11 / 3.13 / 3.15 (AMD EPYC znver4). One such kernel alone,
# its data flushed from the caches first: 0.62-0.78 -> 0.51-0.66 ms. Into the outer caches (prefetch_l2) rather
# than every level, and in the prange variant too (it had none): that kernel flushed 0.76 -> 0.71 ms serial, 0.68
# -> 0.58 at two threads, in the caches 0.40 / 0.23 either way (one process, alternated, AMD EPYC znver4)
PREFETCH_AHEAD = 2


def generate_rows(node, name, fastmath=False):
    return _RowKernel(node).source(name, fastmath)


class _RowKernel:
    """One row group: __init__ classifies the operands and turns each body node into per-element statements
    (`elem`), per-row statements after a given pass (`row_stmts`), scratch-row fills (`updates`) and stores;
    `source` writes the kernel text."""

    def __init__(self, node):
        body = node.attrs["body"]
        self.node, self.ins, self.outs = node, node.inputs, node.outputs
        self.dom = dom = node.attrs["rows"]
        self.L, self.R, self.T = (int(np.prod(d, dtype=np.int64)) for d in dom)
        self.N = self.L * self.T       # elements per row: L segments of T contiguous ones (L == 1: reduced dims trail)
        self.const, self.consts = const_namer()
        self.param, self.params = param_namer()
        self.out_index = {id(o): k for k, o in enumerate(self.outs)}
        self.names, self.dtypes, self.level = {}, {}, {}
        self.elem = {}             # per-element value id -> (statement, ids of the per-element values it reads)
        self.row_stmts = {}        # level -> statements run once per row after the loop of that level
        self.updates = {}          # pass -> (scratch, value): that inner loop fills a reduction's scratch row
        self.scratch = []          # scratch rows (name, dtype): arguments of the serial kernel, per task in kernel_par
        self.rows_of = {}          # value id -> the row sum/mean/var read it from (one scratch per value)
        self.row_sums = {}         # that row -> the variable of its float64 sum (layer norm's mean and var share it)
        self.whole = set()         # scratch rows read whole after their pass (var's second pass, max, min, exp)
        self.row_slices = set()    # inputs whose row (L == 1) a reduction reads as an array: p{j} = in{j}[b:b + T]
        self.head = ["N = L * T"]  # before the row loop
        self.block = []            # at the start of each block of rows (rlo .. rhi - 1)
        self.direct = set()        # outputs a softmax wrote whole into its output row (no store statement)
        self.stores = {}           # pass -> store statements of per-element outputs
        self.in_kinds = []
        self.widened = []          # bool inputs read through a float32 copy of each segment (w{j})
        for j, v in enumerate(self.ins):
            kind = row_class(v.shape, dom)
            self.in_kinds.append(kind)
            self.names[id(v)], self.dtypes[id(v)], self.level[id(v)] = f"x{j}", v.dtype, 0
            if kind == "scalar":
                self.head.append(f"x{j} = in{j}[0]")
            elif kind == "row":
                self.row_stmts.setdefault(0, []).append(f"x{j} = in{j}[r]")
            elif kind == "bcast":
                self.row_stmts.setdefault(0, []).append(self._bcast_row(j, v.shape))
                self.elem[id(v)] = (f"x{j} = in{j}[np.uint64(d{j} + c)]", ())
            elif kind == "full" and v.dtype.np == np.bool_ and self.L > 1:
                # a loop reading bytes is vectorized 32 lanes wide: one of 16 (a 4x4 image's batch-norm mask) ran
                # scalar, 6.8 ns an element; each segment's bools are copied to a float32 row first (2.7 ns; one
                # thread, AMD EPYC znver3). For every segment length: one kernel for every layer of a network (a
                # copy only for short segments compiled one more kernel)
                self.widened.append(j)
                self.scratch.append((f"w{j}", np.float32))
                self.elem[id(v)] = (f"x{j} = w{j}[c] != 0", ())
            else:                   # per element, at a flat unsigned offset (see inner_loop)
                self.elem[id(v)] = (f"x{j} = in{j}[np.uint64({'b' if kind == 'full' else 'e'} + c)]", ())
        for q, nd in enumerate(body.nodes):
            self._node(q, nd)
        self.npass = max(list(self.updates) + list(self.stores) + list(self.row_stmts))
        self.order = [id(v) for v in self.ins if id(v) in self.elem] + \
            [id(nd.outputs[0]) for nd in body.nodes if id(nd.outputs[0]) in self.elem]
        # scratch rows of one segment (T, not N): a row only summed, with L > 1 segments, is a float64 row that
        # each segment's loop adds into, summed once after the last segment (it stays in L1: a 16-channel
        # BatchNorm backward over 64 x 16 x 16 positions 0.19 -> 0.14 ms with a row of one segment filled and
        # summed per segment, one thread, AMD EPYC znver3; adding into it instead, no call per segment: the ResNet
        # step's seven batch-norm backward kernels 2.79-2.90 -> 2.65-2.68 ms, znver4); a widened bool operand's copy
        self.seg_sums = {t for t, _ in self.scratch if self.L > 1 and t in self.row_sums and t not in self.whole}
        self.scratch = [(t, np.float64 if t in self.seg_sums else dt) for t, dt in self.scratch]
        self.segmented = self.seg_sums | {f"w{j}" for j in self.widened}
        summed = {f"{s} = rsum({t}, N)" for t, s in self.row_sums.items() if t in self.segmented}
        self.row_stmts = {p: [s for s in st if s not in summed] for p, st in self.row_stmts.items()}

    def _bcast_row(self, j, shape):
        """d{j} = where row r of input j starts: the row index's digits over the kept dims, 0 where it broadcasts
        (the dims are literals: such kernels are specialized to their shapes)."""
        kept = self.dom[1]
        shape = (1,) * (len(kept) + len(self.dom[2]) - len(shape)) + tuple(shape)
        lines, step = [f"d{j} = 0", f"y{j} = r"], self.T
        for d in reversed(range(len(kept))):
            if shape[d] != 1:
                lines.append(f"d{j} += (y{j} % {kept[d]}) * {step}")
                step *= kept[d]
            lines.append(f"y{j} //= {kept[d]}")
        return "\n".join(lines)

    def _node(self, q, nd):
        o = nd.outputs[0]
        nm = f"v{q}"
        self.names[id(o)], self.dtypes[id(o)] = nm, o.dtype
        lv = max([self.level[id(v)] for v in nd.inputs if isinstance(v, Value)] or [0])
        if nd.op.kind == "elementwise" or nd.op.name == "expand":
            text = op_expression(nd, self.names, self.dtypes, self.const, typed_calls, param=self.param)
            if row_class(o.shape, self.dom) == "full":
                self.elem[id(o)] = (f"{nm} = {text}    # {nd.op.name}",
                                    tuple(id(v) for v in nd.inputs if id(v) in self.elem))
            else:
                self.row_stmts.setdefault(lv, []).append(f"{nm} = {text}    # {nd.op.name}")
        else:
            self._reduction(q, nd, lv)
            lv += 1
        self.level[id(o)] = lv
        if id(o) in self.out_index and id(o) not in self.direct:
            k = self.out_index[id(o)]
            if id(o) in self.elem:
                self.stores.setdefault(lv + 1, []).append((id(o), k, nm))
            else:
                self.row_stmts.setdefault(lv, []).append(f"out{k}[r] = {nm}")

    def _reduction(self, q, nd, lv):
        """A row reduction at level lv: its operand's row (a scratch row the pass lv + 1 fills, or an input's
        row slice), then its per-row statements after that pass."""
        o, x = nd.outputs[0], self.names[id(nd.inputs[0])]
        t, dt, op = f"t{q}", f"np.{npname(o.dtype)}", nd.op.name
        j = next((j for j, v in enumerate(self.ins)
                  if v is nd.inputs[0] and self.in_kinds[j] == "full" and self.L == 1), None)
        shared = not nd.op.row_exp      # the row is only read (the exp family writes its shifted exp there)
        if shared and id(nd.inputs[0]) in self.rows_of:
            t = self.rows_of[id(nd.inputs[0])]
        elif j is None:
            self.scratch.append((t, nd.inputs[0].dtype.np))
            self.updates.setdefault(lv + 1, []).append((t, x))
        else:           # reduce the input's row slice itself (read-only)
            t = f"p{j}"
            self.row_slices.add(j)
        if shared:
            self.rows_of[id(nd.inputs[0])] = t
        rs = self.row_stmts.setdefault(lv + 1, [])
        nm = self.names[id(o)]
        if op == "sum" or op == "mean":
            # (the row length N is an argument, not a literal: BatchNorm layers of any size share a kernel)
            rs.append(f"{nm} = {dt}({self._row_sum(t, q, rs)}{'' if op == 'sum' else ' / N'})")
        elif op == "var":
            corr = nd.attrs["correction"]
            den = f"(N - {corr} if N > {corr} else 0)"
            rs += [f"m{q} = {self._row_sum(t, q, rs)} / N", f"{nm} = {dt}(rsumsq({t}, N, m{q}) / {den})"]
            self.whole.add(t)
        elif op == "amax" or op == "amin":
            rs.append(f"{nm} = {dt}(r{op[1:]}({t}, N))")
            self.whole.add(t)
        else:
            self.whole.add(t)
            self._exp_family(q, nd, t, j, rs)

    def _row_sum(self, t, q, rs):
        if t not in self.row_sums:
            self.row_sums[t] = f"r{q}"
            rs.append(f"r{q} = rsum({t}, N)")
        return self.row_sums[t]

    def _exp_family(self, q, nd, t, j, rs):
        """logsumexp, softmax, log_softmax: shift by the row's max (0 if it is not finite)."""
        o, op = nd.outputs[0], nd.op.name
        nm, dt = self.names[id(o)], f"np.{npname(o.dtype)}"
        k = self.out_index.get(id(o)) if op == "softmax" and self.L == 1 else None
        if k is not None:   # exp straight into the output row (its cache lines arrive while exp computes)
            u = f"o{k}"
            rs.append(f"{u} = out{k}[b:b + T]")
        else:
            u = f"u{q}" if op == "log_softmax" or j is not None else t
            if u != t:
                self.scratch.append((u, o.dtype.np))
        # logsumexp shifts by 0 when the max is not finite; softmax and log_softmax by the max as it is, so
        # that a row holding +inf or NaN, or only -inf, is NaN everywhere (PyTorch; see ops/nn_ops.py)
        shift = f"{dt}(a{q}) if isfinite(a{q}) else {self.const(0.0, o.dtype)}" if op == "logsumexp" else \
            f"{dt}(a{q})"
        exp = f"for c in range(N):\n    {u}[c] = " + typed_calls(f"expshift({t}[c] - h{q})", o.dtype)
        if j is None:
            rs += [f"a{q} = rmax({t}, N)", f"h{q} = {shift}", exp]
        else:       # an input's row: the next row's max is found in this row's exp loop (one memory-bound
            # pass less per row, its reads overlap the compute-bound exp); the block's first row finds its own
            self.block.append(f"n{q} = rmax(in{j}[rlo * T:rlo * T + T], N)")
            rs += [f"a{q} = n{q}", f"h{q} = {shift}",
                   f"w{q} = in{j}[b + T:b + 2 * T] if r + 1 < rhi else {t}",
                   f"m{q} = {self.const(-np.inf, nd.inputs[0].dtype)}",
                   exp + f"\n    m{q} = rmaximum(m{q}, w{q}[c])", f"n{q} = m{q}"]
        rs.append(f"s{q} = rsum({u}, N)")
        if op == "logsumexp":
            rs.append(f"{nm} = {dt}(log_f64(s{q})) + h{q}")
        elif k is not None:     # scaled in place while the row is in L1; later loops read it as stored
            rs += [f"i{q} = {dt}(1.0 / s{q})", f"for c in range(N):\n    {u}[c] = {dt}({u}[c] * i{q})"]
            self.elem[id(o)] = (f"{nm} = {u}[c]    # softmax", ())
            self.direct.add(id(o))
        elif op == "softmax":
            rs.append(f"i{q} = {dt}(1.0 / s{q})")
            self.elem[id(o)] = (f"{nm} = {dt}({u}[c] * i{q})    # softmax", ())
        else:
            rs.append(f"g{q} = {dt}(log_f64(s{q}))")
            self.elem[id(o)] = (f"{nm} = ({t}[c] - h{q}) - g{q}    # log_softmax", ())

    # inner loops address operands, outputs and (L > 1) scratch rows by flat offsets, as unsigned integers:
    # numba checks no negative index then, the loop vectorizes, and no array view is made per segment (a
    # slice per operand cost a BatchNorm backward kernel 16% more compile time)
    def _at(self, base):
        return "c" if base == "0" else f"np.uint64({base} + c)"

    def inner_loop(self, p):
        elem = self.elem
        ups, sts = self.updates.get(p, []), self.stores.get(p, [])
        wanted = [vid for _, x in ups for vid in _named(x, self.names, elem)] + [vid for vid, _, _ in sts]
        need = set()
        while wanted:
            vid = wanted.pop()
            if vid not in need:
                need.add(vid)
                wanted.extend(elem[vid][1])
        lines = [elem[vid][0] for vid in self.order if vid in need]
        lines += [f"{t}[c] += {x}" if t in self.seg_sums else
                  f"{t}[{self._at('0' if self.L == 1 else 'e')}] = {x}" for t, x in ups]
        lines += [f"out{k}[{self._at('b')}] = {nm}" for _, k, nm in sts]
        if not lines:
            return []
        loop = ["for c in range(T):"] + ["    " + ln for text in lines for ln in text.split("\n")]
        if self.L == 1:
            return loop
        seg = [(t, self.row_sums[t]) for t, _ in ups if t in self.seg_sums]    # summed after the last segment
        widen = [f"    for c in range(T):\n        w{j}[c] = in{j}[np.uint64(b + c)]" for j in self.widened
                 if id(self.ins[j]) in need]
        return [f"for c in range(T):\n    {t}[c] = 0.0" for t, _ in seg] + \
            ["for l in range(L):", "    b = (l * R + r) * T", "    e = l * T"] + self._prefetch(need) + \
            widen + ["    " + ln for ln in loop] + [f"{s} = rsum({t}, T)" for t, s in seg]

    def _prefetch(self, need):
        """The first pass to read a full input's segments fetches the segment PREFETCH_AHEAD segments on into the
        cache, one cache line at a time, while it works on this one (see kernels/cpu/rows.prefetch_l2)."""
        fresh = [j for j, v in enumerate(self.ins) if self.in_kinds[j] == "full" and id(v) in need
                 and j not in self.fetched]
        self.fetched.update(fresh)
        if not fresh or not PREFETCH_AHEAD:
            return []
        return [f"    if l + {PREFETCH_AHEAD} < L:", f"        pfb = ((l + {PREFETCH_AHEAD}) * R + r) * T"] + \
            [f"        for c in range(0, T, {max(1, 64 // self.ins[j].dtype.np.itemsize)}):\n"
             f"            prefetch_l2(in{j}, pfb + c)" for j in fresh]

    def kernel_fn(self, fname, rng, flags):
        kp_arg, kp_unpack = param_args(self.params)
        sig = ", ".join([f"in{j}" for j in range(len(self.ins))] + [t for t, _ in self.scratch]
                        + [f"out{k}" for k in range(len(self.outs))] + ["R", "L", "T"] + kp_arg)
        rb = ROWS_PER_BLOCK
        self.fetched = set()        # full inputs a pass of this function prefetches (the first to read each)
        lines = [f"@numba.njit({flags})", f"def {fname}({sig}):"] + ["    " + s for s in kp_unpack + self.head]
        lines.append(f"    for blk in {rng}((R + {rb - 1}) // {rb}):")
        if rng != "range":       # threads: each task its own rows
            lines += [f"        {t} = np.empty({'T' if t in self.segmented else 'N'}, np.{np.dtype(dt).name})"
                      for t, dt in self.scratch]
        # (rlo/rhi: no generated name has that form; r{q} is a row sum)
        lines += [f"        rlo = blk * {rb}", f"        rhi = R if R < rlo + {rb} else rlo + {rb}"]
        lines += ["        " + s for s in self.block] + ["        for r in range(rlo, rhi):"]
        row = (["b = r * T", "e = 0"] + [f"p{j} = in{j}[b:b + T]" for j in sorted(self.row_slices)]
               if self.L == 1 else []) + self.row_stmts.get(0, [])
        for p in range(1, self.npass + 1):
            row += self.inner_loop(p) + self.row_stmts.get(p, [])
        lines += ["            " + ln for text in row for ln in text.split("\n")]
        return "\n".join(lines)

    def source(self, name, fastmath):
        ins, outs, R, L, T, N = self.ins, self.outs, self.R, self.L, self.T, self.N
        base = njit_flags(fastmath) + ", pipeline_class=NoAliasCompiler"
        title = (f"# tracejit row kernel {name}: {len(ins)} inputs -> {len(outs)} outputs, "
                 f"{R} rows x {N} ({L} segments of {T}; {outs[0].dtype.short}), {self.npass} passes over each row")
        code = module_code(self.consts, [self.kernel_fn("kernel", "range", base),
                                         self.kernel_fn("kernel_par", "numba.prange", base + ", parallel=True")],
                           ["from tracejit.kernels.cpu.rows import prefetch_l2, rmax, rmaximum, rmin, rsum, rsumsq  "
                            "# noqa: F401  (reduce a scratch row)"])
        ks = KernelSource(name, title, self.node, code, "rows", self.in_kinds, (R, L, T), R * N, self.params,
                          [(dt, T if t in self.segmented else N) for t, dt in self.scratch])
        ks.parallel_ok = R > 1
        ks.par_weight = max(SEGMENTED_PAR_WEIGHT if L > 1 else 1,
                            par_weight(any(_heavy_calls(ln) for ln in code.splitlines())))
        return ks


def _named(line, names, elem):
    """ids of the per-element values a statement reads (by their variable names)."""
    used = set(re.findall(r"\b[xv]\d+\b", line))
    return [vid for vid in elem if names[vid] in used]

