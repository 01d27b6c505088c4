"""Convolutions in every configuration against PyTorch (values and the gradients of input, weight and bias) and
by float64 gradcheck; transposed convolutions; memory formats (channels_last) as PyTorch lays them out."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

# (input shape, weight shape, keyword arguments)
CONV2D = [
    ((2, 3, 7, 6), (4, 3, 3, 3), dict()),
    ((2, 3, 7, 6), (4, 3, 3, 2), dict(stride=2, padding=1)),
    ((1, 2, 8, 7), (3, 2, 3, 3), dict(stride=(2, 3), padding=(0, 2))),
    ((2, 2, 7, 7), (2, 2, 3, 3), dict(padding="same")),
    ((1, 2, 6, 7), (3, 2, 4, 2), dict(padding="same", dilation=(1, 2))),       # even kernel: pads one more at the end
    ((1, 2, 6, 7), (3, 2, 3, 3), dict(padding="valid")),
    ((2, 2, 9, 8), (3, 2, 3, 2), dict(dilation=2, padding=1)),
    ((2, 4, 6, 6), (6, 2, 3, 3), dict(groups=2, padding=1)),
    ((2, 4, 6, 6), (8, 1, 3, 3), dict(groups=4, padding=1, stride=2)),         # depthwise, channel multiplier 2
    ((2, 4, 6, 6), (4, 1, 3, 3), dict(groups=4, padding=1)),                   # depthwise
    ((2, 3, 5, 5), (5, 3, 1, 1), dict(stride=2)),                              # strided 1x1 (ResNet downsample)
    ((3, 6, 6), (2, 3, 3, 3), dict(padding=1)),                                # unbatched
    ((2, 3, 16, 16), (5, 3, 3, 3), dict(stride=2, padding=1)),     # direct: two column planes, rows of 8 in place
    ((2, 8, 8, 8), (7, 8, 3, 3), dict(padding=1)),                 # direct: weight gradient in place (>= 6 channels)
]


def _run(L, fn, arrays, go=None):
    ts = [L.tensor(a, requires_grad=True) for a in arrays]
    y = fn(L, *ts)
    go = np.cos(np.arange(y.numel())).reshape(tuple(y.shape)).astype(arrays[0].dtype) if go is None else go
    y.backward(L.tensor(go))
    return [y.detach().numpy()] + [t.grad.numpy() for t in ts]


def _agree(fn, arrays, tol=1e-4):
    ours, theirs = _run(tj, fn, arrays), _run(torch, fn, arrays)
    assert ours[0].shape == theirs[0].shape
    for k, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"output {k}")


def _arrays(xs, ws, bias, dtype=np.float32, bias_size=None):
    rng = np.random.default_rng(0)
    out = [rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)]
    if bias:
        out.append(rng.standard_normal(bias_size or ws[0]).astype(dtype))
    return out


@pytest.fixture(params=["batch", "per-image", "direct"])
def products(request, monkeypatch):
    """Every convolution product as one product over the batch, or (kernels/cpu/convgemm.py) one per image, each
    path taken for every shape (the chosen path depends on the image size otherwise), or by
    kernels/cpu/convtile.py's direct convolution where it applies."""
    from tracejit.kernels.cpu import conv, convtile
    from tracejit.kernels.cpu.blas import blas_threads, gemm_address
    monkeypatch.setattr(convtile, "ENABLED", request.param == "direct")
    limit = 0 if request.param == "per-image" else None
    for name in ("CHUNKED_FORWARD", "CHUNKED_INPUT_GRAD", "CHUNKED_WEIGHT_GRAD"):
        monkeypatch.setattr(conv, name, limit)
    threads = blas_threads()
    blas_threads(1)                 # the per-image products are taken with one OpenBLAS thread only
    a = np.zeros(1, np.float32)
    assert (conv._chunked(limit, 1, a, a) is not None) == (limit == 0 and bool(gemm_address(np.float32)))
    yield request.param
    blas_threads(threads)


@pytest.mark.filterwarnings("ignore::UserWarning")      # torch's note on 'same' padding with an even kernel
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d_against_torch(xs, ws, kw, bias, products):
    _agree(lambda L, *t: L.nn.functional.conv2d(*t, **kw), _arrays(xs, ws, bias))


@pytest.mark.parametrize("xs,ws,kw", [CONV2D[i] for i in (1, 4, 7, 8)])
def test_conv2d_gradcheck_float64(xs, ws, kw, products):
    ts = [tj.tensor(a, requires_grad=True) for a in _arrays(xs, ws, True, np.float64)]
    assert gradcheck(lambda *t: F.conv2d(*t, **kw), ts)


CONV1D = [((2, 3, 9), (4, 3, 3), dict()), ((2, 3, 9), (4, 3, 2), dict(stride=2, padding=1, dilation=2)),
          ((2, 4, 8), (4, 1, 3), dict(groups=4, padding="same")), ((3, 7), (2, 3, 3), dict(padding="valid"))]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV1D)
def test_conv1d_against_torch(xs, ws, kw, bias):
    _agree(lambda L, *t: L.nn.functional.conv1d(*t, **kw), _arrays(xs, ws, bias))


def test_conv1d_gradcheck_float64():
    ts = [tj.tensor(a, requires_grad=True) for a in _arrays((2, 3, 7), (2, 3, 3), True, np.float64)]
    assert gradcheck(lambda *t: F.conv1d(*t, stride=2, padding=1), ts)


# (input shape, weight shape (in, out / groups, kh, kw), keyword arguments)
CONVT2D = [
    ((2, 4, 5, 6), (4, 3, 3, 3), dict()),
    ((2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 4, 5), (4, 2, 3, 2), dict(stride=(2, 3), padding=(0, 1), dilation=(1, 2), groups=2, output_padding=(1, 0))),
    ((1, 2, 4, 4), (2, 3, 3, 3), dict(dilation=2, output_padding=1)),           # output_padding >= stride, < dilation
    ((2, 4, 3, 3), (4, 1, 4, 4), dict(stride=2, padding=1, groups=4)),            # depthwise
    ((4, 3, 3), (4, 2, 2, 2), dict(stride=2)),                                    # unbatched
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONVT2D)
def test_conv_transpose2d_against_torch(xs, ws, kw, bias, products):
    arrays = _arrays(xs, ws, bias, bias_size=ws[1] * kw.get("groups", 1))
    _agree(lambda L, *t: L.nn.functional.conv_transpose2d(*t, **kw), arrays)


@pytest.mark.parametrize("xs,ws,kw", [CONVT2D[i] for i in (1, 2, 3)])
def test_conv_transpose2d_gradcheck_float64(xs, ws, kw, products):
    arrays = _arrays(xs, ws, True, np.float64, bias_size=ws[1] * kw.get("groups", 1))
    ts = [tj.tensor(a, requires_grad=True) for a in arrays]
    assert gradcheck(lambda *t: F.conv_transpose2d(*t, **kw), ts)
    if kw.get("dilation", 1) == 2:
        assert gradgradcheck(lambda *t: F.conv_transpose2d(*t, **kw), ts)


def test_conv_transpose1d_against_torch():
    _agree(lambda L, *t: L.nn.functional.conv_transpose1d(*t, stride=2, padding=1, output_padding=1),
           _arrays((2, 3, 6), (3, 4, 3), True, bias_size=4))


def _sync(ours, theirs):
    ours.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


@pytest.mark.parametrize("make,shape,out_size", [
    (lambda L: L.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1), (2, 4, 5, 5), [10, 10]),
    (lambda L: L.nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2), groups=2, bias=False, dilation=(2, 1)), (1, 4, 3, 4),
     None),
    (lambda L: L.nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1), (2, 3, 5), [15]),
])
def test_conv_transpose_modules_against_torch(make, shape, out_size):
    ours, theirs = make(tj), make(torch)
    assert ours.weight.shape == theirs.weight.shape and repr(ours) == repr(theirs)
    _sync(ours, theirs)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    res = []
    for m, L in ((ours, tj), (theirs, torch)):
        t = L.tensor(x, requires_grad=True)
        y = m(t, output_size=out_size)
        (y * y).sum().backward()
        res.append([y.detach().numpy(), t.grad.numpy()] + [p.grad.numpy() for p in m.parameters()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="requested an output size"):
        ours(tj.tensor(x), output_size=[100] * (len(shape) - 2))


def test_conv_transpose_errors():
    x = tj.randn(1, 4, 5, 5)
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose2d(x, tj.randn(4, 2, 3, 3), output_padding=1)
    with pytest.raises(RuntimeError, match="expected input.* to have 3 channels, but got 4 channels"):
        F.conv_transpose2d(x, tj.randn(3, 2, 3, 3))


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (4, 5), (None, 3), 2])
def test_adaptive_avg_pool2d_against_torch(size):
    _agree(lambda L, x: L.nn.functional.adaptive_avg_pool2d(x, size),
           [np.random.default_rng(2).standard_normal((2, 3, 7, 6)).astype(np.float32)], tol=1e-5)


# ----------------------------------------------------------------------------- memory formats

def _layouts(L, x):
    """Strides and contiguity flags PyTorch defines, through the ops of a convnet, in channels_last; and the
    values (the conv starts from the same weights in both libraries)."""
    t = L.tensor(x).to(memory_format=L.channels_last).requires_grad_()
    conv = L.nn.Conv2d(3, 4, 3, padding=1)
    rng = np.random.default_rng(4)
    conv.load_state_dict({"weight": L.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
                          "bias": L.tensor(rng.standard_normal(4).astype(np.float32))})
    conv = conv.to(memory_format=L.channels_last)
    y = conv(t)
    b = L.nn.BatchNorm2d(4)(y)
    p = L.nn.functional.max_pool2d((b * 2 + 1).relu(), 2)
    a = L.nn.functional.avg_pool2d(p, 2)
    a.sum().backward()
    out = [t, y, b, p, a, t.grad, conv.weight, conv.weight.grad, t.contiguous(), t.clone(),
           t.clone(memory_format=L.contiguous_format), t.detach().contiguous(memory_format=L.contiguous_format)]
    flags = [(v.is_contiguous(), v.is_contiguous(memory_format=L.channels_last)) for v in out]
    return [v.stride() for v in out], flags, [v.detach().numpy() for v in (y, b, p, a, t.grad)]


def test_channels_last_strides_and_results_as_torch():
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    tj.manual_seed(0)
    ours = _layouts(tj, x)
    theirs = _layouts(torch, x)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    for k, (a, b) in enumerate(zip(ours[2], theirs[2])):      # conv, batch norm, max pool, avg pool, input grad
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"value {k}")
    assert repr(tj.channels_last) == "tracejit.channels_last"


def test_memory_format_api():
    x = tj.randn(2, 3, 4, 5)
    cl = x.contiguous(memory_format=tj.channels_last)
    assert cl.stride() == (60, 1, 15, 3) and cl.is_contiguous(memory_format=tj.channels_last)
    assert not cl.is_contiguous() and x.is_contiguous(memory_format=tj.contiguous_format)
    assert cl.contiguous(memory_format=tj.channels_last) is cl and x.to(memory_format=tj.contiguous_format) is x
    np.testing.assert_array_equal(cl.numpy(), x.numpy())
    d = x.to(tj.float64, memory_format=tj.channels_last)
    assert d.dtype is tj.float64 and d.stride() == (60, 1, 15, 3)
    assert x.to(memory_format=tj.preserve_format) is x
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        tj.randn(2, 3, 4).to(memory_format=tj.channels_last)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
        x.contiguous(memory_format=tj.preserve_format)
    v = tj.randn(2, 3, 4, 5, 6).contiguous(memory_format=tj.channels_last_3d)
    assert v.stride() == torch.randn(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d).stride()
    # a gradient flows through the layout change unchanged
    x.requires_grad_()
    (x.contiguous(memory_format=tj.channels_last) * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3, 4, 5), 3, np.float32))


@pytest.mark.parametrize("backend", ["numba", "interpreter"])
def test_traced_channels_last_equals_eager(backend):
    tj.manual_seed(0)
    net = tj.nn.Sequential(tj.nn.Conv2d(3, 4, 3, padding=1), tj.nn.BatchNorm2d(4), tj.nn.ReLU(),
                           tj.nn.AdaptiveAvgPool2d(1), tj.nn.Flatten(), tj.nn.Linear(4, 2))
    net = net.to(memory_format=tj.channels_last)

    def f(x):
        y = net(x.contiguous(memory_format=tj.channels_last))
        y.sum().backward()
        return y.detach()
    x = tj.randn(2, 3, 6, 6)
    eager = f(x).numpy()
    g_eager = net[0].weight.grad.numpy().copy()
    net.zero_grad()
    np.testing.assert_allclose(tj.trace(f, backend=backend)(x).numpy(), eager, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(net[0].weight.grad.numpy(), g_eager, rtol=1e-4, atol=1e-5)
