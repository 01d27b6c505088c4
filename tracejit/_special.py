"""Lazy access to the special-function kernels (numba is imported on first use only)."""


def erf(x):
    from tracejit.kernels.cpu.special import erf as _erf
    return _erf(x)


def erfinv(x):
    from tracejit.kernels.cpu.special import erfinv_newton
    return erfinv_newton(x)


def gelu_backward(g, x, k, tanh_form):
    from tracejit.kernels.cpu.special import gelu_backward as _gb
    return _gb(g, x, k, tanh_form)


def gelu(x, r2):
    from tracejit.kernels.cpu.special import gelu as _gelu
    return _gelu(x, r2)
