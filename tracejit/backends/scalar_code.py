"""The scalar code of elementwise ops, shared by the CPU and CUDA code generators: an op's `expr` template
with its operands cast to the op's compute dtype, constants named as typed module globals (`C0 = np.float32(0.5)`:
a bare float literal would promote float32 work to float64), and Python floats of the graph named as kernel
arguments (`k0`), so that a retrace for another learning rate reuses the compiled kernel.
"""
import re

import numpy as np

from .. import _dtype as D
from ..ir.graph import Value

_FLOAT_LIT = re.compile(r"(?<![\w{.])(\d+\.\d*(?:[eE][+-]?\d+)?)")


def npname(dt):
    return "bool_" if dt.np == np.bool_ else dt.np.name


def cast_text(expr, src, dst):
    if src is dst or src.np == dst.np:
        return expr
    return f"np.{npname(dst)}({expr})"


def operand_dtypes(node):
    """(dtypes the operands are cast to, dtype of the expression's result)."""
    op, out = node.op, node.outputs[0].dtype
    ins = node.inputs
    if op.bool_operands:
        return [D.bool_] * len(ins), D.bool_
    if op.passthrough:
        return [ins[0].dtype], ins[0].dtype
    if op.dtype_rule == "where":
        return [D.bool_] + [out] * (len(ins) - 1), out
    rule = op.dtype_rule
    if rule == "bool":
        c = D.result_type(*ins)
        return [c] * len(ins), D.bool_
    if rule == "same":
        c = ins[0].dtype if isinstance(ins[0], Value) else out
        return [c] * len(ins), c
    return [out] * len(ins), out


def is_param(nd, x, cdt):
    """A Python number in float arithmetic is a kernel argument, not a literal: a scheduler's learning rate, and
    an int too (mean's backward divides by each layer's own count), share the kernel; a pow exponent is not
    (`literal_exponent`: x ** 2.0 with the exponent an argument is a libm pow per element, 33x slower at 4M)."""
    return cdt.is_floating_point and isinstance(x, (int, float)) and not isinstance(x, bool) and \
        not nd.op.literal_exponent


def op_expression(nd, names, dtypes, const, post=None, param=None):
    """The scalar expression of one elementwise body node, from its op's `expr` template.

    `names`/`dtypes` map id(Value) -> local variable name / dtype for the values already computed,
    `const(value, dtype)` names a typed constant, `post(text, compute_dtype)` (optional) rewrites the
    formatted template (the CUDA backend names its per-dtype runtime helpers there), `param(value, dtype)`
    (optional) names a kernel argument for a Python float operand. The result is cast to
    the node's output dtype. Shared by the CPU and CUDA code generators.
    """
    cdts, rdt = operand_dtypes(nd)
    args = []
    for x, cdt in zip(nd.inputs, cdts):
        if isinstance(x, Value):
            args.append(cast_text(names[id(x)], dtypes[id(x)], cdt))
        elif x is None:
            args.append("None")
        elif param is not None and is_param(nd, x, cdt):
            args.append(param(x, cdt))
        else:
            args.append(const(x, cdt))
    op = nd.op
    cdt0 = cdts[0] if cdts else rdt
    if op.passthrough or (op.int_identity and cdt0.np.kind in "biu"):
        expr = "{0}"
    else:
        expr = op.expr
    # float literals inside templates become typed constants of the compute dtype
    if cdt0.is_floating_point:
        expr = _FLOAT_LIT.sub(lambda m: const(float(m.group(1)), cdt0), expr)
    attrs = {}
    for k, a in nd.attrs.items():
        if a is None:
            attrs[k] = "None"
        elif isinstance(a, bool) or isinstance(a, str):
            attrs[k] = str(a)
        elif isinstance(a, (int, float)) and k != "decimals":
            attrs[k] = const(a, cdt0 if cdt0.np.kind != "b" else D.float32)
        else:
            attrs[k] = repr(a)
    text = expr.format(*args, **attrs)
    if post is not None:
        text = post(text, cdt0)
    o = nd.outputs[0]
    if (rdt.np.kind in "iu" and rdt.np.itemsize < 8) or (rdt.np.kind == "b" and op.dtype_rule == "promote"):
        # numba widens small ints (int32 + int32 -> int64) and bool arithmetic; numpy wraps: cast back
        return f"np.{npname(o.dtype)}({text})"
    return cast_text(text, rdt, o.dtype)


def literal(value):
    """Python source for a constant (repr gives `inf` and `nan`, which are not names in a kernel module)."""
    if isinstance(value, float) and not np.isfinite(value):
        return "np.nan" if value != value else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


def param_namer():
    """`param(value, dtype)` -> the name of a kernel argument carrying a Python float of the graph (a learning
    rate, a loss weight), and the list of typed values to pass. The value is not in the source, so a retrace
    for another learning rate generates the same source and reuses the compiled kernel. One argument per
    occurrence: merging equal values would make the source depend on them."""
    values = []

    def param(value, dt):
        values.append(dt.np.type(value))
        return f"k{len(values) - 1}"
    return param, values


def const_namer():
    """`const(value, dtype)` -> the name of a typed module-level constant, and the {key: (name, text)} made."""
    consts = {}

    def const(value, dt):
        if dt.np == np.bool_:
            return "True" if value else "False"
        key = (repr(value), dt.np.name)
        if key not in consts:
            consts[key] = (f"C{len(consts)}", f"np.{npname(dt)}({literal(value)})")
        return consts[key][0]
    return const, consts
