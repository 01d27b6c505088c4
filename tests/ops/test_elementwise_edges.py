"""Paths of tracejit/ops/elementwise.py that the reference-value, gradcheck and kink tests do not reach: default
arguments, gradients of one operand alone, the scalar-base pow gradient, thresholds met exactly, the error
messages. Each was a surviving mutant of a mutation-testing run (issue 23). Expected values are PyTorch's, written
out from the definitions (math, float64); no torch needed."""
import math

import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit.ops.registry import OPS, apply

nan, inf = math.nan, math.inf


def _f64(values, requires_grad=False):
    return tj.tensor(values, dtype=tj.float64, requires_grad=requires_grad)


def test_gelu_and_softplus_record_pytorchs_default_arguments():
    x = _f64([1.0], requires_grad=True)
    assert F.gelu(x).grad_fn._saved_approximate == "none"
    sp = F.softplus(x).grad_fn
    assert (sp._saved_beta, sp._saved_threshold) == (1.0, 20.0)


def test_softplus_is_linear_only_strictly_above_the_threshold():
    # PyTorch: x where beta * x > threshold, else log1p(exp(beta * x)) / beta; the default threshold is 20
    got = F.softplus(_f64([20.0, 20.5])).tolist()         # log1p(exp(20)) = 20 + 2.06e-9
    np.testing.assert_allclose(got, [math.log1p(math.exp(20.0)), 20.5], rtol=1e-14, atol=0)
    got = F.softplus(_f64([10.0]), beta=2.0, threshold=20.0).tolist()
    np.testing.assert_allclose(got, [math.log1p(math.exp(20.0)) / 2], rtol=1e-14, atol=0)


def test_hardtanh_addcmul_addcdiv_default_arguments():
    assert F.hardtanh(_f64([-1.5, 0.5, 1.5])).tolist() == [-1.0, 0.5, 1.0]
    one, two, four = _f64([1.0]), _f64([2.0]), _f64([4.0])
    assert tj.addcmul(one, two, four).tolist() == [9.0]
    assert tj.addcdiv(one, two, four).tolist() == [1.5]


def test_allclose_default_tolerances_and_nan():
    a = _f64([1.0, 100.0])
    assert tj.allclose(a, a * (1 + 0.5e-5))
    assert not tj.allclose(a, a * (1 + 2e-5))               # rtol 1e-05
    assert tj.allclose(_f64([0.0]), _f64([5e-9]))           # atol 1e-08
    assert not tj.allclose(_f64([0.0]), _f64([2e-8]))
    assert not tj.allclose(_f64([nan]), _f64([nan]))        # equal_nan False
    assert tj.allclose(_f64([nan, 1.0]), _f64([nan, 1.0]), equal_nan=True)


def test_isclose_bound_is_inclusive_and_relative_to_other():
    # |input - other| <= atol + rtol * |other|
    assert tj.isclose(_f64([1.0]), _f64([1.5]), rtol=0.0, atol=0.5).tolist() == [True]
    assert tj.isclose(_f64([10.9, 11.1]), _f64([10.0, 10.0]), rtol=0.1, atol=0.0).tolist() == [True, False]


def test_sub_scales_other_by_alpha():
    assert tj.sub(_f64([5.0]), _f64([1.0]), alpha=2).tolist() == [3.0]
    assert tj.sub(_f64([5.0]), _f64([1.0]), alpha=1).tolist() == [4.0]


def test_divide_without_rounding_mode_and_its_message():
    assert tj.divide(_f64([3.0]), _f64([2.0])).tolist() == [1.5]
    with pytest.raises(RuntimeError, match=r"^div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                                           r"but found 'round'$"):
        tj.divide(_f64([3.0]), 2, rounding_mode="round")


def test_trunc_division_by_zero_of_a_float_and_an_integer_operand_is_infinite():
    # the float result (trunc of a true division): +-inf, not the NaN of an integer-style x - fmod(x, 0)
    assert tj.div(tj.tensor([1.0, -1.0]), 0, rounding_mode="trunc").tolist() == [inf, -inf]
    assert tj.div(tj.tensor([1, -1]), 0.0, rounding_mode="trunc").tolist() == [inf, -inf]


def test_float_power_of_a_python_base_is_float64():
    out = tj.float_power(2, tj.tensor([1.0, 0.5], dtype=tj.float32))
    assert out.dtype is tj.float64
    assert out.tolist() == [2.0, math.sqrt(2.0)]


def test_signbit_of_integers_is_below_zero():
    assert tj.signbit(tj.tensor([-1, 0, 2])).tolist() == [True, False, False]
    assert tj.signbit(_f64([-0.0, 0.0, -2.0])).tolist() == [True, False, True]


def test_xlogy_is_zero_at_zero_input_unless_other_is_nan():
    # PyTorch: NaN where other is NaN, else 0 where input is 0, else input * log(other)
    got = tj.xlogy(_f64([0.0, 0.0, 0.0, 1.0, 2.0]), _f64([nan, 0.0, 2.0, 2.0, 3.0])).tolist()
    assert math.isnan(got[0])
    assert got[1:] == [0.0, 0.0, math.log(2.0), 2 * math.log(3.0)]


def test_threshold_keeps_an_integer_dtype_and_writes_in_place():
    out = F.threshold(tj.tensor([1, 2, 3]), 1, 7)
    assert out.dtype is tj.int64 and out.tolist() == [7, 2, 3]
    out = F.threshold(tj.tensor([1, 2, 3]), 1, 0.5)      # a float value is cast to the input's dtype (0)
    assert out.dtype is tj.int64 and out.tolist() == [0, 2, 3]
    x = _f64([1.0, 2.0, 3.0])
    r = F.threshold(x, 1.5, 0.0, inplace=True)
    assert r is x and x.tolist() == [0.0, 2.0, 3.0]


def test_clamp_without_bounds_message():
    with pytest.raises(RuntimeError, match=r"^torch\.clamp: At least one of 'min' or 'max' must not be None$"):
        tj.clamp(_f64([1.0]))


def test_lerp_refuses_an_end_of_another_dtype():
    with pytest.raises(RuntimeError, match=r"^expected dtype \S+ for `end` but got dtype \S+$"):
        tj.lerp(tj.tensor([1.0]), _f64([1.0]), 0.5)


def test_pow_gradient_of_the_exponent_for_a_python_base():
    # d(a ** y)/dy = a ** y * log(a); PyTorch: log(0) = -inf, with 0 where y >= 0; NaN for a negative base
    y = _f64([-1.0, 0.0, 2.0], requires_grad=True)
    for a, want in [(0.5, [2.0 * math.log(0.5), math.log(0.5), 0.25 * math.log(0.5)]),
                    (0.0, [-inf, 0.0, 0.0]), (1.0, [0.0, 0.0, 0.0])]:
        (g,) = tj.autograd.grad((a ** y).sum(), y)
        assert g.tolist() == want, a
    (g,) = tj.autograd.grad(((-2.0) ** y).sum(), y)
    assert all(math.isnan(v) for v in g.tolist())


def test_pow_mul_sub_grad_fn_names_are_pytorchs():
    x = _f64([1.5], requires_grad=True)
    assert (2.0 ** x).grad_fn.name() == "PowBackward2"
    assert (x ** 2.0).grad_fn.name() == "PowBackward0"
    assert (x ** x).grad_fn.name() == "PowBackward1"
    assert (1 - x).grad_fn.name() == "RsubBackward1"
    assert (x - 1).grad_fn.name() == "SubBackward0"


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_gradient_of_the_first_operand_alone(name):
    # a tie or a NaN other sends the gradient to the first operand (tests/ops/test_kinks.py's table)
    a = _f64([1.0, 2.0, 2.0], requires_grad=True)
    b = _f64([2.0, 1.0, nan])
    getattr(tj, name)(a, b).sum().backward()
    assert a.grad.tolist() == ([0.0, 1.0, 1.0] if name == "fmax" else [1.0, 0.0, 1.0])


def test_gelu_backward_gradient_of_the_incoming_gradient_alone():
    # d/dg of g * gelu'(x) is gelu'(x) = Phi(x) + x phi(x), also when x needs no gradient
    xs = [-1.0, 0.0, 0.5, 2.0]
    g = _f64([1.0] * 4, requires_grad=True)
    out = apply(OPS["gelu_backward"], g, _f64(xs))
    (gg,) = tj.autograd.grad(out.sum(), g)
    want = [0.5 * (1 + math.erf(v / math.sqrt(2))) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in xs]
    np.testing.assert_allclose(gg.tolist(), want, rtol=1e-12, atol=1e-15)


def test_uncast_dtype_stands_in_only_where_nothing_is_cast():
    # the hot path's shortcut: the arrays' shared dtype when it already is the result (Python scalars of no higher
    # category may join), None (compute the result type) otherwise
    from tracejit.ops.elementwise import _uncast_dtype
    f32, i32, b = np.ones(2, np.float32), np.ones(2, np.int32), np.ones(2, bool)
    assert _uncast_dtype((f32, f32)) is tj.float32
    assert _uncast_dtype((f32, 2.0)) is tj.float32 and _uncast_dtype((2, f32, True)) is tj.float32
    assert _uncast_dtype((i32, 2)) is tj.int32 and _uncast_dtype((b, True)) is tj.bool
    assert _uncast_dtype((i32, 2.0)) is None and _uncast_dtype((b, 1)) is None
    assert _uncast_dtype((f32, np.ones(2))) is None and _uncast_dtype((f32, np.float32(1))) is None
    assert _uncast_dtype((2.0, 3.0)) is None


def test_eager_ops_on_one_dtype_compute_no_result_type(monkeypatch):
    from tracejit.ops import elementwise as E

    def refuse(rule, args):
        raise AssertionError("the general dtype rule ran")
    x = tj.tensor([1.0, 2.0])
    monkeypatch.setattr(E, "_compute_dtype", refuse)
    assert (x * x + 2.0 - 1).tolist() == [2.0, 5.0]
    assert tj.exp(tj.tensor([0.0])).tolist() == [1.0] and (x > 1.5).tolist() == [False, True]
    assert (-x).tolist() == [-1.0, -2.0] and tj.relu(-x).tolist() == [0.0, 0.0]     # the "same" rule's ops


def test_where_with_an_operand_bigger_than_the_other_and_the_condition():
    got = tj.where(tj.tensor([True, False, True]), _f64([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), _f64([7.0, 8.0, 9.0]))
    assert got.tolist() == [[1.0, 8.0, 3.0], [4.0, 8.0, 6.0]]
    got = tj.where(tj.tensor(True), _f64([1.0, 2.0, 3.0]), _f64(5.0))
    assert got.tolist() == [1.0, 2.0, 3.0]
    got = tj.where(tj.tensor(False), 4.0, _f64(5.0))
    assert got.tolist() == 5.0


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_decompositions_compute_what_the_ops_compute(approximate):
    # the parts a backend lowers gelu and its VJP to (CSE shares their erf or tanh): the op's values, float64
    from tracejit.ops.registry import call
    x = _f64(np.linspace(-5.0, 5.0, 23))
    g = _f64(np.linspace(0.5, 2.0, 23))
    for name, args in (("gelu", (x,)), ("gelu_backward", (g, x))):
        got, want = OPS[name].decompose(*args, approximate=approximate), call(name, *args, approximate=approximate)
        assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13, atol=1e-15)


def test_integer_division_by_zero_message_is_exactly_pytorchs():
    with pytest.raises(RuntimeError, match=r"^ZeroDivisionError$"):
        tj.tensor([3, 4]) // tj.tensor([1, 0])
    with pytest.raises(RuntimeError, match=r"^ZeroDivisionError$"):
        tj.tensor([3, 4]) % 0
