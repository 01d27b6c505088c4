"""Python source for a row kernel: a fused group around reductions over the trailing (inner) dims.

softmax, log_softmax, logsumexp, sum/mean/amax/amin/var over the last dims, with the elementwise work
before and after them (layer norm, the losses, their backward), become one kernel. The outer loop runs
over rows (prange for large inputs: rows are independent, nothing is shared); inside a row there is one
loop over the inner positions per reduction level: `x - max(x)` needs the row's max, so it is computed in
the loop after the one that finds the max. Each loop writes the operand of its reductions to a scratch
row (small, in L1) that `kernels.cpu.rows` then reduces with vectorized loops; softmax's exp stays in
its scratch row for the output loop. Other per-element values are recomputed in each loop that needs
them instead of being stored: elementwise math is cheaper than another pass over memory. Sums accumulate
in float64 (numpy sums float32 pairwise: both are within float32 rounding of the exact sum); max/min
propagate NaN like numpy.
"""
import re

import numpy as np

from ... import _dtype as D
from ...ir.graph import Value
from ...passes.fusion import row_class
from .codegen import KernelSource, _npname, const_namer, module_source, njit_flags, op_expression, param_namer

ROWS_PER_BLOCK = 8           # rows per task of the parallel loop (and per scratch allocation)


def generate_rows(node, name, fastmath=False):
    body = node.attrs["body"]
    outer, inner = dom = node.attrs["rows"]
    R, C = int(np.prod(outer, dtype=np.int64)), int(np.prod(inner, dtype=np.int64))
    ins, outs = node.inputs, node.outputs
    const, consts = const_namer()
    param, params = param_namer()
    out_index = {id(o): k for k, o in enumerate(outs)}

    names, dtypes, level = {}, {}, {}
    elem = {}                  # per-element value id -> (statement, ids of the per-element values it reads)
    row_stmts = {}             # level -> statements run once per row after the loop of that level
    updates = {}               # pass -> statements in that inner loop (each fills a reduction's scratch row)
    scratch = []               # scratch rows, allocated once per block of rows
    head = []                  # before the row loop
    in_kinds = []
    for j, v in enumerate(ins):
        kind = row_class(v.shape, dom)
        in_kinds.append(kind)
        names[id(v)], dtypes[id(v)], level[id(v)] = f"x{j}", v.dtype, 0
        if kind == "scalar":
            head.append(f"x{j} = in{j}[0]")
        elif kind == "row":
            row_stmts.setdefault(0, []).append(f"x{j} = in{j}[r]")
        else:
            if kind == "full":      # a row slice: indexing `in0[b + c]` defeats vectorization (wraparound check)
                row_stmts.setdefault(0, []).append(f"p{j} = in{j}[b:b + C]")
            elem[id(v)] = (f"x{j} = {'p' if kind == 'full' else 'in'}{j}[c]", ())

    def deps(nd):
        return tuple(id(v) for v in nd.inputs if id(v) in elem)

    stores = {}                # pass -> store statements of per-element outputs
    for q, nd in enumerate(body.nodes):
        o = nd.outputs[0]
        nm = f"v{o.id}"
        names[id(o)], dtypes[id(o)] = nm, o.dtype
        lv = max([level[id(v)] for v in nd.inputs if isinstance(v, Value)] or [0])
        op = nd.op.name
        if nd.op.kind == "elementwise" or op == "expand":
            text = op_expression(nd, names, dtypes, const, param=param)
            if row_class(o.shape, dom) == "full":
                elem[id(o)] = (f"{nm} = {text}    # {op}", deps(nd))
            else:
                row_stmts.setdefault(lv, []).append(f"{nm} = {text}    # {op}")
        else:
            x, t = names[id(nd.inputs[0])], f"t{q}"
            dt = f"np.{_npname(o.dtype)}"
            j = next((j for j, v in enumerate(ins) if v is nd.inputs[0] and in_kinds[j] == "full"), None)
            if j is None:
                scratch.append(f"{t} = np.empty(C, np.{_npname(nd.inputs[0].dtype)})")
                updates.setdefault(lv + 1, []).append(f"{t}[c] = {x}")
            else:           # reduce the input's row slice itself (read-only)
                t = f"p{j}"
            rs = row_stmts.setdefault(lv + 1, [])
            n_ = const(float(C), D.float64)
            if op in ("sum", "mean"):
                rs.append(f"{nm} = {dt}(rsum({t}, C){'' if op == 'sum' else f' / {n_}'})")
            elif op == "var":
                corr = nd.attrs["correction"]
                den = const(float(C - corr) if C > corr else 0.0, D.float64)
                rs += [f"m{q} = rsum({t}, C) / {n_}", f"{nm} = {dt}(rsumsq({t}, C, m{q}) / {den})"]
            elif op in ("amax", "amin"):
                rs.append(f"{nm} = {dt}(r{op[1:]}({t}, C))")
            else:           # logsumexp, softmax, log_softmax: shift by the row's max (0 if it is not finite)
                u = f"u{q}" if op == "log_softmax" or t.startswith("p") else t
                if u != t:
                    scratch.append(f"{u} = np.empty(C, np.{_npname(o.dtype)})")
                rs += [f"a{q} = rmax({t}, C)", f"h{q} = {dt}(a{q}) if isfinite(a{q}) else {const(0.0, o.dtype)}",
                       f"for c in range(C):\n    {u}[c] = exp({t}[c] - h{q})", f"s{q} = rsum({u}, C)"]
                if op == "logsumexp":
                    rs.append(f"{nm} = {dt}(log(s{q})) + h{q}")
                elif op == "softmax":
                    rs.append(f"i{q} = 1.0 / s{q}")
                    elem[id(o)] = (f"{nm} = {dt}({u}[c] * i{q})    # softmax", ())
                else:
                    rs.append(f"g{q} = {dt}(log(s{q}))")
                    elem[id(o)] = (f"{nm} = ({t}[c] - h{q}) - g{q}    # log_softmax", ())
            lv += 1
        level[id(o)] = lv
        if id(o) in out_index:
            k = out_index[id(o)]
            if id(o) in elem:
                stores.setdefault(lv + 1, []).append((id(o), f"o{k}[c] = {nm}"))
                row_stmts.setdefault(0, []).append(f"o{k} = out{k}[b:b + C]")
            else:
                row_stmts.setdefault(lv, []).append(f"out{k}[r] = {nm}")

    npass = max(list(updates) + list(stores) + list(row_stmts))
    order = [id(v) for v in ins if id(v) in elem] + [id(nd.outputs[0]) for nd in body.nodes if id(nd.outputs[0]) in elem]

    def inner_loop(p):
        wanted = [vid for line in updates.get(p, []) for vid in _named(line, names, elem)]
        wanted += [vid for vid, _ in stores.get(p, [])]
        need = set()
        while wanted:
            vid = wanted.pop()
            if vid not in need:
                need.add(vid)
                wanted.extend(elem[vid][1])
        lines = [elem[vid][0] for vid in order if vid in need]
        lines += updates.get(p, []) + [st for _, st in stores.get(p, [])]
        if not lines:
            return []
        return ["for c in range(C):"] + ["    " + ln for text in lines for ln in text.split("\n")]

    def kernel_fn(fname, rng, flags):
        sig = ", ".join([f"in{j}" for j in range(len(ins))] + [f"out{k}" for k in range(len(outs))] + ["R", "C"]
                        + [f"k{q}" for q in range(len(params))])
        rb = ROWS_PER_BLOCK
        lines = [f"@numba.njit({flags})", f"def {fname}({sig}):"] + ["    " + s for s in head]
        lines.append(f"    for blk in {rng}((R + {rb - 1}) // {rb}):")
        lines += ["        " + s for s in scratch]
        lines.append(f"        for r in range(blk * {rb}, min(R, blk * {rb} + {rb})):")
        row = ["b = r * C"] + row_stmts.get(0, [])
        for p in range(1, npass + 1):
            row += inner_loop(p) + row_stmts.get(p, [])
        lines += ["            " + ln for text in row for ln in text.split("\n")]
        return "\n".join(lines)

    base = njit_flags(fastmath)
    title = (f"# tracejit row kernel {name}: {len(ins)} inputs -> {len(outs)} outputs, "
             f"{R} rows x {C} ({outs[0].dtype.short}), {npass} passes over each row")
    src = module_source(title, node, consts, [kernel_fn("kernel", "range", base),
                                              kernel_fn("kernel_par", "numba.prange", base + ", parallel=True")],
                        ["from kernels.cpu.rows import rmax, rmin, rsum, rsumsq  # noqa: F401  (reduce a scratch row)"])
    ks = KernelSource(name, src, "rows", in_kinds, (R, C), R * C, params)
    ks.parallel_ok = R > 1
    return ks


def _named(line, names, elem):
    """ids of the per-element values a statement reads (by their variable names)."""
    used = set(re.findall(r"\b[xv]\d+\b", line))
    return [vid for vid in elem if names[vid] in used]

