"""The scalar math runtime of generated CUDA kernels: every name an op's `expr` template calls, per dtype.

The CPU runtime (`numba_cpu/rt.py`) keeps float32 work in float32 with numba `@overload`s that read the
argument's type. CUDA device functions cannot do that, and the simulator runs them as plain Python, so here
each helper is made per compute dtype: the code generator writes `relu__float32(x)` where the template says
`relu(x)`, and this module builds `relu__float32` on first import (PEP 562 `__getattr__`) from a factory
closed over `T = np.float32`. `T(...)` casts keep results in the op's dtype on the GPU (a bare literal would
promote to float64) and in the simulator (where `math.*` returns Python floats).

Each helper follows numpy's semantics (NaN propagation, signed zeros, inf/NaN for domain errors), except that
an integer division by zero gives 0 here: a GPU thread cannot raise, where the CPU kernels and eager mode raise
PyTorch's RuntimeError("ZeroDivisionError"). Domain checks come first: Python's `math` raises where CUDA's
libm returns NaN/inf, and the simulator runs Python's.
"""
import math

import numpy as np
from numba import cuda

from .. import scalar_rt as S

_dev = cuda.jit(device=True)

_FACTORIES = {}


def _factory(fn):
    _FACTORIES[fn.__name__.lstrip("_")] = fn
    return fn


def _helper(base, T):
    """The device function `base` of dtype T (`exp__float32`), made on first use: a primitive of `scalar_rt`'s
    helpers."""
    name = f"{base}__{np.dtype(T).name}"
    return globals().get(name) or __getattr__(name)


def __getattr__(name):
    # `relu__float32` -> _relu(np.float32), compiled lazily by numba for the dtypes it meets
    base, sep, dt = name.rpartition("__")
    if not sep or base not in _FACTORIES or not hasattr(np, dt):
        raise AttributeError(name)
    T = getattr(np, dt)
    f = _dev(_FACTORIES[base](T, _consts(T)))
    globals()[name] = f
    return f


NAMES = None   # filled below: the template names this runtime provides


class _C:
    """Typed constants of one dtype."""

    def __init__(self, T):
        isf = np.dtype(T).kind == "f"
        self.zero, self.one, self.half, self.two = T(0), T(1), (T(0.5) if isf else T(0)), T(2)
        self.nan = T(np.nan) if isf else T(0)
        self.inf = T(np.inf) if isf else T(0)
        fi = np.finfo(T) if isf else None
        # |x| at or above this is already an integer (float32: 2**23, float64: 2**52)
        self.big = T(2.0 ** (fi.nmant if fi else 0))
        self.exp_hi = T(np.log(fi.max)) if fi else T(0)     # exp overflows above
        self.isf = isf


def _consts(T):
    return _C(T)


# ----------------------------------------------------------------------------- exp / log family

@_factory
def _exp(T, c):
    hi, inf = c.exp_hi, c.inf

    def f(x):
        if x > hi:
            return inf
        return T(math.exp(x))
    return f


@_factory
def _expm1(T, c):
    hi, inf = c.exp_hi, c.inf

    def f(x):
        if x > hi:
            return inf
        return T(math.expm1(x))
    return f


@_factory
def _exp2(T, c):
    hi, inf, two = T(c.exp_hi / np.log(2.0)) if c.isf else c.zero, c.inf, c.two

    def f(x):
        if x > hi:
            return inf
        return T(math.pow(two, x))
    return f


def _log_like(T, c, fn, lo):
    """log-type function with its pole at `lo`: below -> nan, at -> -inf."""
    nan, inf = c.nan, c.inf

    def f(x):
        if x > lo:
            return T(fn(x))
        if x == lo:
            return -inf
        return nan       # x < lo, or x is NaN
    return f


@_factory
def _log(T, c):
    return _log_like(T, c, math.log, c.zero)


@_factory
def _log2(T, c):
    return _log_like(T, c, math.log2, c.zero)


@_factory
def _log10(T, c):
    return _log_like(T, c, math.log10, c.zero)


@_factory
def _log1p(T, c):
    return _log_like(T, c, math.log1p, -c.one)


@_factory
def _sqrt(T, c):
    nan, zero = c.nan, c.zero

    def f(x):
        if x >= zero:
            return T(math.sqrt(x))
        return nan
    return f


@_factory
def _sigmoid(T, c):
    one, zero = c.one, c.zero

    def f(x):
        if x != x:
            return x
        if x >= zero:
            return T(one / (one + T(math.exp(-x))))
        if x < T(-700):
            return zero
        z = T(math.exp(x))
        return T(z / (one + z))
    return f


@_factory
def _tanh(T, c):
    return lambda x: T(math.tanh(x))


@_factory
def _erf(T, c):
    return lambda x: T(math.erf(x))


@_factory
def _erfinv(T, c):
    def f(y):
        return T(_erfinv64(float(y)))
    return f


# The gamma family and erfinv: device copies of the CPU runtime's own functions, compiled from the same factories
# (tracejit.kernels.cpu.special), float64 inside
def _gamma_family():
    import types
    from tracejit.kernels.cpu import special as sp
    digamma, zeta = _dev(sp.digamma_fn()), _dev(sp.hurwitz_zeta_fn())
    pg = sp.polygamma_fn()          # (it calls _digamma64 and _zeta64 by global name: here, the device functions)
    pg = types.FunctionType(pg.__code__, {**pg.__globals__, "_digamma64": digamma, "_zeta64": zeta}, pg.__name__)
    return _dev(sp.lgamma_fn()), digamma, _dev(pg), _dev(sp.erfinv_fn())


_lgamma64, _digamma64, _polygamma64, _erfinv64 = _gamma_family()


@_factory
def _lgamma(T, c):
    return lambda x: T(_lgamma64(float(x)))


@_factory
def _digamma(T, c):
    return lambda x: T(_digamma64(float(x)))


@_factory
def _polygamma(T, c):
    return lambda x, n: T(_polygamma64(float(x), int(n)))     # (the code generator passes n in the dtype T)


# ----------------------------------------------------------------------------- trigonometric / hyperbolic

def _periodic(T, c, fn):
    nan, inf = c.nan, c.inf

    def f(x):
        if x == inf or x == -inf:
            return nan
        return T(fn(x))
    return f


@_factory
def _sin(T, c):
    return _periodic(T, c, math.sin)


@_factory
def _cos(T, c):
    return _periodic(T, c, math.cos)


@_factory
def _tan(T, c):
    return _periodic(T, c, math.tan)


def _unit_domain(T, c, fn):
    nan, one = c.nan, c.one

    def f(x):
        if x >= -one and x <= one:
            return T(fn(x))
        return nan
    return f


@_factory
def _asin(T, c):
    return _unit_domain(T, c, math.asin)


@_factory
def _acos(T, c):
    return _unit_domain(T, c, math.acos)


@_factory
def _atan(T, c):
    return lambda x: T(math.atan(x))


@_factory
def _atan2(T, c):
    return lambda y, x: T(math.atan2(y, x))


@_factory
def _sinh(T, c):
    inf = c.inf

    def f(x):
        if x > T(710):
            return inf
        if x < T(-710):
            return -inf
        return T(math.sinh(x))
    return f


@_factory
def _cosh(T, c):
    inf = c.inf

    def f(x):
        if x > T(710) or x < T(-710):
            return inf
        return T(math.cosh(x))
    return f


# ----------------------------------------------------------------------------- rounding

def _rounding(T, c, fn):
    big = c.big

    def f(x):
        if not (abs(x) < big):       # NaN, inf and large values are integers already
            return x
        return T(math.copysign(T(fn(x)), x))    # keeps -0.0 for floor(-0.0), ceil(-0.5), ...
    return f


@_factory
def _floor(T, c):
    return _rounding(T, c, math.floor)


@_factory
def _ceil(T, c):
    return _rounding(T, c, math.ceil)


def _trunc_py(x):
    return math.floor(x) if x >= 0 else math.ceil(x)     # (numpy scalars have no __trunc__)


@_factory
def _trunc(T, c):
    return _rounding(T, c, _dev(_trunc_py))


@_factory
def _round_(T, c):
    if not c.isf:
        return lambda x, decimals: x
    big, half, one = c.big, c.half, c.one

    def f(x, decimals):          # numpy's rint: halves to even (Python's round() would go through float64)
        if not (abs(x) < big):
            return x
        r = T(math.floor(x))
        d = T(x - r)
        if d > half or (d == half and T(math.floor(T(r * half))) != T(r * half)):
            r = T(r + one)
        return T(math.copysign(r, x))
    return f


# ----------------------------------------------------------------------------- sign and classification

@_factory
def _sign(T, c):
    zero, one = c.zero, c.one

    def f(x):
        if x > zero:
            return one
        if x < zero:
            return -one
        return zero          # 0, -0 and NaN (PyTorch: sign(nan) = 0)
    return f


@_factory
def _signbit(T, c):
    if not c.isf:
        zero = c.zero
        return lambda x: x < zero
    one, zero = c.one, c.zero
    return lambda x: math.copysign(one, x) < zero


@_factory
def _isnan(T, c):
    return lambda x: x != x


@_factory
def _isinf(T, c):
    if not c.isf:
        return lambda x: False
    inf = c.inf
    return lambda x: x == inf or x == -inf


@_factory
def _isfinite(T, c):
    if not c.isf:
        return lambda x: True
    inf = c.inf
    return lambda x: x == x and x != inf and x != -inf


# ----------------------------------------------------------------------------- min / max

@_factory
def _maximum(T, c):
    return lambda x, y: x if (x > y or x != x) else y       # NaN in either -> NaN


@_factory
def _minimum(T, c):
    return lambda x, y: x if (x < y or x != x) else y


@_factory
def _fmax(T, c):
    return lambda x, y: x if (x >= y or y != y) else y      # NaN only if both are


@_factory
def _fmin(T, c):
    return lambda x, y: x if (x <= y or y != y) else y


@_factory
def _relu(T, c):
    return S.relu(T)


@_factory
def _clamp(T, c):
    def f(x, lo, hi):
        if lo is not None:
            x = x if (x >= lo or x != x) else lo
        if hi is not None:
            x = x if (x <= hi or x != x) else hi
        return x
    return f


# ----------------------------------------------------------------------------- division family

@_factory
def _fmod(T, c):
    zero = c.zero
    if not c.isf:
        def ifmod(x, y):
            if y == zero:
                return zero
            r = x % y                                  # floor mod -> C's truncated mod
            if r != zero and (x < zero) != (y < zero):
                r -= y
            return T(r)
        return ifmod
    nan, inf = c.nan, c.inf

    def f(x, y):
        if y == zero or x != x or y != y or x == inf or x == -inf:
            return nan
        if y == inf or y == -inf:
            return x
        return T(math.fmod(x, y))
    return f


@_factory
def _remainder(T, c):
    zero = c.zero
    if not c.isf:
        def irem(x, y):
            if y == zero:
                return zero
            return T(x % y)
        return irem
    fmod = _dev(_fmod(T, c))

    def f(x, y):
        m = fmod(x, y)
        if m != m:
            return m
        if m != zero:
            if (y < zero) != (m < zero):
                m = T(m + y)
        else:
            m = T(math.copysign(zero, y))
        return m
    return f


@_factory
def _floor_divide(T, c):
    zero = c.zero
    if not c.isf:
        def idiv(x, y):
            if y == zero:
                return zero
            return T(x // y)
        return idiv
    one, half, nan, inf, c_big = c.one, c.half, c.nan, c.inf, c.big
    fmod = _dev(_fmod(T, c))

    def f(x, y):          # numpy's npy_floor_divide
        if y == zero:
            if x == zero or x != x:
                return nan
            return inf if (x > zero) == (math.copysign(one, y) > zero) else -inf
        if x != x or y != y:
            return nan
        m = fmod(x, y)
        if m != m:        # x is +-inf
            return nan
        d = T((x - m) / y)
        if m != zero and ((y < zero) != (m < zero)):
            d = T(d - one)
        if d != zero:
            fd = T(math.floor(d)) if abs(d) < c_big else d
            if T(d - fd) > half:
                fd = T(fd + one)
            return fd
        return T(math.copysign(zero, T(x / y)))
    return f


@_factory
def _pow_(T, c):
    if not c.isf:
        return S.int_pow(T)
    return lambda x, y: T(x ** y)


# ----------------------------------------------------------------------------- activations

@_factory
def _gelu_none(T, c):
    return S.gelu_none(T, _helper("erf", T))


@_factory
def _gelu_tanh(T, c):
    return S.gelu_tanh(T, _helper("tanh", T))


@_factory
def _softplus(T, c):
    return S.softplus(T, _helper("maximum", T), _helper("exp", T), _helper("log1p", T))


NAMES = frozenset(_FACTORIES)
