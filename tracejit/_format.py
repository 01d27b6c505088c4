"""repr() of tensors in PyTorch's style: tensor([1., 2.], requires_grad=True)."""
import math

import numpy as np

from . import _dtype as D


def _float_formatter(arr):
    """PyTorch's _Formatter: integer, fixed (4 decimals) or scientific mode, chosen from the nonzero finite
    values, every value right-aligned to the widest of those values."""
    vals = arr[np.isfinite(arr) & (arr != 0)].astype(np.float64)
    if vals.size == 0:
        fmt = "int"
    else:
        a = np.abs(vals)
        lo, hi = a.min(), a.max()
        if np.all(vals == np.ceil(vals)):
            fmt = "sci" if hi / lo > 1000.0 or hi > 1.0e8 else "int"
        else:
            fmt = "sci" if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4 else "fixed"

    def text(v):
        v = float(v)
        if fmt == "sci":
            return f"{v:.4e}"
        if fmt == "int":
            return f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        return f"{v:.4f}"
    width = max((len(text(v)) for v in vals), default=1)
    return lambda v: text(v).rjust(width)


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def format_tensor(t):
    extras = []
    if t._data is None:
        body = f"tracer({t._value})"
        prefix = ""
    else:
        arr = t._data
        prefix = "tensor("
        if arr.size == 0:
            body = "[]" if arr.ndim == 1 else f"[], size={tuple(arr.shape)}"
        else:
            fmt = {}
            if arr.dtype.kind == "f":
                fmt["float_kind"] = _float_formatter(arr)
            elif arr.dtype.kind == "b":
                w = 5 if not arr.all() else 4
                fmt["bool"] = lambda v: ("True" if v else "False").rjust(w)
            body = np.array2string(arr, separator=", ", prefix=prefix, formatter=fmt, threshold=1000,
                                   edgeitems=3, max_line_width=80)
        d = t.dtype
        if d not in (D.get_default_dtype(), D.int64, D.bool_) or (arr.size == 0 and d is not D.get_default_dtype()):
            extras.append(f"dtype=tracejit.{d.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    if t._data is None:
        return body[:-1] + "".join(", " + e for e in extras) + ")" if extras else body
    return prefix + body + "".join(", " + e for e in extras) + ")"
