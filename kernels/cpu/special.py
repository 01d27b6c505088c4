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


def erfinv_fn():
    """The inverse of erf in float64: a polynomial first guess (Giles' single-precision approximation in
    w = -log(1 - y^2)), then two Newton steps on math.erf (each squares the relative error: a few ulp of float64).
    -1 and 1 give -inf and inf, |y| > 1 and NaN give NaN. A factory, as the gamma family's below: numba.njit here,
    cuda.jit(device=True) in the CUDA runtime."""
    def erfinv64(y):
        if y != y or y < -1.0 or y > 1.0:
            return math.nan
        if y == -1.0 or y == 1.0:
            return math.copysign(math.inf, y)
        w = -math.log((1.0 - y) * (1.0 + y))
        if w < 5.0:
            w -= 2.5
            p = 2.81022636e-08
            for k in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                      -0.00417768164, 0.246640727, 1.50140941):
                p = k + p * w
        else:
            w = math.sqrt(w) - 3.0
            p = -0.000200214257
            for k in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                      1.00167406, 2.83297682):
                p = k + p * w
        x = p * y
        for _ in range(2):
            x -= (math.erf(x) - y) / (1.1283791670955126 * math.exp(-x * x))       # (2 / sqrt(pi))
        return x
    return erfinv64


_erfinv64 = numba.njit(cache=True, nogil=True)(erfinv_fn())


@numba.njit(cache=True, nogil=True)
def erfinv_scalar(y):
    return _erfinv64(np.float64(y))     # (numba's float() keeps a float32 a float32)


def _erfinv_elem(y):
    return erfinv_scalar(y)


# ----------------------------------------------------------------------------- the gamma family
# lgamma, digamma and polygamma in float64 whatever the input's type. Each is a factory returning a plain function
# of math.* only (and of the functions passed in), so that one text serves eager mode and the CPU code generator
# (numba.njit, below) and the CUDA runtime (cuda.jit(device=True) of the same factories, numba_cuda/rt.py).

_BIG_INT = 4503599627370496.0        # 2**52: a float this large is an integer
_HALF_LOG_2PI = 0.9189385332046728
# B_2j / (2j)!, j = 1..12: the Euler-Maclaurin tail of the Hurwitz zeta function
_EM = (0.08333333333333333, -0.001388888888888889, 3.306878306878307e-05, -8.267195767195768e-07,
       2.08767569878681e-08, -5.284190138687493e-10, 1.3382536530684679e-11, -3.3896802963225827e-13,
       8.586062056277845e-15, -2.174868698558062e-16, 5.5090028283602295e-18, -1.3954464685812525e-19)


def lgamma_fn():
    """log|Gamma(x)|: libm's lgamma, with PyTorch's values where libm (and Python's math, which the CUDA simulator
    runs) would signal: +inf at the poles (0, -0 and the negative integers) and at +-inf, Stirling's formula above
    1e17 (where 1/(12x) is below float64's resolution; it overflows to inf without raising)."""
    def lgamma64(x):
        x = float(x)
        if x != x:
            return x
        if x == math.inf or x == -math.inf:
            return math.inf
        if x <= 0.0 and (x <= -_BIG_INT or math.floor(x) == x):
            return math.inf
        if x > 1e17:
            lx = math.log(x)
            return x * (lx - 1.0) - 0.5 * lx + _HALF_LOG_2PI
        return math.lgamma(x)
    return lgamma64


def digamma_fn():
    """psi(x) = Gamma'(x) / Gamma(x). PyTorch's conventions: psi(+0) = -inf, psi(-0) = +inf, NaN at the negative
    integers and -inf. x < 0 by the reflection psi(x) = psi(1 - x) - pi / tan(pi r), r = x minus its nearest
    integer (exact, so tan sees no rounding of pi x); then the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10
    and the asymptotic series log x - 1/(2x) - sum B_2k / (2k x^2k) to x^-14 (its next term is below 1e-17)."""
    def digamma64(x):
        x = float(x)
        if x != x or x == math.inf:
            return x
        if x == 0.0:
            return math.copysign(math.inf, -x)
        refl = 0.0
        if x < 0.0:
            if x <= -_BIG_INT or math.floor(x) == x:
                return math.nan
            if x > -0.5:
                r = x
            else:
                r = x - math.floor(x)
                if r > 0.5:
                    r -= 1.0
            refl = math.pi / math.tan(math.pi * r)
            x = 1.0 - x
        res = 0.0
        while x < 10.0:
            res -= 1.0 / x
            x += 1.0
        z = 1.0 / (x * x)
        tail = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (
            1.0 / 132 - z * (691.0 / 32760 - z * (1.0 / 12)))))))
        return res + math.log(x) - 0.5 / x - tail - refl
    return digamma64


def hurwitz_zeta_fn():
    """zeta(s, q) = sum_k (q + k)^-s for s > 1 and q > 0 (all terms positive): the first terms summed until
    a = q + k >= s + 10, the rest by Euler-Maclaurin, a^(1-s)/(s-1) + a^-s/2 + sum_j B_2j/(2j)! (s)_(2j-1)
    a^(-s-2j+1), whose terms fall at least ~30x each at that a (checked against mpmath for s up to 40)."""
    def zeta64(s, q):
        lim = s + 10.0
        tot = 0.0
        k = 0
        a = q
        while a < lim:
            tot += math.pow(a, -s)
            k += 1
            a = q + k
        p1 = math.pow(a, 1.0 - s)
        p = p1 / a
        tail = p1 / (s - 1.0) + 0.5 * p
        t = s * p / a
        m = s + 1.0
        for c in _EM:
            term = c * t
            tail += term
            if abs(term) <= 1e-18 * (tail + tot):
                break
            t *= m * (m + 1.0) / (a * a)
            m += 2.0
        return tot + tail
    return zeta64


def polygamma_fn():
    """The n-th derivative of digamma: digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x). x < 0: the terms
    (x + k)^-(n+1) up to x + k > 0 (x + k is exact there) are summed directly when there are at most 64 of them,
    each paired with the positive term of its size; else as (-1)^(n+1) (zeta(n+1, 1-f) - zeta(n+1, M+1-f)),
    f = x + M in (0, 1), with zeta(n+1, f) and zeta(n+1, 1-f) added first (at half-integers an even n's terms
    cancel exactly, as in the function). Poles give +inf for odd n and -inf for even n (PyTorch's signs); +inf
    gives a signed zero, -inf NaN (a limit of poles). It calls digamma and zeta by the global names _digamma64 and
    _zeta64 (the CPU functions below; the CUDA runtime binds them to its device functions): no closure cells, which
    numba's disk cache cannot keep."""
    def polygamma64(x, order):
        x = float(x)
        n = int(order)
        if n == 0:
            return _digamma64(x)
        if x != x:
            return x
        odd = n % 2 == 1
        s = n + 1.0
        fact = 1.0
        for i in range(2, n + 1):
            fact *= i
        sgn = fact if odd else -fact
        if x == math.inf:
            return 0.0 if odd else -0.0
        if x > 0.0:
            return sgn * _zeta64(s, x)
        if x == -math.inf:
            return math.nan
        if x <= -_BIG_INT or math.floor(x) == x:
            return math.inf if odd else -math.inf
        m = math.ceil(-x)
        if m <= 64:
            # the negative terms paired with the positive ones of the same size: (x + m + k) and (x + m - 1 - k)
            # are exact, and at half-integers an even n's pairs cancel exactly, as they do in the function
            tot = 0.0
            for k in range(m - 1, -1, -1):
                tot += math.pow(x + (m + k), -s) + math.pow(x + (m - 1 - k), -s)
            return sgn * (tot + _zeta64(s, x + 2 * m))
        f = x + m
        pair = _zeta64(s, f) + _zeta64(s, 1.0 - f) if odd else _zeta64(s, f) - _zeta64(s, 1.0 - f)
        return sgn * (pair - _zeta64(s, 1.0 - f + m) if odd else pair + _zeta64(s, 1.0 - f + m))
    return polygamma64


class _LazyUfunc:
    """A numba ufunc of explicit signatures made at its first call (numba compiles it or loads it from its disk
    cache then), not at import: the code generator's runtime imports this module in every process that compiles."""

    def __init__(self, signatures, fn):
        self.signatures, self.fn, self.ufunc = signatures, fn, None

    def __call__(self, *args):
        if self.ufunc is None:
            self.ufunc = numba.vectorize(self.signatures, cache=True)(self.fn)
        return self.ufunc(*args)


# the float64 functions, compiled at first use; the *_scalar entry points widen their argument first (numba's
# float() keeps a float32 a float32, and math.lgamma of one would be lgammaf)
_lgamma64 = numba.njit(cache=True, nogil=True)(lgamma_fn())
_digamma64 = numba.njit(cache=True, nogil=True)(digamma_fn())
_zeta64 = numba.njit(cache=True, nogil=True)(hurwitz_zeta_fn())
_polygamma64 = numba.njit(cache=True, nogil=True)(polygamma_fn())


@numba.njit(cache=True, nogil=True)
def lgamma_scalar(x):
    return _lgamma64(np.float64(x))


@numba.njit(cache=True, nogil=True)
def digamma_scalar(x):
    return _digamma64(np.float64(x))


@numba.njit(cache=True, nogil=True)
def hurwitz_zeta_scalar(s, x):
    return _zeta64(np.float64(s), np.float64(x))


@numba.njit(cache=True, nogil=True)
def polygamma_scalar(x, n):
    return _polygamma64(np.float64(x), np.int64(n))


def _lgamma_elem(x):
    return lgamma_scalar(x)


def _digamma_elem(x):
    return digamma_scalar(x)


def _polygamma_elem(x, n):
    return polygamma_scalar(x, n)


# over arrays: the ops' eager faces
lgamma_ufunc = _LazyUfunc(["float32(float32)", "float64(float64)"], _lgamma_elem)
digamma_ufunc = _LazyUfunc(["float32(float32)", "float64(float64)"], _digamma_elem)
polygamma_ufunc = _LazyUfunc(["float32(float32, int64)", "float64(float64, int64)"], _polygamma_elem)
erfinv_newton = _LazyUfunc(["float32(float32)", "float64(float64)"], _erfinv_elem)   # (trunc_normal_, the erfinv op)
