"""repr() of tensors in PyTorch's style: tensor([1., 2.], requires_grad=True)."""
import numpy as np

from . import _dtype as D


def _float_formatter(arr):
    finite = arr[np.isfinite(arr)].astype(np.float64)
    if finite.size == 0:
        return lambda v: _special(v) or "0."
    absmax, nz = np.abs(finite).max(), np.abs(finite[finite != 0])
    absmin = nz.min() if nz.size else 0.0
    if np.all(finite == np.round(finite)) and absmax < 1e8:
        width = len(f"{absmax:.0f}") + (1 if finite.min() < 0 else 0)
        return lambda v: _special(v) or f"{v:.0f}.".rjust(width + 1)
    if absmax >= 1e8 or (absmin and absmin < 1e-4) or (absmin and absmax / absmin > 1e3 and absmax > 1e3):
        return lambda v: _special(v) or f"{v:.4e}"
    width = len(f"{absmax:.4f}") + (1 if finite.min() < 0 else 0)
    return lambda v: _special(v) or f"{v:.4f}".rjust(width)


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
                fmt["bool"] = lambda v: "True" if v else "False"
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
