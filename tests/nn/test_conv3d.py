"""Conv3d / F.conv3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, LPPool3d, LazyConv3d against PyTorch: values and the
gradients of input, weight and bias from the same arrays, PyTorch's errors for bad input, traced = eager."""
import numpy as np
import pytest

import tracejit as tj
from torch_compare import both as _both, close as _close, same_error as _same_error, torch_or_skip as _torch

F = tj.nn.functional
RNG = np.random.default_rng(0)


CONV_CASES = [  # (input shape, weight shape, bias, stride, padding, dilation, groups)
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), True, 1, 0, 1, 1),
    ((1, 4, 6, 5, 7), (6, 2, 2, 3, 1), True, (2, 1, 2), (1, 0, 2), (1, 2, 1), 2),
    ((2, 4, 7, 7, 6), (4, 1, 3, 2, 3), False, 2, 1, 2, 4),                # depthwise, dilated and strided
    ((3, 5, 5, 4), (2, 3, 1, 2, 2), True, 1, (0, 1, 1), 1, 1),             # unbatched
    ((2, 2, 4, 5, 6), (3, 2, 3, 3, 3), True, 1, "same", (2, 1, 1), 1),     # 'same', odd total padding
    ((2, 2, 4, 5, 6), (3, 2, 2, 2, 2), True, 1, "same", 1, 1),
    ((2, 2, 4, 5, 6), (3, 2, 4, 5, 2), True, 1, "valid", 1, 1),            # kernel the size of the input
    ((1, 2, 3, 3, 3), (2, 2, 1, 1, 1), True, 3, 0, 1, 1),                  # a 1x1x1 kernel with stride 3
]


@pytest.mark.parametrize("xs, ws, bias, s, p, d, g", CONV_CASES)
def test_conv3d_same_as_torch(xs, ws, bias, s, p, d, g):
    arrays = [RNG.standard_normal(xs), RNG.standard_normal(ws)] + ([RNG.standard_normal(ws[0])] if bias else [])
    _both(lambda lib, x, w, *b: lib.nn.functional.conv3d(x, w, b[0] if b else None, s, p, d, g), arrays, 1e-10)
    _both(lambda lib, x, w, *b: lib.nn.functional.conv3d(x, w, b[0] if b else None, s, p, d, g),
          [a.astype(np.float32) for a in arrays], 1e-4)


def test_conv3d_module_as_torch():
    torch = _torch()
    for kw in (dict(), dict(stride=2, padding=1, bias=False), dict(padding="same", groups=2, dilation=(1, 2, 1))):
        a, b = torch.nn.Conv3d(4, 6, 3, **kw), tj.nn.Conv3d(4, 6, 3, **kw)
        assert repr(b) == repr(a) and [n for n, _ in b.named_parameters()] == [n for n, _ in a.named_parameters()]
        assert [tuple(p.shape) for p in b.parameters()] == [tuple(p.shape) for p in a.parameters()]
        with torch.no_grad():
            for p, q in zip(a.parameters(), b.parameters()):
                p.copy_(torch.tensor(q.detach().numpy()))
        x = RNG.standard_normal((2, 4, 5, 6, 5)).astype(np.float32)
        _close(b(tj.tensor(x)).detach().numpy(), a(torch.tensor(x)).detach().numpy(), 1e-4)
    m = tj.nn.LazyConv3d(5, 2)
    m(tj.randn(1, 3, 4, 4, 4))
    assert type(m) is tj.nn.Conv3d and tuple(m.weight.shape) == (5, 3, 2, 2, 2)
    # fan-in of the default init: the weights are bounded by 1/sqrt(C * kd * kh * kw) like PyTorch's
    assert np.abs(tj.nn.Conv3d(4, 8, 3).weight.detach().numpy()).max() <= 1 / np.sqrt(4 * 27) + 1e-7


def test_conv3d_errors_as_torch():
    c = lambda x, w, **kw: lambda lib: lib.nn.functional.conv3d(lib.ones(x), lib.ones(w), **kw)  # noqa: E731
    assert "to have 3 channels, but got 5 channels" in _same_error(c((2, 5, 6, 6, 6), (4, 3, 3, 3, 3)))
    assert "Kernel size can't be greater than actual input size" in _same_error(c((2, 3, 2, 6, 6), (4, 3, 3, 3, 3)))
    assert "Expected 4D (unbatched) or 5D (batched) input to conv3d" in _same_error(c((3, 6, 6), (4, 3, 3, 3, 3)))
    assert "Invalid padding string" in _same_error(c((1, 3, 6, 6, 6), (4, 3, 3, 3, 3), padding="full"))
    assert "strided convolutions" in _same_error(c((1, 3, 6, 6, 6), (4, 3, 3, 3, 3), padding="same", stride=2))
    _same_error(c((1, 3, 6, 6, 6), (4, 3, 3, 3, 3), stride=(1, 1)))
    assert "in_channels must be divisible by groups" in _same_error(lambda lib: lib.nn.Conv3d(3, 4, 2, groups=2))


POOL_CASES = [  # (shape, kernel_size, stride, padding, ceil_mode)
    ((2, 3, 6, 7, 8), 2, None, 0, False), ((1, 2, 7, 6, 5), (3, 2, 2), (2, 1, 2), (1, 0, 1), False),
    ((1, 2, 7, 6, 5), 3, 2, 1, True), ((3, 5, 5, 6), (2, 3, 2), 1, 0, False), ((1, 1, 5, 5, 5), (5, 1, 2), 2, 0, True),
]


@pytest.mark.parametrize("shape, k, s, p, ceil", POOL_CASES)
def test_max_pool3d_same_as_torch(shape, k, s, p, ceil):
    x = RNG.standard_normal(shape)
    _both(lambda lib, t: lib.nn.functional.max_pool3d(t, k, s, p, 1, ceil), [x], 1e-12)
    if k == 2:                                                   # dilated
        _both(lambda lib, t: lib.nn.functional.max_pool3d(t, k, s, 0, 2, ceil), [x], 1e-12)
    torch = _torch()
    assert repr(tj.nn.MaxPool3d(k, s, p, ceil_mode=ceil)) == repr(torch.nn.MaxPool3d(k, s, p, ceil_mode=ceil))


@pytest.mark.parametrize("shape, k, s, p, ceil", POOL_CASES)
@pytest.mark.parametrize("count_include_pad, divisor", [(True, None), (False, None), (True, 5)])
def test_avg_pool3d_same_as_torch(shape, k, s, p, ceil, count_include_pad, divisor):
    x = RNG.standard_normal(shape)
    _both(lambda lib, t: lib.nn.functional.avg_pool3d(t, k, s, p, ceil, count_include_pad, divisor), [x], 1e-12)
    torch = _torch()
    args = (k, s, p, ceil, count_include_pad, divisor)
    _both(lambda lib, t: (torch.nn.AvgPool3d if lib is torch else tj.nn.AvgPool3d)(*args)(t),
          [x.astype(np.float32)], 1e-5)
    assert repr(tj.nn.AvgPool3d(*args)) == repr(torch.nn.AvgPool3d(*args))


@pytest.mark.parametrize("shape, out", [((2, 3, 6, 7, 8), 2), ((2, 3, 5, 7, 9), (3, 4, 5)),
                                        ((3, 5, 6, 7), (2, None, 3)), ((1, 2, 4, 4, 4), (4, 4, 4)),
                                        ((1, 2, 3, 5, 4), (5, 7, 1))])
def test_adaptive_avg_pool3d_same_as_torch(shape, out):
    x = RNG.standard_normal(shape)
    _both(lambda lib, t: lib.nn.functional.adaptive_avg_pool3d(t, out), [x], 1e-12)
    _both(lambda lib, t: lib.nn.AdaptiveAvgPool3d(out)(t), [x.astype(np.float32)], 1e-5)
    assert repr(tj.nn.AdaptiveAvgPool3d(out)) == repr(_torch().nn.AdaptiveAvgPool3d(out))


@pytest.mark.parametrize("p", [2, 3.0, float("inf")])
def test_lp_pool3d_same_as_torch(p):
    x = RNG.standard_normal((2, 2, 5, 6, 4))
    _both(lambda lib, t: lib.nn.functional.lp_pool3d(t, p, 2, (1, 2, 2)), [x], 1e-10)
    assert repr(tj.nn.LPPool3d(p, 2)) == repr(_torch().nn.LPPool3d(p, 2))


def test_pool3d_errors_as_torch():
    assert "pad should be at most half" in _same_error(
        lambda lib: lib.nn.functional.max_pool3d(lib.ones(1, 3, 6, 6, 6), 2, padding=2))
    assert "pad should be at most half" in _same_error(
        lambda lib: lib.nn.functional.avg_pool3d(lib.ones(1, 3, 6, 6, 6), 2, padding=(2, 0, 0)))
    assert "4D or 5D" in _same_error(lambda lib: lib.nn.functional.max_pool3d(lib.ones(3, 6, 6), 2))
    assert "4D or 5D" in _same_error(lambda lib: lib.nn.functional.adaptive_avg_pool3d(lib.ones(3, 6, 6), 2))
    assert "divisor must be not zero" in _same_error(
        lambda lib: lib.nn.functional.avg_pool3d(lib.ones(1, 3, 6, 6, 6), 2, divisor_override=0))


def test_conv3d_net_traced_equals_eager():
    net = tj.nn.Sequential(tj.nn.Conv3d(2, 4, 3, padding=1), tj.nn.ReLU(), tj.nn.MaxPool3d(2),
                           tj.nn.Conv3d(4, 4, (1, 3, 3), groups=2), tj.nn.AvgPool3d((1, 2, 2), count_include_pad=False),
                           tj.nn.AdaptiveAvgPool3d(1), tj.nn.Flatten(), tj.nn.Linear(4, 3))
    x = tj.randn(2, 2, 4, 10, 10)

    def loss(x):
        return net(x).square().sum()

    loss(x).backward()
    want = [float(loss(x))] + [p.grad.numpy().copy() for p in net.parameters()]
    step = tj.trace(lambda t: (lambda v: (v.backward(), v.detach())[1])(loss(t)))
    for _ in range(2):
        net.zero_grad()
        got = [float(step(x))] + [p.grad.numpy() for p in net.parameters()]
        for a, b in zip(got, want):
            _close(a, b, 1e-4)
