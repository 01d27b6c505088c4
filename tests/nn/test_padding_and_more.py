"""F.pad's modes (constant, reflect, replicate, circular) and the padding modules; the activations and small
modules (RReLU, Softmax2d, ChannelShuffle, LocalResponseNorm, LPPool, lazy modules, SyncBatchNorm) against PyTorch:
values and every gradient from the same inputs and weights, PyTorch's errors for bad input, traced = eager."""
import numpy as np
import pytest

import tracejit as tj

F = tj.nn.functional
RNG = np.random.default_rng(0)


def _torch():
    return pytest.importorskip("torch")


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _both(fn, arrays, tol=1e-5):
    """fn(lib, *tensors) run by torch and tracejit on the same arrays (float ones require grad): the outputs and
    the gradients of sum(out**2 * w) (w fixed random) are compared. Returns tracejit's output."""
    torch = _torch()
    res = []
    for lib in (torch, tj):
        xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = fn(lib, *xs)
        w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(arrays[0].dtype))
        if any(x.requires_grad for x in xs):
            (out * out * w).sum().backward()
        res.append((out, [x.grad.numpy() for x in xs if x.requires_grad]))
    (tout, tgrads), (jout, jgrads) = res
    assert tuple(jout.shape) == tuple(tout.shape)
    _close(jout.detach().numpy(), tout.detach().numpy(), tol)
    assert len(jgrads) == len(tgrads)
    for a, b in zip(jgrads, tgrads):
        _close(a, b, tol)
    return jout


def _same_error(fn, *args, **kwargs):
    """fn(lib, *args, **kwargs) raises the same exception class in both libraries; returns tracejit's message."""
    torch = _torch()
    with pytest.raises(Exception) as want:
        fn(torch, *args, **kwargs)
    with pytest.raises(type(want.value)) as got:
        fn(tj, *args, **kwargs)
    return str(got.value)


def _traced_equals_eager(f, *xs, tol=1e-5):
    """f(*xs) -> scalar loss: the loss and the inputs' gradients traced equal eager's."""
    for x in xs:
        x.grad = None
    loss = f(*xs)
    loss.backward()
    want = [float(loss)] + [x.grad.numpy().copy() for x in xs]
    step = tj.trace(lambda *a: (lambda v: (v.backward(), v.detach())[1])(f(*a)))
    for _ in range(2):
        for x in xs:
            x.grad = None
        got = [float(step(*xs))] + [x.grad.numpy() for x in xs]
        for a, b in zip(got, want):
            _close(a, b, tol)


# ----------------------------------------------------------------------------- F.pad

PAD_CASES = [  # (shape, pad)
    ((2, 3, 5), (2, 3)), ((3, 5), (4, 1)), ((2, 3, 5), (0, 4)), ((2, 3, 5), (-1, 2)), ((2, 3, 5), (3, -3)),
    ((2, 3, 5), (-2, -2)), ((2, 2, 4, 5), (1, 2, 3, 0)), ((2, 4, 5), (4, 4, 3, 3)), ((2, 2, 4, 5), (-1, 2, 2, -1)),
    ((1, 2, 3, 4, 5), (1, 2, 2, 1, 2, 2)), ((2, 3, 4, 5), (4, 0, 0, 3, 1, 2)), ((1, 2, 3, 4, 5), (-1, 3, 0, 0, 2, -1)),
    ((0, 2, 3), (1, 1)), ((2, 1, 1), (0, 0)),
]


def _valid(shape, pad, mode):
    k = len(pad) // 2
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(k)]
    sizes = shape[::-1][:k]
    if mode == "reflect":
        return all(lo < n and hi < n and n + lo + hi >= 1 for (lo, hi), n in zip(pairs, sizes))
    if mode == "circular":          # negative sides crop, then the new sides wrap what is left (at most once)
        return all(max(lo, hi) <= n + min(lo, 0) + min(hi, 0) for (lo, hi), n in zip(pairs, sizes))
    if mode == "replicate":
        return all(n + lo + hi >= 1 for (lo, hi), n in zip(pairs, sizes))
    return all(n + min(lo, 0) + min(hi, 0) >= 0 for (lo, hi), n in zip(pairs, sizes))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, pad", PAD_CASES)
def test_pad_same_as_torch(mode, shape, pad):
    x = RNG.standard_normal(shape)
    if not _valid(shape, pad, mode):
        with pytest.raises(RuntimeError):        # (PyTorch's circular mode reads memory it never wrote for some)
            F.pad(tj.tensor(x), pad, mode)
        if mode != "circular":
            _same_error(lambda lib: lib.nn.functional.pad(lib.tensor(x), pad, mode))
        return
    _both(lambda lib, t: lib.nn.functional.pad(t, pad, mode), [x], tol=1e-12)
    _both(lambda lib, t: lib.nn.functional.pad(t, pad, mode), [x.astype(np.float32)])


def test_pad_reflect_values_by_hand():
    x = tj.arange(4.0).reshape(1, 4)
    assert F.pad(x, (3, 3), "reflect").tolist() == [[3, 2, 1, 0, 1, 2, 3, 2, 1, 0]]
    assert F.pad(x, (2, 3), "replicate").tolist() == [[0, 0, 0, 1, 2, 3, 3, 3, 3]]
    assert F.pad(x, (4, 2), "circular").tolist() == [[0, 1, 2, 3, 0, 1, 2, 3, 0, 1]]
    assert F.pad(x, (2, -2), "circular").tolist() == [[0, 1, 0, 1]]          # the cropped [0, 1] wrapped
    assert F.pad(x, (-3, 1), "circular").tolist() == [[3, 3]]
    with pytest.raises(RuntimeError, match="more than once"):
        F.pad(x, (3, -2), "circular")
    assert F.pad(x, (1, -2), value=7.0).tolist() == [[7, 0, 1]]
    # a position copied several times: its gradient is the number of copies
    x = tj.arange(4.0, requires_grad=True).reshape(1, 4)
    x.retain_grad()
    F.pad(x, (3, 3), "reflect").sum().backward()
    assert x.grad.tolist() == [[2, 3, 3, 2]]


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_keeps_the_dtype(dtype, mode):
    torch = _torch()
    x = RNG.integers(0, 2, (2, 3, 4)).astype(dtype)
    if dtype == "bool" and mode != "circular":          # (PyTorch's reflect and replicate take no bool)
        return
    want = torch.nn.functional.pad(torch.tensor(x), (2, 1), mode)
    got = F.pad(tj.tensor(x), (2, 1), mode)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_pad_errors_as_torch():
    pad = lambda lib, shape, *a, **kw: lib.nn.functional.pad(lib.ones(shape), *a, **kw)  # noqa: E731
    assert "less than the corresponding input dimension" in _same_error(pad, (1, 3), (3, 3), "reflect")
    assert "padding (4, 1) at dimension 2 of input [2, 3, 4, 5]" in _same_error(pad, (2, 3, 4, 5), (1, 1, 4, 1),
                                                                                 "reflect")
    assert "Argument #8" in _same_error(pad, (2, 3, 4, 5, 6), (1, 1, 1, 1, 4, 1), "reflect")
    assert "wrapping around more than once" in _same_error(pad, (2, 3, 4), (5, 1), "circular")
    assert "resulting in an empty dimension" in _same_error(pad, (2, 3, 4), (-4, -1), "circular")
    assert "too small" in _same_error(pad, (2, 3, 4), (-2, -2), "replicate")
    assert "Calculated output H: -1 W: -1" in _same_error(pad, (2, 3, 4, 5), (-5, -1, -4, -1), "reflect")
    assert "Padding size 2 is not supported for 1D input" in _same_error(pad, (3,), (1, 1), "reflect")
    assert "Padding size 4 is not supported for 2D input" in _same_error(pad, (2, 3), (1, 1, 1, 1), "replicate")
    assert "Padding size 6 is not supported for 3D input" in _same_error(pad, (3, 4, 5), (1,) * 6, "circular")
    assert "Padding size 0" in _same_error(pad, (3, 4), (), "reflect")
    assert "divisible by 2" in _same_error(pad, (2, 3), (1, 1, 1))
    assert "two times the input dimension" in _same_error(pad, (2, 3), (1,) * 6)
    assert "possibly 0 batch size" in _same_error(pad, (2, 3, 0), (1, 1), "reflect")
    assert "possibly 0 batch size" in _same_error(pad, (2, 0, 3, 5), (1, 1, 1, 1), "replicate")
    assert "Unrecognised padding mode foo" in _same_error(pad, (2, 3), (1, 1), "foo")
    assert "doesn't take in value" in _same_error(pad, (2, 3), (1, 1), "reflect", 1.0)
    assert "tuple of ints" in _same_error(pad, (2, 3), (1.5, 1), "reflect")
    _same_error(pad, (2, 3, 4), (-5, 1))


def test_pad_traced_equals_eager():
    conv = tj.nn.Conv2d(2, 3, 3)

    def f(x):
        y = F.pad(x, (1, 2, 2, 1), "reflect") + F.pad(x, (2, 1, 1, 2), "circular")
        return conv(F.pad(y, (1, 1, 1, 1), "replicate")).square().sum() + F.pad(x, (1, -1, 0, 2), value=2.0).sum()

    _traced_equals_eager(f, tj.randn(2, 2, 5, 6, requires_grad=True), tol=1e-4)


# ----------------------------------------------------------------------------- padding modules

PAD_MODULES = [(f"{kind}{n}d", n) for kind in ("ZeroPad", "ReflectionPad", "ReplicationPad", "CircularPad",
                                               "ConstantPad") for n in (1, 2, 3)]


@pytest.mark.parametrize("name, n", PAD_MODULES)
def test_padding_modules_same_as_torch(name, n):
    torch = _torch()
    args = (lambda p: (p, -1.5)) if name.startswith("Constant") else (lambda p: (p,))
    for padding in (2, tuple(range(1, 2 * n + 1))):
        a = getattr(torch.nn, name)(*args(padding))
        b = getattr(tj.nn, name)(*args(padding))
        assert repr(b) == repr(a) and b.padding == a.padding
        for batch in ((), (2,)):
            x = RNG.standard_normal(batch + (2,) + (7,) * n)
            _both(lambda lib, t: (a if lib is torch else b)(t), [x], tol=1e-12)
    if name.startswith("Circular"):
        assert "expected" in _same_error(lambda lib: getattr(lib.nn, name)(1)(lib.ones((3,) * n)))
