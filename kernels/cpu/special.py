"""Special functions numpy lacks (erf) without importing scipy: erf is vmath's (the compiled kernels' own, so
eager and compiled results are the same bits), erfinv by Newton iterations on libm's erf."""
import math

import numba
import numpy as np

from .vmath import verf, vexp, vtanh


@numba.njit(cache=True, nogil=True)
def _erf_into(x, out):
    for i in range(x.shape[0]):
        out[i] = verf(x[i])


def erf(x):
    """erf of an array (float32 stays float32, anything else is computed in float64), elementwise."""
    x = np.asarray(x)
    x = x if x.dtype == np.float32 or x.dtype == np.float64 else x.astype(np.float64)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _erf_into(flat, out)
    return out.reshape(x.shape)


@numba.njit(cache=True, nogil=True)
def _gelu_into(x, out, half, one, r2):
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = half * v * (one + verf(v * r2))


def gelu(x, r2):
    """0.5 * x * (1 + erf(x * r2)) of a float32 or float64 array in its dtype, in one pass (numpy's order of
    operations on the array, so the same bits)."""
    t = x.dtype.type
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _gelu_into(flat, out, t(0.5), t(1), t(r2))
    return out.reshape(x.shape)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _gelu_backward_into(g, x, out, k, tanh_form):
    """out = g * gelu'(x), in the arrays' dtype: k = (0.5, 1, 1/sqrt(2), 1/sqrt(2 pi), sqrt(2/pi), the tanh
    form's cubic coefficient, 3) in it."""
    half, one, r2, r2pi, s2pi, c, three = k[0], k[1], k[2], k[3], k[4], k[5], k[6]
    if tanh_form:
        for i in range(x.shape[0]):
            v = x[i]
            t = vtanh(s2pi * (v + c * v * v * v))
            out[i] = g[i] * (half * (one + t) + half * v * (one - t * t) * s2pi * (one + three * c * v * v))
    else:
        for i in range(x.shape[0]):
            v = x[i]
            out[i] = g[i] * (half * (one + verf(v * r2)) + v * vexp(-half * v * v) * r2pi)


def gelu_backward(g, x, k, tanh_form):
    """g * gelu'(x) for float arrays of one dtype (broadcast together), by _gelu_backward_into."""
    dt = x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    g, x = np.broadcast_arrays(g.astype(dt, copy=False), x.astype(dt, copy=False))
    out = np.empty(x.shape, dt)
    _gelu_backward_into(np.ascontiguousarray(g).reshape(-1), np.ascontiguousarray(x).reshape(-1), out.reshape(-1),
                        np.array(k, dt), tanh_form)
    return out


@numba.njit(cache=True, nogil=True)
def erfinv_scalar(y):
    """The inverse of erf, in float64 whatever y's type: a polynomial first guess (Giles' single-precision
    approximation in w = -log(1 - y^2)), then two Newton steps on math.erf (each squares the relative error:
    exact to a few ulp of float64). -1 and 1 give -inf and inf, |y| > 1 and NaN give NaN."""
    y = float(y)
    if y != y:
        return math.nan
    if y <= -1.0:
        return -math.inf if y == -1.0 else math.nan
    if y >= 1.0:
        return math.inf if y == 1.0 else math.nan
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    x = p * y
    for _ in range(2):
        x -= (math.erf(x) - y) / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


@numba.vectorize(["float32(float32)", "float64(float64)"], cache=True)
def erfinv_newton(y):
    """erfinv_scalar over arrays (the erfinv op's eager face, trunc_normal_)."""
    return erfinv_scalar(y)
