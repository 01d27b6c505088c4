"""Gaps closed against PyTorch: return_indices of adaptive max pooling and max_pool3d, the nuclear norm,
linalg.cholesky_ex's info, conv padding-string errors, and nn.parameter's lazy classes."""
import numpy as np
import pytest

import tracejit as tj
from torch_compare import both, close, same_error

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)


# ----------------------------------------------------------------------------- return_indices

def _pool_with_indices(fn, x):
    """fn(lib, t) -> (values, indices) in both libraries: values and gradients compared by `both`, indices equal."""
    idx = {}

    def values(lib, t):
        v, i = fn(lib, t)
        idx[lib.__name__] = i
        return v
    both(values, [x], tol=1e-12)
    want, got = idx["torch"], idx["tracejit"]
    assert str(got.dtype) == "tracejit.int64" and str(want.dtype) == "torch.int64"
    np.testing.assert_array_equal(got.numpy(), want.numpy())


POOL_CASES = [  # (call, input shape, integer input: ties)
    (lambda lib, t: lib.nn.functional.adaptive_max_pool1d(t, 3, return_indices=True), (2, 3, 7), False),
    (lambda lib, t: lib.nn.AdaptiveMaxPool1d(4, return_indices=True)(t), (3, 7), False),
    (lambda lib, t: lib.nn.functional.adaptive_max_pool1d(t, 9, return_indices=True), (2, 3, 7), False),
    (lambda lib, t: lib.nn.functional.adaptive_max_pool2d(t, (3, 4), return_indices=True), (2, 3, 7, 9), False),
    (lambda lib, t: lib.nn.functional.adaptive_max_pool2d(t, (3, 4), return_indices=True), (2, 3, 7, 9), True),
    (lambda lib, t: lib.nn.AdaptiveMaxPool2d((None, 4), return_indices=True)(t), (3, 7, 9), False),
    (lambda lib, t: lib.nn.AdaptiveMaxPool3d((2, 3, 4), return_indices=True)(t), (2, 3, 5, 7, 9), False),
    (lambda lib, t: lib.nn.functional.adaptive_max_pool3d(t, (2, None, 4), return_indices=True), (3, 5, 7, 9), True),
    (lambda lib, t: lib.nn.functional.adaptive_max_pool3d(t, (6, 7, 8), return_indices=True), (1, 2, 3, 4, 5), False),
    (lambda lib, t: lib.nn.functional.max_pool3d(t, 2, return_indices=True), (2, 3, 5, 6, 7), False),
    (lambda lib, t: lib.nn.MaxPool3d(3, 2, 1, return_indices=True)(t), (2, 3, 5, 6, 7), True),
    (lambda lib, t: lib.nn.MaxPool3d(3, 2, 1, return_indices=True)(-abs(t)), (3, 5, 6, 7), False),
    (lambda lib, t: lib.nn.functional.max_pool3d(t, (2, 3, 2), (2, 1, 3), (1, 1, 0), (1, 2, 2), ceil_mode=True,
                                                  return_indices=True), (2, 3, 6, 7, 8), False),
]


@pytest.mark.parametrize("fn, shape, ties", POOL_CASES)
def test_pool_return_indices(fn, shape, ties):
    x = RNG.integers(0, 2, shape).astype(float) if ties else RNG.standard_normal(shape)
    _pool_with_indices(fn, x)


def test_pool_return_indices_empty_output():
    for lib in (torch, tj):
        v, i = lib.nn.functional.adaptive_max_pool2d(lib.zeros(1, 2, 3, 4), (0, 2), return_indices=True)
        assert tuple(v.shape) == tuple(i.shape) == (1, 2, 0, 2)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.max_pool3d(lib.zeros(1, 2, 3, 4, 4), 2, padding=2, return_indices=True),
    lambda lib: lib.nn.functional.max_pool3d(lib.zeros(1, 2, 1, 4, 4), 3, return_indices=True),
    lambda lib: lib.nn.functional.max_pool3d(lib.zeros(2, 4, 4), 3, return_indices=True),
    lambda lib: lib.nn.functional.adaptive_max_pool2d(lib.zeros(1, 2, 3, 4), -1, return_indices=True),
    lambda lib: lib.nn.functional.adaptive_max_pool1d(lib.zeros(1, 2, 0), 3, return_indices=True),
])
def test_pool_return_indices_errors(call):
    same_error(call)


def test_pool_return_indices_traced_equals_eager():
    x = tj.tensor(RNG.standard_normal((2, 3, 5, 6, 7)), requires_grad=True)
    w = tj.tensor(RNG.standard_normal((2, 3, 2, 3, 4)))

    def f(t):
        v, i = tj.nn.functional.adaptive_max_pool3d(t, (2, 3, 4), return_indices=True)
        return (v * v * w).sum(), i
    loss, want_idx = f(x)
    loss.backward()
    want, wgrad = float(loss), x.grad.numpy().copy()

    def step(t):
        v, i = f(t)
        v.backward()
        return v.detach(), i
    step = tj.trace(step)
    for _ in range(2):
        x.grad = None
        v, i = step(x)
        close(float(v), want, 1e-12)
        close(x.grad.numpy(), wgrad, 1e-12)
        np.testing.assert_array_equal(i.numpy(), want_idx.numpy())


# ----------------------------------------------------------------------------- nuclear norm

@pytest.mark.parametrize("call, shape", [
    (lambda lib, t: lib.norm(t, p="nuc"), (3, 4)),
    (lambda lib, t: lib.norm(t, p="nuc", dim=(0, 2), keepdim=True), (2, 3, 4)),
    (lambda lib, t: lib.norm(t, p="nuc", dim=(2, 1)), (2, 3, 4)),
    (lambda lib, t: t.norm(p="nuc", dim=(1, 2)), (2, 5, 3)),
    (lambda lib, t: lib.linalg.matrix_norm(t, "nuc"), (2, 3, 4)),
    (lambda lib, t: lib.linalg.matrix_norm(t, "nuc", keepdim=True), (2, 4, 3)),
    (lambda lib, t: lib.linalg.norm(t, "nuc"), (4, 3)),
])
def test_nuclear_norm(call, shape):
    both(call, [RNG.standard_normal(shape)], tol=1e-10)


@pytest.mark.parametrize("call", [
    lambda lib: lib.norm(lib.ones(2, 3, 4), p="nuc"),
    lambda lib: lib.norm(lib.ones(2, 3, 4), p="nuc", dim=1),
    lambda lib: lib.norm(lib.ones(4), p="nuc"),
    lambda lib: lib.norm(lib.ones(3, 4), p="foo"),
])
def test_nuclear_norm_errors(call):
    with pytest.raises(Exception) as want:
        call(torch)
    assert same_error(call) == str(want.value)


def test_nuclear_norm_traced_equals_eager():
    x = tj.tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)

    def step(t):
        v = tj.norm(t, p="nuc", dim=(1, 2)).square().sum()
        v.backward()
        return v.detach()
    want = float(step(x))
    wgrad = x.grad.numpy().copy()
    traced = tj.trace(step)
    for _ in range(2):
        x.grad = None
        close(float(traced(x)), want, 1e-10)
        close(x.grad.numpy(), wgrad, 1e-10)


# ----------------------------------------------------------------------------- cholesky_ex

NOT_PD = [
    [[1., 2.], [2., 1.]],
    [[4., 2, 1, 3], [2, 1, 5, 1], [1, 5, 3, 2], [3, 1, 2, 6]],      # fails at order 2: later columns as given
    [[4., 2, 1, 3], [2, 5, 5, 1], [1, 5, 3, 2], [3, 1, 2, 6]],      # fails at order 3
    [[np.nan, 0.], [0., 1.]],
]


@pytest.mark.parametrize("a", NOT_PD)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cholesky_ex_info(a, upper, dtype):
    a = np.array(a, dtype)
    want = torch.linalg.cholesky_ex(torch.tensor(a), upper=upper)
    got = tj.linalg.cholesky_ex(tj.tensor(a), upper=upper)
    assert str(got.info.dtype) == "tracejit.int32" and got.info.shape == ()
    assert int(got.info) == int(want.info) > 0
    if np.isnan(a).any():
        with pytest.raises(tj.linalg.LinAlgError, match="order 1 is not"):
            tj.linalg.cholesky(tj.tensor(a))
    np.testing.assert_allclose(got.L.numpy(), want.L.numpy(), rtol=1e-6, atol=1e-6)


def test_cholesky_ex_batch_and_check_errors():
    a = np.stack([np.eye(3), -np.eye(3), np.diag([1., 1., -1.]), np.array(NOT_PD[2])[:3, :3]])
    want, got = torch.linalg.cholesky_ex(torch.tensor(a)), tj.linalg.cholesky_ex(tj.tensor(a))
    np.testing.assert_array_equal(got.info.numpy(), want.info.numpy())
    close(got.L.numpy(), want.L.numpy(), 1e-12)
    with pytest.raises(torch.linalg.LinAlgError) as want:
        torch.linalg.cholesky_ex(torch.tensor(a), check_errors=True)
    with pytest.raises(tj.linalg.LinAlgError) as got:
        tj.linalg.cholesky_ex(tj.tensor(a), check_errors=True)
    assert isinstance(got.value, RuntimeError) and str(got.value) == str(want.value)
    same_error(lambda lib: lib.linalg.cholesky_ex(lib.ones(3)))


def test_cholesky_ex_positive_definite_values_and_gradient():
    m = RNG.standard_normal((2, 4, 4))
    spd = m @ np.swapaxes(m, -1, -2) + 4 * np.eye(4)
    for upper in (False, True):
        both(lambda lib, t: lib.linalg.cholesky_ex((t + t.mT) / 2, upper=upper).L, [spd], tol=1e-10)
        assert not tj.linalg.cholesky_ex(tj.tensor(spd)).info.numpy().any()


def test_cholesky_ex_traced_equals_eager():
    a = np.stack([np.eye(3) * 2, np.array(NOT_PD[2])[:3, :3]])
    f = tj.trace(lambda t: tj.linalg.cholesky_ex(t))
    want = torch.linalg.cholesky_ex(torch.tensor(a))
    for _ in range(2):
        low, info = f(tj.tensor(a))
        np.testing.assert_array_equal(info.numpy(), want.info.numpy())
        close(low.numpy(), want.L.numpy(), 1e-12)


# ----------------------------------------------------------------------------- conv padding strings

def _conv(nd, padding, stride):
    shapes = {1: ((2, 3, 9), (4, 3, 3)), 2: ((2, 3, 7, 8), (4, 3, 3, 2)), 3: ((1, 3, 5, 6, 4), (4, 3, 3, 2, 3))}
    x, w = shapes[nd]
    return lambda lib: getattr(lib.nn.functional, f"conv{nd}d")(lib.ones(*x), lib.ones(*w), padding=padding,
                                                                 stride=stride)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("padding, stride", [("foo", 1), ("SAME", 1), ("same", 2), ("same", "last")])
def test_conv_bad_padding_string(nd, padding, stride):
    if stride == "last":    # strided along the last dim only
        stride = (1,) * (nd - 1) + (2,)
    call = _conv(nd, padding, stride)
    with pytest.raises(Exception) as want:
        call(torch)
    assert same_error(call) == str(want.value)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("padding, stride", [("same", 1), ("valid", 2)])
def test_conv_good_padding_string(nd, padding, stride):
    assert tuple(_conv(nd, padding, stride)(tj).shape) == tuple(_conv(nd, padding, stride)(torch).shape)


# ----------------------------------------------------------------------------- lazy parameters and buffers

@pytest.mark.parametrize("make", [lambda lib: lib.nn.LazyLinear(3), lambda lib: lib.nn.LazyConv2d(4, 3)])
def test_lazy_module_parameters_are_nn_parameter_classes(make):
    for lib in (torch, tj):
        m = make(lib)
        P = lib.nn.parameter
        assert isinstance(m.weight, P.UninitializedParameter) and isinstance(m.weight, lib.nn.UninitializedParameter)
        assert isinstance(m.weight, P.UninitializedTensorMixin) and isinstance(m.weight, P.Parameter)
        assert P.is_lazy(m.weight) and P.is_lazy(m.bias) and repr(m.weight) == "<UninitializedParameter>"
        m(lib.ones((2, 5) if isinstance(m, lib.nn.LazyLinear) else (1, 2, 5, 5)))
        assert not P.is_lazy(m.weight) and type(m.weight) is P.Parameter


def _lazy_scale(lib):
    """A user's lazy module with a lazy buffer: its size from the first input's last dim."""
    class LazyScale(lib.nn.modules.lazy.LazyModuleMixin, lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", lib.nn.parameter.UninitializedBuffer())

        def initialize_parameters(self, x):
            self.scale.materialize(x.shape[-1:])
            with lib.no_grad():
                self.scale.fill_(2.0)

        def forward(self, x):
            return x * self.scale
    return LazyScale()


def test_uninitialized_buffer():
    for lib in (torch, tj):
        P = lib.nn.parameter
        b = P.UninitializedBuffer()
        assert isinstance(b, lib.Tensor) and isinstance(b, lib.nn.UninitializedBuffer) and P.is_lazy(b)
        assert not b.requires_grad and repr(b) == "<UninitializedBuffer>"
        assert not P.is_lazy(lib.ones(2)) and not P.is_lazy(P.Parameter(lib.ones(2)))
        b.materialize((2, 3))
        assert type(b) is lib.Tensor and tuple(b.shape) == (2, 3) and not P.is_lazy(b)
        m = _lazy_scale(lib)
        assert m.has_uninitialized_params() and P.is_lazy(next(iter(m.buffers())))
        close(m(lib.ones(3, 4)).numpy(), np.full((3, 4), 2.0))
        assert not m.has_uninitialized_params() and type(m.scale) is lib.Tensor
