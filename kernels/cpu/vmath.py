"""Vectorizable math helpers for generated numba CPU kernels.

Why this exists
---------------
The pip build of llvmlite has no SVML, so ``math.exp``/``math.tanh``/... in a
numba loop become one scalar libm call per element and block SIMD
vectorization of the whole fused loop.
Every helper here is built only from arithmetic, comparisons/selects, a few
LLVM intrinsics (floor, fabs, copysign) and int<->float bit casts, so LLVM
vectorizes a loop such as ``for i in range(n): out[i] = vmath.vexp(x[i])``
(``<16 x float>`` / zmm on AVX-512, ``<8 x float>`` / ymm on AVX2).  Both the
float32 and the float64 variants are polynomial versions (none calls libm).

How generated code uses it
--------------------------
::

    from tracejit.kernels.cpu import vmath

    @numba.njit(cache=True)
    def kern(x, out):
        for i in range(x.size):
            out[i] = vmath.vexp(x[i])

The generic names (``vexp``, ``vlog``, ...) are Python stubs with a
``numba.extending.overload``: inside njit code they pick the float32 or the
float64 implementation from the argument type (float32 -> float32 result;
float64 -> float64; integers and booleans are converted to float64, like
numpy's ``np.exp(int64)``).  Called from plain Python they evaluate the same
algorithms element by element (slow; for debugging only).  The typed
implementations (``exp_f32``, ``exp_f64``, ...) are ordinary njit dispatchers
and can be called directly as well.

``VMATH`` maps op name -> generic helper, ``VMATH_NAMES`` maps op name -> the
attribute name to emit (``"vmath." + VMATH_NAMES[op]``), and ``VMATH_F32`` /
``VMATH_F64`` map op name -> typed helper.

=========  ========  =========================  ==========================
op         generic   typed                      max error measured (ulp)
                                                f32 / f64 vs exact result
=========  ========  =========================  ==========================
exp        vexp      exp_f32 / exp_f64          1.02 / 0.98
expm1      vexpm1    expm1_f32 / expm1_f64      1.41 / 1.77
log        vlog      log_f32 / log_f64          0.83 / 0.81
log1p      vlog1p    log1p_f32 / log1p_f64      0.81 / 0.83
tanh       vtanh     tanh_f32 / tanh_f64        1.72 / 1.33
sigmoid    vsigmoid  sigmoid_f32 / sigmoid_f64  1.50 / 1.47
erf        verf      erf_f32 / erf_f64          1.08 / 1.00 (vs math.erf)
maximum    vmaximum  one njit for all types     exact (numpy semantics)
minimum    vminimum  one njit for all types     exact (numpy semantics)
=========  ========  =========================  ==========================

Measured over ~8-12 million points per function and dtype (log-uniform
magnitudes over the whole finite domain, a sweep over all exponents/bit
patterns incl. denormals, and the edge cases), against a float64 reference
for float32 and a long-double reference for float64; the tests
(tests/kernels/test_vmath.py) assert <= 2 ulp (f32) / 2.5 ulp (f64).  Against
numpy's *own* float32 result the distance is <= 3 ulp for exp and <= 4 ulp
for log: numpy's AVX-512 float32 exp/log are themselves up to ~2.5/3.5 ulp off
(ours <= 1 ulp).  Relative error, where the result is a normal number:
<= 1.5e-7 (f32) and <= 2.7e-16 (f64).  float32 tanh / sigmoid / exp were also
checked on every 5th float32 bit pattern (860 million points): 1.72 / 1.50 /
1.02 ulp.  Without FMA (no FMA hardware, or TRACEJIT_VECTOR_BITS=128; helpers
use ``contract``) the compensated steps are no longer exact: over the tests'
points expm1 f64 reaches 1.92 ulp, sigmoid f64 1.87, erf f32 1.38; float32
tanh and sigmoid then compute their correction term in float64
(`_residual_f32`): 1.70 / 1.45 ulp (2.12 / 1.82 before).  Both the float32 and the float64 variants are polynomial
(nothing calls libm).

Sources of the algorithms: exp float32 a degree-6 minimax polynomial (fitted
here; Cephes expf's has one term more for no accuracy), expm1 float32 Taylor
degree 8, float64 Taylor degree 13, all with Cody-Waite reduction (n by the
round-to-nearest magic-number addition, whose bits also give 2**n) and an FMA
recombination for expm1; log/log1p fdlibm (musl) e_logf/e_log and
s_log1p(f) made branch-free; tanh float32 h/(1+h), h = expm1(2|x|)/2 from exp's
polynomial, for every |x|, with the rounding of 1+h and of the division
compensated by the residual 1 - g*(1+h) of g = 1/(1+h); float64 Cephes
small-|x| rational plus 1 - 2/(exp(2|x|)+1); sigmoid 1/(1+e) and e/(1+e),
e = exp(-|x|) without exp's overflow handling, compensated the same way;
erf float32 two least-squares polynomial fits (made here: x + x*P(x^2) below 1,
1 - exp(-x^2)*P(|x| - 2.5) above), float64 fdlibm s_erf with all 4 ranges
evaluated and selected.

Design notes
------------
* The helpers are ``@njit(fastmath={'contract'}, error_model='numpy',
  forceinline=True)``, deliberately *not* ``inline='always'``.  numba's
  ``inline='always'`` inlines at the numba-IR level and the inlined body is
  then lowered with the *caller's* fastmath flags: in a kernel compiled with
  ``fastmath=True`` it turned ``exp(nan)`` and ``exp(88.7)`` into ``inf``;
  and ``reassoc`` (the recommended kernel flag) may legally fold the
  Cody-Waite reduction and the exact-error terms used here (``(1 - d) + e``,
  ``x - (u - 1)``) to nothing.  ``forceinline=True`` instead puts LLVM's
  ``alwaysinline`` on the separately compiled helper: it is inlined into the
  caller's loop at the LLVM level (so the loop vectorizes; plain ``@njit``
  helpers like erf exceed LLVM's inline threshold and stay scalar calls)
  while every instruction keeps the helper's own flags.  Since the flags are
  given explicitly, numba does not inherit the caller's either.  The only
  flag is ``contract`` (FMA), which never changes NaN/inf behaviour.  So the
  helpers are correct whatever fastmath flags the generated kernel uses
  (``{'reassoc', 'contract'}``, ``True``, none); the tests check this.
* ``error_model='numpy'``: with the default ``'python'`` model a float
  division gets a ZeroDivisionError branch, which blocks vectorization.
* Each helper is compiled once per process per signature (``cache=True``:
  once per machine) and then linked into every kernel that calls it.
* numba's on-disk cache key of a kernel does not cover the helpers it calls.
  Include ``SOURCE_HASH`` (sha256 of this file) in the generated module's
  name / cache directory so that an edit here invalidates cached kernels.
* Integer arithmetic on bit patterns is done inside small ``@intrinsic``
  functions (numba would otherwise promote int32 arithmetic to int64 and the
  vector code would use half-width integer lanes).
* float32 code only ever uses float32 constants (numpy scalars), so nothing
  is promoted to float64.
"""

import hashlib
import math
import os

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

__all__ = [
    "VMATH", "VMATH_NAMES", "VMATH_F32", "VMATH_F64", "SOURCE_HASH",
    "vexp", "vexpm1", "vlog", "vlog1p", "vtanh", "vsigmoid", "verf",
    "vmaximum", "vminimum",
    "exp_f32", "exp_f64", "expm1_f32", "expm1_f64", "log_f32", "log_f64",
    "log1p_f32", "log1p_f64", "tanh_f32", "tanh_f64", "sigmoid_f32",
    "sigmoid_f64", "erf_f32", "erf_f64", "expshift_f32", "expshift_f64",
]

with open(os.path.abspath(__file__), "rb") as _fh:
    SOURCE_HASH = hashlib.sha256(_fh.read()).hexdigest()

# Options of every helper: explicit (so not inherited from the caller), only
# 'contract' (FMA formation); error_model='numpy' so that a float division
# cannot raise ZeroDivisionError (the raise path blocks inlining and
# vectorization).  cache=True: compiled once per machine.
_OPTS = dict(fastmath={"contract"}, error_model="numpy", forceinline=True,
             cache=True, nogil=True)


def _compiled_with_fma():
    """Whether numba's CPU code has FMA instructions (TRACEJIT_VECTOR_BITS=128 and CPUs without FMA: not; a CPU
    named by the user without its features: assumed not)."""
    from numba.core import config
    if config.CPU_NAME and not config.CPU_FEATURES:
        return False
    import llvmlite.binding as ll
    return "+fma" in (config.CPU_FEATURES or ll.get_host_cpu_features().flatten()).split(",")


_FMA = _compiled_with_fma()      # a constant to the compiled code: the branches on it are resolved at compile time


# ---------------------------------------------------------------------------
# LLVM-level building blocks (all vectorizable)
# ---------------------------------------------------------------------------

def _float_info(ty):
    """(llvm float type, llvm int type, mantissa bits, exponent bias), or
    None for a non-float type."""
    if ty == types.float32:
        return ir.FloatType(), ir.IntType(32), 23, 127
    if ty == types.float64:
        return ir.DoubleType(), ir.IntType(64), 52, 1023
    return None


def llvm_float_intrinsic(name, nargs=1):
    """An @intrinsic calling LLVM's `name` on `nargs` floats of one type (float32 or float64)."""
    def typer(typingctx, *xs):
        if _float_info(xs[0]) is None or any(x != xs[0] for x in xs):
            return None

        def codegen(context, builder, sig, args):
            ty = args[0].type
            fn = builder.module.declare_intrinsic(name, [ty], ir.FunctionType(ty, [ty] * nargs))
            return builder.call(fn, list(args))
        return xs[0](*xs), codegen
    # (named parameters: numba lowers no *args call to an @intrinsic)
    if nargs == 1:
        return intrinsic(lambda typingctx, x: typer(typingctx, x))
    return intrinsic(lambda typingctx, a, b: typer(typingctx, a, b))


_floor = llvm_float_intrinsic("llvm.floor")
_fabs = llvm_float_intrinsic("llvm.fabs")
_copysign = llvm_float_intrinsic("llvm.copysign", 2)      # copysign(mag, sgn)


@intrinsic
def _scale2(typingctx, y, nf):
    """y * 2**n for an integral float n in [-2*bias-1, 2*bias+2], computed as
    (y * 2**(n>>1)) * 2**(n - (n>>1)): correct overflow to inf and a single
    rounding into the denormal range."""
    info = _float_info(y)
    if info is None or nf != y:
        return None
    fty, ity, mbits, bias = info

    def codegen(context, builder, sig, args):
        yv, nv = args
        i32 = ir.IntType(32)
        n = builder.fptosi(nv, i32)
        n1 = builder.ashr(n, ir.Constant(i32, 1))
        n2 = builder.sub(n, n1)
        if ity.width != 32:
            n1 = builder.sext(n1, ity)
            n2 = builder.sext(n2, ity)
        s1, s2 = _pow2_pair(builder, n1, n2, info)
        return builder.fmul(builder.fmul(yv, s1), s2)
    return y(y, nf), codegen


def _pow2_pair(builder, n1, n2, info):
    """2**n1 and 2**n2 (integers of the float's width, each power normal) from their exponent bits."""
    fty, ity, mbits, bias = info
    b = ir.Constant(ity, bias)
    sh = ir.Constant(ity, mbits)
    return tuple(builder.bitcast(builder.shl(builder.add(m, b), sh), fty) for m in (n1, n2))


@intrinsic
def _pow2(typingctx, nf):
    """2**n for an integral float n with 2**n a normal number."""
    info = _float_info(nf)
    if info is None:
        return None
    fty, ity, mbits, bias = info

    def codegen(context, builder, sig, args):
        n = builder.fptosi(args[0], ir.IntType(32))
        if ity.width != 32:
            n = builder.sext(n, ity)
        bits = builder.shl(builder.add(n, ir.Constant(ity, bias)),
                           ir.Constant(ity, mbits))
        return builder.bitcast(bits, fty)
    return nf(nf), codegen


@intrinsic
def _pow2_rounded(typingctx, t):
    """2**(n + k) from t = _round_magic(k) + n (n, k integral, 2**(n + k) normal): t's low mantissa bits hold
    n + k + bias, so its bit pattern shifted left by the mantissa width is that power of two (one integer
    shift instead of a float -> int conversion and an add)."""
    info = _float_info(t)
    if info is None:
        return None
    fty, ity, mbits, bias = info

    def codegen(context, builder, sig, args):
        bits = builder.shl(builder.bitcast(args[0], ity), ir.Constant(ity, mbits))
        return builder.bitcast(bits, fty)
    return t(t), codegen


@intrinsic
def _scale2_rounded(typingctx, q, t):
    """(1 + q) * 2**n from t = _round_magic() + n, n integral in [-2*bias-1, 2*bias+2], as _scale2 does it: the
    two powers of two 2**(n>>1) and 2**(n - (n>>1)), made from t's bits by integer arithmetic (no float -> int
    conversion: defined for every t, NaN included), and (q * s1 + s1) * s2 (the first product exact, so one
    rounding with or without an FMA: (1 + q) rounded, scaled exactly, then one rounding into the denormal
    range). A NaN q gives NaN."""
    info = _float_info(q)
    if info is None or t != q:
        return None
    fty, ity, mbits, bias = info

    def codegen(context, builder, sig, args):
        qv, tv = args
        base = ((bias + mbits) << mbits) | (1 << (mbits - 1))          # the bits of 1.5 * 2**mbits
        n = builder.sub(builder.bitcast(tv, ity), ir.Constant(ity, base + bias))
        n1 = builder.ashr(n, ir.Constant(ity, 1))
        s1, s2 = _pow2_pair(builder, n1, builder.sub(n, n1), info)
        y = builder.fadd(builder.fmul(qv, s1, flags=("contract",)), s1, flags=("contract",))
        return builder.fmul(y, s2)
    return q(q, t), codegen


def _sign_bits(y, x, combine):
    """(signature, codegen) of y's bits combined (builder method `combine`: or_, xor) with x's sign bit; None
    where y is no float or x's type differs."""
    info = _float_info(y)
    if info is None or x != y:
        return None
    fty, ity = info[0], info[1]

    def codegen(context, builder, sig, args):
        sign = builder.and_(builder.bitcast(args[1], ity), ir.Constant(ity, 1 << (ity.width - 1)))
        return builder.bitcast(getattr(builder, combine)(builder.bitcast(args[0], ity), sign), fty)
    return y(y, x), codegen


@intrinsic
def _or_sign(typingctx, y, x):
    """y with x's sign bit or-ed in: copysign(y, x) for a y whose sign bit is clear or already x's (two integer
    operations instead of copysign's three)."""
    return _sign_bits(y, x, "or_")


@intrinsic
def _xor_sign(typingctx, y, x):
    """y with x's sign bit xor-ed in: y, or -y where x's sign bit is set (x NaN included)."""
    return _sign_bits(y, x, "xor")


@intrinsic
def _sign_select(typingctx, x, a, b):
    """a where x's sign bit is clear, b where it is set (-0.0 and a negative NaN included): a test of the sign
    bit, which AVX's blendv does by itself (no compare instruction, as `x >= 0` needs)."""
    info = _float_info(x)
    if info is None or a != x or b != x:
        return None
    fty, ity, mbits, bias = info

    def codegen(context, builder, sig, args):
        neg = builder.icmp_signed("<", builder.bitcast(args[0], ity), ir.Constant(ity, 0))
        return builder.select(neg, args[2], args[1])
    return x(x, a, b), codegen


def _round_magic(dt, k=0):
    """1.5 * 2**mantissa_bits + bias + k: adding it to a float y (|y| < 2**(mantissa_bits - 2)) rounds y to the
    nearest integer n in one rounding and leaves n + bias + k in the low bits (see _pow2_rounded)."""
    mbits, bias = (23, 127) if dt == np.float32 else (52, 1023)
    return dt(1.5 * 2.0 ** mbits + bias + k)


# offsets for the reduction of a positive normal x to m*2**k, m in
# [sqrt(2)/2, sqrt(2)) (the fdlibm/musl trick: add (1.0 - sqrt(2)/2) bits)
_LOGRED = {
    32: (0x3F800000 - 0x3F3504F3, 0x3F3504F3, 0x007FFFFF),
    64: (0x3FF0000000000000 - 0x3FE6A09E00000000, 0x3FE6A09E00000000,
         0x000FFFFFFFFFFFFF),
}


@intrinsic
def _log_mant(typingctx, x):
    """m with x = m * 2**k, m in [sqrt(2)/2, sqrt(2)) (x positive normal)."""
    info = _float_info(x)
    if info is None:
        return None
    fty, ity, mbits, bias = info
    off, base, mmask = _LOGRED[ity.width]

    def codegen(context, builder, sig, args):
        i = builder.add(builder.bitcast(args[0], ity), ir.Constant(ity, off))
        m = builder.add(builder.and_(i, ir.Constant(ity, mmask)),
                        ir.Constant(ity, base))
        return builder.bitcast(m, fty)
    return x(x), codegen


@intrinsic
def _log_expo(typingctx, x):
    """k (as a float) with x = m * 2**k, m in [sqrt(2)/2, sqrt(2))."""
    info = _float_info(x)
    if info is None:
        return None
    fty, ity, mbits, bias = info
    off = _LOGRED[ity.width][0]

    def codegen(context, builder, sig, args):
        i = builder.add(builder.bitcast(args[0], ity), ir.Constant(ity, off))
        k = builder.sub(builder.ashr(i, ir.Constant(ity, mbits)),
                        ir.Constant(ity, bias))
        if ity.width != 32:  # int32 -> float converts vectorize everywhere
            k = builder.trunc(k, ir.IntType(32))
        return builder.sitofp(k, fty)
    return x(x), codegen


@intrinsic
def _chop(typingctx, x):
    """x with the low half of its significand cleared (so x*x is exact)."""
    info = _float_info(x)
    if info is None:
        return None
    fty, ity, mbits, bias = info
    mask = 0xFFFFF000 if ity.width == 32 else 0xFFFFFFFF00000000

    def codegen(context, builder, sig, args):
        i = builder.and_(builder.bitcast(args[0], ity), ir.Constant(ity, mask))
        return builder.bitcast(i, fty)
    return x(x), codegen


# ---------------------------------------------------------------------------
# constants
# ---------------------------------------------------------------------------

_f = np.float32
_F_NAN = _f(np.nan)
_F_INF = _f(np.inf)
_F_0 = _f(0.0)
_F_HALF = _f(0.5)
_F_1 = _f(1.0)
_F_2 = _f(2.0)
_D_NAN = float("nan")
_D_INF = float("inf")

# exp/expm1 range reduction
_F_LOG2E = _f(1.44269504088896341)
_F_LN2HI = _f(0.693359375)          # 9 significant bits: n*LN2HI is exact
_F_LN2LO = _f(-2.12194440e-4)
_D_LOG2E = 1.4426950408889634
_D_LN2HI = 6.93147180369123816490e-01   # 0x3fe62e42fee00000
_D_LN2LO = 1.90821492927058770002e-10   # 0x3dea39ef35793c76

# exp_f32 clamp: exp(89) overflows, exp(-104) < 2**-150 rounds to 0
_F_EXP_HI = _f(89.0)
_F_EXP_LO = _f(-104.0)
_D_EXP_HI = 710.0
_D_EXP_LO = -746.0
# n = round(x / ln2) by adding these (see _round_magic); exp of a <= 0 scales by 2**24 (2**54) and back
_F_EXP_RND = _round_magic(np.float32)
_F_EXP_RND24 = _round_magic(np.float32, 24)
_D_EXP_RND = _round_magic(np.float64)
_D_EXP_RND54 = _round_magic(np.float64, 54)
_F_2M24 = _f(2.0 ** -24)
_D_2M54 = 2.0 ** -54

# exp(r) = 1 + r + r*r*P(r), |r| <= ln2/2: P of degree 4, minimax for the relative error of exp (Lawson
# iteration in float64, then rounded to float32): 3.6e-9 = 0.06 ulp, as small as the Cephes expf polynomial's
# 2.7e-9 with one term fewer (its degree-5 P is a near-Taylor fit)
_F_EP0 = _f(0.0013814553)
_F_EP1 = _f(0.008368745)
_F_EP2 = _f(0.04166839)
_F_EP3 = _f(0.16666521)
_F_EP4 = _f(0.49999994)

# Taylor coefficients 1/k!
_F_T = [_f(1.0 / math.factorial(k)) for k in range(16)]
_F_T2, _F_T3, _F_T4, _F_T5, _F_T6, _F_T7, _F_T8 = _F_T[2:9]
(_D_T2, _D_T3, _D_T4, _D_T5, _D_T6, _D_T7, _D_T8, _D_T9, _D_T10, _D_T11,
 _D_T12, _D_T13) = [1.0 / math.factorial(k) for k in range(2, 14)]

# expm1 clamps: below them expm1 rounds to -1; above them it overflows
_F_EM1_LO = _f(-30.0)
_F_EM1_HI = _f(89.0)
_F_127 = _f(127.0)
_D_EM1_LO = -40.0
_D_EM1_HI = 710.0
_D_1023 = 1023.0

# log (fdlibm / musl)
_F_LN2_HI = _f(6.9313812256e-01)    # 0x3f317180
_F_LN2_LO = _f(9.0580006145e-06)    # 0x3717f7d1
_F_LG1 = _f(0.66666662693)          # 0xaaaaaa.0p-24
_F_LG2 = _f(0.40000972152)          # 0xccce13.0p-25
_F_LG3 = _f(0.28498786688)          # 0x91e9ee.0p-25
_F_LG4 = _f(0.24279078841)          # 0xf89e26.0p-26
_F_MINNORM = _f(2.0 ** -126)
_F_TWO25 = _f(2.0 ** 25)
_F_25 = _f(25.0)
_D_LG1 = 6.666666666666735130e-01
_D_LG2 = 3.999999999940941908e-01
_D_LG3 = 2.857142874366239149e-01
_D_LG4 = 2.222219843214978396e-01
_D_LG5 = 1.818357216161805012e-01
_D_LG6 = 1.531383769920937332e-01
_D_LG7 = 1.479819860511658591e-01
_D_MINNORM = 2.0 ** -1022
_D_TWO54 = 2.0 ** 54

# tanh clamp: tanh(|x|) rounds to 1 well before these
_F_TANH_HI = _f(10.0)
_D_TANH_HI = 20.0
# tanh_f32's reduction: n = round(2|x| / ln2), its bits giving 2**(n - 1); ln2 as one float32
_F_TANH_RND = _round_magic(np.float32, -1)
_F_LN2 = _f(math.log(2.0))
# Cephes tanh: tanh(x) = x + x*z*P(z)/Q(z), |x| < 0.625
_D_THP0 = -9.64399179425052238628e-1
_D_THP1 = -9.92877231001918586564e1
_D_THP2 = -1.61468768441708447952e3
_D_THQ0 = 1.12811678491632931402e2
_D_THQ1 = 2.23548839060100448583e3
_D_THQ2 = 4.84406305325125486048e3

# erf float32: least-squares fits on Chebyshev nodes (made here), coefficients rounded to float32:
# erf(x) / x - 1 = P1(x^2) on |x| < 1, erfc(x) exp(x^2) = P2(x - 2.5) on 1 <= x <= 4
_E_P1 = tuple(_f(v) for v in (0.12837916612625122, -0.3761262595653534, 0.11283597350120544, -0.02685432881116867,
                              0.005189312156289816, -0.0008018856751732528, 7.88249890320003e-05))
_E_P2 = tuple(_f(v) for v in (0.21080635488033295, -0.07434733957052231, 0.024938203394412994,
                              -0.008001696318387985, 0.002465982222929597, -0.0007331466767936945,
                              0.0002129722124664113, -5.952957144472748e-05, 1.4353584447235335e-05,
                              -3.7444121971930144e-06, 1.6718172446417157e-06, -4.269374755949684e-07))
_F_4 = _f(4.0)
_F_2P5 = _f(2.5)

# erf float64 (fdlibm s_erf.c via musl)
_D_ERX = 8.45062911510467529297e-01
_D_EFX8 = 1.02703333676410069053e+00
(_D_PP0, _D_PP1, _D_PP2, _D_PP3, _D_PP4) = (
    1.28379167095512558561e-01, -3.25042107247001499370e-01,
    -2.84817495755985104766e-02, -5.77027029648944159157e-03,
    -2.37630166566501626084e-05)
(_D_QQ1, _D_QQ2, _D_QQ3, _D_QQ4, _D_QQ5) = (
    3.97917223959155352819e-01, 6.50222499887672944485e-02,
    5.08130628187576562776e-03, 1.32494738004321644526e-04,
    -3.96022827877536812320e-06)
(_D_PA0, _D_PA1, _D_PA2, _D_PA3, _D_PA4, _D_PA5, _D_PA6) = (
    -2.36211856075265944077e-03, 4.14856118683748331666e-01,
    -3.72207876035701323847e-01, 3.18346619901161753674e-01,
    -1.10894694282396677476e-01, 3.54783043256182359371e-02,
    -2.16637559486879084300e-03)
(_D_QA1, _D_QA2, _D_QA3, _D_QA4, _D_QA5, _D_QA6) = (
    1.06420880400844228286e-01, 5.40397917702171048937e-01,
    7.18286544141962662868e-02, 1.26171219808761642112e-01,
    1.36370839120290507362e-02, 1.19844998467991074170e-02)
(_D_RA0, _D_RA1, _D_RA2, _D_RA3, _D_RA4, _D_RA5, _D_RA6, _D_RA7) = (
    -9.86494403484714822705e-03, -6.93858572707181764372e-01,
    -1.05586262253232909814e+01, -6.23753324503260060396e+01,
    -1.62396669462573470355e+02, -1.84605092906711035994e+02,
    -8.12874355063065934246e+01, -9.81432934416914548592e+00)
(_D_SA1, _D_SA2, _D_SA3, _D_SA4, _D_SA5, _D_SA6, _D_SA7, _D_SA8) = (
    1.96512716674392571292e+01, 1.37657754143519042600e+02,
    4.34565877475229228821e+02, 6.45387271733267880336e+02,
    4.29008140027567833386e+02, 1.08635005541779435134e+02,
    6.57024977031928170135e+00, -6.04244152148580987438e-02)
(_D_RB0, _D_RB1, _D_RB2, _D_RB3, _D_RB4, _D_RB5, _D_RB6) = (
    -9.86494292470009928597e-03, -7.99283237680523006574e-01,
    -1.77579549177547519889e+01, -1.60636384855821916062e+02,
    -6.37566443368389627722e+02, -1.02509513161107724954e+03,
    -4.83519191608651397019e+02)
(_D_SB1, _D_SB2, _D_SB3, _D_SB4, _D_SB5, _D_SB6, _D_SB7) = (
    3.03380607434824582924e+01, 3.25792512996573918826e+02,
    1.53672958608443695994e+03, 3.19985821950859553908e+03,
    2.55305040643316442583e+03, 4.74528541206955367215e+02,
    -2.24409524465858183362e+01)
_D_ERF_C = 1.0 / 0.35


# ---------------------------------------------------------------------------
# exp
# ---------------------------------------------------------------------------

@njit(**_OPTS)
def _expm1_poly_f32(r):
    """exp(r) - 1 = r + r*r*P(r) on |r| <= ln2/2, P (degree 4) by Estrin's scheme: the same operations as Horner's
    but a dependency chain two multiply-adds shorter (the vectorized loops are partly latency-bound)."""
    z = r * r
    p = (_F_EP0 * z + (_F_EP1 * r + _F_EP2)) * z + (_F_EP3 * r + _F_EP4)
    return p * z + r


@njit(**_OPTS)
def _expm1_reduced_f32(xc, magic):
    """(q, t) with exp(xc) = (1 + q) * 2**n (degree-6 polynomial, exact range reduction): n = round(xc / ln2) by
    adding `magic` (_round_magic), t = magic + n, from which _pow2_rounded makes 2**(n + k). The caller folds
    the 1 + q into its scaling: (1 + q) * s as q * s + s, one FMA, the same bits."""
    t = xc * _F_LOG2E + magic
    n = t - magic
    r = xc - n * _F_LN2HI
    r = r - n * _F_LN2LO
    return _expm1_poly_f32(r), t


@njit(**_OPTS)
def exp_f32(x):
    """exp for float32 (degree-6 polynomial, exact range reduction). The clamps keep NaN (min/max
    instructions) and NaN flows through to the result."""
    xc = _F_EXP_HI if x > _F_EXP_HI else x
    xc = _F_EXP_LO if xc < _F_EXP_LO else xc
    q, t = _expm1_reduced_f32(xc, _F_EXP_RND)
    return _scale2_rounded(q, t)       # overflow to inf, gradual underflow


@njit(**_OPTS)
def _exp_core_f32(x):
    """exp for float32 x in [-87, 88] (no NaN/overflow/denormal handling). The polynomial by Horner's scheme here:
    erf_f32, its one caller, keeps many values live in its loop, and Estrin's (_expm1_poly_f32) made it ~2% slower
    (1M float32, one thread)."""
    t = x * _F_LOG2E + _F_EXP_RND
    n = t - _F_EXP_RND
    r = x - n * _F_LN2HI
    r = r - n * _F_LN2LO
    p = (((_F_EP0 * r + _F_EP1) * r + _F_EP2) * r + _F_EP3) * r + _F_EP4
    q = p * (r * r) + r
    s = _pow2_rounded(t)
    return q * s + s


@njit(**_OPTS)
def _expm1_poly_f64(r):
    """exp(r) - 1 on |r| <= ln2/2: Taylor series to degree 13 (rel. error of
    the truncation < 2e-17)."""
    q = _D_T13
    q = q * r + _D_T12
    q = q * r + _D_T11
    q = q * r + _D_T10
    q = q * r + _D_T9
    q = q * r + _D_T8
    q = q * r + _D_T7
    q = q * r + _D_T6
    q = q * r + _D_T5
    q = q * r + _D_T4
    q = q * r + _D_T3
    q = q * r + _D_T2
    return r + (r * r) * q


@njit(**_OPTS)
def _exp_reduce_f64(xc, magic):
    """exp(xc) = y * 2**n (degree-13 polynomial, two-constant reduction); n and t as in _expm1_reduced_f32."""
    t = xc * _D_LOG2E + magic
    n = t - magic
    r = xc - n * _D_LN2HI
    r = r - n * _D_LN2LO
    return 1.0 + _expm1_poly_f64(r), n, t


@njit(**_OPTS)
def exp_f64(x):
    """exp for float64 (degree-13 polynomial, two-constant reduction)."""
    xc = x if x < _D_EXP_HI else _D_EXP_HI
    xc = xc if xc > _D_EXP_LO else _D_EXP_LO
    y, n, t = _exp_reduce_f64(xc, _D_EXP_RND)
    y = _scale2(y, n)
    return x if x != x else y


@njit(**_OPTS)
def _exp_core_f64(x):
    """exp for float64 x in [-708, 709] (no NaN/overflow/denormal handling)."""
    y, n, t = _exp_reduce_f64(x, _D_EXP_RND)
    return y * _pow2_rounded(t)


# ---------------------------------------------------------------------------
# expm1
# ---------------------------------------------------------------------------

@njit(**_OPTS)
def expm1_f32(x):
    """expm1 for float32: 2**n * expm1(r) + (2**n - 1), one FMA rounding."""
    xc = x if x < _F_EM1_HI else _F_EM1_HI
    xc = xc if xc > _F_EM1_LO else _F_EM1_LO
    n = _floor(xc * _F_LOG2E + _F_HALF)
    r = xc - n * _F_LN2HI
    r = r - n * _F_LN2LO
    q = _F_T8
    q = q * r + _F_T7
    q = q * r + _F_T6
    q = q * r + _F_T5
    q = q * r + _F_T4
    q = q * r + _F_T3
    q = q * r + _F_T2
    p = r + (r * r) * q
    big = n > _F_127                 # n == 128: 2**n not representable
    m = n - _F_1 if big else n
    t = _pow2(m)
    y = t * p + (t - _F_1)
    y = y * _F_2 if big else y
    y = x if x == _F_0 else y        # keeps -0.0
    return x if x != x else y


@njit(**_OPTS)
def expm1_f64(x):
    """expm1 for float64: 2**n * expm1(r) + (2**n - 1), one FMA rounding."""
    xc = x if x < _D_EM1_HI else _D_EM1_HI
    xc = xc if xc > _D_EM1_LO else _D_EM1_LO
    n = _floor(xc * _D_LOG2E + 0.5)
    r = xc - n * _D_LN2HI
    r = r - n * _D_LN2LO
    p = _expm1_poly_f64(r)
    big = n > _D_1023
    m = n - 1.0 if big else n
    t = _pow2(m)
    y = t * p + (t - 1.0)
    y = y * 2.0 if big else y
    y = x if x == 0.0 else y
    return x if x != x else y


# ---------------------------------------------------------------------------
# log / log1p  (fdlibm: log(1+f) = f - hfsq + s*(hfsq+R), s = f/(2+f))
# ---------------------------------------------------------------------------

@njit(**_OPTS)
def _log1pf_core_f32(f):
    s = f / (_F_2 + f)
    z = s * s
    w = z * z
    t1 = w * (_F_LG2 + w * _F_LG4)
    t2 = z * (_F_LG1 + w * _F_LG3)
    hfsq = _F_HALF * f * f
    return s * (hfsq + t2 + t1), hfsq


@njit(**_OPTS)
def _log1pf_core_f64(f):
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_D_LG2 + w * (_D_LG4 + w * _D_LG6))
    t2 = z * (_D_LG1 + w * (_D_LG3 + w * (_D_LG5 + w * _D_LG7)))
    hfsq = 0.5 * f * f
    return s * (hfsq + t2 + t1), hfsq


@njit(**_OPTS)
def log_f32(x):
    """log for float32 (musl/fdlibm logf, branch-free)."""
    sub = x < _F_MINNORM
    xs = x * _F_TWO25 if sub else x
    m = _log_mant(xs)
    k = _log_expo(xs)
    k = k - _F_25 if sub else k
    f = m - _F_1
    sr, hfsq = _log1pf_core_f32(f)
    y = sr + k * _F_LN2_LO - hfsq + f + k * _F_LN2_HI
    y = x if x == _F_INF else y
    y = -_F_INF if x == _F_0 else y
    y = _F_NAN if x < _F_0 else y
    return x if x != x else y


@njit(**_OPTS)
def log_f64(x):
    """log for float64 (fdlibm e_log.c, branch-free)."""
    sub = x < _D_MINNORM
    xs = x * _D_TWO54 if sub else x
    m = _log_mant(xs)
    k = _log_expo(xs)
    k = k - 54.0 if sub else k
    f = m - 1.0
    sr, hfsq = _log1pf_core_f64(f)
    y = sr + k * _D_LN2LO - hfsq + f + k * _D_LN2HI
    y = x if x == _D_INF else y
    y = -_D_INF if x == 0.0 else y
    y = _D_NAN if x < 0.0 else y
    return x if x != x else y


@njit(**_OPTS)
def log1p_f32(x):
    """log1p for float32: log(u) + c/u with u = 1+x rounded and c = (1+x)-u
    computed exactly (fdlibm s_log1pf.c, branch-free)."""
    u = _F_1 + x
    uu = u if u < _F_INF else _F_2   # keep the core finite (inf -> selected)
    m = _log_mant(uu)
    k = _log_expo(uu)
    c = (x - (uu - _F_1)) if uu < _F_2 else (_F_1 - (uu - x))
    c = c / uu
    f = m - _F_1
    sr, hfsq = _log1pf_core_f32(f)
    y = k * _F_LN2_HI - ((hfsq - (sr + (k * _F_LN2_LO + c))) - f)
    y = x if x == _F_INF else y
    y = -_F_INF if x == -_F_1 else y
    y = _F_NAN if x < -_F_1 else y
    y = x if x == _F_0 else y        # keeps -0.0
    return x if x != x else y


@njit(**_OPTS)
def log1p_f64(x):
    """log1p for float64 (fdlibm s_log1p.c, branch-free)."""
    u = 1.0 + x
    uu = u if u < _D_INF else 2.0
    m = _log_mant(uu)
    k = _log_expo(uu)
    c = (x - (uu - 1.0)) if uu < 2.0 else (1.0 - (uu - x))
    c = c / uu
    f = m - 1.0
    sr, hfsq = _log1pf_core_f64(f)
    y = k * _D_LN2HI - ((hfsq - (sr + (k * _D_LN2LO + c))) - f)
    y = x if x == _D_INF else y
    y = -_D_INF if x == -1.0 else y
    y = _D_NAN if x < -1.0 else y
    y = x if x == 0.0 else y
    return x if x != x else y


# ---------------------------------------------------------------------------
# tanh, sigmoid
# ---------------------------------------------------------------------------

@njit(**_OPTS)
def _residual_f32(omg, g, h):
    """omg - g*h with the product exact (tanh's and sigmoid's correction term): one FMA, or, where the code has
    no FMA, in float64 (a product of two float32 is exact there): without it tanh reached 2.12 ulp and sigmoid
    1.82 over 4M points (1.67 / 1.45 with FMA)."""
    if _FMA:
        return omg - g * h
    return np.float32(np.float64(omg) - np.float64(g) * np.float64(h))


@njit(**_OPTS)
def tanh_f32(x):
    """tanh for float32, one formula for every |x| (no second polynomial and select): h = expm1(2|x|) / 2 from
    exp's polynomial, then tanh = h / (1 + h) = 1 - g with g = 1/(1 + h) rounded, corrected by its residual
    res = 1 - g * (1 + h) = (1 - g) - g * h (one FMA; 1 - g is exact while g >= 1/2, and where it is not, tanh
    > 0.46 and that rounding is damped): 1 - g - res * g. So the rounding of 1 + h and of the division cancel;
    what is left is h's own rounding (up to ~1 ulp of tanh where h and tanh sit at opposite ends of their
    binades) and the last one. One division and 11 multiplies/FMAs (the old two-formula version: 17 and a
    compare and blend). The reduction 2|x| - n * ln2 uses one float32 ln2: its error, n * 1.9e-9 absolute in
    the reduced argument (n <= 29 here, 0 for |x| < 0.17), moves tanh by 2e/(e+1)**2 (<= 1/2) times that
    (e = exp(2|x|)): < 0.1 ulp where n > 0."""
    a = _fabs(x)
    a = _F_TANH_HI if a > _F_TANH_HI else a          # tanh(10) rounds to 1; NaN stays NaN
    a2 = a + a
    t = a2 * _F_LOG2E + _F_TANH_RND
    n = t - _F_TANH_RND
    q = _expm1_poly_f32(a2 - n * _F_LN2)
    s = _pow2_rounded(t)                             # 2**(n - 1): n >= 0, so s - 1/2 is exact
    h = q * s + (s - _F_HALF)
    g = _F_1 / (h + _F_1)
    omg = _F_1 - g
    res = _residual_f32(omg, g, h)
    return _or_sign(omg - res * g, x)                # (>= 0 before the sign); tanh(-0.0) = -0.0


@njit(**_OPTS)
def tanh_f64(x):
    """tanh for float64: Cephes rational x + x*z*P(z)/Q(z) for |x| < 0.625,
    else sign(x) * (1 - 2/(exp(2|x|) + 1)); NaN flows through."""
    a = _fabs(x)
    a = _D_TANH_HI if a > _D_TANH_HI else a
    z = x * x
    ys = x + x * (z * ((_D_THP0 * z + _D_THP1) * z + _D_THP2)
                  / (((z + _D_THQ0) * z + _D_THQ1) * z + _D_THQ2))
    e = _exp_core_f64(a + a)
    yl = 1.0 - 2.0 / (e + 1.0)
    return _copysign(ys if a < 0.625 else yl, x)


@njit(**_OPTS)
def _exp_nonpos_f32(a):
    """exp(a) for a <= 0 (NaN gives NaN): results below 2**-126 by one rounding into
    the denormal range, as exp_f32 gives them, but cheaper than its two-sided
    scaling: y * 2**(n + 24) is normal for every n here (n >= -150), then
    one multiply by 2**-24."""
    a = _F_EXP_LO if a < _F_EXP_LO else a         # NaN stays NaN
    q, t = _expm1_reduced_f32(a, _F_EXP_RND24)
    s = _pow2_rounded(t)
    return (q * s + s) * _F_2M24


@njit(**_OPTS)
def sigmoid_f32(x):
    """1/(1+exp(-x)) for float32: e = exp(-|x|), g = 1/(1 + e) rounded (sigmoid(|x|), in [1/2, 1]) and its
    residual res = 1 - g * (1 + e) = (1 - g) - g * e (1 - g exact), so that 1/(1 + e) = g + res * g and
    e/(1 + e) = (1 - g) - res * g, each one FMA: the rounding of 1 + e and of the division compensated, one
    division. The sign of x picks the form (a blend on x's sign bit); NaN flows through (e is NaN)."""
    e = _exp_nonpos_f32(-_fabs(x))
    g = _F_1 / (_F_1 + e)
    omg = _F_1 - g
    res = _residual_f32(omg, g, e)
    return res * _xor_sign(g, x) + _sign_select(x, g, omg)


@njit(**_OPTS)
def _exp_nonpos_f64(a):
    """exp(a) for a <= 0 (NaN gives NaN), denormal results as in _exp_nonpos_f32
    (n >= -1076: y * 2**(n + 54) is normal)."""
    a = _D_EXP_LO if a < _D_EXP_LO else a
    y, n, t = _exp_reduce_f64(a, _D_EXP_RND54)
    return (y * _pow2_rounded(t)) * _D_2M54


@njit(**_OPTS)
def sigmoid_f64(x):
    """1/(1+exp(-x)) for float64 (sigmoid_f32's scheme)."""
    e = _exp_nonpos_f64(-_fabs(x))
    g = 1.0 / (1.0 + e)
    omg = 1.0 - g
    res = omg - g * e
    return res * _xor_sign(g, x) + _sign_select(x, g, omg)


@njit(**_OPTS)
def expshift_f32(x):
    """exp(x) of a row shifted by its max (softmax, log_softmax, logsumexp), x <= 0: exp_f32's result, bit for
    bit, without its overflow handling (~1.25x faster); x itself where x > 0 or NaN, which happens only in a
    row holding +inf or NaN, whose sum is then inf or NaN whatever the other terms are."""
    y = _exp_nonpos_f32(x if x < _F_0 else _F_0)
    return y if x <= _F_0 else x


@njit(**_OPTS)
def expshift_f64(x):
    """expshift_f32 for float64."""
    y = _exp_nonpos_f64(x if x < 0.0 else 0.0)
    return y if x <= 0.0 else x


# ---------------------------------------------------------------------------
# erf  (fdlibm s_erf.c / s_erff.c, all branches evaluated and selected)
# ---------------------------------------------------------------------------

@njit(**_OPTS)
def erf_f32(x):
    """erf for float32: x + x * P1(x^2) for |x| < 1, else 1 - exp(-x^2) * P2(|x| - 2.5) with |x| clamped at 4
    (erf rounds to 1 in float32 from 3.92 on). Both are evaluated and one selected: no branch in a
    vectorized loop (fdlibm's four ranges with five divisions and two exps cost 5x more)."""
    a = _fabs(x)
    t = x * x
    p = _E_P1[6]
    for k in range(5, -1, -1):
        p = p * t + _E_P1[k]
    b = a if a < _F_4 else _F_4
    s = b - _F_2P5
    q = _E_P2[11]
    for k in range(10, -1, -1):
        q = q * s + _E_P2[k]
    big = _copysign(_F_1 - _exp_core_f32(-(b * b)) * q, x)
    y = x + x * p if a < _F_1 else big
    return x if x != x else y


@njit(**_OPTS)
def erf_f64(x):
    """erf for float64 (fdlibm s_erf.c, branch-free)."""
    a = _fabs(x)
    z = x * x
    r = _D_PP0 + z * (_D_PP1 + z * (_D_PP2 + z * (_D_PP3 + z * _D_PP4)))
    s = 1.0 + z * (_D_QQ1 + z * (_D_QQ2 + z * (_D_QQ3 + z * (_D_QQ4
                                                            + z * _D_QQ5))))
    y_small = 0.125 * (8.0 * a + (8.0 * a) * (r / s))
    t = a - 1.0
    p = _D_PA0 + t * (_D_PA1 + t * (_D_PA2 + t * (_D_PA3 + t * (
        _D_PA4 + t * (_D_PA5 + t * _D_PA6)))))
    q = 1.0 + t * (_D_QA1 + t * (_D_QA2 + t * (_D_QA3 + t * (
        _D_QA4 + t * (_D_QA5 + t * _D_QA6)))))
    y_mid = _D_ERX + p / q
    b = a if a > 1.25 else 1.25
    b = b if b < 6.0 else 6.0
    v = 1.0 / (b * b)
    lo = b < _D_ERF_C
    c0 = _D_RA0 if lo else _D_RB0
    c1 = _D_RA1 if lo else _D_RB1
    c2 = _D_RA2 if lo else _D_RB2
    c3 = _D_RA3 if lo else _D_RB3
    c4 = _D_RA4 if lo else _D_RB4
    c5 = _D_RA5 if lo else _D_RB5
    c6 = _D_RA6 if lo else _D_RB6
    c7 = _D_RA7 if lo else 0.0
    d1 = _D_SA1 if lo else _D_SB1
    d2 = _D_SA2 if lo else _D_SB2
    d3 = _D_SA3 if lo else _D_SB3
    d4 = _D_SA4 if lo else _D_SB4
    d5 = _D_SA5 if lo else _D_SB5
    d6 = _D_SA6 if lo else _D_SB6
    d7 = _D_SA7 if lo else _D_SB7
    d8 = _D_SA8 if lo else 0.0
    rr = c0 + v * (c1 + v * (c2 + v * (c3 + v * (c4 + v * (c5 + v * (
        c6 + v * c7))))))
    ss = 1.0 + v * (d1 + v * (d2 + v * (d3 + v * (d4 + v * (d5 + v * (
        d6 + v * (d7 + v * d8)))))))
    zc = _chop(b)
    ex = (_exp_core_f64(-zc * zc - 0.5625)
          * _exp_core_f64((zc - b) * (zc + b) + rr / ss))
    y_big = 1.0 - ex / b
    y = y_small if a < 0.84375 else (y_mid if a < 1.25 else (
        y_big if a < 6.0 else 1.0))
    y = _copysign(y, x)
    return x if x != x else y


# ---------------------------------------------------------------------------
# NaN-propagating maximum / minimum (numpy semantics)
# ---------------------------------------------------------------------------

@njit(**_OPTS)
def vmaximum(a, b):
    """np.maximum semantics: NaN if either is NaN, else (a if a > b else b)."""
    return a if (a > b or a != a) else b


@njit(**_OPTS)
def vminimum(a, b):
    """np.minimum semantics: NaN if either is NaN, else (a if a < b else b)."""
    return a if (a < b or a != a) else b


# ---------------------------------------------------------------------------
# generic (type-dispatching) names
# ---------------------------------------------------------------------------

def _make_generic(name, f32, f64, doc):
    def stub(x):
        # plain-Python fallback (debugging only): same algorithms, elementwise
        arr = np.asarray(x)
        if arr.dtype == np.float32:
            impl, dt = f32, np.float32
        else:
            impl, dt = f64, np.float64
            arr = arr.astype(np.float64)
        if arr.ndim == 0:
            return dt(impl(arr[()]))
        flat = [impl(v) for v in arr.ravel()]
        return np.array(flat, dtype=dt).reshape(arr.shape)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    stub.__module__ = __name__

    def _call_f32(x):
        return f32(x)

    def _call_f64(x):
        return f64(x)

    def _call_cast(x):
        return f64(np.float64(x))

    @overload(stub, jit_options=dict(fastmath={"contract"},
                                     error_model="numpy", forceinline=True,
                                     nogil=True))
    def _ol(x):
        if x == types.float32:
            return _call_f32
        if x == types.float64:
            return _call_f64
        if isinstance(x, (types.Integer, types.Boolean)):
            return _call_cast
        return None

    return stub


vexp = _make_generic("vexp", exp_f32, exp_f64, "exp(x): see module doc.")
vexpm1 = _make_generic("vexpm1", expm1_f32, expm1_f64,
                       "expm1(x) = exp(x) - 1: see module doc.")
vlog = _make_generic("vlog", log_f32, log_f64, "log(x): see module doc.")
vlog1p = _make_generic("vlog1p", log1p_f32, log1p_f64,
                       "log1p(x) = log(1 + x): see module doc.")
vtanh = _make_generic("vtanh", tanh_f32, tanh_f64, "tanh(x): see module doc.")
vsigmoid = _make_generic("vsigmoid", sigmoid_f32, sigmoid_f64,
                         "1 / (1 + exp(-x)): see module doc.")
verf = _make_generic("verf", erf_f32, erf_f64, "erf(x): see module doc.")


VMATH = {
    "exp": vexp,
    "expm1": vexpm1,
    "log": vlog,
    "log1p": vlog1p,
    "tanh": vtanh,
    "sigmoid": vsigmoid,
    "erf": verf,
    "maximum": vmaximum,
    "minimum": vminimum,
}

# op name -> attribute name of this module to emit in generated source
VMATH_NAMES = {op: fn.__name__ for op, fn in VMATH.items()}

VMATH_F32 = {
    "exp": exp_f32, "expm1": expm1_f32, "log": log_f32, "log1p": log1p_f32,
    "tanh": tanh_f32, "sigmoid": sigmoid_f32, "erf": erf_f32,
    "maximum": vmaximum, "minimum": vminimum,
}
VMATH_F64 = {
    "exp": exp_f64, "expm1": expm1_f64, "log": log_f64, "log1p": log1p_f64,
    "tanh": tanh_f64, "sigmoid": sigmoid_f64, "erf": erf_f64,
    "maximum": vmaximum, "minimum": vminimum,
}
