"""The scalar math runtime of generated kernels: every name an op's `expr` template calls.

Generated kernel modules do `from tracejit.backends.numba_cpu.rt import *`. Each helper follows numpy's
semantics for the argument types the code generator passes (it casts the operands of each op to the op's
compute dtype first), and keeps float32 in float32: typed constants (`T(0.5)`, T the numba type of the
argument) instead of bare float literals, which would promote to float64. The transcendental functions
come from `tracejit.kernels.cpu.vmath` (polynomial, vectorizable: the pip numba has no SVML, and a libm call in the
loop blocks SIMD of the whole fused loop).
"""

import numpy as np
from numba import njit, types
from numba.core.compiler import Compiler
from numba.extending import overload

from tracejit.kernels.cpu import special, vmath

from .. import scalar_rt as S

_OPTS = dict(forceinline=True, error_model="numpy")

# vectorizable, numpy-exact-enough transcendental functions
exp = vmath.vexp
expshift = vmath.vexp        # (row kernels' exp of a row minus its max: expshift_f32/_f64, below, are cheaper)
expm1 = vmath.vexpm1
log = vmath.vlog
log1p = vmath.vlog1p
tanh = vmath.vtanh
sigmoid = vmath.vsigmoid
erf = vmath.verf
maximum = vmath.vmaximum
minimum = vmath.vminimum


@njit(**vmath._OPTS)
def relu_f32(x):
    return vmath.vmaximum(x, np.float32(0))


@njit(**vmath._OPTS)
def relu_f64(x):
    return vmath.vmaximum(x, np.float64(0))


# Per-dtype versions (exp_f32, relu_f64, ...), which the code generator calls when it knows the operand's
# dtype: numba loads them from its disk cache, where a generic name compiles its dispatching overload once
# per process and dtype (30-50 ms each, a good part of a cold first call)
TYPED = {f"{op}{sfx}": f for sfx, table in (("_f32", vmath.VMATH_F32), ("_f64", vmath.VMATH_F64))
         for op, f in table.items() if op not in ("maximum", "minimum")}
TYPED.update(relu_f32=relu_f32, relu_f64=relu_f64, expshift_f32=vmath.expshift_f32, expshift_f64=vmath.expshift_f64)
globals().update(TYPED)

# The costly functions here (tens of instructions per element, or a libm call): the code generator runs a fused
# loop with several of them in stages (codegen.stages)
HEAVY = frozenset([n for n in TYPED if not n.startswith("relu")] + [
    "exp", "expshift", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfinv", "exp2", "log2", "log10", "sin",
    "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "atan2", "fmod", "pow_", "gelu_none", "gelu_tanh",
    "softplus", "lgamma", "digamma", "polygamma"])

erfinv = special.erfinv_scalar       # (float64 inside; the kernel stores it in the output's dtype)
lgamma = special.lgamma_scalar       # (the gamma family too)
digamma = special.digamma_scalar
polygamma = special.polygamma_scalar    # polygamma(x, n)

# numpy ufuncs on scalars (numba keeps float32 as float32 for these)
exp2, log2, log10, sqrt = np.exp2, np.log2, np.log10, np.sqrt
sin, cos, tan, asin, acos, atan = np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan
sinh, cosh, atan2 = np.sinh, np.cosh, np.arctan2
floor, ceil, trunc, signbit = np.floor, np.ceil, np.trunc, np.signbit
isnan, isinf, isfinite = np.isnan, np.isinf, np.isfinite
fmax, fmin = np.fmax, np.fmin

__all__ = ["exp", "expshift", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfinv", "maximum", "minimum", "exp2",
           "log2", "log10", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "atan2", "floor", "ceil",
           "trunc", "sign", "signbit", "isnan", "isinf", "isfinite", "fmax", "fmin", "fmod", "relu", "pow_",
           "remainder", "floor_divide", "round_", "gelu_none", "gelu_tanh", "softplus", "clamp", "lgamma", "digamma",
           "polygamma", "NoAliasCompiler",
           *TYPED]


# Python stubs; numba uses the overloads below
def relu(x):
    raise NotImplementedError


def sign(x):
    raise NotImplementedError


def _zero_division():
    raise NotImplementedError


def pow_(x, y):
    raise NotImplementedError


def remainder(x, y):
    raise NotImplementedError


def floor_divide(x, y):
    raise NotImplementedError


def fmod(x, y):
    raise NotImplementedError


@overload(fmod, jit_options=_OPTS)
def _fmod(x, y):
    if isinstance(x, types.Integer):
        def ifmod(x, y):          # C semantics: the sign of the dividend (numba's np.fmod gets ints wrong)
            if y == 0:
                _zero_division()
            r = abs(x) % abs(y)
            return -r if x < 0 else r
        return ifmod
    return lambda x, y: np.fmod(x, y)


def round_(x, decimals):
    raise NotImplementedError


def gelu_none(x):
    raise NotImplementedError


def gelu_tanh(x):
    raise NotImplementedError


def softplus(x, beta, threshold):
    raise NotImplementedError


def clamp(x, lo, hi):
    raise NotImplementedError


@overload(sign, jit_options=_OPTS)
def _sign(x):
    T = x

    def impl(x):
        # PyTorch: sign(nan) = 0 and sign(-0.0) = +0 (np.sign gives nan and -0.0); branch-free, so the loop
        # around it still vectorizes (numba's np.sign does not)
        return T(x > T(0)) - T(x < T(0))
    return impl


@overload(_zero_division, jit_options=dict(error_model="numpy"))
def _ovl_zero_division():
    # integer division by zero raises, as in PyTorch and tracejit's eager ops (numpy and error_model='numpy'
    # quietly give 0); the executor turns this into PyTorch's RuntimeError("ZeroDivisionError")
    def impl():
        raise ZeroDivisionError("integer division or modulo by zero")
    return impl


@overload(relu, jit_options=_OPTS)
def _relu(x):
    return S.relu(x)


@overload(pow_, jit_options=_OPTS)
def _pow(x, y):
    if isinstance(x, types.Integer) and isinstance(y, types.Integer):
        return S.int_pow(x)

    def fpow(x, y):
        return x ** y
    return fpow


@overload(remainder, jit_options=_OPTS)
def _remainder(x, y):
    if isinstance(x, types.Integer):
        def irem(x, y):
            if y == 0:
                _zero_division()
            r = x % y
            return r
        return irem

    def frem(x, y):
        return np.remainder(x, y)
    return frem


@overload(floor_divide, jit_options=_OPTS)
def _floor_divide(x, y):
    if isinstance(x, types.Integer):
        def idiv(x, y):
            if y == 0:
                _zero_division()
            return x // y
        return idiv

    def fdiv(x, y):
        return np.floor_divide(x, y)
    return fdiv


@overload(round_, jit_options=_OPTS)
def _round(x, decimals):
    if isinstance(x, types.Integer):
        return lambda x, decimals: x

    def impl(x, decimals):
        return np.rint(x)
    return impl


@overload(gelu_none, jit_options=_OPTS)
def _gelu_none(x):
    return S.gelu_none(x, vmath.verf)


@overload(gelu_tanh, jit_options=_OPTS)
def _gelu_tanh(x):
    return S.gelu_tanh(x, vmath.vtanh)


@overload(softplus, jit_options=_OPTS)
def _softplus(x, beta, threshold):
    return S.softplus(x, vmath.vmaximum, vmath.vexp, vmath.vlog1p)


@overload(clamp, jit_options=_OPTS)
def _clamp(x, lo, hi):
    lo_none = isinstance(lo, (types.NoneType, types.Omitted)) or lo is None
    hi_none = isinstance(hi, (types.NoneType, types.Omitted)) or hi is None
    if lo_none and hi_none:
        return lambda x, lo, hi: x
    if lo_none:
        return lambda x, lo, hi: vmath.vminimum(x, hi)
    if hi_none:
        return lambda x, lo, hi: vmath.vmaximum(x, lo)
    return lambda x, lo, hi: vmath.vminimum(vmath.vmaximum(x, lo), hi)


class NoAliasCompiler(Compiler):
    """numba's compiler with `noalias` on the array arguments' data pointers, for the generated row kernels: the
    executor never passes a row kernel two arrays that share memory one of them writes (no donation into a row
    kernel's input; passes/buffers.plan gives a node's outputs and scratch memory none of its inputs hold). LLVM
    then checks no overlap at run time before each inner loop and drops the scalar fallback loops: a batch-norm
    forward's second pass vectorizes (it did not: too many arrays to check), and the ResNet step's batch-norm
    kernels compile 6-12% faster (AMD EPYC znver4)."""

    def define_pipelines(self):
        self.state.flags.noalias = True
        return super().define_pipelines()
