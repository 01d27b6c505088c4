"""Differential tests against PyTorch: one lambda runs through tracejit and through torch on the same
inputs; forward values, dtypes and shapes must agree, then the gradients of sum(out * cotangent).

Lambdas reach library functions through `L` (L.where, L.nn.functional.mse_loss ...), which resolves to
whichever library is being run; methods and operators need nothing special.
"""
import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tracejit  # noqa: E402
import tracejit.nn.functional  # noqa: E402,F401  (L.nn.functional)

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")


class _Lib:
    """`L.name` is torch.name or tracejit.name, depending on which library the helper is running."""
    cur = None

    def __getattr__(self, name):
        return getattr(self.cur, name)


L = _Lib()
F64, F32 = np.float64, np.float32
_rng = np.random.default_rng(0)


def R(*shape, dtype=F64):
    """Standard normal input."""
    return _rng.standard_normal(shape).astype(dtype)


def P(*shape, dtype=F64, low=0.5, high=2.0):
    """Positive input (log, sqrt, ...)."""
    return _rng.uniform(low, high, shape).astype(dtype)


def U(*shape, low=-0.9, high=0.9, dtype=F64):
    return _rng.uniform(low, high, shape).astype(dtype)


def I(*shape, low=0, high=5, dtype=np.int64):  # noqa: E743
    return _rng.integers(low, high, shape).astype(dtype)


def B(*shape):
    return _rng.random(shape) < 0.5


def A(x, dtype=F64):
    return np.array(x, dtype=dtype)


# ----------------------------------------------------------------------------- the helper

def _dtname(d):
    return str(d).split(".")[-1]


def _wrap_inputs(lib, inputs, grad):
    out = []
    for k, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            rg = bool(grad is True or (grad and k in grad)) and x.dtype.kind == "f"
            t = lib.tensor(x.copy(), requires_grad=rg)
            out.append(t)
        else:
            out.append(x)
    return out


def _flatten(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in _flatten(x)]
    return [o]


def _run(lib, fn, inputs, grad):
    L.cur = lib
    try:
        ts = _wrap_inputs(lib, inputs, grad)
        return ts, fn(*ts)
    finally:
        L.cur = None


def _np(t):
    return t.detach().numpy(force=True)


def _close(a, b, atol, rtol, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shape {a.shape} (tracejit) vs {b.shape} (torch)"
    if a.dtype.kind in "biu" or b.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b, err_msg=what)
    else:
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=rtol,
                                   equal_nan=True, err_msg=what)


def _tol(dtypes, atol, rtol):
    low = any(d in ("float32", "float16") for d in dtypes)
    return (atol if atol is not None else (1e-5 if low else 1e-10),
            rtol if rtol is not None else (1e-4 if low else 1e-7))


def helper(fn, *inputs, grad=True, atol=None, rtol=None, check_grad=True, ct_seed=1):
    """Run `fn` on tracejit and torch tensors made from `inputs` (numpy arrays; anything else is passed
    as is), compare the outputs, then the input gradients of sum(out * cotangent) over float outputs."""
    tts, tout = _run(torch, fn, inputs, grad)
    jts, jout = _run(tracejit, fn, inputs, grad)
    tflat, jflat = _flatten(tout), _flatten(jout)
    assert len(tflat) == len(jflat), f"{len(jflat)} outputs (tracejit) vs {len(tflat)} (torch)"
    dts = [_dtname(t.dtype) for t in tflat if isinstance(t, torch.Tensor)]
    dts += [_dtname(t.dtype) for t in tts if isinstance(t, torch.Tensor)]
    at, rt = _tol(dts, atol, rtol)
    for k, (t, j) in enumerate(zip(tflat, jflat)):
        if not isinstance(t, torch.Tensor):
            assert not isinstance(j, tracejit.Tensor), f"output {k}: tracejit gives a tensor, torch {type(t)}"
            if isinstance(t, float):
                assert j == pytest.approx(t, rel=rt, abs=at), f"output {k}"
            else:
                assert j == t, f"output {k}: {j!r} vs {t!r}"
            continue
        assert isinstance(j, tracejit.Tensor), f"output {k}: tracejit gives {type(j)}"
        assert _dtname(j.dtype) == _dtname(t.dtype), f"output {k}: dtype {j.dtype} (tracejit) vs {t.dtype} (torch)"
        assert tuple(j.shape) == tuple(t.shape), f"output {k}: shape {tuple(j.shape)} vs {tuple(t.shape)}"
        _close(_np(j), _np(t), at, rt, f"output {k} values")
        assert j.requires_grad == t.requires_grad, f"output {k}: requires_grad {j.requires_grad} vs {t.requires_grad}"
    if not check_grad:
        return jout
    rng = np.random.default_rng(ct_seed)
    tl, jl = 0, 0
    for t, j in zip(tflat, jflat):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            ct = rng.standard_normal(tuple(t.shape)).astype(_np(t).dtype)
            tl = tl + (t * torch.tensor(ct)).sum()
            jl = jl + (j * tracejit.tensor(ct)).sum()
    if isinstance(tl, int):
        return jout
    tl.backward()
    jl.backward()
    for k, (t, j) in enumerate(zip(tts, jts)):
        if not isinstance(t, torch.Tensor) or not t.requires_grad:
            continue
        tg, jg = t.grad, j.grad
        if tg is None or jg is None:   # an unused input: None on one side may be zeros on the other
            other = jg if tg is None else tg
            assert other is None or not np.any(_np(other)), f"grad of input {k}: {jg} (tracejit) vs {tg} (torch)"
            continue
        assert _dtname(jg.dtype) == _dtname(tg.dtype), f"grad of input {k}: dtype {jg.dtype} vs {tg.dtype}"
        _close(_np(jg), _np(tg), at, rt, f"grad of input {k}")
    return jout


def helper_raises(fn, *inputs, match=None, grad=False):
    """Both libraries raise the same kind of exception (tracejit's message matching `match` if given)."""
    with pytest.raises(Exception) as te:
        _run(torch, fn, inputs, grad)
    with pytest.raises(Exception) as je:
        _run(tracejit, fn, inputs, grad)
    assert isinstance(je.value, te.type), (f"tracejit raised {je.type.__name__}: {je.value}; torch raised "
                                           f"{te.type.__name__}: {te.value}")
    msg = str(je.value)
    if match is not None:
        assert re.search(match, msg), f"message {msg!r} does not match {match!r}"
    else:   # no internal error passing for the expected one: the message must carry what torch's message says
        assert not re.search(r"tracejit bug|NoneType|has no attribute|object is not|numba|Traceback", msg), msg
        missing = set(re.findall(r"-?\d+", str(te.value))) - set(re.findall(r"-?\d+", msg))
        assert not missing, f"tracejit's message {msg!r} lacks {sorted(missing)} of torch's {str(te.value)!r}"
    return je.value


def case(fn, *inputs, id=None, **kw):
    return pytest.param(fn, inputs, kw, id=id)


def run_cases(cases):
    return pytest.mark.parametrize("fn,inputs,kw", cases)


# ----------------------------------------------------------------------------- pointwise math

UNARY = [
    ("abs", lambda x: x.abs(), R), ("neg", lambda x: -x, R), ("exp", lambda x: x.exp(), R),
    ("log", lambda x: x.log(), P), ("log1p", lambda x: x.log1p(), P), ("expm1", lambda x: x.expm1(), R),
    ("sqrt", lambda x: x.sqrt(), P), ("rsqrt", lambda x: x.rsqrt(), P), ("sin", lambda x: x.sin(), R),
    ("cos", lambda x: x.cos(), R), ("tan", lambda x: x.tan(), U), ("tanh", lambda x: x.tanh(), R),
    ("sigmoid", lambda x: x.sigmoid(), R), ("relu", lambda x: x.relu(), R),
    ("gelu", lambda x: L.nn.functional.gelu(x), R),
    ("gelu_tanh", lambda x: L.nn.functional.gelu(x, approximate="tanh"), R),
    ("silu", lambda x: L.nn.functional.silu(x), R), ("softplus", lambda x: L.nn.functional.softplus(x), R),
    ("softplus_beta", lambda x: L.nn.functional.softplus(x * 10, beta=2.0, threshold=5.0), R),
    ("elu", lambda x: L.nn.functional.elu(x), R), ("elu_alpha", lambda x: L.nn.functional.elu(x, alpha=0.5), R),
    ("leaky_relu", lambda x: L.nn.functional.leaky_relu(x, 0.2), R), ("erf", lambda x: x.erf(), R),
    ("erfinv", lambda x: (x * 0.7).tanh().erfinv(), R),
    ("lgamma", lambda x: (x * 3).lgamma(), R), ("digamma", lambda x: x.digamma(), P),
    ("digamma_neg", lambda x: (-x).digamma(), P), ("polygamma", lambda x: x.polygamma(1) + L.polygamma(2, x), P),
    ("mvlgamma", lambda x: (x + 1).mvlgamma(3), P),
    ("reciprocal", lambda x: x.reciprocal(), P), ("sign", lambda x: x.sign(), R),
    ("floor", lambda x: (x * 3).floor(), R), ("ceil", lambda x: (x * 3).ceil(), R),
    ("round", lambda x: (x * 3).round(), R), ("round_dec", lambda x: (x * 30).round(decimals=1), R),
    ("trunc", lambda x: (x * 3).trunc(), R), ("frac", lambda x: (x * 3).frac(), R),
    ("exp2", lambda x: x.exp2(), R), ("log2", lambda x: x.log2(), P), ("log10", lambda x: x.log10(), P),
    ("square", lambda x: x.square(), R), ("asin", lambda x: x.asin(), U), ("acos", lambda x: x.acos(), U),
    ("atan", lambda x: x.atan(), R), ("sinh", lambda x: x.sinh(), R), ("cosh", lambda x: x.cosh(), R),
    ("clamp", lambda x: x.clamp(-0.5, 0.5), R), ("clamp_min", lambda x: x.clamp(min=0.1), R),
    ("clamp_max", lambda x: L.clamp(x, max=0.1), R), ("clip", lambda x: L.clip(x, -0.2, 0.3), R),
    ("hardtanh", lambda x: L.nn.functional.hardtanh(x * 2), R), ("relu6", lambda x: L.nn.functional.relu6(x * 8), R),
    ("hardsigmoid", lambda x: L.nn.functional.hardsigmoid(x * 4), R),
    ("hardswish", lambda x: L.nn.functional.hardswish(x * 4), R), ("mish", lambda x: L.nn.functional.mish(x), R),
    ("logsigmoid", lambda x: L.nn.functional.logsigmoid(x), R), ("softsign", lambda x: L.nn.functional.softsign(x), R),
    ("tanhshrink", lambda x: L.nn.functional.tanhshrink(x), R), ("logit", lambda x: x.logit(), lambda *s, dtype: U(*s, low=0.1, dtype=dtype)),
    ("logit_eps", lambda x: L.logit(x, eps=0.2), lambda *s, dtype: U(*s, low=0.01, high=0.99, dtype=dtype)),
    ("pow_scalar", lambda x: x ** 3, R), ("pow_half", lambda x: x ** 0.5, P), ("pow_neg", lambda x: x.pow(-2), P),
    ("rpow", lambda x: 2 ** x, R), ("pow_int_exp", lambda x: x ** 2, R), ("sgn", lambda x: x.sgn(), R),
    ("positive", lambda x: +x, R), ("float_power", lambda x: L.float_power(x, 2), R),
]


@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("name,fn,gen", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, gen, dtype):
    helper(fn, gen(3, 4, dtype=dtype))


BINARY_ERRORS = [
    case(lambda x, y: L.lerp(x, y, 0.5), R(3, dtype=F32), R(3), id="lerp_dtype_mismatch"),
    case(lambda x, y: x // y, I(3), A([0, 1, 2], np.int64), id="int_floordiv_by_zero"),
    case(lambda x, y: x % y, I(3), A([1, 0, 2], np.int64), id="int_remainder_by_zero"),
    case(lambda x: x // 0, I(3), id="int_floordiv_by_zero_scalar"),
]


@run_cases(BINARY_ERRORS)
def test_binary_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


BINARY_CASES = [
    case(lambda x, y: x + y, R(3, 4), R(3, 4), id="add"),
    case(lambda x, y: x - y, R(3, 4), R(4), id="sub_bcast"),
    case(lambda x, y: x * y, R(3, 1), R(1, 4), id="mul_outer_bcast"),
    case(lambda x, y: x / y, R(2, 3, 4), P(3, 1), id="div_bcast"),
    case(lambda x, y: L.add(x, y, alpha=2.5), R(3, 4), R(4), id="add_alpha"),
    case(lambda x, y: L.sub(x, y, alpha=-2), R(3, 4), R(4), id="sub_alpha"),
    case(lambda x, y: L.rsub(x, y), R(3, 4), R(4), id="rsub"),
    case(lambda x, y: x ** y, P(3, 4), R(3, 4), id="pow_tt"),
    case(lambda x, y: x.pow(y), P(3, 1), R(4), id="pow_bcast"),
    case(lambda x, y: L.maximum(x, y), R(3, 4), R(4), id="maximum"),
    case(lambda x, y: L.minimum(x, y), R(3, 4), R(3, 4), id="minimum"),
    case(lambda x, y: L.fmax(x, y), R(3, 4), R(3, 4), id="fmax"),
    case(lambda x, y: L.fmin(x, y), R(3, 4), R(3, 4), id="fmin"),
    case(lambda x, y: L.remainder(x * 5, y), R(3, 4), P(3, 4), id="remainder"),
    case(lambda x, y: (x * 5) % y, R(3, 4), -P(4), id="remainder_neg_div"),
    case(lambda x, y: L.fmod(x * 5, y), R(3, 4), P(3, 4), id="fmod"),
    case(lambda x, y: L.atan2(x, y), R(3, 4), R(3, 4), id="atan2"),
    case(lambda x, y: L.floor_divide(x * 5, y), R(3, 4), P(3, 4), id="floor_divide", check_grad=False),
    case(lambda x, y: (x * 5) // y, R(3, 4), -P(3, 4), id="floordiv_op", check_grad=False),
    case(lambda x, y: L.div(x * 5, y, rounding_mode="trunc"), R(3, 4), P(3, 4), id="div_trunc"),
    case(lambda x, y: L.div(x * 5, y, rounding_mode="floor"), R(3, 4), P(3, 4), id="div_floor"),
    case(lambda x, y: L.lerp(x, y, 0.3), R(3, 4), R(3, 4), id="lerp_scalar"),
    case(lambda x, y, w: L.lerp(x, y, w), R(3, 4), R(4), U(3, 1), id="lerp_tensor"),
    case(lambda x, y: L.xlogy(x, y), R(3, 4), P(3, 4), id="xlogy"),
    case(lambda x, a, b: L.addcmul(x, a, b, value=0.5), R(3, 4), R(3, 4), R(4), id="addcmul"),
    case(lambda x, a, b: L.addcdiv(x, a, b, value=2), R(3, 4), R(3, 4), P(4), id="addcdiv"),
    case(lambda c, x, y: L.where(c, x, y), B(3, 4), R(3, 4), R(4), id="where"),
    case(lambda c, x: L.where(c, x, 0.5), B(3, 1), R(4), id="where_scalar"),
    case(lambda c, x: L.where(c, 2, x), B(4), R(3, 4), id="where_scalar_first"),
    case(lambda x, lo, hi: x.clamp(lo, hi), R(3, 4), U(4, low=-1, high=-0.2), U(3, 1, low=0.2, high=1), id="clamp_t"),
    case(lambda x, y: x + y, R(3, 4, dtype=F32), R(3, 4), id="add_f32_f64"),
    case(lambda x, y: x * y, R(3, 4, dtype=F32), A(2.0), id="mul_f32_0d_f64"),
    case(lambda x, y: x * y, R(3, 4), I(3, 4), id="mul_float_int"),
    case(lambda x, y: x / y, I(3, 4, low=-5), I(3, 4, low=1), id="div_int_int"),
    case(lambda x, y: x + y, I(3, 4), B(3, 4), id="add_int_bool"),
    case(lambda x: x + 1.5, I(3, 4), id="int_plus_float_scalar"),
    case(lambda x: x * True, I(3, 4), id="int_times_bool_scalar"),
    case(lambda x: x + 2, B(3, 4), id="bool_plus_int_scalar"),
    case(lambda x: 1 - x, R(3, 4, dtype=F32), id="rsub_scalar_f32"),
    case(lambda x: 2 / x, P(3, 4), id="rdiv_scalar"),
    case(lambda x, y: x // y, I(3, 4, low=-9, high=9), I(4, low=1, high=4), id="floordiv_int"),
    case(lambda x, y: x % y, I(3, 4, low=-9, high=9), I(4, low=-4, high=-1), id="mod_int_neg"),
    case(lambda x, y: L.fmod(x, y), I(3, 4, low=-9, high=9), I(4, low=1, high=4), id="fmod_int"),
    case(lambda x: x ** 2, I(3, 4, low=-3), id="pow_int_int"),
    case(lambda x: x ** 0.5, I(3, 4), id="pow_int_float"),
    case(lambda x: 2 ** x, I(3, 4), id="rpow_int"),
    case(lambda x: 2.5 ** x, I(3, 4), id="rpow_int_float_base"),
    case(lambda x, y: x.pow(y), R(3, 4), I(3, 4), id="pow_float_int_t"),
    case(lambda x, y: x - y, I(3, dtype=np.int32), A(5, np.int64), id="int32_minus_0d_int64"),
    case(lambda x, y: x + y, I(3, dtype=np.int32), A(5.0), id="int32_plus_0d_f64"),
    case(lambda x, y: x + y, I(3, dtype=np.uint8), I(3, dtype=np.int8), id="uint8_int8"),
    case(lambda x, y: x * y, I(3, dtype=np.int16), R(3, dtype=np.float16), id="int16_f16", grad=False),
    case(lambda x, y: x + y, A(1.0, F32), A(2.0), id="0d_f32_0d_f64"),
    case(lambda x, y: x + y, A(1.0, np.float16), R(3, dtype=F32), id="0d_f16_plus_f32", grad=False),
    case(lambda x: L.square(x), I(3, 4, low=-3), id="square_int"),
    case(lambda x: x.abs(), I(3, 4, low=-3), id="abs_int"),
    case(lambda x: x.sqrt(), I(3, 4), id="sqrt_int"),
    case(lambda x: x.exp(), B(3, 4), id="exp_bool"),
    case(lambda x: x.sigmoid(), I(3, 4), id="sigmoid_int"),
    case(lambda x: -x, I(3, 4), id="neg_int"),
    case(lambda x: x.sign(), I(3, 4, low=-3), id="sign_int"),
    case(lambda x: x.floor(), I(3, 4, low=-3), id="floor_int"),
    case(lambda x: x.clamp(1, 3), I(3, 4), id="clamp_int"),
    case(lambda x: x.clamp(0.5, 3.5), I(3, 4), id="clamp_int_float_bounds"),
    case(lambda x, y: L.maximum(x, y), I(3, 4), R(3, 4), id="maximum_int_float"),
    case(lambda x, y: L.where(x > 2, x, y), I(3, 4), R(3, 4, dtype=F32), id="where_int_f32"),
    case(lambda c: L.where(c, 2, 3), B(3), id="where_int_scalars"),
    case(lambda c: L.where(c, 2, 3.5), B(3), id="where_int_float_scalars"),
    case(lambda c, x: L.where(c, x, 1.0), B(3), A(2.0, F32), id="where_0d_f32_scalar"),
    case(lambda x, y: x / y, R(3), A([0.0, -0.0, 1.0]), id="float_div_by_zero"),
    case(lambda x: (x * 5) // 0.0, R(3), id="float_floordiv_by_zero", check_grad=False),
]


@run_cases(BINARY_CASES)
def test_binary_and_promotion(fn, inputs, kw):
    helper(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- kinks and ties (PyTorch's choices)

KINK = A([-2.0, -1.0, 0.0, 0.0, 1.0, 2.0, 6.0])
TIES = A([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, 4.0, 5.0]])

KINK_CASES = [
    case(lambda x: x.relu(), KINK, id="relu_at_0"),
    case(lambda x: x.abs(), KINK, id="abs_at_0"),
    case(lambda x: x.sqrt(), KINK.clip(0), id="sqrt_at_0"),
    case(lambda x: x ** 0.5, KINK.clip(0), id="pow_half_at_0"),
    case(lambda x: x ** 2, KINK, id="pow_2_at_0"),
    case(lambda x: x ** 0, KINK, id="pow_0"),
    case(lambda x: x ** 1.5, KINK.clip(0), id="pow_1p5_at_0"),
    case(lambda x, y: x ** y, A([0.0, 0.0, 2.0, 0.0]), A([2.0, 0.0, 0.0, -1.0]), id="pow_zero_base"),
    case(lambda y: 0.0 ** y, A([2.0, 0.0, 1.0]), id="rpow_zero_base"),
    case(lambda y: 2.0 ** y, A([2.0, 0.0, -1.0]), id="rpow_two"),
    case(lambda x: x.clamp(-1.0, 2.0), KINK, id="clamp_at_bounds"),
    case(lambda x: x.clamp(min=0.0), KINK, id="clamp_min_at_bound"),
    case(lambda x: L.nn.functional.hardtanh(x, -1.0, 2.0), KINK, id="hardtanh_at_bounds"),
    case(lambda x: L.nn.functional.relu6(x), KINK, id="relu6_at_bounds"),
    case(lambda x: L.nn.functional.leaky_relu(x, 0.1), KINK, id="leaky_relu_at_0"),
    case(lambda x: L.nn.functional.elu(x), KINK, id="elu_at_0"),
    case(lambda x: L.nn.functional.hardsigmoid(x * 3), KINK, id="hardsigmoid_at_bounds"),
    case(lambda x: L.nn.functional.hardswish(x * 1.5), KINK, id="hardswish_at_bounds"),
    case(lambda x: x.sign(), KINK, id="sign_at_0"),
    case(lambda x, y: L.maximum(x, y), KINK, KINK[::-1].copy(), id="maximum_ties"),
    case(lambda x, y: L.minimum(x, y), KINK, KINK[::-1].copy(), id="minimum_ties"),
    case(lambda x, y: L.fmax(x, y), KINK, KINK[::-1].copy(), id="fmax_ties"),
    case(lambda x: L.maximum(x, L.tensor(1.0, dtype=L.float64)), KINK, id="maximum_ties_0d_const"),
    case(lambda x: x.max(), TIES, id="max_all_ties"),
    case(lambda x: x.min(), TIES, id="min_all_ties"),
    case(lambda x: x.amax(), TIES, id="amax_all_ties"),
    case(lambda x: x.amax(1), TIES, id="amax_dim_ties"),
    case(lambda x: x.amin((0, 1)), TIES, id="amin_dims_ties"),
    case(lambda x: x.max(1), TIES, id="max_dim_ties"),
    case(lambda x: x.min(1, keepdim=True), TIES, id="min_dim_ties"),
    case(lambda x: x.max(0), TIES, id="max_dim0_ties"),
    case(lambda x: x.argmax(1), TIES, id="argmax_ties"),
    case(lambda x: x.argmin(), TIES, id="argmin_ties"),
    case(lambda x: x.norm(float("inf")), TIES, id="norm_inf_ties"),
    case(lambda x: x.norm(float("inf"), dim=1), TIES, id="norm_inf_dim_ties"),
    case(lambda x: x.norm(), A([0.0, 0.0]), id="norm2_at_0"),
    case(lambda x: x.norm(1), A([0.0, 1.0]), id="norm1_at_0"),
    case(lambda x: x.norm(3), A([0.0, 0.0]), id="norm3_at_0"),
    case(lambda x: L.logsumexp(x, 1), A([[-math.inf, -math.inf], [0.0, 1.0]]), id="logsumexp_all_neg_inf"),
    case(lambda x: x.sort(1).values, TIES, id="sort_ties_values"),
    case(lambda x: x.sort(dim=1, descending=True, stable=True), TIES, id="sort_desc_stable_ties"),
    case(lambda x: x.sort(dim=1, stable=True), TIES, id="sort_stable_ties"),
    case(lambda x: x.prod(), A([2.0, 0.0, 3.0]), id="prod_one_zero"),
    case(lambda x: x.prod(), A([2.0, 0.0, 0.0]), id="prod_two_zeros"),
    case(lambda x: x.prod(1), A([[2.0, 0.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 1.0]]), id="prod_dim_zeros"),
    case(lambda x: x.cumprod(0), A([2.0, 0.0, 3.0, 4.0]), id="cumprod_zero"),
    case(lambda x: x.std(), A([1.0, 1.0, 1.0]), id="std_constant"),
]


@run_cases(KINK_CASES)
def test_nondifferentiable_points_and_ties(fn, inputs, kw):
    helper(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- comparisons and logic

SPECIAL = A([1.0, -math.inf, math.inf, math.nan, 0.0, -0.0])

LOGIC_CASES = [
    case(lambda x, y: x == y, I(3, 4), I(4), id="eq"),
    case(lambda x, y: x != y, I(3, 4), I(4), id="ne"),
    case(lambda x, y: x < y, R(3, 4), R(3, 1), id="lt_bcast"),
    case(lambda x, y: x <= y, I(3, 4), I(3, 4), id="le"),
    case(lambda x, y: x > y, R(3, 4), I(4), id="gt_float_int"),
    case(lambda x, y: x >= y, I(3, 4), R(4), id="ge_int_float"),
    case(lambda x: x > 0.5, I(3, 4), id="gt_int_float_scalar"),
    case(lambda x: x == 2, R(3, 4).round(), id="eq_scalar"),
    case(lambda x: 0 < x, R(3, 4), id="reflected_lt"),
    case(lambda x, y: L.eq(x, y), R(3), R(3), id="eq_fn"),
    case(lambda x, y: L.gt(x, y), R(3), 0.1, id="gt_fn_scalar"),
    case(lambda x, y: x.lt(y), R(3), R(3), id="lt_method"),
    case(lambda x, y: L.logical_and(x, y), B(3, 4), B(4), id="logical_and"),
    case(lambda x, y: L.logical_or(x, y), B(3, 4), I(3, 4), id="logical_or_int"),
    case(lambda x, y: L.logical_xor(x, y), R(3, 4).round(), B(3, 4), id="logical_xor_float"),
    case(lambda x: L.logical_not(x), I(3, 4), id="logical_not_int"),
    case(lambda x: x.logical_not(), R(3, 4).round(), id="logical_not_float"),
    case(lambda x, y: x & y, B(3, 4), B(3, 4), id="and_bool"),
    case(lambda x, y: x | y, B(3, 4), B(4), id="or_bool"),
    case(lambda x, y: x ^ y, B(3, 4), B(3, 4), id="xor_bool"),
    case(lambda x: ~x, B(3, 4), id="invert_bool"),
    case(lambda x, y: x & y, I(3, 4, high=16), I(3, 4, high=16), id="and_int"),
    case(lambda x, y: x | y, I(3, 4, high=16), I(4, high=16), id="or_int"),
    case(lambda x, y: x ^ y, I(3, 4, high=16), I(3, 4, high=16), id="xor_int"),
    case(lambda x: ~x, I(3, 4, low=-8, high=8), id="invert_int"),
    case(lambda x: x & 6, I(3, 4, high=16), id="and_int_scalar"),
    case(lambda x: L.bitwise_not(x), I(3, 4, high=16, dtype=np.uint8), id="bitwise_not_uint8"),
    case(lambda x: x.isnan(), SPECIAL, id="isnan"),
    case(lambda x: x.isinf(), SPECIAL, id="isinf"),
    case(lambda x: x.isfinite(), SPECIAL, id="isfinite"),
    case(lambda x: x.isfinite(), I(4), id="isfinite_int"),
    case(lambda x: x.signbit(), SPECIAL, id="signbit"),
    case(lambda x, y: L.isclose(x, y), A([1.0, 1.0, math.nan, math.inf]), A([1.0 + 1e-9, 1.1, math.nan, math.inf]),
         id="isclose"),
    case(lambda x, y: L.isclose(x, y, equal_nan=True), A([1.0, math.nan]), A([1.0, math.nan]), id="isclose_nan"),
    case(lambda x, y: L.allclose(x, y), R(3), R(3), id="allclose_false"),
    case(lambda x: L.allclose(x, x + 1e-9), R(3), id="allclose_true"),
    case(lambda x, y: L.equal(x, y), I(3), I(3), id="equal"),
    case(lambda x: L.equal(x, x.clone()), R(3), id="equal_true"),
    case(lambda x: L.maximum(x, x.flip(0)), SPECIAL, id="maximum_nan_propagates", grad=False),
    case(lambda x: L.fmax(x, x.flip(0)), SPECIAL, id="fmax_ignores_nan", grad=False),
    case(lambda x: x.clamp(-1, 1), SPECIAL, id="clamp_special", grad=False),
    case(lambda x: x.sigmoid(), A([-800.0, -50.0, 0.0, 50.0, 800.0]), id="sigmoid_extreme"),
    case(lambda x: L.nn.functional.softplus(x), A([-800.0, -50.0, 0.0, 50.0, 800.0]), id="softplus_extreme"),
    case(lambda x: x.exp(), A([-800.0, 800.0]), id="exp_overflow"),
    case(lambda x: x.log(), A([0.0, -1.0, 1.0]), id="log_zero_neg", grad=False),
    case(lambda x: x.sign(), SPECIAL, id="sign_special", grad=False),
]


@run_cases(LOGIC_CASES)
def test_comparisons_and_logic(fn, inputs, kw):
    helper(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- reductions

X = R(3, 4, 5)
XI = I(3, 4, 5, low=-3, high=4)

REDUCTION_CASES = [
    case(lambda x: x.sum(), X, id="sum"),
    case(lambda x: x.sum(1), X, id="sum_dim"),
    case(lambda x: x.sum(-1, keepdim=True), X, id="sum_dim_keepdim"),
    case(lambda x: x.sum((0, 2)), X, id="sum_dims"),
    case(lambda x: x.sum((-1, 0), keepdim=True), X, id="sum_dims_keepdim"),
    case(lambda x: L.sum(x, dim=1, dtype=L.float32), X, id="sum_dtype"),
    case(lambda x: x.sum(), XI, id="sum_int"),
    case(lambda x: x.sum(0), B(3, 4), id="sum_bool"),
    case(lambda x: x.sum(), I(3, dtype=np.int32), id="sum_int32"),
    case(lambda x: x.sum(), A(3.0), id="sum_0d"),
    case(lambda x: x.sum(0), A(3.0), id="sum_0d_dim0"),
    case(lambda x: x.mean(), X, id="mean"),
    case(lambda x: x.mean((1, 2)), X, id="mean_dims"),
    case(lambda x: x.mean(-1, keepdim=True), R(3, 4, dtype=F32), id="mean_f32"),
    case(lambda x: L.mean(x, 0, dtype=L.float64), XI, id="mean_int_dtype"),
    case(lambda x: x.prod(), P(3, 4), id="prod"),
    case(lambda x: x.prod(1), R(3, 4), id="prod_dim"),
    case(lambda x: x.prod(0, keepdim=True), R(3, 4), id="prod_keepdim"),
    case(lambda x: x.prod(), I(5, low=1, high=4), id="prod_int"),
    case(lambda x: x.max(), X, id="max"),
    case(lambda x: x.max(1), X, id="max_dim"),
    case(lambda x: x.max(dim=-1, keepdim=True), X, id="max_dim_keepdim"),
    case(lambda x: x.min(0), X, id="min_dim"),
    case(lambda x: x.min(), XI, id="min_int"),
    case(lambda x: x.max(2), XI, id="max_dim_int"),
    case(lambda x, y: L.max(x, y), R(3, 4), R(4), id="max_binary"),
    case(lambda x, y: x.min(y), R(3, 4), R(4), id="min_binary"),
    case(lambda x: x.amax((0, 2)), X, id="amax_dims"),
    case(lambda x: L.amin(x, -1, keepdim=True), X, id="amin_keepdim"),
    case(lambda x: x.argmax(), X, id="argmax"),
    case(lambda x: x.argmax(1, keepdim=True), X, id="argmax_keepdim"),
    case(lambda x: x.argmin(-1), X, id="argmin_dim"),
    case(lambda x: x.argmax(0), XI, id="argmax_int"),
    case(lambda x: x.argmax(), A([1.0, math.nan, 3.0, math.nan]), id="argmax_nan"),
    case(lambda x: x.max(0), A([1.0, math.nan, 3.0]), id="max_dim_nan", grad=False),
    case(lambda x: x.var(), X, id="var"),
    case(lambda x: x.var(1), X, id="var_dim"),
    case(lambda x: x.var((0, 2), keepdim=True), X, id="var_dims_keepdim"),
    case(lambda x: x.var(1, unbiased=False), X, id="var_biased"),
    case(lambda x: x.var(False), X, id="var_positional_unbiased"),
    case(lambda x: x.var(dim=1, correction=0), X, id="var_correction0"),
    case(lambda x: x.var(dim=2, correction=2), X, id="var_correction2"),
    case(lambda x: x.std(), X, id="std"),
    case(lambda x: x.std(0, keepdim=True), X, id="std_dim"),
    case(lambda x: x.std(dim=(1, 2), correction=0), X, id="std_correction0"),
    case(lambda x: x.std(-1, unbiased=False), R(3, 4, dtype=F32), id="std_f32"),
    case(lambda x: L.var_mean(x, 1), X, id="var_mean"),
    case(lambda x: L.std_mean(x, (0, 1), correction=0), X, id="std_mean"),
    case(lambda x: x.logsumexp(1), X, id="logsumexp"),
    case(lambda x: L.logsumexp(x, (0, 2), keepdim=True), X, id="logsumexp_dims"),
    case(lambda x: L.logsumexp(x * 100, -1), R(3, 4, dtype=F32), id="logsumexp_large_f32"),
    case(lambda x: L.logsumexp(x, 0), XI, id="logsumexp_int"),
    case(lambda x: x.norm(), X, id="norm"),
    case(lambda x: x.norm(1), X, id="norm_p1"),
    case(lambda x: x.norm(2, dim=1), X, id="norm_p2_dim"),
    case(lambda x: x.norm(float("inf"), dim=(0, 2)), X, id="norm_inf_dims"),
    case(lambda x: x.norm(3, dim=-1, keepdim=True), X, id="norm_p3"),
    case(lambda x: x.norm(p=0.5, dim=1), X, id="norm_p05"),
    case(lambda x: L.norm(x, float("-inf"), 1), X, id="norm_neg_inf"),
    case(lambda x: L.norm(x, 0, 1), X, id="norm_p0"),
    case(lambda x: x.all(), B(3, 4), id="all"),
    case(lambda x: x.any(1), B(3, 4), id="any_dim"),
    case(lambda x: x.all(0), XI, id="all_int"),
    case(lambda x: L.all(x, 1, keepdim=True), R(3, 4), id="all_float"),
    case(lambda x: x.count_nonzero(), XI, id="count_nonzero"),
    case(lambda x: L.count_nonzero(x, 1), XI, id="count_nonzero_dim"),
    case(lambda x: L.nansum(x), A([1.0, math.nan, 2.0]), id="nansum"),
    case(lambda x: L.nanmean(x), A([1.0, math.nan, 2.0]), id="nanmean"),
    case(lambda x: x.cumsum(1), X, id="cumsum"),
    case(lambda x: x.cumsum(-1), XI, id="cumsum_int"),
    case(lambda x: L.cumsum(x, 0, dtype=L.float64), R(3, 4, dtype=F32), id="cumsum_dtype"),
    case(lambda x: x.cumsum(0), B(4), id="cumsum_bool"),
    case(lambda x: x.cumsum(0), A(2.0), id="cumsum_0d"),
    case(lambda x: x.cumprod(1), X, id="cumprod"),
    case(lambda x: x.cumprod(0), XI, id="cumprod_int"),
    case(lambda x: x.cumprod(-1), A([[1.0, 0.0, 2.0, 0.0, 3.0], [0.0, 2.0, 3.0, 4.0, 5.0]]), id="cumprod_zeros"),
    case(lambda x: x.sort(), X, id="sort"),
    case(lambda x: x.sort(0, descending=True), X, id="sort_desc"),
    case(lambda x: x.sort(1), XI, id="sort_int", check_grad=False),
    case(lambda x: x.sort(descending=True), A([2.0, math.nan, -1.0, math.nan, 5.0]), id="sort_nan_desc"),
    case(lambda x: x.sort(), A([2.0, math.nan, -1.0, math.inf, 5.0]), id="sort_nan"),
    case(lambda x: x.argsort(1), X, id="argsort"),
    case(lambda x: L.argsort(x, 0, descending=True), X, id="argsort_desc"),
    case(lambda x: x.topk(2), X, id="topk"),
    case(lambda x: x.topk(3, dim=0, largest=False), X, id="topk_smallest"),
    case(lambda x: L.topk(x, 2, 1).values, XI, id="topk_int"),  # tie order of indices is unspecified
    case(lambda x: L.msort(x), X, id="msort"),
]


REDUCTION_CASES += [
    case(lambda x: x.sum(dim=()), R(2, 3), id="sum_empty_dims_is_all"),
    case(lambda x: x.mean(dim=[]), R(2, 3), id="mean_empty_dims_is_all"),
    case(lambda x: x.amax(dim=()), R(2, 3), id="amax_empty_dims"),
    case(lambda x: x.std(dim=()), R(2, 3), id="std_empty_dims", check_grad=False),  # torch's backward: n=1
    case(lambda x: x.sum(), R(0, 3), id="sum_empty"),
    case(lambda x: x.prod(0), R(0, 3), id="prod_empty"),
    case(lambda x: x.logsumexp(0), R(0, 3), id="logsumexp_empty"),
    case(lambda x: x.softmax(0), R(0, 3), id="softmax_empty"),
    case(lambda x: x.log_softmax(1), R(0, 3), id="log_softmax_empty"),
    case(lambda x: x.var(), R(1), id="var_one_element"),
    case(lambda x: x.var(0), R(1, 3), id="var_dim_one_element"),
    case(lambda x: x.var(correction=3), R(2), id="var_no_dof", check_grad=False),  # torch: +inf whatever the sign
    case(lambda x: x.std(), R(1), id="std_one_element"),
]


@run_cases(REDUCTION_CASES)
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_reductions(fn, inputs, kw):
    helper(fn, *inputs, **kw)


REDUCTION_ERRORS = [
    case(lambda x: x.sum(3), X, id="sum_dim_out_of_range"),
    case(lambda x: x.sum((1, 1)), X, id="sum_dim_repeated"),
    case(lambda x: x.mean(), XI, id="mean_int"),
    case(lambda x: x.max(), R(0, 3), id="max_empty"),
    case(lambda x: x.topk(7, dim=1), X, id="topk_k_too_large"),
    case(lambda x: x.norm(), XI, id="norm_int"),
    case(lambda x: x.cumsum(3), X, id="cumsum_bad_dim"),
    case(lambda x: x.argmax(5), X, id="argmax_bad_dim"),
]


@run_cases(REDUCTION_ERRORS)
def test_reduction_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- shape ops

S3 = R(2, 3, 4)

SHAPE_CASES = [
    case(lambda x: x.reshape(4, 6), S3, id="reshape"),
    case(lambda x: x.reshape(-1, 2), S3, id="reshape_infer"),
    case(lambda x: L.reshape(x, (3, -1)), S3, id="reshape_fn"),
    case(lambda x: x.reshape(()), R(1, 1), id="reshape_0d"),
    case(lambda x: x.transpose(0, 2).reshape(-1), S3, id="reshape_noncontig"),
    case(lambda x: x.view(6, 4), S3, id="view"),
    case(lambda x: x.view(-1), S3, id="view_flat"),
    case(lambda x: x.view_as(L.zeros(3, 8)), S3, id="view_as"),
    case(lambda x: x.permute(2, 0, 1), S3, id="permute"),
    case(lambda x: x.permute((1, -1, 0)), S3, id="permute_tuple_neg"),
    case(lambda x: x.transpose(0, -1), S3, id="transpose"),
    case(lambda x: L.swapaxes(x, 1, 2), S3, id="swapaxes"),
    case(lambda x: x.swapdims(0, 1), S3, id="swapdims"),
    case(lambda x: x.t(), R(3, 4), id="t"),
    case(lambda x: x.t(), R(3), id="t_1d"),
    case(lambda x: x.T, R(3, 4), id="T"),
    case(lambda x: x.mT, S3, id="mT"),
    case(lambda x: x.squeeze(), R(1, 3, 1, 2), id="squeeze"),
    case(lambda x: x.squeeze(2), R(1, 3, 1, 2), id="squeeze_dim"),
    case(lambda x: x.squeeze(1), R(1, 3, 1, 2), id="squeeze_non1_dim"),
    case(lambda x: x.squeeze((0, 2)), R(1, 3, 1, 2), id="squeeze_dims"),
    case(lambda x: x.unsqueeze(0), S3, id="unsqueeze"),
    case(lambda x: x.unsqueeze(-1), S3, id="unsqueeze_neg"),
    case(lambda x: x.unsqueeze(-1), A(2.0), id="unsqueeze_0d_neg"),
    case(lambda x: x.expand(2, 3, 4), R(3, 1), id="expand"),
    case(lambda x: x.expand(5, -1, 4), R(3, 1), id="expand_minus1"),
    case(lambda x, y: x.expand_as(y), R(1, 4), R(3, 4), id="expand_as"),
    case(lambda x: L.broadcast_to(x, (2, 3, 4)), R(4), id="broadcast_to"),
    case(lambda x, y: L.broadcast_tensors(x, y), R(3, 1), R(4), id="broadcast_tensors"),
    case(lambda x: x.flatten(), S3, id="flatten"),
    case(lambda x: x.flatten(1), S3, id="flatten_start"),
    case(lambda x: L.flatten(x, 0, 1), S3, id="flatten_range"),
    case(lambda x: x.flatten(), A(3.0), id="flatten_0d"),
    case(lambda x: x.unflatten(2, (2, 2)), S3, id="unflatten"),
    case(lambda x: x.unflatten(-1, (2, -1)), S3, id="unflatten_infer"),
    case(lambda x: x.ravel(), S3, id="ravel"),
    case(lambda x: x.movedim(0, -1), S3, id="movedim"),
    case(lambda x: L.movedim(x, (0, 1), (2, 0)), S3, id="movedim_tuple"),
    case(lambda x: L.moveaxis(x, -1, 0), S3, id="moveaxis"),
    case(lambda x, y: L.cat([x, y]), R(2, 3), R(4, 3), id="cat"),
    case(lambda x, y: L.cat((x, y), dim=-1), R(2, 3), R(2, 1), id="cat_neg_dim"),
    case(lambda x, y, z: L.cat([x, y, z], 1), R(2, 3), R(2, 1), R(2, 2), id="cat3"),
    case(lambda x, y: L.cat([x, y]), R(2, 3), I(1, 3), id="cat_promote"),
    case(lambda x, y: L.cat([x, y]), R(2, 3, dtype=F32), R(1, 3), id="cat_f32_f64"),
    case(lambda x, y: L.cat([x, y]), R(2, 3), R(0), id="cat_legacy_empty"),
    case(lambda x, y: L.concat([x, y], 0), I(2), I(3), id="concat_int"),
    case(lambda x, y: L.stack([x, y]), R(2, 3), R(2, 3), id="stack"),
    case(lambda x, y: L.stack([x, y], -1), R(2, 3), R(2, 3), id="stack_last"),
    case(lambda x, y: L.stack([x, y], 1), R(2, 3), I(2, 3), id="stack_promote"),
    case(lambda x, y: L.hstack([x, y]), R(2, 3), R(2, 2), id="hstack"),
    case(lambda x, y: L.hstack([x, y]), R(3), R(2), id="hstack_1d"),
    case(lambda x, y: L.vstack([x, y]), R(3), R(2, 3), id="vstack"),
    case(lambda x, y: L.row_stack([x, y]), R(3), R(3), id="row_stack"),
    case(lambda x, y: L.dstack([x, y]), R(2, 3), R(2, 3), id="dstack"),
    case(lambda x, y: L.dstack([x, y]), R(3), R(3), id="dstack_1d"),
    case(lambda x, y: L.column_stack([x, y]), R(3), R(3, 2), id="column_stack"),
    case(lambda x: x.split(2, 1), R(3, 5), id="split_int"),
    case(lambda x: L.split(x, [1, 4], dim=1), R(3, 5), id="split_sizes"),
    case(lambda x: x.split(3), R(3, 5), id="split_exact"),
    case(lambda x: x.chunk(3, 1), R(3, 5), id="chunk"),
    case(lambda x: x.chunk(4, 1), R(3, 6), id="chunk_fewer"),
    case(lambda x: L.chunk(x, 2), R(3, 5), id="chunk_dim0"),
    case(lambda x: x.tensor_split(3, 1), R(3, 7), id="tensor_split_sections"),
    case(lambda x: x.tensor_split([1, 4], dim=1), R(3, 7), id="tensor_split_indices"),
    case(lambda x: L.tensor_split(x, [2, 9]), R(4, 2), id="tensor_split_past_end"),
    case(lambda x: L.tensor_split(x, 5), R(3), id="tensor_split_more_than_size"),
    case(lambda x: x.hsplit(2), R(3, 4), id="hsplit"),
    case(lambda x: L.hsplit(x, [1, 2]), R(5), id="hsplit_1d"),
    case(lambda x: x.vsplit([1]), R(3, 4), id="vsplit"),
    case(lambda x: x.dsplit(2), S3, id="dsplit"),
    case(lambda x: x.unbind(1), R(3, 4), id="unbind"),
    case(lambda x: L.unbind(x), R(3, 4), id="unbind0"),
    case(lambda x: x.narrow(1, 1, 2), R(3, 4), id="narrow"),
    case(lambda x: x.narrow(-1, -3, 2), R(3, 4), id="narrow_neg_start"),
    case(lambda x: x.tile((2,)), R(3, 2), id="tile_short"),
    case(lambda x: x.tile((2, 1, 3)), R(3, 2), id="tile_long"),
    case(lambda x: x.repeat(2, 3), R(3, 2), id="repeat"),
    case(lambda x: x.repeat(2, 1, 2), R(3, 2), id="repeat_more_dims"),
    case(lambda x: x.repeat(2), A(3.0), id="repeat_0d"),
    case(lambda x: x.flip(0), R(3, 4), id="flip"),
    case(lambda x: x.flip((0, -1)), S3, id="flip_dims"),
    case(lambda x: L.fliplr(x), R(3, 4), id="fliplr"),
    case(lambda x: L.flipud(x), R(3, 4), id="flipud"),
    case(lambda x: x.roll(1), R(3, 4), id="roll_flat"),
    case(lambda x: x.roll(-2, 1), R(3, 4), id="roll_dim"),
    case(lambda x: x.roll((1, 5), (0, 1)), R(3, 4), id="roll_dims"),
    case(lambda x: x.tril(), R(4, 5), id="tril"),
    case(lambda x: x.tril(-1), R(4, 5), id="tril_neg"),
    case(lambda x: L.tril(x, 2), R(2, 4, 5), id="tril_batched"),
    case(lambda x: x.triu(1), R(4, 5), id="triu"),
    case(lambda x: L.triu(x, -2), I(4, 4), id="triu_int"),
    case(lambda x: L.diag(x), R(4), id="diag_1d"),
    case(lambda x: L.diag(x, 1), R(3), id="diag_1d_offset"),
    case(lambda x: L.diag(x, -2), R(3), id="diag_1d_neg_offset"),
    case(lambda x: x.diag(), R(3, 4), id="diag_2d"),
    case(lambda x: x.diag(1), R(3, 4), id="diag_2d_offset"),
    case(lambda x: x.diag(-1), R(3, 4), id="diag_2d_neg_offset"),
    case(lambda x: x.diagonal(), S3, id="diagonal"),
    case(lambda x: x.diagonal(1, 1, 2), S3, id="diagonal_dims"),
    case(lambda x: L.diag_embed(x), R(2, 3), id="diag_embed"),
    case(lambda x: x.contiguous(), R(3, 4).T, id="contiguous"),
    case(lambda x: x.clone(), R(3, 4), id="clone"),
    case(lambda x: L.atleast_2d(x), R(3), id="atleast_2d"),
    case(lambda x: L.atleast_3d(x), R(3, 4), id="atleast_3d"),
    case(lambda x: L.atleast_1d(x), A(2.0), id="atleast_1d"),
    case(lambda x: x.T.reshape(-1), B(3, 2), id="reshape_bool"),
    case(lambda x, y: L.meshgrid(x, y, indexing="ij"), R(3), R(2), id="meshgrid_ij"),
    case(lambda x, y: L.meshgrid(x, y, indexing="xy"), R(3), R(2), id="meshgrid_xy"),
]


SHAPE_CASES += [
    case(lambda x: x.flip(0), A(2.0), id="flip_0d"),
    case(lambda x: x.split(0), R(0, 2), id="split_zero_size_empty"),
    case(lambda x: x.gather(0, L.tensor(0)), A(2.0), id="gather_0d"),
]


@run_cases(SHAPE_CASES)
def test_shape_ops(fn, inputs, kw):
    helper(fn, *inputs, **kw)


def test_views_share_storage_like_torch():
    res = []
    for lib in (tracejit, torch):
        x = lib.zeros(3, 4)
        x.view(12)[1] = 1.0
        x.transpose(0, 1)[2, 0] = 2.0
        x[1].fill_(3.0)
        x.narrow(1, 3, 1).mul_(0)
        x[2, 3].fill_(4.0)
        x[2][2].add_(1.0)
        x.expand(2, 3, 4)
        res.append(x.tolist())
        assert x.t().is_contiguous() is False and x.is_contiguous() is True
        assert x.t().stride() == (1, 4)
    assert res[0] == res[1] == [[0.0, 1.0, 2.0, 0.0], [3.0, 3.0, 3.0, 0.0], [0.0, 0.0, 1.0, 4.0]]


SHAPE_ERRORS = [
    case(lambda x: x.reshape(5, -1), S3, id="reshape_bad"),
    case(lambda x: x.reshape(-1, -1), S3, id="reshape_two_infer"),
    case(lambda x: x.transpose(0, 1).view(-1), S3, id="view_noncontig"),
    case(lambda x: x.permute(0, 1), S3, id="permute_too_few"),
    case(lambda x: x.permute(0, 1, 1), S3, id="permute_dup"),
    case(lambda x: x.transpose(0, 3), S3, id="transpose_bad_dim"),
    case(lambda x: x.expand(3, 4), R(2, 4), id="expand_bad"),
    case(lambda x: x.expand(4), R(2, 4), id="expand_fewer_dims"),
    case(lambda x, y: L.cat([x, y]), R(2, 3), R(2, 4), id="cat_mismatch"),
    case(lambda x, y: L.cat([x, y], 2), R(2, 3), R(2, 3), id="cat_bad_dim"),
    case(lambda x, y: L.stack([x, y]), R(2, 3), R(3, 2), id="stack_mismatch"),
    case(lambda x: x.split([1, 1], 1), R(3, 5), id="split_bad_sizes"),
    case(lambda x: x.narrow(1, 3, 2), R(3, 4), id="narrow_out_of_range"),
    case(lambda x: x.squeeze(3), R(2, 3), id="squeeze_bad_dim"),
    case(lambda x: x.unsqueeze(4), R(2, 3), id="unsqueeze_bad_dim"),
    case(lambda x: x.unsqueeze(1), A(2.0), id="unsqueeze_0d_bad_dim"),
    case(lambda x: x.narrow(1, 5, 0), R(3, 4), id="narrow_bad_start"),
    case(lambda x: x.narrow(1, 2, -1), R(3, 4), id="narrow_negative_length"),
    case(lambda x: x.repeat(2), R(2, 3), id="repeat_too_few"),
    case(lambda x: x.t(), S3, id="t_3d"),
    case(lambda x: x.flatten(2, 1), S3, id="flatten_bad_range"),
    case(lambda x: x.unflatten(1, (2, 2)), S3, id="unflatten_bad"),
    case(lambda x: L.diag(x), S3, id="diag_3d"),
    case(lambda x: x.chunk(0), R(3), id="chunk_zero"),
    case(lambda x: x.split(0), R(3), id="split_zero"),
    case(lambda x: x.split(-1), R(3), id="split_negative"),
    case(lambda x: x.movedim(0, 3), S3, id="movedim_bad"),
]


@run_cases(SHAPE_ERRORS)
def test_shape_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- indexing

def _set(index, value_is_input=True):
    """y = x.clone(); y[index] = v; return y (through both libraries' autograd)."""
    def f(x, v):
        y = x.clone()
        ix = index if isinstance(index, tuple) else (index,)
        y[tuple(i(L.cur) if callable(i) else i for i in ix)] = v
        return y
    return f


def _set_scalar(index, value):
    def f(x):
        y = x * 1
        y[index] = value
        return y
    return f


def _T(v):
    """An index tensor built inside the lambda (so it is a tensor of the library being run)."""
    return lambda lib: lib.tensor(v)


def _noop():
    pass


IX = R(4, 5, 6)
IDX = A([2, 0, 2], np.int64)

INDEX_CASES = [
    case(lambda x: x[1], IX, id="int"),
    case(lambda x: x[-1, 2], IX, id="int_int_neg"),
    case(lambda x: x[1:3], IX, id="slice"),
    case(lambda x: x[:, 1:4:2], IX, id="slice_step"),
    case(lambda x: x[..., ::3], IX, id="ellipsis_slice_step"),
    case(lambda x: x[None, 1, :, None], IX, id="none"),
    case(lambda x: x[1, ..., None], IX, id="ellipsis_none"),
    case(lambda x: x[-3:-1, 5:1], IX, id="neg_and_empty_slice"),
    case(lambda x: x[:100], IX, id="slice_past_end"),
    case(lambda x: x[()], A(3.0), id="empty_tuple_0d"),
    case(lambda x: x[...], IX, id="ellipsis_only"),
    case(lambda x, i: x[i], IX, IDX, id="adv_tensor_dup"),
    case(lambda x: x[[0, 3, -1]], IX, id="adv_list"),
    case(lambda x, i: x[:, i], IX, IDX, id="adv_middle"),
    case(lambda x, i: x[..., i], IX, IDX, id="adv_last"),
    case(lambda x, i, j: x[i, j], IX, IDX, A([1, 4, -2], np.int64), id="adv_pair"),
    case(lambda x, i, j: x[i, :, j], IX, IDX, A([1, 4, -2], np.int64), id="adv_separated"),
    case(lambda x, i, j: x[:, i, j], IX, IDX, A([1, 4, 3], np.int64), id="adv_adjacent"),
    case(lambda x, i: x[i], IX, A([[0, 1], [3, 3]], np.int64), id="adv_2d_index"),
    case(lambda x, i, j: x[i, j], IX, A([[0], [1]], np.int64), A([2, 3, 4], np.int64), id="adv_bcast"),
    case(lambda x, i: x[1:3, i, None], IX, IDX, id="adv_with_slice_none"),
    case(lambda x, i: x[i, 1], IX, IDX, id="adv_and_int"),
    case(lambda x, i: x[i], IX, A([1, 3], np.int32), id="adv_int32"),
    case(lambda x, m: x[m], R(3, 4), B(3, 4), id="mask_full"),
    case(lambda x, m: x[m], R(3, 4), B(3), id="mask_rows"),
    case(lambda x, m: x[:, m], R(3, 4), B(4), id="mask_cols"),
    case(lambda x: x[x > 0], R(3, 4), id="mask_expr"),
    case(lambda x, m: x[m, 1:], R(3, 4), B(3), id="mask_and_slice"),
    case(lambda x: x[[True, False, True]], R(3, 4), id="mask_list"),
    case(_set(1), R(4, 5), R(5), id="set_int"),
    case(_set((slice(1, 3), slice(None, None, 2))), R(4, 5), R(2, 3), id="set_slice"),
    case(_set(_T([0, 2])), R(4, 5), R(1, 5), id="set_adv_bcast"),
    case(_set((slice(None), _T([4, 0]))), R(4, 5), R(4, 2), id="set_adv_cols"),
    case(_set(_T([[True, False, True, False, True]] * 4)), R(4, 5), R(12), id="set_mask"),
    case(_set(Ellipsis), R(4, 5), R(5), id="set_ellipsis"),
    case(_set_scalar(1, 3.0), R(4, 5), id="set_scalar"),
    case(_set_scalar((slice(None), 0), -1), R(4, 5), id="set_scalar_int"),
    case(lambda x: _set_scalar(x > 0, 0.0)(x), R(4, 5), id="set_mask_scalar"),
    case(lambda x, v: _set(slice(1, 3))(x, v), I(4, 5), R(5), id="set_int_tensor_float_value", grad=False),
    case(lambda x, i: x.gather(1, i), R(3, 4), I(3, 5, high=4), id="gather"),
    case(lambda x, i: L.gather(x, 0, i), R(3, 4), I(2, 4, high=3), id="gather_dim0"),
    case(lambda x, i: x.gather(-1, i), R(3, 4), I(2, 2, high=4), id="gather_smaller_index"),
    case(lambda x, i: x.gather(0, i), R(3), I(5, high=3), id="gather_1d"),
    case(lambda x, i, s: x.scatter(1, i, s), R(3, 4), A([[0, 3], [1, 2], [2, 0]], np.int64), R(3, 2), id="scatter"),
    case(lambda x, i, s: x.scatter(0, i, s), R(3, 4), A([[0, 1], [2, 0]], np.int64), R(3, 3),
         id="scatter_src_larger", check_grad=False),  # torch's own backward rejects a larger src
    case(lambda x, i: x.scatter(1, i, 1.5), R(3, 4), A([[0, 3], [1, 2], [2, 0]], np.int64), id="scatter_value"),
    case(lambda x, i, s: x.scatter(1, i, s, reduce="add"), R(3, 4), I(3, 5, high=4), R(3, 5), id="scatter_reduce_add",
         check_grad=False),  # torch: derivative for scatter(reduce=) not implemented
    case(lambda x, i, s: x.scatter(1, i, s, reduce="multiply"), R(3, 4), I(3, 5, high=4), R(3, 5),
         id="scatter_reduce_multiply", check_grad=False),
    case(lambda x, i, s: x.clone().scatter_(1, i, s, reduce="add"), R(3, 4), I(3, 5, high=4), R(3, 5),
         id="scatter__reduce_add", check_grad=False),
    case(lambda x, i, s: x.clone().scatter_(0, i, s), R(3, 4), A([[0, 1, 2, 0]], np.int64), R(1, 4), id="scatter_"),
    case(lambda x, i, s: x.scatter_add(1, i, s), R(3, 4), I(3, 5, high=4), R(3, 5), id="scatter_add"),
    case(lambda x, i, s: L.scatter_add(x, 0, i, s), R(3, 4), I(2, 3, high=3), R(3, 4), id="scatter_add_src_larger",
         check_grad=False),
    case(lambda x, i, s: x.clone().scatter_add_(1, i, s), R(3, 4), I(3, 5, high=4), R(3, 5), id="scatter_add_"),
    case(lambda x, i: x.index_select(1, i), R(3, 4), IDX, id="index_select"),
    case(lambda x, i: L.index_select(x, 0, i), R(3, 4), A([2, 2], np.int64), id="index_select_dup"),
    case(lambda x, i: x.index_select(0, i), R(3), A(1, np.int64), id="index_select_0d_index"),
    case(lambda x, i, s: x.index_add(0, i, s), R(3, 4), IDX, R(3, 4), id="index_add_dup"),
    case(lambda x, i, s: x.index_add(1, i, s, alpha=2.0), R(3, 4), IDX, R(3, 3), id="index_add_alpha"),
    case(lambda x, i, s: x.clone().index_add_(1, i, s), R(3, 4), IDX, R(3, 3), id="index_add_"),
    case(lambda x, m: x.masked_fill(m, 0.5), R(3, 4), B(3, 4), id="masked_fill"),
    case(lambda x, m: x.masked_fill(m, -1), R(3, 4), B(4), id="masked_fill_bcast"),
    case(lambda x, m, v: x.masked_fill(m, v), R(3, 4), B(3, 1), A(2.5), id="masked_fill_0d_tensor"),
    case(lambda x, m: x.masked_fill(m, 2.5), I(3, 4), B(3, 4), id="masked_fill_int_float_value"),
    case(lambda x, m: x.clone().masked_fill_(m, 0.0), R(3, 4), B(3, 4), id="masked_fill_"),
    case(lambda x, m: x.masked_select(m), R(3, 4), B(3, 4), id="masked_select"),
    case(lambda x, m: L.masked_select(x, m), R(3, 4), B(4), id="masked_select_bcast"),
    case(lambda x, m: L.masked_select(x, m), R(4), B(3, 4), id="masked_select_bcast_input"),
    case(lambda x, i: x.take(i), R(3, 4), A([[0, 11], [-1, 5]], np.int64), id="take"),
    case(lambda x, i: L.take_along_dim(x, i, 1), R(3, 4), I(3, 2, high=4), id="take_along_dim"),
    case(lambda x, i: L.take_along_dim(x, i, 0), R(3, 4), I(1, 4, high=3), id="take_along_dim_bcast"),
    case(lambda x, i: L.take_along_dim(x, i), R(3, 4), I(5, high=12), id="take_along_dim_none"),
    case(lambda x: L.take_along_dim(x, x.argsort(1), 1), R(3, 4), id="take_along_dim_argsort"),
    case(lambda x: x.nonzero(), A([[0, 1, 0], [2, 0, 3]]), id="nonzero"),
    case(lambda x: L.nonzero(x, as_tuple=True), A([[0, 1, 0], [2, 0, 3]]), id="nonzero_tuple"),
    case(lambda x: x.nonzero(), A(0.0), id="nonzero_0d_false"),
    case(lambda x: x.nonzero(), A(5.0), id="nonzero_0d_true"),
    case(lambda x: x.nonzero(), np.zeros((2, 3)), id="nonzero_none"),
    case(lambda x: L.argwhere(x), B(3, 4), id="argwhere"),
    case(lambda x: L.where(x), B(3, 4), id="where_one_arg"),
    case(lambda x: x.select(1, -1), R(3, 4), id="select"),
    case(lambda x, i: x.index_fill(1, i, -1.0), R(3, 4), IDX, id="index_fill"),
    case(lambda x, i, s: x.index_copy(0, i, s), R(3, 4), A([2, 0], np.int64), R(2, 4), id="index_copy"),
    case(lambda x, v: x.index_put((L.tensor([0, 2]), L.tensor([1, 1])), v, accumulate=True), R(3, 4), R(2),
         id="index_put_accumulate"),
]


@run_cases(INDEX_CASES)
def test_indexing(fn, inputs, kw):
    helper(fn, *inputs, **kw)


INDEX_ERRORS = [
    case(lambda x: x[4], R(4, 5), id="int_out_of_range"),
    case(lambda x: x[0, 0, 0], R(4, 5), id="too_many_indices"),
    case(lambda x: x[L.tensor([0, 5])], R(4, 5), id="tensor_index_out_of_range"),
    case(lambda x: x[L.tensor([0.0, 1.0])], R(4, 5), id="float_index"),
    case(lambda x: x[::-1], R(4, 5), id="negative_step"),
    case(lambda x: x[L.tensor([True, False])], R(4, 5), id="mask_wrong_size"),
    case(lambda x, i: x.gather(1, i), R(3, 4), I(3, high=4), id="gather_ndim_mismatch"),
    case(lambda x, i: x.gather(1, i), R(3, 4), A([[5]], np.int64), id="gather_out_of_range"),
    case(lambda x, i, s: x.scatter(1, i, s), R(3, 4), A([[7]], np.int64), R(1, 1), id="scatter_out_of_range"),
    case(lambda x, i: x.index_select(0, i), R(3, 4), A([[0]], np.int64), id="index_select_2d_index"),
    case(lambda x, m: x.masked_fill(m, 0.0), R(3, 4), I(3, 4), id="masked_fill_int_mask"),
    case(lambda x, i: x.take(i), R(3, 4), A([12], np.int64), id="take_out_of_range"),
    case(lambda x, i: x.gather(1, i), R(3, 4), A([[-1]], np.int64), id="gather_negative"),
    case(lambda x, i: x.gather(0, i), R(3, 4), I(3, 5, high=3), id="gather_index_too_wide"),
    case(lambda x, i, s: x.scatter(1, i, s), R(3, 4), I(3, 5, high=4), R(3, 4), id="scatter_index_larger_than_src"),
    case(lambda x, i: x.index_select(0, i), R(3, 4), A([-1], np.int64), id="index_select_negative"),
    case(lambda x, i: x.index_select(0, i), R(3, 4), A([3], np.int64), id="index_select_out_of_range"),
    case(lambda x: x[:, L.tensor([True, False, True])], R(3, 4), id="mask_wrong_size_dim1"),
    case(lambda x, v: _set(1)(x, v), R(4, 5), R(4), id="setitem_shape_mismatch"),
    case(lambda x, i, s: x.index_add(0, i, s), R(3, 4), IDX, R(2, 4), id="index_add_mismatch"),
]


@run_cases(INDEX_ERRORS)
def test_indexing_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- linear algebra

MATMUL_SHAPES = [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3,)), ((3,), (5, 3, 4)),
    ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)),
    ((4, 1, 2, 3), (1, 5, 3, 2)), ((1, 2, 3), (6, 3, 1)), ((0, 3), (3, 2)), ((2, 0), (0, 3)),
]


@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_every_rank(sa, sb, dtype):
    helper(lambda a, b: a @ b, R(*sa, dtype=dtype), R(*sb, dtype=dtype))
    helper(lambda a, b: L.matmul(a, b), R(*sa, dtype=dtype), R(*sb, dtype=dtype), grad=[1])


LINALG_CASES = [
    case(lambda a, b: L.mm(a, b), R(2, 3), R(3, 4), id="mm"),
    case(lambda a, b: a.mm(b), R(2, 3, dtype=F32), R(3, 4, dtype=F32), id="mm_f32"),
    case(lambda a, b: L.bmm(a, b), R(5, 2, 3), R(5, 3, 4), id="bmm"),
    case(lambda a, b: L.mv(a, b), R(2, 3), R(3), id="mv"),
    case(lambda a, b: L.dot(a, b), R(3), R(3), id="dot"),
    case(lambda a, b: a.dot(b), I(3), I(3), id="dot_int"),
    case(lambda a, b: L.inner(a, b), R(3), R(3), id="inner_1d"),
    case(lambda a, b: L.inner(a, b), R(2, 3), R(4, 3), id="inner_2d"),
    case(lambda a, b: L.inner(a, b), R(2, 5, 3), R(4, 3), id="inner_3d_2d"),
    case(lambda a, b: L.inner(a, b), R(2, 3), R(4, 2, 3), id="inner_2d_3d"),
    case(lambda a, b: L.inner(a, b), A(2.0), R(4, 3), id="inner_scalar"),
    case(lambda a, b: L.outer(a, b), R(3), R(4), id="outer"),
    case(lambda a, b: a.outer(b), I(3), R(4), id="outer_promote"),
    case(lambda a, b: L.ger(a, b), R(3), R(4), id="ger"),
    case(lambda c, a, b: L.addmm(c, a, b), R(2, 4), R(2, 3), R(3, 4), id="addmm"),
    case(lambda c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2.0), R(4), R(2, 3), R(3, 4), id="addmm_bcast_beta_alpha"),
    case(lambda c, a, b: L.addmm(c, a, b, beta=0), R(2, 4), R(2, 3), R(3, 4), id="addmm_beta0"),
    case(lambda c, a, b: L.addmv(c, a, b, alpha=3), R(2), R(2, 3), R(3), id="addmv"),
    case(lambda c, a, b: L.baddbmm(c, a, b, beta=2), R(5, 2, 4), R(5, 2, 3), R(5, 3, 4), id="baddbmm"),
    case(lambda a, b: L.einsum("ij,jk->ik", a, b), R(2, 3), R(3, 4), id="einsum_mm"),
    case(lambda a, b: L.einsum("ij,jk", a, b), R(2, 3), R(3, 4), id="einsum_implicit"),
    case(lambda a, b: L.einsum("bij,bjk->bik", a, b), R(5, 2, 3), R(5, 3, 4), id="einsum_bmm"),
    case(lambda a, b: L.einsum("i,j->ij", a, b), R(3), R(4), id="einsum_outer"),
    case(lambda a, b: L.einsum("i,i->", a, b), R(3), R(3), id="einsum_dot"),
    case(lambda a: L.einsum("ij->ji", a), R(2, 3), id="einsum_transpose"),
    case(lambda a: L.einsum("ijk->", a), R(2, 3, 4), id="einsum_sum_all"),
    case(lambda a: L.einsum("ijk->j", a), R(2, 3, 4), id="einsum_sum_some"),
    case(lambda a, b: L.einsum("...ij,...jk->...ik", a, b), R(5, 2, 3), R(5, 3, 4), id="einsum_ellipsis"),
    case(lambda a, b: L.einsum("...ij,jk->...ik", a, b), R(6, 5, 2, 3), R(3, 4), id="einsum_ellipsis_one_side"),
    case(lambda a, b: L.einsum("b...,b->...", a, b), R(3, 2, 4), R(3), id="einsum_ellipsis_trailing"),
    case(lambda a, b: L.einsum("...i,...i->...", a, b), R(2, 1, 3), R(4, 3), id="einsum_ellipsis_bcast"),
    case(lambda a, w, b: L.einsum("bn,anm,bm->ba", a, w, b), R(2, 3), R(4, 3, 5), R(2, 5), id="einsum_bilinear"),
    case(lambda a, b, c: L.einsum("ij,jk,kl->il", a, b, c), R(2, 3), R(3, 4), R(4, 2), id="einsum_chain"),
    case(lambda a, b: L.einsum("ij , jk -> ik", a, b), R(2, 3), R(3, 4), id="einsum_spaces"),
    case(lambda a, b: L.einsum("ij,jk->ik", [a, b]), R(2, 3), R(3, 4), id="einsum_list"),
    case(lambda a, b: L.einsum("ab,cd->abcd", a, b), R(2, 3), R(2, 2), id="einsum_outer_2d"),
    case(lambda a, b: L.einsum("ij,ij->i", a, b), R(3, 1), R(3, 4), id="einsum_size1_bcast"),
    case(lambda a: L.einsum("ii->i", a), R(3, 3), id="einsum_diagonal"),
    case(lambda a: L.einsum("ii", a), R(3, 3), id="einsum_trace"),
    case(lambda a, b: L.einsum("bii,bj->bij", a, b), R(2, 3, 3), R(2, 4), id="einsum_batched_diagonal"),
    case(lambda a: L.einsum("iji->j", a), R(3, 2, 3), id="einsum_diagonal_split"),
]


@run_cases(LINALG_CASES)
def test_linalg(fn, inputs, kw):
    helper(fn, *inputs, **kw)


LINALG_ERRORS = [
    case(lambda a, b: a @ b, R(2, 3), R(4, 5), id="matmul_mismatch"),
    case(lambda a, b: a @ b, R(3), R(4), id="matmul_1d_mismatch"),
    case(lambda a, b: a @ b, A(2.0), R(3), id="matmul_0d"),
    case(lambda a, b: a @ b, R(2, 2, 3), R(3, 3, 4), id="matmul_batch_mismatch"),
    case(lambda a, b: a @ b, R(2, 3), I(3, 4), id="matmul_dtype_mismatch"),
    case(lambda a, b: L.mm(a, b), R(2, 3), R(3), id="mm_1d"),
    case(lambda a, b: L.bmm(a, b), R(2, 2, 3), R(3, 3, 4), id="bmm_batch"),
    case(lambda a, b: L.dot(a, b), R(2, 3), R(3), id="dot_2d"),
    case(lambda a, b: L.dot(a, b), R(3), R(4), id="dot_mismatch"),
    case(lambda a, b: L.einsum("ij,jk->ik", a, b), R(2, 3), R(4, 5), id="einsum_mismatch"),
    case(lambda a, b: L.einsum("ij,jk->ik", a), R(2, 3), R(4, 5), id="einsum_operand_count"),
    case(lambda a: L.einsum("ij->ijk", a), R(2, 3), id="einsum_output_unknown"),
    case(lambda a: L.einsum("ijk->ij", a), R(2, 3), id="einsum_too_many_subscripts"),
]


@run_cases(LINALG_ERRORS)
def test_linalg_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


def test_matmul_error_names_both_shapes():
    e = helper_raises(lambda a, b: a @ b, R(2, 3), R(4, 5))
    assert "2x3" in str(e) and "4x5" in str(e)


# ----------------------------------------------------------------------------- softmax and losses

NN_CASES = [
    case(lambda x: x.softmax(-1), R(3, 4), id="softmax"),
    case(lambda x: L.softmax(x, 0), R(3, 4, 2), id="softmax_dim0"),
    case(lambda x: L.nn.functional.softmax(x, dim=1), R(3, 4, 2, dtype=F32), id="softmax_f32"),
    case(lambda x: x.softmax(1, dtype=L.float64), R(3, 4, dtype=F32), id="softmax_dtype"),
    case(lambda x: x.softmax(-1), A([[1000.0, 0.0, -1000.0], [-math.inf, 0.0, 1.0]]), id="softmax_extreme"),
    case(lambda x: x.softmax(0), A(2.0), id="softmax_0d"),
    case(lambda x: x.log_softmax(-1), R(3, 4), id="log_softmax"),
    case(lambda x: L.log_softmax(x, 1), R(3, 4, 2, dtype=F32), id="log_softmax_f32"),
    case(lambda x: L.nn.functional.log_softmax(x, -1), A([[1000.0, 0.0, -1000.0], [-math.inf, 0.0, 1.0]]),
         id="log_softmax_extreme"),
    case(lambda x: L.nn.functional.softmin(x, 1), R(3, 4), id="softmin"),
    case(lambda x, y: L.nn.functional.mse_loss(x, y), R(3, 4), R(3, 4), id="mse"),
    case(lambda x, y: L.nn.functional.mse_loss(x, y, reduction="sum"), R(3, 4), R(3, 4), id="mse_sum"),
    case(lambda x, y: L.nn.functional.mse_loss(x, y, reduction="none"), R(3, 4), R(3, 4), id="mse_none"),
    case(lambda x, y: L.nn.functional.l1_loss(x, y), R(3, 4), R(3, 4), id="l1"),
    case(lambda x, y: L.nn.functional.l1_loss(x, y, reduction="none"), R(3, 4, dtype=F32), R(3, 4, dtype=F32),
         id="l1_none_f32"),
    case(lambda x, y: L.nn.functional.smooth_l1_loss(x, y), R(3, 4), R(3, 4), id="smooth_l1"),
    case(lambda x, y: L.nn.functional.smooth_l1_loss(x, y, beta=0.5, reduction="sum"), R(3, 4), R(3, 4),
         id="smooth_l1_beta"),
    case(lambda x, y: L.nn.functional.smooth_l1_loss(x, y, beta=0.0), R(3, 4), R(3, 4), id="smooth_l1_beta0"),
    case(lambda x, y: L.nn.functional.huber_loss(x, y, delta=0.7), R(3, 4), R(3, 4), id="huber"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t), R(4, 5), I(4), id="ce"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t, reduction="sum"), R(4, 5), I(4), id="ce_sum"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t, reduction="none"), R(4, 5), I(4), id="ce_none"),
    case(lambda x, t, w: L.nn.functional.cross_entropy(x, t, weight=w), R(4, 5), I(4), P(5), id="ce_weight",
         grad=[0]),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t, ignore_index=2), R(6, 5), A([2, 0, 2, 4, 1, 2], np.int64),
         id="ce_ignore"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t, ignore_index=-100), R(3, 5), A([-100, 0, 4], np.int64),
         id="ce_ignore_default"),
    case(lambda x, t, w: L.nn.functional.cross_entropy(x, t, weight=w, ignore_index=1, reduction="none"), R(4, 5),
         A([1, 0, 3, 1], np.int64), P(5), id="ce_weight_ignore_none", grad=[0]),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t, label_smoothing=0.1), R(4, 5), I(4), id="ce_smooth"),
    case(lambda x, t, w: L.nn.functional.cross_entropy(x, t, weight=w, label_smoothing=0.2), R(4, 5), I(4), P(5),
         id="ce_smooth_weight", grad=[0]),
    case(lambda x, t, w: L.nn.functional.cross_entropy(x, t, weight=w, label_smoothing=0.2, ignore_index=0,
                                                       reduction="sum"),
         R(4, 5), A([0, 1, 2, 0], np.int64), P(5), id="ce_smooth_weight_ignore_sum", grad=[0]),
    case(lambda x, t, w: L.nn.functional.cross_entropy(x, t, weight=w, label_smoothing=0.2, ignore_index=0,
                                                       reduction="none"),
         R(4, 5), A([0, 1, 2, 0], np.int64), P(5), id="ce_smooth_weight_ignore_none", grad=[0]),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t.softmax(1)), R(4, 5), R(4, 5), id="ce_probs"),
    case(lambda x, t, w: L.nn.functional.cross_entropy(x, t.softmax(1), weight=w), R(4, 5), R(4, 5), P(5),
         id="ce_probs_weight", grad=[0, 1]),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t.softmax(1), label_smoothing=0.3), R(4, 5), R(4, 5),
         id="ce_probs_smooth"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t.softmax(1), reduction="none"), R(4, 5, 2), R(4, 5, 2),
         id="ce_probs_3d_none"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t.softmax(1), reduction="sum"), R(4, 5), R(4, 5),
         id="ce_probs_sum"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t), R(2, 5, 3, 2), I(2, 3, 2), id="ce_spatial"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t, reduction="none", label_smoothing=0.1), R(2, 5, 3),
         I(2, 3), id="ce_spatial_none_smooth"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t), R(5), A(3, np.int64), id="ce_unbatched"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t), R(4, 5, dtype=F32), I(4), id="ce_f32"),
    case(lambda x, t: L.nn.functional.nll_loss(x.log_softmax(1), t), R(4, 5), I(4), id="nll"),
    case(lambda x, t, w: L.nn.functional.nll_loss(x, t, weight=w, ignore_index=3), R(6, 5),
         A([3, 0, 1, 4, 3, 2], np.int64), P(5), id="nll_weight_ignore", grad=[0]),
    case(lambda x, t: L.nn.functional.nll_loss(x, t, reduction="sum"), R(4, 5), I(4), id="nll_sum"),
    case(lambda x, t: L.nn.functional.nll_loss(x, t, reduction="none"), R(4, 5), I(4), id="nll_none"),
    case(lambda x, t: L.nn.functional.nll_loss(x, t, reduction="none"), R(5), A(3, np.int64), id="nll_unbatched_none"),
    case(lambda x, t: L.nn.functional.nll_loss(x, t), R(2, 5, 3), I(2, 3), id="nll_spatial"),
    case(lambda x, t: L.nn.functional.binary_cross_entropy(x, t), U(3, 4, low=0.05, high=0.95), U(3, 4, low=0, high=1),
         id="bce"),
    case(lambda x, t, w: L.nn.functional.binary_cross_entropy(x, t, weight=w, reduction="sum"),
         U(3, 4, low=0.05, high=0.95), U(3, 4, low=0, high=1), P(4), id="bce_weight", grad=[0, 1]),
    case(lambda x, t: L.nn.functional.binary_cross_entropy(x, t, reduction="none"), A([0.0, 1.0, 0.5]),
         A([0.0, 1.0, 1.0]), id="bce_edges"),
    case(lambda x, t: L.nn.functional.binary_cross_entropy(x, t), A([0.0, 1.0, 0.5]), A([1.0, 0.0, 1.0]),
         id="bce_clamped_log"),
    case(lambda x, t: L.nn.functional.binary_cross_entropy(x.sigmoid(), t), R(3, 4, dtype=F32) * 40,
         U(3, 4, low=0, high=1, dtype=F32), id="bce_saturated_f32"),
    case(lambda x, t: L.nn.functional.binary_cross_entropy_with_logits(x, t), R(3, 4), U(3, 4, low=0, high=1),
         id="bce_logits"),
    case(lambda x, t, p: L.nn.functional.binary_cross_entropy_with_logits(x, t, pos_weight=p), R(3, 4),
         U(3, 4, low=0, high=1), P(4), id="bce_logits_pos_weight", grad=[0, 1]),
    case(lambda x, t, w, p: L.nn.functional.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=p,
                                                                             reduction="none"),
         R(3, 4) * 30, U(3, 4, low=0, high=1), P(3, 1), P(4), id="bce_logits_weight_pos_weight_large", grad=[0, 1]),
    case(lambda x, t: L.nn.functional.kl_div(x.log_softmax(1), t.softmax(1), reduction="batchmean"), R(3, 4), R(3, 4),
         id="kl_div"),
    case(lambda x, t: L.nn.functional.kl_div(x, t, reduction="sum", log_target=True), R(3, 4), R(3, 4),
         id="kl_div_log_target"),
    case(lambda x: L.nn.functional.one_hot(x, 5), I(4), id="one_hot"),
    case(lambda x: L.nn.functional.one_hot(x), I(2, 3), id="one_hot_infer"),
    case(lambda x, w, b: L.nn.functional.linear(x, w, b), R(2, 3), R(4, 3), R(4), id="linear"),
    case(lambda x: L.nn.functional.normalize(x, dim=1), R(3, 4), id="normalize"),
    case(lambda x, y: L.nn.functional.cosine_similarity(x, y), R(3, 4), R(3, 4), id="cosine_similarity"),
    case(lambda x: L.nn.functional.pad(x, (1, 2, 0, 1), value=0.5), R(2, 3), id="pad"),
]


@run_cases(NN_CASES)
def test_softmax_and_losses(fn, inputs, kw):
    helper(fn, *inputs, **kw)


NN_ERRORS = [
    case(lambda x, t: L.nn.functional.cross_entropy(x, t), R(4, 5), A([0, 1, 5, 2], np.int64), id="ce_target_oob"),
    case(lambda x, t: L.nn.functional.cross_entropy(x, t), R(4, 5), I(3), id="ce_batch_mismatch"),
    case(lambda x, t: L.nn.functional.nll_loss(x, t), R(4, 5), R(4), id="nll_float_target"),
    case(lambda x, t: L.nn.functional.mse_loss(x, t), R(4, 5), R(3, 5), id="mse_shape_mismatch"),
    case(lambda x: L.nn.functional.one_hot(x, 3), I(4, low=3, high=5), id="one_hot_oob"),
    case(lambda x: L.nn.functional.one_hot(x, 3), I(4, low=-2, high=0), id="one_hot_negative"),
    case(lambda x, t: L.nn.functional.binary_cross_entropy(x, t), U(3, low=0.1), U(2, low=0.1), id="bce_size"),
    case(lambda x, t: L.nn.functional.binary_cross_entropy(x, t), A([1.5]), A([1.0]), id="bce_out_of_range"),
]


@run_cases(NN_ERRORS)
def test_loss_errors(fn, inputs, kw):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        helper_raises(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- in-place variants

INPLACE = ["add", "sub", "mul", "div", "pow", "remainder", "fmod", "atan2", "lerp", "floor_divide", "true_divide",
           "xlogy", "logical_and", "logical_or", "logical_xor", "clamp_min"]
INPLACE_UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "floor", "ceil",
                 "round", "trunc", "sign", "reciprocal", "square", "log1p", "expm1", "erf", "frac", "exp2",
                 "log2", "log10", "tan", "atan", "sinh", "cosh", "t", "sigmoid", "asin", "acos"]


@pytest.mark.parametrize("name", INPLACE_UNARY)
def test_inplace_unary(name):
    gen = U if name in ("asin", "acos") else P
    helper(lambda x: getattr(x * 1, name + "_")(), gen(3, 3))


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_binary(name):
    if name == "lerp":
        helper(lambda x, y: (x * 1).lerp_(y, 0.3), P(3, 4), P(4))
    elif name in ("logical_and", "logical_or", "logical_xor"):
        helper(lambda x, y: getattr(x.clone(), name + "_")(y), B(3, 4), B(4))
    else:
        helper(lambda x, y: getattr(x * 1, name + "_")(y), P(3, 4), P(4), check_grad=name != "floor_divide")


INPLACE_CASES = [
    case(lambda x, y: _iadd(x * 1, y), R(3, 4), R(4), id="iadd"),
    case(lambda x: _ops_all(x * 1), R(3, 4), id="augmented_ops"),
    case(lambda x: _ops_all(x.clone()), I(3, 4, low=1), id="augmented_ops_int", grad=False),
    case(lambda x: (x * 1).clamp_(-0.5, 0.5), R(3, 4), id="clamp_"),
    case(lambda x: (x * 1).clamp_(min=0.0), R(3, 4), id="clamp_min_"),
    case(lambda x: (x * 1).clamp_min_(0.0).clamp_max_(0.5), R(3, 4), id="clamp_min_max_"),
    case(lambda x: (x * 1).add_(x), R(3, 4), id="add_self"),
    case(lambda x: (x * 1).mul_(2).mul_(x), R(3, 4), id="mul_chain"),
    case(lambda x, y: (x * 1).add_(y, alpha=2), R(3, 4), R(4), id="add_alpha_"),
    case(lambda x, a, b: (x * 1).addcmul_(a, b, value=0.5), R(3, 4), R(3, 4), R(4), id="addcmul_"),
    case(lambda x, a, b: (x * 1).addcdiv_(a, b, value=2), R(3, 4), R(3, 4), P(4), id="addcdiv_"),
    case(lambda x: (x * 1).fill_(2.0), R(3, 4), id="fill_"),
    case(lambda x: (x * 1).zero_(), R(3, 4), id="zero_"),
    case(lambda x, y: (x * 1).copy_(y), R(3, 4), R(4), id="copy_bcast"),
    case(lambda x, y: (x * 1).copy_(y), R(3, 4), I(3, 4), id="copy_int"),
    case(lambda x, v: (x * 1).fill_(v), R(3, 4), A(2.0), id="fill_tensor"),
    case(lambda x: (x * 1).unsqueeze_(0).squeeze_(), R(3, 4), id="squeeze_unsqueeze_"),
    case(lambda x: (x * 1).transpose_(0, 1), R(3, 4), id="transpose_"),
    case(lambda x: (x * 1).tril_(), R(3, 4), id="tril_"),
    case(lambda x: L.nn.functional.relu_(x * 1), R(3, 4), id="F_relu_"),
    case(lambda x: x.clone().logical_not_(), R(3, 4).round(), id="logical_not_float", grad=False),
    case(lambda x: _floordiv_inplace(x * 1), R(3, 4), id="ifloordiv", check_grad=False),
    case(lambda x: (x * 1).uniform_().mul(0), R(3, 4), id="uniform_keeps_graph"),
    case(lambda x: (x * 1).masked_fill_(x > 0, 0.0), R(3, 4), id="masked_fill_self_mask"),
    case(lambda x: _view_then_update(x), R(3, 4), id="inplace_no_grad_view", grad=False),
    case(lambda x: (x * 1).exp_().sum(), R(3, 4), id="exp_then_sum"),
    case(lambda x: _inplace_on_int(x), I(3, 4), id="int_inplace_int_ops", grad=False),
    case(lambda x: x.clone().add_(1.5), R(3, 4, dtype=F32), id="f32_add_float"),
    case(lambda x: x.clone().add_(L.tensor(1.5, dtype=L.float64)), R(3, 4, dtype=F32), id="f32_add_0d_f64"),
    case(lambda x, y: x.clone().add_(y), R(3, 4, dtype=F32), R(3, 4), id="f32_add_f64_tensor"),
]


def _iadd(x, y):
    x += y
    return x


def _ops_all(x):
    x += 2
    x *= 3
    x -= 1
    x **= 2
    x %= 7
    return x


def _floordiv_inplace(x):
    x //= 0.3
    return x


def _view_then_update(x):
    y = x.clone()
    v = y[1:, ::2]
    v.mul_(10)
    y.t()[0].add_(1)
    return y


def _inplace_on_int(x):
    x = x.clone()
    x.add_(3).mul_(2).remainder_(5).clamp_(1, 3)
    x //= 2
    x[0] = 7
    x[x > 5] = -1
    return x


def _modify_unread_input(x):
    """In-place changes of inputs a VJP does not read are fine in PyTorch (scalar mul, indexing, where)."""
    h = x * 1
    a = h * 0.5
    b = h[L.tensor([0, 2])]
    c = L.where(h > 0, h, 0.0)
    h.add_(1)
    return a + b.sum() + c


def _self_scaled_column(x):
    y = x * 1
    y[:, 0] = y[:, 0] * 3
    return y


def _view_mul(x):
    y = x * 1
    y[0].mul_(3)
    return y


def _view_add_other(x, w):
    y = x * 1
    y.view(-1)[1:3].add_(w)
    return y


def _base_without_grad(w):
    b = L.zeros(2, 3, dtype=L.float64)
    b[1].copy_(w)
    b.t()[0].mul_(w[0])
    return b * 2


def _view_reads_sibling(x):
    y = x * 1
    y.t()[0].mul_(y.t()[1])
    return y


def _view_then_both(x):
    y = x * 1
    z = y[:, 1:]
    z.exp_()
    return y.sum(1) + z.sum()


def _reshape_view_update(x):
    y = x * 2
    y.reshape(-1)[::2].zero_()
    y.flatten()[1] = 5.0
    return y


INPLACE_CASES += [
    case(_view_mul, R(3, 4), id="copyslices_view_mul"),
    case(_view_add_other, R(3, 4), R(2), id="copyslices_add_other"),
    case(_base_without_grad, R(3), id="copyslices_base_without_grad"),
    case(_view_then_both, R(3, 4), id="copyslices_view_and_base"),
    case(lambda x: _reshape_view_update(x.sin()), R(3, 4), id="copyslices_reshape_view"),
    case(_modify_unread_input, R(3, 4), id="modify_unread_input"),
    case(_self_scaled_column, R(3, 4), id="setitem_from_own_slice"),
]


@run_cases(INPLACE_CASES)
def test_inplace(fn, inputs, kw):
    helper(fn, *inputs, **kw)


INPLACE_ERRORS = [
    case(lambda x: x.add_(1), R(3), id="leaf_requires_grad", grad=True),
    case(lambda x: _iadd(x, 1.5), I(3), id="int_plus_float_inplace"),
    case(lambda x: x.div_(2), I(3), id="int_div_inplace"),
    case(lambda x, y: x.clone().add_(y), R(3), R(2, 3), id="inplace_broadcast_grows"),
    case(lambda x: x.clone().exp_(), I(3), id="int_exp_inplace"),
    case(lambda x: x.expand(3, 3).add_(1), R(3), id="inplace_on_expanded"),
    case(lambda x: x.clone().logical_not_().add_(2.5), B(3), id="bool_add_float"),
    case(lambda x: _modify_saved(x), R(3), id="modified_saved_tensor", grad=True),
    case(lambda x, y: _modify_mul_operand(x, y), R(3), R(3), id="modified_mul_operand", grad=True),
    case(lambda x: x.fill_(L.tensor([1.0, 2.0])), R(3), id="fill_nonscalar"),
    case(lambda x: x[0].mul_(2), R(3), id="view_of_leaf_inplace", grad=True),
    case(lambda x: _view_reads_sibling(x).sum().backward(), R(3, 4), id="view_update_modifies_saved_view",
         grad=True),
    case(lambda x: _exp_then_view_update(x).sum().backward(), R(3, 4), id="view_update_modifies_saved_output",
         grad=True),
]


def _modify_saved(x):
    y = x * 1
    z = y.exp()
    y.mul_(2)
    (z * y).sum().backward()   # exp saved its output, not y: fine in both
    w = x * 1
    s = w.sin()
    w.add_(1)                  # sin saved its input w: backward must raise
    s.sum().backward()


def _modify_mul_operand(x, y):
    h = x * 1
    z = h * y           # y requires grad: its gradient reads h
    h.add_(1)
    z.sum().backward()


def _exp_then_view_update(x):
    y = x.exp()
    y[0].zero_()
    return y


@run_cases(INPLACE_ERRORS)
def test_inplace_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- creation

CREATION_CASES = [
    case(lambda: L.arange(5), id="arange_int"),
    case(lambda: L.arange(2, 9, 3), id="arange_start_step"),
    case(lambda: L.arange(5.0), id="arange_float_end"),
    case(lambda: L.arange(0, 1, 0.1), id="arange_float_step"),
    case(lambda: L.arange(1, 2.5, 0.5), id="arange_float_inclusive_edge"),
    case(lambda: L.arange(5, 0, -1), id="arange_negative_step"),
    case(lambda: L.arange(-1.0, -3.0, -0.25), id="arange_negative_float_step"),
    case(lambda: L.arange(5, dtype=L.float64), id="arange_dtype"),
    case(lambda: L.arange(0, 10, 3, dtype=L.int32), id="arange_int32"),
    case(lambda: L.arange(0), id="arange_empty"),
    case(lambda: L.arange(L.tensor(4)), id="arange_tensor_end"),
    case(lambda: L.linspace(0, 1, 5), id="linspace"),
    case(lambda: L.linspace(-2, 3, 1), id="linspace_one"),
    case(lambda: L.linspace(0, 10, 4, dtype=L.int64), id="linspace_int"),
    case(lambda: L.linspace(1, 0, 6, dtype=L.float64), id="linspace_f64_desc"),
    case(lambda: L.logspace(0, 2, 3), id="logspace"),
    case(lambda: L.logspace(0, 3, 4, base=2), id="logspace_base2"),
    case(lambda: L.logspace(-1, 1, 5, dtype=L.float64), id="logspace_f64"),
    case(lambda: L.eye(3), id="eye"),
    case(lambda: L.eye(2, 4), id="eye_rect"),
    case(lambda: L.eye(3, dtype=L.int64), id="eye_int"),
    case(lambda: L.eye(3, dtype=L.bool), id="eye_bool"),
    case(lambda: L.full((2, 3), 7), id="full_int"),
    case(lambda: L.full((2, 3), 7.0), id="full_float"),
    case(lambda: L.full((2,), True), id="full_bool"),
    case(lambda: L.full((2, 2), 1, dtype=L.float64), id="full_dtype"),
    case(lambda: L.full([], 3.5), id="full_0d"),
    case(lambda: L.zeros(2, 3), id="zeros"),
    case(lambda: L.zeros((2, 3), dtype=L.int32), id="zeros_tuple_dtype"),
    case(lambda: L.ones([2]), id="ones_list"),
    case(lambda: L.ones(()), id="ones_0d"),
    case(lambda: L.empty(2, 0).shape, id="empty_shape"),
    case(lambda x: L.zeros_like(x), R(2, 3), id="zeros_like", grad=False),
    case(lambda x: L.ones_like(x, dtype=L.int64), R(2, 3), id="ones_like_dtype", grad=False),
    case(lambda x: L.full_like(x, 2.5), I(2, 3), id="full_like_int_truncates", grad=False),
    case(lambda x: L.empty_like(x).shape, R(2, 3), id="empty_like", grad=False),
    case(lambda: L.tensor([1, 2, 3]), id="tensor_int"),
    case(lambda: L.tensor([1.0, 2]), id="tensor_mixed"),
    case(lambda: L.tensor([True, False]), id="tensor_bool"),
    case(lambda: L.tensor([[1, 2], [3, 4]], dtype=L.float64), id="tensor_dtype"),
    case(lambda: L.tensor(3), id="tensor_0d_int"),
    case(lambda: L.tensor(2.5), id="tensor_0d_float"),
    case(lambda: L.tensor([]), id="tensor_empty"),
    case(lambda: L.tensor([True, 2]), id="tensor_bool_int"),
    case(lambda: L.tensor(np.array([1, 2], np.int32)), id="tensor_from_numpy_int32"),
    case(lambda: L.tensor(np.float64(2.0)), id="tensor_numpy_scalar"),
    case(lambda: L.tensor([L.tensor(1.0), L.tensor(2.0)]), id="tensor_of_0d_tensors"),
    case(lambda: L.as_tensor([1, 2], dtype=L.float32), id="as_tensor"),
    case(lambda: L.Tensor([1, 2]), id="Tensor_ctor_float"),
    case(lambda: L.Tensor(2, 3).shape, id="Tensor_ctor_sizes"),
    case(lambda: L.from_numpy(np.arange(3.0)), id="from_numpy"),
]


@run_cases(CREATION_CASES)
def test_creation(fn, inputs, kw):
    helper(fn, *inputs, **kw)


def test_from_numpy_shares_memory():
    a = np.zeros(3)
    t = tracejit.from_numpy(a)
    a[0] = 5
    t[1] = 7
    assert t.tolist() == [5.0, 7.0, 0.0] and a.tolist() == [5.0, 7.0, 0.0]
    assert t.numpy() is a or np.shares_memory(t.numpy(), a)


CREATION_ERRORS = [
    case(lambda: L.arange(0, 5, 0), id="arange_zero_step"),
    case(lambda: L.arange(0, 5, -1), id="arange_wrong_sign"),
    case(lambda: L.zeros(-1, 2), id="zeros_negative"),
    case(lambda: L.tensor([[1, 2], [3]]), id="tensor_ragged"),
    case(lambda: L.linspace(0, 1, -1), id="linspace_negative_steps"),
    case(lambda: L.tensor([1, 2]).requires_grad_(), id="int_requires_grad"),
]


@run_cases(CREATION_ERRORS)
def test_creation_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


# ----------------------------------------------------------------------------- type promotion

PROMO_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
PROMO_SCALARS = [True, 2, 2.5]


def _typed(lib, name, ndim):
    return lib.ones((2,) * ndim, dtype=getattr(lib, name))


@pytest.mark.parametrize("ndim_a,ndim_b", [(1, 1), (1, 0), (0, 0)])
@pytest.mark.parametrize("a", PROMO_DTYPES)
def test_promotion_table(a, ndim_a, ndim_b):
    """result dtypes of add/mul/div/where/comparisons for every dtype pair (dimensioned with dimensioned
    or with 0-d) and with Python scalars, against torch."""
    for b in PROMO_DTYPES:
        for op in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x / y, lambda x, y: L.where(x > 0, x, y),
                   lambda x, y: L.maximum(x, y), lambda x, y: x == y, lambda x, y: L.cat([x.reshape(-1), y.reshape(-1)])):
            got = []
            for lib in (tracejit, torch):
                L.cur = lib
                try:
                    x, y = _typed(lib, a, ndim_a), _typed(lib, b, ndim_b)
                    try:
                        got.append(_dtname(op(x, y).dtype))
                    except Exception as e:  # noqa: BLE001
                        got.append(type(e).__name__)
                finally:
                    L.cur = None
            assert got[0] == got[1], f"{a} ({ndim_a}-d) op {b} ({ndim_b}-d): tracejit {got[0]}, torch {got[1]}"
    for s in PROMO_SCALARS:
        for op in (lambda x, y: x + y, lambda x, y: y * x, lambda x, y: x / y, lambda x, y: x ** y,
                   lambda x, y: x > y, lambda x, y: L.where(x > 0, x, y), lambda x, y: L.full_like(x, y)):
            got = []
            for lib in (tracejit, torch):
                L.cur = lib
                try:
                    got.append(_dtname(op(_typed(lib, a, ndim_b), s).dtype))
                except Exception as e:  # noqa: BLE001
                    got.append(type(e).__name__)
                finally:
                    L.cur = None
            assert got[0] == got[1], f"{a} op {s!r}: tracejit {got[0]}, torch {got[1]}"


def test_promotion_functions():
    for a in PROMO_DTYPES:
        for b in PROMO_DTYPES:
            ja, jb = getattr(tracejit, a), getattr(tracejit, b)
            ta, tb = getattr(torch, a), getattr(torch, b)
            assert _dtname(tracejit.promote_types(ja, jb)) == _dtname(torch.promote_types(ta, tb)), (a, b)
            assert tracejit.can_cast(ja, jb) == torch.can_cast(ta, tb), (a, b)
    assert _dtname(tracejit.result_type(tracejit.tensor([1]), 1.0)) == _dtname(torch.result_type(torch.tensor([1]), 1.0))
    assert _dtname(tracejit.result_type(tracejit.tensor([1], dtype=tracejit.int32), tracejit.tensor(1))) == "int32"


def test_default_dtype_follows_set_default_dtype():
    for lib in (tracejit, torch):
        old = lib.get_default_dtype()
        try:
            lib.set_default_dtype(lib.float64)
            assert _dtname(lib.tensor([1.0]).dtype) == "float64"
            assert _dtname(lib.arange(0.0, 1.0, 0.5).dtype) == "float64"
            assert _dtname((lib.tensor([1]) + 0.5).dtype) == "float64"
            assert _dtname(lib.zeros(2).dtype) == "float64"
        finally:
            lib.set_default_dtype(old)


# ----------------------------------------------------------------------------- repr

REPR_CASES = [
    lambda: L.tensor([1.0, 2.0, 3.0]),
    lambda: L.tensor([[1.0, -2.0], [30.0, 4.0]]),
    lambda: L.tensor([1.5, 2.25, -3.125]),
    lambda: L.tensor([0.1234, 12.5, -7.0]),
    lambda: L.tensor([1.0, 2.0], requires_grad=True),
    lambda: L.tensor([1.0, 2.0], requires_grad=True) * 2,
    lambda: L.tensor([1.0, 2.0], requires_grad=True).exp(),
    lambda: L.tensor([1.0, 2.0], requires_grad=True).sum(),
    lambda: L.tensor([1, 2, 3]),
    lambda: L.tensor([[1, -20], [3, 4]]),
    lambda: L.tensor([True, False]),
    lambda: L.tensor([1.0, 2.5], dtype=L.float64),
    lambda: L.tensor([1, 2], dtype=L.int32),
    lambda: L.tensor(3.0),
    lambda: L.tensor(3),
    lambda: L.tensor(2.5, dtype=L.float64),
    lambda: L.tensor([]),
    lambda: L.zeros(2, 0),
    lambda: L.tensor([1.0, float("nan"), float("inf")]),
    lambda: L.tensor([1e-5, 1.0]),
    lambda: L.tensor([1e10, 1.0]),
    lambda: L.tensor([[0.5, 1.0], [1.5, 2.0]], dtype=L.float64, requires_grad=True),
    lambda: L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True) + 1,
    lambda: L.tensor([1.0, 2.0], requires_grad=True)[0],
    lambda: L.arange(12.0).reshape(3, 4) / 3,
    lambda: L.ones(2, 3, dtype=L.int64),
    lambda: L.tensor([-0.0, 0.0]),
    lambda: L.tensor([100.0, 2.5]),
    lambda: L.tensor([1.0, 0.001]),
    lambda: L.tensor([1.0, 2000.0]),
    lambda: L.tensor([0.001, 2.0]),
    lambda: L.tensor([1e8, 0.0]),
    lambda: L.tensor([123456789.0, 1.0]),
    lambda: L.tensor([1.0, float("nan"), -float("inf"), 0.0]),
    lambda: L.tensor([float("nan")]),
    lambda: L.tensor([True, True]),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True)[0],
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True)[:, 1:],
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True)[None],
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True)[0, None],
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True)[:, 0],
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True)[...],
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True)[L.tensor([0, 0])],
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).reshape(2, 1),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).permute(1, 0),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).expand(3, 2),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).mean(),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True) @ L.ones(2, 1),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).double(),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).clone(),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).relu(),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True).pow(2),
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True) / 3,
    lambda: L.tensor([[1.0, 2.0]], requires_grad=True) - 3,
    lambda: L.arange(2000.0),
    lambda: L.arange(30.0).reshape(3, 10) / 7,
    lambda: L.arange(1200.0).reshape(2, 600),
    lambda: L.arange(2000).reshape(10, 200),
    lambda: L.arange(3000.0).reshape(10, 10, 30) / 3,
    lambda: L.tensor([True, False] * 30),
    lambda: L.arange(24.0).reshape(2, 3, 4).double().requires_grad_(),
    lambda: L.tensor([[]]),
    lambda: L.zeros(0, dtype=L.int64),
    lambda: L.arange(100.0).reshape(1, 100),
]


@pytest.mark.parametrize("k", range(len(REPR_CASES)))
def test_repr_matches_torch(k):
    out = []
    for lib in (torch, tracejit):
        L.cur = lib
        try:
            out.append(str(REPR_CASES[k]()))
        finally:
            L.cur = None
    assert out[1] == out[0].replace("torch", "tracejit")


# ----------------------------------------------------------------------------- random ops (shapes and dtypes)

RANDOM_CASES = [
    lambda: L.rand(2, 3), lambda: L.rand((2,), dtype=L.float64), lambda: L.randn(3, 1),
    lambda: L.randn(2, dtype=L.float64), lambda: L.randint(0, 5, (3, 2)), lambda: L.randint(4, (2,)),
    lambda: L.randint(0, 5, (3,), dtype=L.int32), lambda: L.randperm(5), lambda: L.bernoulli(L.full((2, 3), 0.5)),
    lambda: L.normal(0.0, 1.0, (2, 2)), lambda: L.normal(L.zeros(3), 1.0), lambda: L.normal(L.zeros(2, 1), L.ones(3)),
    lambda: L.normal(1.0, L.ones(3, dtype=L.float64)), lambda: L.rand_like(L.zeros(2, dtype=L.float64)),
    lambda: L.randn_like(L.zeros(2, 3)), lambda: L.randint_like(L.zeros(2, 2), 5),
    lambda: L.zeros(3, 2).uniform_(-1, 1), lambda: L.zeros(3, dtype=L.float64).normal_(2.0, 0.5),
    lambda: L.zeros(4).bernoulli_(0.3), lambda: L.zeros(4, dtype=L.int64).random_(0, 3),
    lambda: L.multinomial(L.tensor([0.2, 0.8]), 3, replacement=True),
]


@pytest.mark.parametrize("k", range(len(RANDOM_CASES)))
def test_random_ops_shapes_and_dtypes(k):
    out = []
    for lib in (torch, tracejit):
        L.cur = lib
        try:
            t = RANDOM_CASES[k]()
            out.append((tuple(t.shape), _dtname(t.dtype)))
        finally:
            L.cur = None
    assert out[1] == out[0]


def test_random_values_in_range():
    tracejit.manual_seed(3)
    r = tracejit.rand(1000)
    assert 0 <= float(r.min()) and float(r.max()) < 1
    n = tracejit.randn(4000, dtype=tracejit.float64)
    assert abs(float(n.mean())) < 0.1 and abs(float(n.std()) - 1) < 0.1
    i = tracejit.randint(2, 5, (1000,))
    assert set(i.tolist()) == {2, 3, 4}
    assert sorted(tracejit.randperm(6).tolist()) == list(range(6))
    assert set(tracejit.bernoulli(tracejit.full((100,), 0.5)).tolist()) == {0.0, 1.0}


# ----------------------------------------------------------------------------- meta (shape rules) coverage

# ops no test here runs eagerly (their meta is checked by the tracing tests only), if any
# (the collectives need an MPI job: tests/distributed/scripts/collectives.py checks their meta against their results)
META_UNCHECKED = {"all_reduce_start", "broadcast_start", "all_gather_start", "reduce_scatter_start", "comm_wait"}


def test_meta_checked_for_every_op(request, check_meta_against_eager):
    """conftest checks meta == eager output shape/dtype on every eager op call in tests/ops; this asserts
    that (when the whole of tests/ops ran) every registry op was called at least once."""
    from tracejit.ops.registry import OPS
    items = request.session.items
    here = [i for i in items if i.fspath == request.node.fspath]
    gc = [i for i in items if str(i.fspath).endswith("test_gradcheck.py")]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    deselected = reporter.stats.get("deselected") if reporter is not None else None
    if len(here) < 900 or not gc or deselected:
        pytest.skip("run the whole of tests/ops for the meta coverage check")
    workerinput = getattr(request.config, "workerinput", None)     # a pytest-xdist worker
    if workerinput is not None and not workerinput.get("tracejit_ops_in_one_worker"):
        # only with --dist load (-n's default) does tests/conftest.py run all of tests/ops in one worker
        pytest.skip("under pytest-xdist the meta coverage check needs --dist load (the default of -n)")
    missing = set(OPS) - check_meta_against_eager - META_UNCHECKED
    assert not missing, f"ops whose meta was never checked against eager: {sorted(missing)}"


# ----------------------------------------------------------------------------- broadcast errors name both shapes

BROADCAST_ERRORS = [
    case(lambda x, y: x + y, R(2, 3), R(4, 3), id="add"),
    case(lambda x, y: x * y, R(2, 3), R(2), id="mul_trailing"),
    case(lambda x, y: x - y, I(5, 1, 3), I(4, 2), id="sub_int"),
    case(lambda x, y: x / y, R(3), R(4), id="div_1d"),
    case(lambda x, y: x < y, R(2, 3), R(3, 2), id="lt"),
    case(lambda x, y: L.maximum(x, y), R(2, 3), R(4, 3), id="maximum"),
    case(lambda x, y: x ** y, P(2, 3), R(2, 2), id="pow"),
    case(lambda x, y: L.atan2(x, y), R(2, 3), R(4), id="atan2"),
    case(lambda c, x, y: L.where(c, x, y), B(2, 3), R(2, 3), R(4, 3), id="where_values"),
    case(lambda c, x, y: L.where(c, x, y), B(5), R(2, 3), R(2, 3), id="where_condition"),
    case(lambda x, y, w: L.lerp(x, y, w), R(2, 3), R(2, 3), R(4, 3), id="lerp_weight"),
    case(lambda x, y: L.logical_and(x, y), B(2, 3), B(3, 3), id="logical_and"),
    case(lambda x, y: x.clone().add_(y), R(2, 3), R(4, 3), id="add_inplace"),
    case(lambda x, m: x.masked_fill(m, 0.0), R(2, 3), B(4, 3), id="masked_fill"),
    case(lambda x, y: L.nn.functional.mse_loss(x, y), R(2, 3), R(4, 3), id="mse_loss"),
    case(lambda x, y: L.broadcast_tensors(x, y), R(2, 3), R(4, 3), id="broadcast_tensors"),
]


@run_cases(BROADCAST_ERRORS)
def test_broadcast_errors_name_both_shapes(fn, inputs, kw):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = helper_raises(fn, *inputs, **kw)
    assert isinstance(e, RuntimeError)
    shapes = [list(x.shape) for x in inputs if isinstance(x, np.ndarray)]
    msg = str(e)
    named = [s for s in shapes if str(s) in msg]
    assert len(named) >= 2, f"message should name both offending shapes {shapes}: {msg}"


# ----------------------------------------------------------------------------- addmm, mv, dot, linear as PyTorch's
# (every test draws its inputs from one random stream, some at run time: these cases put the stream back where they
# found it, so that other tests keep their inputs)
_stream_at = _rng.bit_generator.state

COMPOSITE_CASES = [
    case(lambda a, b: a.mv(b), I(2, 3), I(3), id="mv_int"),
    case(lambda a, b: L.mv(a, b), R(0, 3), R(3), id="mv_empty"),
    case(lambda a, b: L.dot(a, b), R(0), R(0), id="dot_empty"),
    case(lambda a, b: L.vdot(a, b), R(3, dtype=F32), R(3, dtype=F32), id="vdot_f32"),
    case(lambda c, a, b: c.addmm(a, b.t(), alpha=-1), R(1, 4, dtype=F32), R(2, 3, dtype=F32), R(4, 3, dtype=F32),
         id="addmm_method_f32"),
    case(lambda c, a, b: L.addmm(c, a, b, beta=2, alpha=3), I(4), I(2, 3), I(3, 4), id="addmm_int"),
    case(lambda c, a, b: L.addmm(c, a, b), A(1.5), R(0, 3), R(3, 4), id="addmm_empty"),
    case(lambda x, w, b: L.nn.functional.linear(x, w, b), R(5, 2, 3), R(4, 3), R(4), id="linear_3d"),
    case(lambda x, w, b: L.nn.functional.linear(x, w, b), R(3), R(4, 3), R(4), id="linear_1d"),
    case(lambda x, w, b: L.nn.functional.linear(x, w, b), R(5, 2, 3), R(4, 3), R(2, 4), id="linear_3d_2d_bias"),
    case(lambda x, w, b: L.nn.functional.linear(x.transpose(0, 1), w, b), R(5, 2, 3), R(4, 3), R(4),
         id="linear_3d_strided"),
    case(lambda x, w, b: L.nn.functional.linear(x, w, b), R(2, 3, dtype=F32), R(4, 3, dtype=F32), R(1, 4, dtype=F32),
         id="linear_f32_2d_bias"),
]


@run_cases(COMPOSITE_CASES)
def test_composite_products(fn, inputs, kw):
    helper(fn, *inputs, **kw)


COMPOSITE_ERRORS = [
    case(lambda c, a, b: L.addmm(c, a, b), R(4), R(2, 3), R(5, 4), id="addmm_mismatch", match=r"\(2x3 and 5x4\)"),
    case(lambda c, a, b: L.addmm(c, a, b), R(4), R(2, 2, 3), R(3, 4), id="addmm_3d", match="mat1 must be a matrix, got 3-D"),
    case(lambda c, a, b: L.addmm(c, a, b), R(4), R(2, 3), R(3), id="addmm_1d", match="mat2 must be a matrix, got 1-D"),
    case(lambda c, a, b: L.addmm(c, a, b), R(5), R(2, 3), R(3, 4), id="addmm_input_shape",
         match=r"The expanded size of the tensor \(4\) must match the existing size \(5\) at non-singleton dimension 1"),
    case(lambda c, a, b: L.addmm(c, a, b), R(2, 1, 4), R(2, 3), R(3, 4), id="addmm_input_rank",
         match=r"expand\(torch.DoubleTensor\{\[2, 1, 4\]\}, size=\[2, 4\]\)"),
    case(lambda c, a, b: L.addmm(c, a, b), R(4, dtype=F32), R(2, 3), R(3, 4), id="addmm_input_dtype",
         match="self and mat2 must have the same dtype, but got Float and Double"),
    case(lambda c, a, b: L.addmm(c, a, b), R(4), R(2, 3, dtype=F32), R(3, 4), id="addmm_mat_dtype",
         match="mat1 and mat2 must have the same dtype, but got Float and Double"),
    case(lambda a, b: L.addmm(1.0, a, b), R(2, 3), R(3, 4), id="addmm_number",
         match=r"addmm\(\): argument 'input' \(position 1\) must be Tensor, not float"),
    case(lambda x, w, b: L.nn.functional.linear(x, w, b), R(2, 5), R(4, 3), R(4), id="linear_mismatch",
         match=r"\(2x5 and 3x4\)"),
    case(lambda x, w, b: L.nn.functional.linear(x, w, b), R(2, 3), R(4, 3), R(5), id="linear_bias",
         match=r"The expanded size of the tensor \(4\) must match the existing size \(5\)"),
    case(lambda a, b: L.dot(a, b), R(3), R(3, dtype=F32), id="dot_dtype", match="dot : expected both vectors to have "
         "same dtype, but found Double and Float"),
    case(lambda a: L.dot(a, 2), R(3), id="dot_number", match=r"argument 'tensor' \(position 2\) must be Tensor"),
    case(lambda a, b: L.mv(a, b), R(3, 3), R(4), id="mv_mismatch", match=r"size mismatch, got input \(3\), mat \(3x3\), vec \(4\)"),
    case(lambda a, b: a @ b, R(2, 3), R(4), id="matmul_mv_mismatch", match=r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    case(lambda a, b: L.mv(a, b), R(3), R(3), id="mv_1d", match="vector \\+ matrix @ vector expected, got 1, 1, 1"),
    case(lambda a, b: L.mv(a, b), R(2, 3, 3), R(3), id="mv_3d", match="vector \\+ matrix @ vector expected, got 1, 3, 1"),
    case(lambda a, b: L.mv(a, b), R(3, 3), R(3, dtype=F32), id="mv_dtype",
         match="addmv input tensors must have the same dtype, but got Float, Double, and Float"),
]


_rng.bit_generator.state = _stream_at


@run_cases(COMPOSITE_ERRORS)
def test_composite_product_errors(fn, inputs, kw):
    helper_raises(fn, *inputs, **kw)


def test_number_divided_by_tensor_as_torch():
    """`c / x` is PyTorch's x.reciprocal() * c: the same float32 bits (c / x rounds once, and differs in the last
    bit for some x), the same dtype for integer x."""
    rng = np.random.default_rng(19)
    for a in (rng.standard_normal(200).astype(F32), rng.integers(1, 5, 6)):
        for c in (3, 0.1, 7.0):
            j, t = c / tracejit.tensor(a), c / torch.tensor(a)
            assert _dtname(j.dtype) == _dtname(t.dtype)
            np.testing.assert_array_equal(j.numpy(), t.numpy())
