"""Derivatives at the points where an op is not differentiable (ties, kinks, bounds, NaN operands).

The expected values are PyTorch's conventions, written out here so that the suite checks them without torch
installed (gradcheck cannot: a finite difference across a kink has no right answer). `test_same_as_torch`
reads the same table against torch where it is installed, so the table itself cannot drift from PyTorch.
"""
import math

import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F

nan, inf = math.nan, math.inf
A, B = [1.0, 2.0, nan, 1.0, nan], [1.0, 3.0, 1.0, nan, nan]
X = [-1.0, 0.0, 1.0]

BINARY = {   # name: (grad of a, grad of b) for sum(op(A, B))
    "fmax": ([1.0, 0.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0, 0.0]),
    "fmin": ([1.0, 1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0, 0.0]),
    "maximum": ([0.5, 0.0, 1.0, 1.0, 1.0], [0.5, 1.0, 1.0, 1.0, 1.0]),
    "minimum": ([0.5, 1.0, 1.0, 1.0, 1.0], [0.5, 0.0, 1.0, 1.0, 1.0]),
}

UNARY = {    # name: (function of (library, x), input, grad of sum(f(x)))
    "clamp": (lambda t, x: x.clamp(-1, 1), X, [1.0, 1.0, 1.0]),
    "clamp_min": (lambda t, x: x.clamp(min=0), X, [0.0, 1.0, 1.0]),
    "clamp_max": (lambda t, x: x.clamp(max=0), X, [1.0, 1.0, 0.0]),
    "hardtanh": (lambda t, x: t.nn.functional.hardtanh(x), X, [0.0, 1.0, 0.0]),
    "relu": (lambda t, x: t.relu(x), X, [0.0, 0.0, 1.0]),
    "relu6": (lambda t, x: t.nn.functional.relu6(x), [0.0, 6.0, 3.0], [0.0, 0.0, 1.0]),
    "leaky_relu": (lambda t, x: t.nn.functional.leaky_relu(x, 0.1), X, [0.1, 0.1, 1.0]),
    "elu": (lambda t, x: t.nn.functional.elu(x), X, [math.exp(-1), 1.0, 1.0]),
    "sign": (lambda t, x: t.sign(x), X, [0.0, 0.0, 0.0]),
    "abs": (lambda t, x: t.abs(x), X, [-1.0, 0.0, 1.0]),
    "hardsigmoid": (lambda t, x: t.nn.functional.hardsigmoid(x), [-3.0, 3.0, 0.0], [0.0, 0.0, 1 / 6]),
    "threshold": (lambda t, x: t.nn.functional.threshold(x, 0.0, 5.0), X, [0.0, 0.0, 1.0]),
    "sqrt": (lambda t, x: t.sqrt(x), [0.0], [inf]),
    "pow_half": (lambda t, x: x ** 0.5, [0.0], [inf]),
    "round": (lambda t, x: t.round(x), [0.5], [0.0]),
    "amax": (lambda t, x: x.amax(), [3.0, 3.0, 1.0], [0.5, 0.5, 0.0]),
    "amin": (lambda t, x: x.amin(), [1.0, 3.0, 1.0], [0.5, 0.0, 0.5]),
    "min": (lambda t, x: x.min(), [1.0, 3.0, 1.0], [0.5, 0.0, 0.5]),
    "max_dim": (lambda t, x: x.max(0).values, [1.0, 3.0, 3.0], [0.0, 1.0, 0.0]),
    "norm_at_zero": (lambda t, x: x.norm(), [0.0, 0.0], [0.0, 0.0]),
}


def _grad_binary(lib, name):
    a = lib.tensor(A, dtype=lib.float64, requires_grad=True)
    b = lib.tensor(B, dtype=lib.float64, requires_grad=True)
    getattr(lib, name)(a, b).sum().backward()
    return a.grad.tolist(), b.grad.tolist()


def _grad_unary(lib, name):
    f, x, _ = UNARY[name]
    x = lib.tensor(x, dtype=lib.float64, requires_grad=True)
    f(lib, x).sum().backward()
    return x.grad.tolist()


def _close(got, want):
    return len(got) == len(want) and all(
        g == w or (math.isnan(g) and math.isnan(w)) or abs(g - w) <= 1e-7 * abs(w) for g, w in zip(got, want))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ties_and_nans(name):
    ga, gb = _grad_binary(tj, name)
    assert _close(ga, BINARY[name][0]), (name, ga)
    assert _close(gb, BINARY[name][1]), (name, gb)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_kinks(name):
    g = _grad_unary(tj, name)
    assert _close(g, UNARY[name][2]), (name, g)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_traced_equals_eager(name):
    def f(a, b):
        return getattr(tj, name)(a, b).sum()

    def grads(fn):
        a = tj.tensor(A, dtype=tj.float64, requires_grad=True)
        b = tj.tensor(B, dtype=tj.float64, requires_grad=True)
        fn(a, b).backward()
        return a.grad.tolist(), b.grad.tolist()

    got = grads(tj.trace(f))
    assert _close(got[0], BINARY[name][0]) and _close(got[1], BINARY[name][1]), (name, got)


def test_table_is_pytorchs():
    torch = pytest.importorskip("torch")
    for name in BINARY:
        ga, gb = _grad_binary(torch, name)
        assert _close(ga, BINARY[name][0]) and _close(gb, BINARY[name][1]), name
    for name in UNARY:
        assert _close(_grad_unary(torch, name), UNARY[name][2]), name


def test_check_index_op_passes_in_range_indices_and_refuses_others():
    """The node traced index_select checks its indices with (run eagerly here, so its shape rule is checked too)."""
    from tracejit.ops.registry import OPS, apply
    i = tj.tensor([0, 2, 1])
    np.testing.assert_array_equal(apply(OPS["check_index"], i, size=3).numpy(), [0, 2, 1])
    for bad in ([0, 3], [-1, 0]):
        with pytest.raises(IndexError, match="index out of range in self"):
            apply(OPS["check_index"], tj.tensor(bad), size=3)
