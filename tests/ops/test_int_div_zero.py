"""Integer division by zero and sign() of special values, eagerly: the same as PyTorch 2.13 on CPU.

PyTorch raises RuntimeError("ZeroDivisionError") for `//`, `%`, div(rounding_mode='floor'), fmod and remainder
on integer tensors with a zero divisor (numpy quietly gives 0 with a warning); sign(nan) is 0 and
sign(-0.0) is +0 (numpy: nan and -0.0). tests/tracing/test_special_values.py checks the compiled face.
"""
import numpy as np
import pytest

import tracejit

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]
DIV_OPS = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "div_floor": lambda a, b: a.div(b, rounding_mode="floor"),
    "div_trunc": lambda a, b: a.div(b, rounding_mode="trunc"),
    "floor_divide": lambda a, b: a.floor_divide(b),
    "fmod": lambda a, b: a.fmod(b),
    "remainder": lambda a, b: a.remainder(b),
    "floordiv_scalar0": lambda a, b: a // 0,
    "mod_scalar0": lambda a, b: a % 0,
}


def _ints(dtype):
    a = np.array([7, 5, 0, 3], dtype=dtype) if dtype == "uint8" else np.array([7, -7, 0, 3], dtype=dtype)
    b = np.array([2, 0, 3, 1], dtype=dtype)
    return a, b


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", sorted(DIV_OPS))
def test_int_division_by_zero_raises_like_torch(op, dtype):
    a, b = _ints(dtype)
    fn = DIV_OPS[op]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(tracejit.tensor(a), tracejit.tensor(b))
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(torch.from_numpy(a), torch.from_numpy(b))


@pytest.mark.parametrize("op", sorted(k for k in DIV_OPS if "scalar0" not in k))
def test_int_division_without_zero_matches_torch(op):
    a, _ = _ints("int32")
    b = np.array([2, 3, -3, 1], dtype=np.int32)
    got = DIV_OPS[op](tracejit.tensor(a), tracejit.tensor(b))
    torch = pytest.importorskip("torch")
    want = DIV_OPS[op](torch.from_numpy(a), torch.from_numpy(b))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sign_of_nan_and_signed_zero_is_torchs(dtype):
    x = np.array([np.nan, -0.0, 0.0, -2.5, 3.0, np.inf, -np.inf], dtype=dtype)
    got = tracejit.tensor(x).sign().numpy()
    want = np.array([0.0, 0.0, 0.0, -1.0, 1.0, 1.0, -1.0], dtype=dtype)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got[:3]).any()          # +0, not -0.0 (numpy gives -0.0 for -0.0)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x).sign().numpy()
    np.testing.assert_array_equal(got, t)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(t))
