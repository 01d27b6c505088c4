"""Special functions numpy lacks (erf) without importing scipy: erf is vmath's (the compiled kernels' own, so
eager and compiled results are the same bits), erfinv by Newton iterations on libm's erf."""
import math

import numba
import numpy as np

from .vmath import verf


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


@numba.vectorize(["float32(float32)", "float64(float64)"], cache=True)
def erfinv_newton(y):
    # used by trunc_normal_: Newton iterations on erf from a good starting point
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
