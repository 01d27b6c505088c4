"""CUDA source for an elementwise group: the same scalar statements as the CPU backend, in a grid-stride loop.

The scalar body comes from `backends/scalar_code.py` (the registry's `expr` templates, operand casts, typed
constants and kernel arguments), shared with the CPU code generator. What differs is the loop and the runtime: each
runtime helper is called by its per-dtype name (`relu__float32`, see `rt.py`), and every array is a flat
device buffer read through a view given at run time:

- `kernel_flat`: every non-scalar operand is C-contiguous with the output's shape: `in0[o0 + i]`;
- `kernel_nd`: any strides (broadcast dims have stride 0, permuted/sliced views their own): the flat index is
  split into coordinates, and each operand's offset is `o + sum(c_a * s_a)`. Outputs may be views too, which
  is how in-place updates of slices write through.

Offsets and strides are kernel arguments, not constants, so one compiled kernel serves every layout and size.
One-element inputs are read once before the loop. Constants are module globals for compiled graphs (fixed
per trace) and kernel arguments for eager ops (`params=True`), so `x * 0.5` and `x * 0.25` share a kernel.
"""
import hashlib
import importlib.util
import re

import numpy as np

from .. import scalar_rt
from ..scalar_code import const_namer, npname, op_expression, param_namer
from . import rt

# in the source text, so that the disk cache key covers the runtime (rt.py and the shared helpers it compiles)
# the runtime's sources, and the scalar special functions it compiles as device functions (kernels/cpu/special.py)
_RT_FILES = (rt.__file__, scalar_rt.__file__, importlib.util.find_spec("tracejit.kernels.cpu.special").origin)
RT_HASH = hashlib.sha256(b"".join(open(f, "rb").read() for f in _RT_FILES)).hexdigest()[:16]
_RT_CALL = re.compile(r"\b(" + "|".join(sorted(rt.NAMES, key=len, reverse=True)) + r")\(")


class CudaKernelSource:
    def __init__(self, name, source, n_in, n_out, scalar_ins, ndim, params, helpers):
        self.name = name
        self.source = source
        self.n_in, self.n_out = n_in, n_out
        self.scalar_ins = scalar_ins      # per input: one element (read once)
        self.ndim = ndim                  # rank of the loop (the output's)
        self.params = params              # eager: typed values of the constants, in kernel-argument order
        self.helpers = helpers

    def __str__(self):
        return self.source


def generate(inputs, outputs, nodes, name, params=False, header=()):
    """Source of one kernel computing `outputs` from `inputs` through the elementwise `nodes` (a fused body)."""
    shape = tuple(outputs[0].shape)
    r = len(shape)
    global_const, consts = const_namer()
    param, param_vals = param_namer()
    helpers = set()

    def const(value, dt):       # eager kernels take every number as an argument (`params`)
        return param(value, dt) if params and dt.np != np.bool_ else global_const(value, dt)

    def post(text, cdt):
        def sub(m):
            nm = f"{m.group(1)}__{npname(cdt)}"
            helpers.add(nm)
            return nm + "("
        return _RT_CALL.sub(sub, text)

    names = {id(v): f"x{j}" for j, v in enumerate(inputs)}
    dtypes = {id(v): v.dtype for v in inputs}
    stmts = []
    for nd in nodes:
        text = op_expression(nd, names, dtypes, const, post)
        o = nd.outputs[0]
        nm = f"v{o.id}"
        names[id(o)] = nm
        dtypes[id(o)] = o.dtype
        stmts.append(f"{nm} = {text}    # {nd.op.name}")
    scalar_ins = [int(np.prod(v.shape, dtype=np.int64)) == 1 for v in inputs]
    results = [names[id(o)] for o in outputs]
    kparams = [f"k{j}" for j in range(len(param_vals))]

    ins = [f"in{j}" for j in range(len(inputs))]
    outs = [f"out{k}" for k in range(len(outputs))]

    def loop(nd_mode):
        if nd_mode:
            offs = []
            for j in range(len(inputs)):
                offs += [f"oi{j}"] + ([] if scalar_ins[j] else [f"si{j}_{a}" for a in range(r)])
            for k in range(len(outputs)):
                offs += [f"oo{k}"] + [f"so{k}_{a}" for a in range(r)]
            sig = ins + outs + ["n"] + [f"d{a}" for a in range(r)] + offs + kparams
        else:
            sig = ins + outs + ["n"] + [f"oi{j}" for j in range(len(inputs))] + \
                [f"oo{k}" for k in range(len(outputs))] + kparams
        fname = "kernel_nd" if nd_mode else "kernel_flat"
        lines = ["@cuda.jit(cache=CACHE)", f"def {fname}({', '.join(sig)}):",
                 "    i = cuda.grid(1)", "    step = cuda.gridsize(1)"]
        lines += [f"    x{j} = in{j}[oi{j}]" for j in range(len(inputs)) if scalar_ins[j]]
        lines.append("    while i < n:")
        body = []
        if nd_mode:
            if r:
                body.append("q = i")
                for a in range(r - 1, 0, -1):
                    body += [f"c{a} = q % d{a}", f"q = q // d{a}"]
                body.append("c0 = q")
            for j in range(len(inputs)):
                if not scalar_ins[j]:
                    idx = " + ".join([f"oi{j}"] + [f"c{a} * si{j}_{a}" for a in range(r)])
                    body.append(f"x{j} = in{j}[{idx}]")
        else:
            body += [f"x{j} = in{j}[oi{j} + i]" for j in range(len(inputs)) if not scalar_ins[j]]
        body += stmts
        for k, res in enumerate(results):
            if nd_mode:
                idx = " + ".join([f"oo{k}"] + [f"c{a} * so{k}_{a}" for a in range(r)])
            else:
                idx = f"oo{k} + i"
            body.append(f"out{k}[{idx}] = {res}")
        body.append("i += step")
        lines += ["        " + b for b in body]
        return "\n".join(lines)

    head = [f"# tracejit CUDA kernel {name}: {len(inputs)} inputs -> {len(outputs)} outputs, "
            f"{outputs[0].dtype.short}[{','.join(map(str, shape))}]"]
    head += ["#   " + h for h in header]
    imports = ["import math", "import numpy as np", "from numba import cuda"]
    if helpers:
        imports.append(f"from tracejit.backends.numba_cuda.rt import {', '.join(sorted(helpers))}  # noqa: F401")
    src = "\n".join(head + [f"# runtime {RT_HASH}"] + imports + [
        "",
        "CACHE = __name__.startswith('tj_')      # numba caches the machine code beside the cached module",
    ] + [f"{n} = {v}" for n, v in consts.values()] + [
        "", "", loop(False), "", "", loop(True), "",
    ])
    return CudaKernelSource(name, src, len(inputs), len(outputs), scalar_ins, r, param_vals, sorted(helpers))
