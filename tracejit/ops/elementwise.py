"""Pointwise ops: each a registry entry with its numpy kernel, dtype rule, VJP and scalar expression.

Scalar expressions are Python expressions over `{0}`, `{1}`... (inputs) and `{name}` (attributes); the
names they call (exp, log, tanh, sigmoid, erf, maximum, ...) are the math runtime of the code generator.
"""
import math
import types

import numpy as np

from .. import _dtype as D
from .registry import AVal, aval_of, broadcast_shapes, defop, apply

np.seterr(all="ignore")  # PyTorch does not warn on inf/nan results; neither do we

# ----------------------------------------------------------------------------- dtype rules

def _floatify(dt):
    return dt if dt.is_floating_point else D.get_default_dtype()


RULES = {
    "promote": lambda *xs: D.result_type(*xs),
    "float": lambda *xs: _floatify(D.result_type(*xs)),
    "bool": lambda *xs: D.bool_,
    "same": lambda x, *r: aval_of(x).dtype,
}


def _np_dtype_of(x):
    d = getattr(x, "dtype", None)
    return D._FROM_NP[d] if isinstance(d, np.dtype) else d


class _NP:
    """Adapter so dtype rules see numpy arrays the way they see tensors."""
    __slots__ = ("dtype", "ndim")

    def __init__(self, a):
        self.dtype = D._FROM_NP[a.dtype]
        self.ndim = a.ndim


def _compute_dtype(rule, args):
    """The dtype inputs are cast to before computing ('bool' ops compare in the promoted type)."""
    xs = [_NP(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in args]
    if rule == "bool":
        return D.result_type(*xs), D.bool_
    dt = RULES[rule](*xs)
    return dt, dt


_SCALAR_CAT = {bool: 0, int: 1, float: 2}


def _uncast_dtype(args):
    """The dtype the arrays among `args` share when it already is PyTorch's result type (Python scalars of
    no higher category may join): the common case, where nothing is cast and PyTorch's zero-dim tiers
    cannot matter. None otherwise. A cheap stand-in for `_compute_dtype` on the per-op hot path."""
    npd = None
    cat = -1
    for a in args:
        if type(a) is np.ndarray:
            if npd is None:
                npd = a.dtype
            elif a.dtype != npd:
                return None
        else:
            c = _SCALAR_CAT.get(type(a))
            if c is None:
                return None
            if c > cat:
                cat = c
    dt = D._FROM_NP.get(npd)
    return dt if dt is not None and cat <= dt._cat else None


def _eager(np_fn, rule):
    if rule == "same":
        if isinstance(np_fn, types.FunctionType):
            return np_fn        # already takes (x, **attrs)
        def impl(x, **attrs):   # a ufunc: a stray second argument must not become its `out`
            return np_fn(x, **attrs)
        return impl
    fast = rule in ("promote", "float", "bool")   # rules whose result `_uncast_dtype` can stand in for
    ufunc = isinstance(np_fn, np.ufunc) and np_fn.nout == 1
    to_float, to_bool = rule == "float", rule == "bool"

    def impl(*args, **attrs):
        dt = _uncast_dtype(args) if fast else None
        if dt is not None and (dt.is_floating_point or not to_float):
            odt = D.bool_ if to_bool else dt
        else:
            cdt, odt = _compute_dtype(rule, args)
            npd = cdt.np
            cast = [a.astype(npd) if isinstance(a, np.ndarray) and a.dtype != npd else a for a in args]
            copies = [c for a, c in zip(args, cast) if c is not a]
            if copies and ufunc and odt is cdt and not attrs:
                # write the result into a cast copy of the output's shape (a float * bool mask, say): a fresh
                # big output costs more in page faults than the multiply (numpy elides such temporaries in
                # `a * b`, not in a ufunc call)
                shape = np.broadcast_shapes(*[np.shape(a) for a in cast])
                for c in copies:
                    if c.shape == shape:
                        return np_fn(*cast, out=c)
            args = cast
        out = np_fn(*args, **attrs)
        if out.dtype != odt.np:
            out = np.asarray(out).astype(odt.np)
        return out
    return impl


def _meta(rule):
    def meta(*args, **attrs):
        shape = broadcast_shapes(*[aval_of(a).shape for a in args if not _is_scalar(a)])
        dt = RULES[rule](*args) if rule != "same" else aval_of(args[0]).dtype
        return AVal(shape, dt)
    return meta


def _is_scalar(a):
    return isinstance(a, (int, float, bool, np.number, np.bool_))


def pointwise(name, np_fn, vjp, expr, rule="promote", saves="i", **kw):
    return defop(name, _eager(np_fn, rule), _meta(rule), vjp, kind="elementwise", expr=expr, saves=saves,
                 dtype_rule=rule, **kw)


# ----------------------------------------------------------------------------- unary ops

def _g(f):
    """VJP of a unary op from f(ctx, g) -> grad."""
    return lambda ctx, g: (f(ctx, g),)


def _x(ctx):
    return ctx.inputs[0]


SQRT_2_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_C = 0.044715                   # the tanh form's cubic coefficient


def _gelu_np(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(x.dtype.type(SQRT_2_PI) * (x + x.dtype.type(GELU_C) * x * x * x)))
    if x.dtype == np.float32 or x.dtype == np.float64:
        from .._special import gelu
        return gelu(x, INV_SQRT_2)      # the line below in one pass
    from .._special import erf
    return 0.5 * x * (1 + erf(x * x.dtype.type(INV_SQRT_2)))


def _gelu_vjp(ctx, g):
    return apply(_R["gelu_backward"], g, _x(ctx), approximate=ctx.attrs.get("approximate", "none"))


def _gelu_backward_np(g, x, approximate="none"):
    from .._special import gelu_backward
    out = gelu_backward(g, x, (0.5, 1.0, INV_SQRT_2, INV_SQRT_2PI, SQRT_2_PI, GELU_C, 3.0), approximate == "tanh")
    return out.astype(x.dtype, copy=False)


def _gelu_backward_parts(g, x, approximate="none"):
    """g * gelu'(x) with registry ops: eager runs one numba loop (`_special.gelu_backward`, the same formula);
    compiled backends lower to these parts, whose erf or tanh CSE shares with the forward's (see _gelu_parts)."""
    if approximate == "tanh":
        t = tanh(SQRT_2_PI * (x + GELU_C * x * x * x))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_PI * (1 + 3 * GELU_C * x * x)
    else:
        d = 0.5 * (1 + erf(x * INV_SQRT_2)) + x * exp(-0.5 * x * x) * INV_SQRT_2PI
    return g * d


def _gelu_backward_vjp(ctx, gg):
    """d/dg = gelu'(x); d/dx = g * gelu''(x): exact, phi(x) (2 - x^2); tanh form, with u = k (x + c x^3),
    t = tanh(u): (1 - t^2) (u' - x t u'^2 + 3 c k x^2)."""
    g, x = ctx.inputs
    approximate = ctx.attrs.get("approximate", "none")
    if approximate == "tanh":
        k, c = SQRT_2_PI, GELU_C
        t = tanh(k * (x + c * x * x * x))
        du = k * (1 + 3 * c * x * x)
        d2 = (1 - t * t) * (du - x * t * du * du + 3 * c * k * x * x)
    else:
        d2 = exp(-0.5 * x * x) * INV_SQRT_2PI * (2 - x * x)
    gg_g = apply(_R["gelu_backward"], gg, x, approximate=approximate) if ctx.edges[0] is not None else None
    return gg_g, gg * g * d2


def _sigmoid_np(x):
    # stable for large |x|; float32 stays float32
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _softplus_np(x, beta=1.0, threshold=20.0):
    bx = x * x.dtype.type(beta)
    return np.where(bx > threshold, x, np.logaddexp(bx, x.dtype.type(0)) / x.dtype.type(beta)).astype(x.dtype, copy=False)


def _erf_np(x):
    from .._special import erf
    return erf(x)


def _erfinv_np(x):
    from .._special import erfinv
    return erfinv(x)


def _lgamma_np(x):
    from tracejit.kernels.cpu.special import lgamma_ufunc
    return lgamma_ufunc(x)


def _digamma_np(x):
    from tracejit.kernels.cpu.special import digamma_ufunc
    return digamma_ufunc(x)


def _polygamma_np(x, n):
    from tracejit.kernels.cpu.special import polygamma_ufunc
    return polygamma_ufunc(x, n)


def _polygamma_grad(c, g, n):
    """g * polygamma(n, x): the derivative of digamma (n = 1) and of polygamma(n - 1)."""
    return g * apply(_R["polygamma"], _x(c), n=n)


def _sign_np(x):
    s = np.sign(x)
    return np.where(np.isnan(x), x.dtype.type(0), s) if x.dtype.kind == "f" else s  # PyTorch: sign(nan) = 0


def _pos(x):
    return x.copy()  # a new tensor must not alias its input (no shared version counter)


_ZERO = {d.np: d.np.type(0) for d in D.ALL}   # a zero of each dtype (x.dtype.type(0) costs ~0.2 us per call)


UNARY = [
    # name, numpy fn, vjp, scalar expr, dtype rule, saves[, traits]
    ("neg", np.negative, _g(lambda c, g: -g), "(-{0})", "same", "", {"involution": True}),
    ("positive", _pos, _g(lambda c, g: g), "{0}", "same", ""),
    ("abs", np.abs, _g(lambda c, g: g * sign(_x(c))), "abs({0})", "same", "i"),
    ("exp", np.exp, _g(lambda c, g: g * c.out), "exp({0})", "float", "o"),
    ("exp2", np.exp2, _g(lambda c, g: g * c.out * math.log(2.0)), "exp2({0})", "float", "o"),
    ("log", np.log, _g(lambda c, g: g / _x(c)), "log({0})", "float", "i"),
    ("log2", np.log2, _g(lambda c, g: g / (_x(c) * math.log(2.0))), "log2({0})", "float", "i"),
    ("log10", np.log10, _g(lambda c, g: g / (_x(c) * math.log(10.0))), "log10({0})", "float", "i"),
    ("log1p", np.log1p, _g(lambda c, g: g / (_x(c) + 1)), "log1p({0})", "float", "i",
     {"grad_name": "Log1PBackward0"}),
    ("expm1", np.expm1, _g(lambda c, g: g * (c.out + 1)), "expm1({0})", "float", "o"),
    ("sqrt", np.sqrt, _g(lambda c, g: g / (2 * c.out)), "sqrt({0})", "float", "o"),
    ("rsqrt", lambda x: 1 / np.sqrt(x), _g(lambda c, g: -0.5 * g * c.out * c.out * c.out), "(1.0 / sqrt({0}))",
     "float", "o"),
    ("square", np.square, _g(lambda c, g: 2 * g * _x(c)), "({0} * {0})", "promote", "i",
     {"grad_name": "PowBackward0"}),     # PyTorch's square is pow(x, 2)
    ("sin", np.sin, _g(lambda c, g: g * cos(_x(c))), "sin({0})", "float", "i"),
    ("cos", np.cos, _g(lambda c, g: -g * sin(_x(c))), "cos({0})", "float", "i"),
    ("tan", np.tan, _g(lambda c, g: g * (1 + c.out * c.out)), "tan({0})", "float", "o"),
    ("asin", np.arcsin, _g(lambda c, g: g * rsqrt(1 - _x(c) * _x(c))), "asin({0})", "float", "i"),
    ("acos", np.arccos, _g(lambda c, g: -g * rsqrt(1 - _x(c) * _x(c))), "acos({0})", "float", "i"),
    ("atan", np.arctan, _g(lambda c, g: g / (1 + _x(c) * _x(c))), "atan({0})", "float", "i"),
    ("sinh", np.sinh, _g(lambda c, g: g * cosh(_x(c))), "sinh({0})", "float", "i"),
    ("cosh", np.cosh, _g(lambda c, g: g * sinh(_x(c))), "cosh({0})", "float", "i"),
    ("tanh", np.tanh, _g(lambda c, g: g * (1 - c.out * c.out)), "tanh({0})", "float", "o"),
    ("sigmoid", _sigmoid_np, _g(lambda c, g: g * c.out * (1 - c.out)), "sigmoid({0})", "float", "o"),
    ("relu", lambda x: np.maximum(x, _ZERO[x.dtype]), _g(lambda c, g: g * (c.out > 0)), "relu({0})", "same", "o"),
    ("erf", _erf_np, _g(lambda c, g: g * (2 / math.sqrt(math.pi)) * exp(-_x(c) * _x(c))), "erf({0})", "float",
     "i"),
    ("erfinv", _erfinv_np, _g(lambda c, g: g * (math.sqrt(math.pi) / 2) * exp(c.out * c.out)), "erfinv({0})",
     "float", "o"),
    # the gamma family (kernels/cpu/special.py: float64 inside, PyTorch's values at the poles)
    ("lgamma", _lgamma_np, _g(lambda c, g: g * digamma(_x(c))), "lgamma({0})", "float", "i"),
    ("digamma", _digamma_np, _g(lambda c, g: _polygamma_grad(c, g, 1)), "digamma({0})", "float", "i"),
    ("reciprocal", lambda x: 1 / x, _g(lambda c, g: -g * c.out * c.out), "(1.0 / {0})", "float", "o"),
    ("sign", _sign_np, _g(lambda c, g: g * 0), "sign({0})", "same", ""),
    ("floor", np.floor, _g(lambda c, g: g * 0), "floor({0})", "same", "", {"int_identity": True}),
    ("ceil", np.ceil, _g(lambda c, g: g * 0), "ceil({0})", "same", "", {"int_identity": True}),
    ("trunc", np.trunc, _g(lambda c, g: g * 0), "trunc({0})", "same", "", {"int_identity": True}),
    ("frac", lambda x: x - np.trunc(x), _g(lambda c, g: g), "({0} - trunc({0}))", "same", ""),
    ("silu", lambda x: x * _sigmoid_np(x),
     _g(lambda c, g: g * sigmoid(_x(c)) * (1 + _x(c) * (1 - sigmoid(_x(c))))), "({0} * sigmoid({0}))", "float", "i"),
    ("logical_not", np.logical_not, None, "(not {0})", "bool", "", {"bool_operands": True}),
    ("isnan", np.isnan, None, "isnan({0})", "bool", ""),
    ("isinf", np.isinf, None, "isinf({0})", "bool", ""),
    ("isfinite", np.isfinite, None, "isfinite({0})", "bool", ""),
    ("bitwise_not", np.invert, None, "(~{0})", "same", "", {"fusible": False}),
]

for _row in UNARY:
    pointwise(*_row[:6], **(_row[6] if len(_row) > 6 else {}))


def _round_np(x, decimals=0):
    return np.round(x, decimals) if decimals else np.round(x)


pointwise("polygamma", _polygamma_np, _g(lambda c, g: _polygamma_grad(c, g, c.attrs["n"] + 1)),
          "polygamma({0}, {n})", "float", "i")
pointwise("round", _round_np, _g(lambda c, g: g * 0), "round_({0}, {decimals})", "same", "", int_identity=True)
def _gelu_parts(x, approximate="none"):
    """gelu written as its VJP writes its pieces, so that once lowered (after autodiff) the forward's erf or
    tanh is the backward's: CSE keeps one (an exact GELU's forward + derivative: 2 erfs per element -> 1)."""
    if approximate == "tanh":
        return 0.5 * x * (1 + tanh(SQRT_2_PI * (x + GELU_C * x * x * x)))
    return 0.5 * x * (1 + erf(x * INV_SQRT_2))


pointwise("gelu", _gelu_np, _g(_gelu_vjp), "gelu_{approximate}({0})", "float", "i", decompose=_gelu_parts,
          fuses_in_parts=True)
pointwise("gelu_backward", _gelu_backward_np, _gelu_backward_vjp, None, "float", "i",
          decompose=_gelu_backward_parts, fuses_in_parts=True, fusible=False, grad_name="GeluBackwardBackward0")
pointwise("softplus", _softplus_np,
          _g(lambda c, g: g * where(_x(c) * c.attrs["beta"] > c.attrs["threshold"], 1.0,
                                    sigmoid(_x(c) * c.attrs["beta"]))),
          "softplus({0}, {beta}, {threshold})", "float", "i")
pointwise("elu", lambda x, alpha=1.0: np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(x)).astype(x.dtype, copy=False),
          _g(lambda c, g: g * where(_x(c) > 0, 1.0, c.attrs["alpha"] * exp(_x(c)))),
          "({0} if {0} > 0 else {alpha} * expm1({0}))", "float", "i")
pointwise("leaky_relu", lambda x, negative_slope=0.01: np.where(x > 0, x, x * x.dtype.type(negative_slope)),
          _g(lambda c, g: where(_x(c) > 0, g, g * c.attrs["negative_slope"])),     # (in g's dtype: exact in float64)
          "({0} if {0} > 0 else {0} * {negative_slope})", "float", "i")
pointwise("clamp", lambda x, min=None, max=None: np.clip(x, min, max).astype(x.dtype, copy=False),
          _g(lambda c, g: g * _in_range(_x(c), c.attrs["min"], c.attrs["max"])),
          "clamp({0}, {min}, {max})", "same", "i",
          grad_name="ClampBackward1")      # bounds are Python numbers here (PyTorch's clamp.Scalar)
defop("cast", lambda x, dtype: x.astype(dtype.np), lambda x, dtype: AVal(aval_of(x).shape, dtype), _g(lambda c, g: g),
      kind="elementwise", expr="cast({0}, {dtype})", saves="", dtype_rule="same", grad_name="ToCopyBackward0",
      passthrough=True, noop=lambda attrs, out: True)


def _in_range(x, lo, hi):
    m = None
    if lo is not None:
        m = x >= lo
    if hi is not None:
        m = (x <= hi) if m is None else logical_and(m, x <= hi)
    return m if m is not None else x * 0 + 1


# ----------------------------------------------------------------------------- binary ops

def _mul_vjp(c, g):
    a, b = c.inputs
    return (g * b if _needs(c, 0) else None, g * a if _needs(c, 1) else None)


def _div_vjp(c, g):
    a, b = c.inputs
    ga = g / b if _needs(c, 0) else None
    gb = -g * a / (b * b) if _needs(c, 1) else None
    return ga, gb


def _needs(c, i):
    return c.edges[i] is not None


def _pow_vjp(c, g):
    a, b = c.inputs
    ga = gb = None
    if _needs(c, 0):
        if _is_scalar(b):
            ga = g * 0 if b == 0 else g * b * pow(a, b - 1)
        else:
            ga = where(b == 0, 0.0, g * b * pow(a, b - 1))
    if _needs(c, 1):
        if _is_scalar(a):
            # PyTorch: g * out * log(a), with log(0) = -inf (0 for exponents >= 0) and NaN for a negative base
            log_a = math.log(a) if a > 0 else -math.inf if a == 0 else math.nan
            gb = where(b >= 0, 0.0, g * c.out * log_a) if a == 0 else g * c.out * log_a
        else:
            gb = where(logical_and(a == 0, b >= 0), 0.0, g * c.out * log(a))
    return ga, gb


def _max_vjp(c, g, lt):
    a, b = c.inputs
    eq = (a == b)
    ga = where(eq, g * 0.5, where(lt(a, b), 0.0, g)) if _needs(c, 0) else None
    gb = where(eq, g * 0.5, where(lt(b, a), 0.0, g)) if _needs(c, 1) else None
    return ga, gb


def _fmax_vjp(c, g, ge):
    # PyTorch: a tie (or a NaN other) sends the whole gradient to the first operand
    a, b = c.inputs
    first = logical_or(ge(a, b), isnan(b))
    return (where(first, g, 0.0) if _needs(c, 0) else None, where(first, 0.0, g) if _needs(c, 1) else None)


def _int_div(fn):
    """Integer division by zero raises, as in PyTorch (numpy quietly gives 0)."""
    def f(a, b):
        if isinstance(b, np.ndarray) and b.dtype.kind in "iub" and not b.all() or \
                (not isinstance(b, np.ndarray) and b == 0 and getattr(a, "dtype", np.float64).kind in "iub"):
            raise RuntimeError("ZeroDivisionError")  # PyTorch's exact error
        return fn(a, b)
    return f


def _atan2_vjp(c, g):
    a, b = c.inputs
    d = a * a + b * b
    return g * b / d, -g * a / d


# PyTorch's node names where they are not the op's name in CamelCase, and its edges: pow(x, 2) and lerp(a, b, 0.5)
# take a Python scalar as a Scalar argument (no edge: `scalar_edges=False`), where x * 2 wraps it as a tensor (an
# edge (None, 0))
def _pow_grad_name(attrs, args):
    return "PowBackward2" if _is_scalar(args[0]) else "PowBackward0" if _is_scalar(args[1]) else "PowBackward1"


def _sub_grad_name(attrs, args):
    return "RsubBackward1" if _is_scalar(args[0]) else "SubBackward0"    # 1 - x is PyTorch's rsub(x, 1)


def _reads_other(i, args):
    """x * y reads x only for y's gradient (a later in-place change of x matters only if y requires grad)."""
    return getattr(args[1 - i], "_requires_grad", False)


BINARY = [
    ("add", np.add, lambda c, g: (g, g), "({0} + {1})", "promote", "", {"unit": 0, "commutative": True}),
    ("sub", np.subtract, lambda c, g: (g, -g), "({0} - {1})", "promote", "", {"unit": 0, "grad_name": _sub_grad_name,
                                                                             "scalar_edges": lambda i: i == 1}),
    ("mul", np.multiply, _mul_vjp, "({0} * {1})", "promote", "i", {"unit": 1, "commutative": True, "reads": _reads_other}),
    ("div", np.true_divide, _div_vjp, "({0} / {1})", "float", "i", {"unit": 1}),
    ("pow", np.power, _pow_vjp, "pow_({0}, {1})", "promote", "io", {"unit": 1, "literal_exponent": True,
                                                                "grad_name": _pow_grad_name, "scalar_edges": False}),
    ("maximum", np.maximum, lambda c, g: _max_vjp(c, g, lambda x, y: x < y), "maximum({0}, {1})", "promote", "i"),
    ("minimum", np.minimum, lambda c, g: _max_vjp(c, g, lambda x, y: x > y), "minimum({0}, {1})", "promote", "i"),
    ("fmax", np.fmax, lambda c, g: _fmax_vjp(c, g, lambda x, y: x >= y), "fmax({0}, {1})", "promote", "i"),
    ("fmin", np.fmin, lambda c, g: _fmax_vjp(c, g, lambda x, y: x <= y), "fmin({0}, {1})", "promote", "i"),
    ("remainder", _int_div(np.remainder), lambda c, g: (g, -g * floor_divide(*c.inputs)), "remainder({0}, {1})",
     "promote", "i", {"int_div_raises": True}),
    ("fmod", _int_div(np.fmod), lambda c, g: (g, -g * trunc(div(*c.inputs))), "fmod({0}, {1})", "promote", "i",
     {"int_div_raises": True}),
    # PyTorch: zero gradients for div(rounding_mode="floor") (floor_divide itself raises in backward)
    ("floor_divide", _int_div(np.floor_divide), lambda c, g: (g * 0, g * 0), "floor_divide({0}, {1})", "promote", "",
     {"int_div_raises": True}),
    ("atan2", np.arctan2, _atan2_vjp, "atan2({0}, {1})", "float", "i"),
    ("eq", np.equal, None, "({0} == {1})", "bool", ""),
    ("ne", np.not_equal, None, "({0} != {1})", "bool", ""),
    ("lt", np.less, None, "({0} < {1})", "bool", ""),
    ("le", np.less_equal, None, "({0} <= {1})", "bool", ""),
    ("gt", np.greater, None, "({0} > {1})", "bool", ""),
    ("ge", np.greater_equal, None, "({0} >= {1})", "bool", ""),
    ("logical_and", np.logical_and, None, "({0} and {1})", "bool", "", {"bool_operands": True}),
    ("logical_or", np.logical_or, None, "({0} or {1})", "bool", "", {"bool_operands": True}),
    ("logical_xor", np.logical_xor, None, "({0} != {1})", "bool", "", {"bool_operands": True}),
    ("bitwise_and", np.bitwise_and, None, "({0} & {1})", "promote", "", {"fusible": False}),
    ("bitwise_or", np.bitwise_or, None, "({0} | {1})", "promote", "", {"fusible": False}),
    ("bitwise_xor", np.bitwise_xor, None, "({0} ^ {1})", "promote", "", {"fusible": False}),
]

for _row in BINARY:
    pointwise(*_row[:6], **(_row[6] if len(_row) > 6 else {}))

# comparisons of floats: "bool" rule compares in the promoted dtype, yields bool


def _where_impl(cond, a, b):
    dt = D.result_type(*[_NP(x) if isinstance(x, np.ndarray) else x for x in (a, b)])
    a = a.astype(dt.np) if isinstance(a, np.ndarray) and a.dtype != dt.np else a
    b = b.astype(dt.np) if isinstance(b, np.ndarray) and b.dtype != dt.np else b
    if type(cond) is np.ndarray and cond.dtype == np.bool_:
        # one operand an array of the result's shape, the other a number (masked_fill and its gradient): a copy of
        # the array with the number written where it is selected (~1.5x faster than np.where's three-way select)
        for arr, num, take in ((b, a, True), (a, b, False)):
            if type(arr) is np.ndarray and arr.dtype == dt.np and np.ndim(num) == 0 and \
                    arr.shape == np.broadcast_shapes(arr.shape, cond.shape):
                out = arr.copy()
                np.copyto(out, num, where=cond if take else ~cond)
                return out
    out = np.where(cond, a, b)
    return out if out.dtype == dt.np else out.astype(dt.np)


def _where_meta(cond, a, b):
    shape = broadcast_shapes(*[aval_of(x).shape for x in (cond, a, b) if not _is_scalar(x)])
    return AVal(shape, D.result_type(a, b))


defop("where", _where_impl, _where_meta,
      lambda c, g: (None, where(c.inputs[0], g, 0.0) if _needs(c, 1) else None,
                    where(c.inputs[0], 0.0, g) if _needs(c, 2) else None),
      kind="elementwise", expr="({1} if {0} else {2})", saves="i", dtype_rule="where",
      reads=lambda i, args: i == 0)  # only the condition


def _lerp_vjp(c, g):
    s, e, w = c.inputs
    return (g * (1 - w), g * w, g * (e - s) if _needs(c, 2) else None)


def _lerp_meta(s, e, w):
    shape = broadcast_shapes(*[aval_of(x).shape for x in (s, e, w) if not _is_scalar(x)])
    return AVal(shape, D.result_type(s, e))


defop("lerp", lambda s, e, w: (s + w * (e - s)).astype(s.dtype, copy=False), _lerp_meta, _lerp_vjp,
      kind="elementwise", expr="({0} + {2} * ({1} - {0}))", saves="i", scalar_edges=False)




# ----------------------------------------------------------------------------- public functions

_this = globals()
for _name in [u[0] for u in UNARY] + [b[0] for b in BINARY]:
    _op = __import__("tracejit.ops.registry", fromlist=["OPS"]).OPS[_name]
    _this[_name] = (lambda op: lambda input, *args: apply(op, input, *args))(_op)


def round(input, decimals=0):
    return apply(_R["round"], input, decimals=decimals)


def polygamma(n, input):
    """The n-th derivative of digamma (torch.polygamma: n first; n a non-negative integer)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return apply(_R["polygamma"], input, n=int(n))


def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension p: sum_j lgamma(x - j/2) + p (p - 1) / 4 log(pi), summed
    as PyTorch sums it (j = p - 1 down to 0)."""
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"mvlgamma(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not input.dtype.is_floating_point:
        input = cast(input, D.get_default_dtype())
    out = None
    for j in range(p - 1, -1, -1):
        t = lgamma(input - j * 0.5) if j else lgamma(input)
        out = t if out is None else out + t
    return out + p * (p - 1) * math.log(math.pi) / 4


def gelu(input, approximate="none"):
    return apply(_R["gelu"], input, approximate=approximate)


def softplus(input, beta=1.0, threshold=20.0):
    return apply(_R["softplus"], input, beta=beta, threshold=threshold)


def elu(input, alpha=1.0):
    return apply(_R["elu"], input, alpha=alpha)


def leaky_relu(input, negative_slope=0.01):
    return apply(_R["leaky_relu"], input, negative_slope=negative_slope)


def clamp(input, min=None, max=None):
    from .._tensor import Tensor
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = input
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    dt = D.result_type(input, *[v for v in (min, max) if v is not None])
    if dt is not input.dtype:  # an integer tensor clamped to float bounds is promoted, as in PyTorch
        input = cast(input, dt)
    return apply(_R["clamp"], input, min=min, max=max)


clip = clamp


def clamp_min(input, min):
    return clamp(input, min=min)


def clamp_max(input, max):
    return clamp(input, max=max)


def where(condition, input=None, other=None):
    if input is None and other is None:
        from .indexing import nonzero
        return nonzero(condition, as_tuple=True)
    return apply(_R["where"], condition, input, other)


def lerp(input, end, weight):
    if getattr(end, "dtype", input.dtype) is not input.dtype:
        raise RuntimeError(f"expected dtype {input.dtype.name} for `end` but got dtype {end.dtype.name}")
    return apply(_R["lerp"], input, end, weight)


def cast(input, dtype):
    dtype = D.to_dtype(dtype)
    if input.dtype is dtype:
        return input
    return apply(_R["cast"], input, dtype=dtype)


def add(input, other, *, alpha=1):
    return apply(_R["add"], input, other if alpha == 1 else mul(other, alpha))


def sub(input, other, *, alpha=1):
    return apply(_R["sub"], input, other if alpha == 1 else mul(other, alpha))


def rsub(input, other, alpha=1):
    return sub(other, input, alpha=alpha)


def true_divide(input, other):
    return div(input, other)


def divide(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return div(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        if D.result_type(input, other).np.kind in "iub":     # integers stay integers (and x / 0 raises)
            return floor_divide(input - fmod(input, other), other)
        return trunc(div(input, other))
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


_div_plain = _this["div"]


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        return divide(input, other, rounding_mode=rounding_mode)
    return _div_plain(input, other)


def float_power(input, exponent):
    return pow(cast(input, D.float64) if hasattr(input, "dtype") else input,
               cast(exponent, D.float64) if hasattr(exponent, "dtype") else exponent)


def addcmul(input, tensor1, tensor2, *, value=1):
    return input + value * tensor1 * tensor2


def addcdiv(input, tensor1, tensor2, *, value=1):
    return input + value * tensor1 / tensor2


def xlogy(input, other):
    return where(logical_and(input == 0, logical_not(isnan(other))), 0.0, input * log(other))   # NaN other: NaN


def hardtanh(input, min_val=-1.0, max_val=1.0):
    # unlike clamp, PyTorch's hardtanh passes no gradient at the bounds themselves
    return where(input <= min_val, min_val, where(input >= max_val, max_val, input))


def relu6(input):
    return hardtanh(input, 0.0, 6.0)


def threshold(input, threshold, value, inplace=False):
    """`input` where it is greater than `threshold`, else `value` (torch.nn.functional.threshold)."""
    out = where(input > threshold, input, value).to(input.dtype)
    return input.copy_(out) if inplace else out


def hardsigmoid(input):
    # zero gradient at +-3 (PyTorch), which also gives hardswish PyTorch's derivative there
    return where(input <= -3, 0.0, where(input >= 3, 1.0, input / 6 + 0.5))


def hardswish(input):
    return input * hardsigmoid(input)


def mish(input):
    return input * tanh(softplus(input))


def logit(input, eps=None):
    if eps is not None:
        input = clamp(input, eps, 1 - eps)
    return log(input / (1 - input))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    diff = abs(input - other)
    close = diff <= atol + rtol * abs(other)
    close = logical_or(close, input == other)
    if equal_nan:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    return tuple(input.shape) == tuple(other.shape) and bool((input == other).all())


def sgn(input):
    return sign(input)


def signbit(input):
    return lt(input, 0) if not input.dtype.is_floating_point else apply(_R["signbit"], input)


pointwise("signbit", np.signbit, None, "signbit({0})", "bool", "")

from .registry import OPS as _R  # noqa: E402

negative, absolute, arcsin, arccos, arctan, arctan2 = neg, abs, asin, acos, atan, atan2
multiply, subtract, greater, greater_equal, less, less_equal, not_equal = mul, sub, gt, ge, lt, le, ne
