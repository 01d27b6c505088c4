"""F.pad's modes (constant, reflect, replicate, circular) and the padding modules; the activations and small
modules (RReLU, Softmax2d, ChannelShuffle, LocalResponseNorm, LPPool, lazy modules, SyncBatchNorm) against PyTorch:
values and every gradient from the same inputs and weights, PyTorch's errors for bad input, traced = eager."""
import numpy as np
import pytest

import tracejit as tj
from torch_compare import both as _both, close as _close, same_error as _same_error, torch_or_skip as _torch

F = tj.nn.functional
RNG = np.random.default_rng(0)


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


# ----------------------------------------------------------------------------- RReLU

def test_rrelu_eval_is_leaky_relu_with_the_mean_slope():
    x = RNG.standard_normal((4, 5))
    x[0, 0] = 0.0
    _both(lambda lib, t: lib.nn.functional.rrelu(t, 0.1, 0.3), [x], tol=1e-12)
    _both(lambda lib, t: lib.nn.RReLU(0.2, 0.4).eval()(t), [x], tol=1e-12)
    for args in ((), (0.1, 0.3, True)):
        assert repr(tj.nn.RReLU(*args)) == repr(_torch().nn.RReLU(*args))
    assert "Lower bound" in _same_error(lambda lib: lib.nn.functional.rrelu(lib.ones(3), 0.5, 0.2, True))


def test_rrelu_training_draws_a_slope_per_element():
    tj.manual_seed(0)
    x = tj.tensor(-np.abs(RNG.standard_normal((200, 100))) - 0.1, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x).detach().numpy()
    assert slope.min() >= 0.1 and slope.max() <= 0.3 and len(np.unique(slope)) > 1000
    assert abs(slope.mean() - 0.2) < 0.002 and abs(slope.var() - 0.2 ** 2 / 12) < 2e-4      # U(0.1, 0.3)
    y.sum().backward()
    _close(x.grad.numpy(), slope, 1e-12)                       # the gradient is the drawn slope
    pos = tj.tensor(np.abs(RNG.standard_normal(50)) + 0.1)
    assert F.rrelu(pos, training=True).tolist() == pos.tolist()
    z = tj.tensor(-np.ones(1000))
    F.rrelu(z, 0.2, 0.25, True, inplace=True)
    assert -0.25 <= z.numpy().min() and z.numpy().max() <= -0.2
    tj.manual_seed(3)
    a = tj.nn.RReLU()(x).detach().numpy()
    tj.manual_seed(3)
    _close(tj.trace(lambda t: tj.nn.functional.rrelu(t, training=True))(x.detach()).numpy(), a, 1e-12)


# ----------------------------------------------------------------------------- Softmax2d, ChannelShuffle, LRN, LPPool

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4, 5)])
def test_softmax2d_same_as_torch(shape):
    _both(lambda lib, t: lib.nn.Softmax2d()(t), [RNG.standard_normal(shape)], tol=1e-12)
    assert repr(tj.nn.Softmax2d()) == "Softmax2d()"
    assert "expected input to be 3D or 4D" in _same_error(lambda lib: lib.nn.Softmax2d()(lib.ones(2, 3)))


@pytest.mark.parametrize("shape, g", [((2, 6, 3), 2), ((2, 6, 3), 3), ((1, 12, 2, 3), 4), ((2, 4, 1, 1, 2), 4),
                                      ((2, 5, 3), 1)])
def test_channel_shuffle_same_as_torch(shape, g):
    x = RNG.standard_normal(shape)
    _both(lambda lib, t: lib.nn.functional.channel_shuffle(t, g), [x], tol=0)
    _both(lambda lib, t: lib.nn.ChannelShuffle(g)(t), [x], tol=0)
    assert repr(tj.nn.ChannelShuffle(g)) == repr(_torch().nn.ChannelShuffle(g))


def test_channel_shuffle_errors_as_torch():
    cs = lambda lib, shape, g: lib.nn.functional.channel_shuffle(lib.ones(shape), g)  # noqa: E731
    assert "divisible by groups" in _same_error(cs, (2, 6, 3), 4)
    assert "> 2 dims" in _same_error(cs, (2, 6), 3)
    assert "must be positive" in _same_error(cs, (2, 6, 1), 0)


@pytest.mark.parametrize("shape", [(2, 7, 5), (2, 6, 3, 4), (1, 5, 2, 3, 2), (2, 2, 3)])
@pytest.mark.parametrize("size, alpha, beta, k", [(3, 1e-4, 0.75, 1.0), (2, 0.5, 0.6, 2.0), (5, 1.0, 1.5, 0.5),
                                                  (1, 0.3, 0.75, 1.0), (9, 2.0, 0.75, 1.0)])
def test_local_response_norm_same_as_torch(shape, size, alpha, beta, k):
    x = RNG.standard_normal(shape)
    _both(lambda lib, t: lib.nn.functional.local_response_norm(t, size, alpha, beta, k), [x], tol=1e-10)
    _both(lambda lib, t: lib.nn.LocalResponseNorm(size, alpha, beta, k)(t), [x.astype(np.float32)], tol=1e-5)
    assert repr(tj.nn.LocalResponseNorm(size, alpha, beta, k)) == repr(_torch().nn.LocalResponseNorm(size, alpha,
                                                                                                        beta, k))


def test_local_response_norm_errors_as_torch():
    assert "3D or higher" in _same_error(lambda lib: lib.nn.functional.local_response_norm(lib.ones(3, 4), 2))
    assert F.local_response_norm(tj.ones(3, 0, 4), 2).shape == (3, 0, 4)


LP_CASES = [  # (n, shape, norm_type, kernel_size, stride, ceil_mode)
    (1, (2, 3, 9), 2, 3, None, False), (1, (3, 10), 3.0, 2, 3, True), (1, (2, 3, 8), 1, 4, 2, False),
    (2, (2, 3, 7, 6), 2, 3, None, False), (2, (2, 3, 7, 6), 1.5, (2, 3), (1, 2), True),
    (2, (3, 8, 8), 4, 2, 2, False), (2, (1, 2, 5, 5), float("inf"), 2, 1, False),
    (1, (2, 3, 9), -float("inf"), 3, 2, False),
]


@pytest.mark.parametrize("n, shape, p, k, s, ceil", LP_CASES)
def test_lp_pool_same_as_torch(n, shape, p, k, s, ceil):
    x = RNG.standard_normal(shape)
    if p == 1.5:
        x = np.abs(x) + 0.1                                    # a fractional power of a negative is nan
    fn = f"lp_pool{n}d"
    _both(lambda lib, t: getattr(lib.nn.functional, fn)(t, p, k, s, ceil), [x], tol=1e-10)
    cls = f"LPPool{n}d"
    _both(lambda lib, t: getattr(lib.nn, cls)(p, k, s, ceil)(t), [x.astype(np.float32)], tol=1e-4)
    assert repr(getattr(tj.nn, cls)(p, k, s, ceil)) == repr(getattr(_torch().nn, cls)(p, k, s, ceil))


def test_lp_pool_zero_window_has_zero_gradient():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 2:, 2:] = RNG.standard_normal((2, 2))
    _both(lambda lib, t: lib.nn.functional.lp_pool2d(t, 2, 2), [x], tol=1e-12)


def test_small_modules_trace():
    m = tj.nn.Sequential(tj.nn.Conv2d(4, 6, 3, padding=1), tj.nn.ChannelShuffle(3), tj.nn.LocalResponseNorm(3),
                         tj.nn.RReLU(), tj.nn.LPPool2d(2, 2), tj.nn.Softmax2d())
    m.eval()
    _traced_equals_eager(lambda x: (m(x) * tj.arange(54.0).reshape(6, 3, 3)).sum(),
                         tj.randn(2, 4, 6, 6, requires_grad=True), tol=1e-4)


# ----------------------------------------------------------------------------- lazy modules

@pytest.mark.parametrize("make, shape", [
    (lambda lib: lib.nn.LazyLinear(3), (2, 5)), (lambda lib: lib.nn.LazyLinear(4, bias=False), (2, 3, 6)),
    (lambda lib: lib.nn.LazyConv2d(4, 3, padding=1), (2, 3, 5, 5)),
    (lambda lib: lib.nn.LazyConv2d(4, 3, groups=2, bias=False), (4, 5, 6)),
    (lambda lib: lib.nn.LazyConv1d(2, 2, stride=2), (2, 3, 8))])
def test_lazy_modules_as_torch(make, shape):
    torch = _torch()
    a, b = make(torch), make(tj)
    assert repr(b) == repr(a)
    assert [n for n, _ in b.named_parameters()] == [n for n, _ in a.named_parameters()]
    assert all(isinstance(p, tj.nn.UninitializedParameter) for p in b.parameters())
    assert b.has_uninitialized_params() and "<UninitializedParameter>" in repr(list(b.parameters()))
    assert list(b.state_dict()) == list(a.state_dict())
    params = list(b.parameters())
    opt = tj.optim.SGD(b.parameters(), lr=0.5, momentum=0.9)    # before the first call: PyTorch's flow allows it
    x = RNG.standard_normal(shape).astype(np.float32)
    a(torch.tensor(x))
    b(tj.tensor(x))
    assert type(b).__name__ == type(a).__name__ and repr(b) == repr(a)
    assert list(b.parameters()) == params and all(type(p) is tj.nn.Parameter for p in params)
    assert [tuple(p.shape) for p in b.parameters()] == [tuple(p.shape) for p in a.parameters()]
    with torch.no_grad():
        for p, q in zip(a.parameters(), b.parameters()):
            p.copy_(torch.tensor(q.detach().numpy()))
    _both(lambda lib, t: (a if lib is torch else b)(t), [x])
    before = [p.detach().numpy().copy() for p in params]
    b.zero_grad()
    b(tj.tensor(x)).square().sum().backward()
    opt.step()
    assert all(not np.allclose(p.detach().numpy(), q) for p, q in zip(params, before))


def test_lazy_parameter_use_and_errors_as_torch():
    torch = _torch()
    for op in (lambda w: w + 1, lambda w: w.sum(), lambda w: w.numel()):
        _same_error(lambda lib: op(lib.nn.LazyLinear(3).weight))
    assert "in_channels must be divisible by groups" in _same_error(
        lambda lib: lib.nn.LazyConv2d(4, 3, groups=2)(lib.ones(1, 5, 6, 6)))
    assert "Expected 3D (unbatched) or 4D (batched) input to LazyConv2d" in _same_error(
        lambda lib: lib.nn.LazyConv2d(4, 3)(lib.ones(2, 4)))
    # load_state_dict gives the lazy parameters the loaded shapes and values
    src = tj.nn.Linear(5, 3)
    m = tj.nn.LazyLinear(3)
    m.load_state_dict(src.state_dict())
    x = tj.randn(2, 5)
    _close(m(x).detach().numpy(), src(x).detach().numpy(), 0)
    assert type(m) is tj.nn.Linear and m.in_features == 5
    assert type(torch.nn.LazyLinear(3).weight).__name__ == type(tj.nn.LazyLinear(3).weight).__name__


# ----------------------------------------------------------------------------- SyncBatchNorm

def test_sync_batchnorm_is_batchnorm_on_one_process():
    torch = _torch()
    x = RNG.standard_normal((4, 3, 5, 2)).astype(np.float32)
    a, b = torch.nn.SyncBatchNorm(3, momentum=0.3), tj.nn.SyncBatchNorm(3, momentum=0.3)
    assert repr(b) == repr(a)
    for train in (True, True, False):
        a.train(train)
        b.train(train)
        _both(lambda lib, t: (a if lib is torch else b)(t), [x])
    for name, t in a.state_dict().items():
        _close(b.state_dict()[name].numpy(), t.numpy())
    assert "at least 2D" in _same_error(lambda lib: lib.nn.SyncBatchNorm(3)(lib.ones(3)))


def test_convert_sync_batchnorm_keeps_the_state():
    net = tj.nn.Sequential(tj.nn.Conv2d(2, 3, 1), tj.nn.BatchNorm2d(3),
                           tj.nn.Sequential(tj.nn.Flatten(2), tj.nn.BatchNorm1d(3, affine=False), tj.nn.ReLU()))
    net(tj.randn(4, 2, 3, 3))
    net[1].eval()
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    weight = net[1].weight
    out = tj.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert out is net and type(net[1]) is tj.nn.SyncBatchNorm and type(net[2][1]) is tj.nn.SyncBatchNorm
    assert type(net[0]) is tj.nn.Conv2d and net[1].weight is weight and not net[1].training and net[2][1].training
    assert net[2][1].weight is None and net[2][1].affine is False
    after = net.state_dict()
    assert list(after) == list(before)
    for k, v in before.items():
        np.testing.assert_array_equal(after[k].numpy(), v)
    bn = tj.nn.BatchNorm1d(4)
    assert type(tj.nn.SyncBatchNorm.convert_sync_batchnorm(bn)) is tj.nn.SyncBatchNorm
    torch = _torch()
    want = torch.nn.SyncBatchNorm.convert_sync_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm2d(3)))
    assert repr(tj.nn.SyncBatchNorm.convert_sync_batchnorm(tj.nn.Sequential(tj.nn.BatchNorm2d(3)))) == repr(want)
