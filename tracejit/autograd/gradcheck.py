"""Numerical gradient checks: finite differences against the analytic VJPs."""
import numpy as np


def _flat_inputs(inputs):
    from .._tensor import Tensor
    return [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]


def _float_outputs(func, inputs):
    """func's floating outputs as float64 copies (an output may alias an input that is perturbed next)."""
    from .._tensor import Tensor
    from .grad_mode import no_grad
    with no_grad():
        o = func(*inputs)
    o = (o,) if isinstance(o, Tensor) else tuple(o)
    return [np.array(a._data, dtype=np.float64) for a in o if isinstance(a, Tensor) and a.dtype.is_floating_point]


def _jacobians(func, inputs, eps):
    from .._tensor import Tensor
    from .grad_mode import no_grad
    diff = _flat_inputs(inputs)
    with no_grad():
        outs = func(*inputs)
    outs = (outs,) if isinstance(outs, Tensor) else tuple(outs)
    outs = [o for o in outs if isinstance(o, Tensor) and o.dtype.is_floating_point]
    numeric = []
    for x in diff:
        cols = []
        arr = x._data   # perturbed in place, element by element (works for non-contiguous inputs too)
        for i in range(arr.size):
            at = np.unravel_index(i, arr.shape)
            orig = arr[at]
            arr[at] = orig + eps
            p = _float_outputs(func, inputs)
            arr[at] = orig - eps
            m = _float_outputs(func, inputs)
            arr[at] = orig
            cols.append(np.concatenate([((a - b) / (2 * eps)).reshape(-1) for a, b in zip(p, m)] or [np.zeros(0)]))
        numeric.append(np.stack(cols, 1) if cols else np.zeros((0, 0)))
    return outs, diff, numeric


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, fast_mode=False, **kw):
    """Compare the analytic Jacobian (one backward per output element) with central differences."""
    from .._tensor import Tensor
    from .engine import grad
    from ..creation import zeros_like
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    for x in _flat_inputs(inputs):
        if x.dtype.name != "float64":
            import warnings
            warnings.warn("gradcheck: inputs are not double precision; the check may fail for numerical reasons")
    outs_ref, diff, numeric = _jacobians(func, inputs, eps)
    outs = func(*inputs)
    outs = (outs,) if isinstance(outs, Tensor) else tuple(outs)
    outs = [o for o in outs if isinstance(o, Tensor) and o.dtype.is_floating_point]
    sizes = [o.numel() for o in outs]
    analytic = [np.zeros((sum(sizes), x.numel())) for x in diff]
    row = 0
    for oi, o in enumerate(outs):
        for j in range(o.numel()):
            if not o.requires_grad:
                row += 1
                continue
            go = zeros_like(o)
            go._data.reshape(-1)[j] = 1
            gs = grad(o, diff, go, retain_graph=True, allow_unused=True)
            for k, g in enumerate(gs):
                if g is not None:
                    analytic[k][row] = g._data.astype(np.float64).reshape(-1)
            row += 1
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        if a.size and not np.allclose(a, n, rtol=rtol, atol=atol):
            if raise_exception:
                raise GradcheckError(f"Jacobian mismatch for output 0 with respect to input {k},\n"
                                     f"numerical:{n}\nanalytical:{a}\n")
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **kw):
    """gradcheck of the function (inputs, grad_outputs) -> grads, i.e. of the VJPs themselves."""
    from .._tensor import Tensor
    from .engine import grad
    from ..creation import randn
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = func(*inputs)
    outs = (outs,) if isinstance(outs, Tensor) else tuple(outs)
    if grad_outputs is None:
        grad_outputs = tuple(randn(tuple(o.shape), dtype=o.dtype, requires_grad=True) for o in outs)
    n = len(inputs)

    def first_order(*args):
        from .grad_mode import enable_grad
        ins, gos = args[:n], args[n:]
        with enable_grad():  # the numeric Jacobian evaluates this under no_grad, but it needs a graph
            o = func(*ins)
            o = (o,) if isinstance(o, Tensor) else tuple(o)
            diff = _flat_inputs(ins)
            gs = grad(o, diff, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_order, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)


class GradcheckError(RuntimeError):
    pass
