"""The eager hot path's shortcuts must give exactly what the general rules give.

`elementwise._uncast_dtype` stands in for `_compute_dtype` (PyTorch's result_type) when the arrays share
a dtype; these tests run every pointwise op's eager kernel on mixes of arrays (0-d and not) and Python
scalars and compare dtype and values with the general path.
"""
import itertools

import numpy as np
import pytest

import tracejit as torch
from tracejit import _dtype as D
from tracejit.ops import elementwise as E
from tracejit.ops.registry import OPS

DTYPES = [np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64]
SCALARS = [True, 2, 0.5]


def _operands():
    rng = np.random.default_rng(0)
    out = []
    for dt in DTYPES:
        for shape in [(), (3,)]:
            out.append((rng.uniform(1, 3, shape) > 2).astype(dt) if dt is np.bool_ else
                       rng.uniform(1, 3, shape).astype(dt))
    return out + SCALARS


NP_FN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "maximum": np.maximum,
         "lt": np.less, "eq": np.equal, "logical_and": np.logical_and, "atan2": np.arctan2, "exp": np.exp,
         "sqrt": np.sqrt, "isnan": np.isnan, "square": np.square}
BINARY = ["add", "sub", "mul", "div", "maximum", "lt", "eq", "logical_and", "atan2"]
UNARY = ["exp", "sqrt", "isnan", "square"]


def _general(name, args):
    """The op by the general rule: PyTorch's result_type, cast every array to it, run numpy."""
    cdt, odt = E._compute_dtype(OPS[name].dtype_rule, args)
    cast = [a.astype(cdt.np) if isinstance(a, np.ndarray) else a for a in args]
    return np.asarray(NP_FN[name](*cast)).astype(odt.np)


@pytest.mark.parametrize("name", BINARY)
def test_binary_fast_path_matches_general_rule(name):
    op = OPS[name]
    for a, b in itertools.product(_operands(), repeat=2):
        if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
            continue
        try:
            want = _general(name, (a, b))
        except TypeError:            # e.g. atan2 on bools: not a fast-path question
            continue
        got = op.impl(a, b)
        assert got.dtype == want.dtype, (name, a.dtype if hasattr(a, "dtype") else a,
                                         b.dtype if hasattr(b, "dtype") else b)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", UNARY)
def test_unary_fast_path_matches_general_rule(name):
    op = OPS[name]
    for a in _operands():
        if isinstance(a, np.ndarray):
            want = _general(name, (a,))
            got = op.impl(a)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_fast_path_through_tensors_matches_torch_promotion():
    x32 = torch.ones(3, dtype=torch.float32)
    i32 = torch.ones(3, dtype=torch.int32)
    assert (x32 * 0.5).dtype is torch.float32
    assert (i32 * 0.5).dtype is torch.float32          # int tensor with a float scalar: the default dtype
    assert (i32 + 2).dtype is torch.int32
    assert (i32 + True).dtype is torch.int32
    assert torch.exp(i32).dtype is torch.float32
    assert (x32 < x32).dtype is torch.bool
    assert (torch.tensor(1.0, dtype=torch.float64) + x32).dtype is torch.float32   # 0-d does not promote
    assert D.result_type(x32, 1.0) is torch.float32
