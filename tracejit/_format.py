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
    return (lambda v: text(v).rjust(width)), width


# PyTorch's print options (torch.set_printoptions defaults)
LINEWIDTH, THRESHOLD, EDGEITEMS = 80, 1000, 3


def _summarized(a):
    """The elements PyTorch's formatter sees when it summarizes: edge items of every dim."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        a = np.concatenate([a[:EDGEITEMS], a[-EDGEITEMS:]])
    return a if a.ndim == 1 else np.stack([_summarized(x) for x in a])


def _formatter(a):
    """(format one element, element width) over the values that will be printed."""
    if a.dtype.kind == "f":
        return _float_formatter(a)
    texts = ["True" if v is True else "False" if v is False else str(v) for v in a.reshape(-1).tolist()]
    width = max((len(s) for s in texts), default=1)
    return (lambda v: str(v).rjust(width)), width


def _array_str(a, indent, summarize, fmt, width):
    """PyTorch's _tensor_str_with_formatter: nested brackets, rows wrapped at LINEWIDTH, '...' summaries."""
    if a.ndim == 0:
        return fmt(a.item())
    n = a.shape[0]
    cut = summarize and n > 2 * EDGEITEMS
    if a.ndim == 1:
        vals = a.tolist()
        data = ([fmt(v) for v in vals[:EDGEITEMS]] + [" ..."] + [fmt(v) for v in vals[-EDGEITEMS:]]) if cut \
            else [fmt(v) for v in vals]
        per_line = max(1, (LINEWIDTH - indent) // (width + 2))
        lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = range(n) if not cut else list(range(EDGEITEMS)) + [None] + list(range(n - EDGEITEMS, n))
    parts = ["..." if i is None else _array_str(a[i], indent + 1, summarize, fmt, width) for i in rows]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _add_suffixes(text, suffixes, indent):
    """PyTorch's _add_suffixes: ', suffix' on the last line while it fits in LINEWIDTH, else a new line."""
    out = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > LINEWIDTH:
            out.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            out.append(", " + s)
            last += len(s) + 2
    return "".join(out) + ")"


def format_tensor(t):
    extras = []
    if t._data is None:
        body = f"tracer({t._value})"
        prefix = ""
    else:
        arr = t._host()
        prefix = "tensor("
        if arr is not t._data:
            extras.append(f"device='{t.device}'")
        if arr.size == 0:
            body = "[]" if arr.ndim == 1 else f"[], size={tuple(arr.shape)}"
        else:
            summarize = arr.size > THRESHOLD
            fmt, width = _formatter(_summarized(arr) if summarize else arr)
            body = _array_str(arr, len(prefix), summarize, fmt, width)
        d = t.dtype
        if d not in (D.get_default_dtype(), D.int64, D.bool_) or (arr.size == 0 and d is not D.get_default_dtype()):
            extras.append(f"dtype=tracejit.{d.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    if t._data is None:
        return body[:-1] + "".join(", " + e for e in extras) + ")" if extras else body
    return _add_suffixes(prefix + body, extras, len(prefix))
