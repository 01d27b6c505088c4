"""The compiled face on special values: traced code (every backend, serial and parallel numba kernels)
equals eager, which equals PyTorch 2.13 (tests/ops/test_int_div_zero.py).

- sign(nan) = 0 and sign(-0.0) = +0 (the numba kernels used np.sign: nan and -0.0);
- integer `//`, `%`, div(rounding_mode='floor'), fmod and remainder by zero raise RuntimeError("ZeroDivisionError")
  (the numba kernels, compiled with error_model='numpy', silently gave 0).
"""
import numpy as np
import pytest

import tracejit

DIV_OPS = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "div_floor": lambda a, b: a.div(b, rounding_mode="floor"),
    "fmod": lambda a, b: a.fmod(b),
    "remainder": lambda a, b: a.remainder(b),
    "floordiv_scalar0": lambda a, b: a // 0,
    "mod_scalar0": lambda a, b: (a + b) % 0,
}


@pytest.fixture(params=["serial", "parallel"])
def kernels(request, monkeypatch):
    """Which numba kernel variant runs: the parallel one is chosen from PAR_MIN elements on."""
    if request.param == "parallel":
        from tracejit.backends.numba_cpu import codegen
        monkeypatch.setattr(codegen, "PAR_MIN", 1)
    return request.param


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_traced_sign_of_nan_and_signed_zero_equals_eager(backend, kernels, dtype):
    x = tracejit.tensor(np.array([np.nan, -0.0, 0.0, -2.5, 3.0, np.inf, -np.inf, 1e-30], dtype=dtype))
    f = tracejit.trace(lambda v: tracejit.sign(v * 1), backend=backend)
    got, want = f(x).numpy(), tracejit.sign(x).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.array([0, 0, 0, -1, 1, 1, -1, 1], dtype=dtype))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_traced_int_sign(backend, dtype):
    x = tracejit.tensor(np.array([3, 0, 1] if dtype == "uint8" else [-3, 0, 4], dtype=dtype))
    f = tracejit.trace(lambda v: tracejit.sign(v) * 1, backend=backend)
    np.testing.assert_array_equal(f(x).numpy(), tracejit.sign(x).numpy())


def test_abs_backward_at_nan_and_zero(backend):
    # abs's gradient is g * sign(x): at 0 and at nan it is 0 in eager (and PyTorch); the same when traced
    a = np.array([np.nan, 0.0, -0.0, -2.0, 2.0], dtype=np.float32)

    def f(x):
        return x.abs().sum()
    xe = tracejit.tensor(a, requires_grad=True)
    f(xe).backward()
    xt = tracejit.tensor(a, requires_grad=True)
    tracejit.trace(f, backend=backend)(xt).backward()
    np.testing.assert_array_equal(xt.grad.numpy(), xe.grad.numpy())


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
@pytest.mark.parametrize("op", sorted(DIV_OPS))
def test_traced_int_division_by_zero_raises_like_eager(backend, kernels, op, dtype):
    fn = DIV_OPS[op]
    a = tracejit.tensor(np.array([7, 5, 0, 3, 9, 4], dtype=dtype))
    ok = tracejit.tensor(np.array([2, 3, 1, 1, 2, 5], dtype=dtype))
    zero = tracejit.tensor(np.array([2, 3, 0, 1, 2, 5], dtype=dtype))
    f = tracejit.trace(lambda x, y: fn(x, y) * 1, backend=backend)
    if "scalar0" not in op:
        np.testing.assert_array_equal(f(a, ok).numpy(), fn(a, ok).numpy() * 1)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, zero)
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
        f(a, zero)
    if "scalar0" not in op:     # the program still works after the error (its buffers were not lost)
        np.testing.assert_array_equal(f(a, ok).numpy(), fn(a, ok).numpy() * 1)


def test_float_division_by_zero_still_gives_inf_nan(backend, kernels):
    x = tracejit.tensor(np.array([1.0, -1.0, 0.0], dtype=np.float32))
    y = tracejit.tensor(np.zeros(3, dtype=np.float32))
    f = tracejit.trace(lambda a, b: (a / b) * 1 + (a // b) * 0 + a.fmod(b) * 0, backend=backend)
    with np.errstate(all="ignore"):
        want = ((x / y) * 1 + (x // y) * 0 + x.fmod(y) * 0).numpy()
    np.testing.assert_array_equal(f(x, y).numpy(), want)


_INF_ROWS = np.array([[np.inf, 1, 2], [-np.inf, -np.inf, -np.inf], [np.inf, -np.inf, 1], [-np.inf, 1, 2],
                      [np.nan, 1, 2], [1, 2, 3]], dtype=np.float32)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_softmax_family_on_infinite_rows_equals_eager_and_pytorch(backend, kernels, name):
    """PyTorch's results: softmax/log_softmax of a row holding +inf or NaN, or only -inf, are NaN everywhere (the
    shift is the max as it is); logsumexp shifts by 0 when the max is not finite (+inf -> inf, all -inf -> -inf)."""
    fn = (lambda v: tracejit.logsumexp(v * 1, dim=1)) if name == "logsumexp" else \
        (lambda v: getattr(tracejit.nn.functional, name)(v * 1, dim=1))
    x = tracejit.tensor(_INF_ROWS)
    got, want = tracejit.trace(fn, backend=backend)(x).numpy(), fn(x).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)         # (ulps apart: another exp)
    if name == "logsumexp":
        assert got[:3].tolist() == [np.inf, -np.inf, np.inf] and np.isnan(got[4])
    else:
        assert np.isnan(got[[0, 1, 2, 4]]).all() and not np.isnan(got[[3, 5]]).any()
    torch = pytest.importorskip("torch")
    ref = getattr(torch, name)(torch.from_numpy(_INF_ROWS), 1).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-6, equal_nan=True)
