"""Conv and pooling registry ops: exact first (and second) order gradients in float64, and PyTorch's numbers."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit.autograd import gradcheck, gradgradcheck
from tracejit.ops import conv as C

CONV_CASES = [
    # N, Cin, H, W, O, kernel, stride, padding, dilation, groups
    (2, 4, 6, 5, 6, 3, 1, 1, 1, 2),
    (1, 3, 7, 6, 2, (3, 2), (2, 1), (1, 0), (1, 2), 1),
    (2, 2, 5, 5, 4, 1, 2, 0, 1, 2),
    (1, 2, 4, 4, 2, 2, 3, 1, 1, 1),  # stride leaves input rows unused
]


def _rand(*shape):
    return np.random.standard_normal(shape)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_gradcheck(case):
    N, Ci, H, W, O, k, s, p, d, g = case
    k2 = (k, k) if isinstance(k, int) else k
    x = tj.tensor(_rand(N, Ci, H, W), requires_grad=True)
    w = tj.tensor(_rand(O, Ci // g, *k2), requires_grad=True)
    assert gradcheck(lambda a, b: C.conv2d(a, b, s, p, d, g), (x, w))


def test_conv2d_second_order():
    x = tj.tensor(_rand(1, 2, 4, 4), requires_grad=True)
    w = tj.tensor(_rand(2, 1, 2, 2), requires_grad=True)
    assert gradgradcheck(lambda a, b: C.conv2d(a, b, 1, 1, 1, 2), (x, w))


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)])
def test_max_pool2d_gradcheck(kw):
    x = tj.tensor(np.random.permutation(2 * 2 * 7 * 6).reshape(2, 2, 7, 6) / 7.0, requires_grad=True)  # no ties
    assert gradcheck(lambda a: F.max_pool2d(a, **kw), (x,))
    assert gradgradcheck(lambda a: F.max_pool2d(a, **kw), (x,))


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
                                dict(kernel_size=2, divisor_override=3)])
def test_avg_pool2d_gradcheck(kw):
    x = tj.tensor(_rand(2, 2, 7, 6), requires_grad=True)
    assert gradcheck(lambda a: F.avg_pool2d(a, **kw), (x,))
    assert gradgradcheck(lambda a: F.avg_pool2d(a, **kw), (x,))


@pytest.mark.parametrize("size", [(3, 4), (1, 1), (5, 2)])
def test_adaptive_avg_pool2d_gradcheck(size):
    x = tj.tensor(_rand(1, 2, 7, 6), requires_grad=True)
    assert gradcheck(lambda a: F.adaptive_avg_pool2d(a, size), (x,))
    assert gradgradcheck(lambda a: F.adaptive_avg_pool2d(a, size), (x,))


@pytest.mark.parametrize("case", CONV_CASES[:2])
def test_conv2d_bias_gradcheck(case):
    # the bias is an input of the conv2d op (added as the kernel lays out its output)
    N, Ci, H, W, O, k, s, p, d, g = case
    k2 = (k, k) if isinstance(k, int) else k
    x = tj.tensor(_rand(N, Ci, H, W), requires_grad=True)
    w = tj.tensor(_rand(O, Ci // g, *k2), requires_grad=True)
    b = tj.tensor(_rand(O), requires_grad=True)
    fn = lambda a, c, e: C.conv2d(a, c, s, p, d, g, bias=e)  # noqa: E731
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))


def test_conv2d_bias_errors():
    x = tj.randn(1, 3, 5, 5)
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 2 elements"):
        F.conv2d(x, tj.randn(2, 3, 3, 3), tj.randn(3))
    with pytest.raises(RuntimeError, match="bias type"):
        F.conv2d(x, tj.randn(2, 3, 3, 3), tj.randn(2, dtype=tj.float64))


@pytest.mark.parametrize("shape", [(2, 3, 8, 6), (1, 2, 7, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_2x2_fast_path_matches_general_kernel(shape, dtype):
    from tracejit.kernels.cpu.pool import max_pool2d, max_pool2d_2x2
    x = np.random.standard_normal(shape).astype(dtype)
    x.flat[::7] = np.nan            # NaN wins (the last one in a window)
    x.flat[3::11] = -np.inf
    x.flat[5::13] = 1.0             # ties keep the first position
    x.flat[6::13] = 1.0
    N, Ch, H, W = shape
    out = [np.empty((N, Ch, H // 2, W // 2), dtype) for _ in range(2)]
    idx = [np.empty((N, Ch, H // 2, W // 2), np.int64) for _ in range(2)]
    max_pool2d(x, 2, 2, 2, 2, 0, 0, 1, 1, out[0], idx[0])
    max_pool2d_2x2(x, out[1], idx[1])
    np.testing.assert_array_equal(out[0], out[1])
    np.testing.assert_array_equal(idx[0], idx[1])
    y, i = F.max_pool2d(tj.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(y.numpy(), out[0])
    np.testing.assert_array_equal(i.numpy(), idx[0])


@pytest.mark.parametrize("N,C,O,H,groups,chunked", [(40, 1, 4, 16, 1, True),      # 4 x 9, columns as rows
                                                      (40, 2, 32, 16, 1, True),     # 32 x 18, g as rows
                                                      (20, 4, 6, 16, 2, True),      # two groups of 3 x 18
                                                      (3, 16, 8, 5, 1, False)])     # 8 x 144, columns as rows
@pytest.mark.parametrize("per_image", [False, True])
def test_weight_grad_from_columns_every_product_form(N, C, O, H, groups, chunked, per_image, monkeypatch,
                                                     one_blas_thread):
    """The weight gradient's product runs in the orientation and chunks that OpenBLAS is fastest for, over the
    batch or one image at a time (convgemm); every form gives the float64 reference (the chunked cases have
    N*H*W > WGRAD_CHUNK positions)."""
    from tracejit.kernels.cpu import conv
    from tracejit.kernels.cpu.conv import WGRAD_CHUNK, columns, weight_grad_from_columns
    monkeypatch.setattr(conv, "CHUNKED_WEIGHT_GRAD", 0 if per_image else None)
    one_blas_thread()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    g = rng.standard_normal((N, O, H, H)).astype(np.float32)
    ws = (O, C // groups, 3, 3)
    got = weight_grad_from_columns(columns(x, 3, 3, (1, 1), (1, 1), (1, 1), H, H), g, ws, groups)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros(ws)
    for o in range(O):
        gi = o // (O // groups)
        for c in range(C // groups):
            for i in range(3):
                for j in range(3):
                    want[o, c, i, j] = np.sum(g[:, o] * xp[:, gi * (C // groups) + c, i:i + H, j:j + H])
    assert got.shape == ws and got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert (N * H * H > WGRAD_CHUNK and (C // groups) * 9 * (O // groups) <= 1024) == chunked


@pytest.mark.parametrize("H,W,k,pad,dil", [(6, 7, (3, 3), (1, 1), (1, 1)),      # 'same': one shifted copy per tap
                                           (5, 9, (3, 5), (2, 4), (2, 2)),
                                           (4, 6, (1, 5), (0, 2), (1, 1)),
                                           (1, 1, (3, 3), (1, 1), (1, 1)),      # taps wholly in the padding
                                           (2, 5, (5, 3), (2, 1), (1, 1)),
                                           (5, 6, (3, 3), (3, 0), (1, 2))])     # not 'same': row by row
@pytest.mark.parametrize("stride", [(1, 1), (2, 1)])
def test_columns_against_a_padded_copy(H, W, k, pad, dil, stride):
    """im2col (`columns`) equals the columns read from a zero-padded copy of x, for stride-1 'same' rows (copied as
    one shifted plane, the taps that wrapped into the next row zeroed) and every other geometry."""
    from tracejit.kernels.cpu.conv import columns, conv_out_size
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, H, W)).astype(np.float32)
    OH, OW = (conv_out_size(n, kk, s, p, d) for n, kk, s, p, d in zip((H, W), k, stride, pad, dil))
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    want = np.empty((2, k[0], k[1], 3, OH, OW), np.float32)
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * dil[0], j * dil[1]
            tap = xp[:, :, r0:r0 + (OH - 1) * stride[0] + 1:stride[0], c0:c0 + (OW - 1) * stride[1] + 1:stride[1]]
            want[:, i, j] = tap.transpose(1, 0, 2, 3)
    got = columns(x, k[0], k[1], stride, pad, dil, OH, OW)
    np.testing.assert_array_equal(got, want.reshape(got.shape))


@pytest.fixture
def one_blas_thread():
    """Runs the test with one OpenBLAS thread (convgemm's per-image products are taken only then)."""
    from tracejit.kernels.cpu.blas import blas_threads
    threads = blas_threads()
    yield lambda: blas_threads(1)
    blas_threads(threads)


@pytest.mark.parametrize("per_image", [False, True])
def test_conv_of_an_empty_batch(per_image, monkeypatch, one_blas_thread):
    """No images: an empty output and input gradient, a zero weight gradient, on both product paths."""
    from tracejit.kernels.cpu import conv, convtile
    for name in ("CHUNKED_FORWARD", "CHUNKED_INPUT_GRAD", "CHUNKED_WEIGHT_GRAD"):
        monkeypatch.setattr(conv, name, 0 if per_image else None)
    monkeypatch.setattr(convtile, "ENABLED", False)
    one_blas_thread()
    x = tj.tensor(np.ones((0, 2, 5, 5), np.float32), requires_grad=True)
    w = tj.tensor(np.ones((3, 2, 3, 3), np.float32), requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    y.sum().backward()
    assert tuple(y.shape) == (0, 3, 5, 5) and tuple(x.grad.shape) == (0, 2, 5, 5)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((3, 2, 3, 3), np.float32))


def test_per_image_products_taken_for_the_resnet_bench_layer(one_blas_thread):
    """The default limits send the ResNet bench's 16x16 layers (float32 and float64) to convgemm's per-image
    products with one OpenBLAS thread; never other dtypes, nor with two threads."""
    from tracejit.kernels.cpu import conv
    from tracejit.kernels.cpu.blas import blas_threads, gemm_address
    if not gemm_address(np.float32):
        pytest.skip("numpy's OpenBLAS cblas not found")
    one_blas_thread()
    for dt in (np.float32, np.float64):
        a = np.zeros(1, dt)
        for limit in (conv.CHUNKED_FORWARD, conv.CHUNKED_INPUT_GRAD, conv.CHUNKED_WEIGHT_GRAD):
            assert conv._chunked(limit, 16 * 16, a, a) is not None
    assert conv._chunked(0, 256, np.zeros(1, np.float16), np.zeros(1, np.float16)) is None
    assert conv._chunked(0, 256, np.zeros(1, np.float32), np.zeros(1)) is None
    blas_threads(2)
    assert conv._chunked(0, 256, np.zeros(1, np.float32), np.zeros(1, np.float32)) is None


class _SmallCNN(tj.nn.Module):
    def __init__(self):
        super().__init__()
        nn = tj.nn
        self.body = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                  nn.Linear(6 * 2 * 2, 3))

    def forward(self, x):
        return self.body(x)


def test_traced_cnn_training_matches_eager():
    # a whole training step (forward, backward through conv/bias/pool, optimizer) traced vs eager
    rng = np.random.default_rng(0)
    xs = [tj.tensor(rng.standard_normal((5, 1, 8, 8))) for _ in range(3)]
    ys = [tj.tensor(rng.integers(0, 3, 5)) for _ in range(3)]
    results = []
    for traced in (False, True):
        tj.manual_seed(0)
        model = _SmallCNN().double()
        opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = tj.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        run = tj.trace(step) if traced else step
        losses = [float(run(x, y)) for x, y in zip(xs, ys)]
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-10)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_traced_conv_graph_computes_only_what_is_needed():
    tj.manual_seed(0)
    conv = tj.nn.Conv2d(1, 4, 3, padding=1)
    g = tj.trace(lambda x: conv(x).relu().sum()).graph(tj.randn(2, 1, 6, 6))
    fwd, bwd = g.compiled_forward.text("f"), g.compiled_backward.text("b")
    assert "conv2d %0 %1 %2 " in fwd and " add " not in fwd     # the bias is added inside the conv kernel
    assert "conv2d_backward_weight" in bwd
    assert "conv2d_backward_input" not in bwd                    # the input needs no gradient


# ------------------------------------------------------------------------------ against PyTorch (float32)

try:
    import torch
except ImportError:   # the tests above run without torch; these compare with it
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
TF = torch.nn.functional if torch is not None else None


def _both(arr, grad=True):
    return tj.tensor(arr, requires_grad=grad), torch.tensor(arr, requires_grad=grad)


def _check(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


@needs_torch
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_matches_torch(case, bias):
    N, Ci, H, W, O, k, s, p, d, g = case
    k2 = (k, k) if isinstance(k, int) else k
    x, tx = _both(_rand(N, Ci, H, W).astype(np.float32))
    w, tw = _both(_rand(O, Ci // g, *k2).astype(np.float32))
    b, tb = _both(_rand(O).astype(np.float32)) if bias else (None, None)
    y = F.conv2d(x, w, b, s, p, d, g)
    ty = TF.conv2d(tx, tw, tb, s, p, d, g)
    _check(y, ty)
    go = _rand(*ty.shape).astype(np.float32)
    y.backward(tj.tensor(go))
    ty.backward(torch.tensor(go))
    _check(x.grad, tx.grad)
    _check(w.grad, tw.grad, 1e-4)
    if bias:
        _check(b.grad, tb.grad, 1e-4)


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("padding,dilation", [("same", 1), ("same", 2), ("valid", 1)])
def test_conv_padding_strings(padding, dilation):
    x, tx = _both(_rand(2, 3, 6, 7).astype(np.float32))
    w, tw = _both(_rand(4, 3, 2, 3).astype(np.float32))
    y, ty = F.conv2d(x, w, padding=padding, dilation=dilation), TF.conv2d(tx, tw, padding=padding, dilation=dilation)
    assert tuple(y.shape) == tuple(ty.shape)
    _check(y, ty)
    y.sum().backward()
    ty.sum().backward()
    _check(x.grad, tx.grad)


@needs_torch
def test_conv1d_and_unbatched():
    x, tx = _both(_rand(2, 4, 9).astype(np.float32))
    w, tw = _both(_rand(6, 2, 3).astype(np.float32))
    y, ty = F.conv1d(x, w, None, 2, 1, 2, 2), TF.conv1d(tx, tw, None, 2, 1, 2, 2)
    _check(y, ty)
    y.sum().backward()
    ty.sum().backward()
    _check(x.grad, tx.grad)
    _check(w.grad, tw.grad, 1e-4)
    u, tu = _both(_rand(3, 5, 5).astype(np.float32), grad=False)
    w2, tw2 = _both(_rand(2, 3, 3, 3).astype(np.float32), grad=False)
    _check(F.conv2d(u, w2, padding=1), TF.conv2d(tu, tw2, padding=1))


@needs_torch
def test_conv_errors():
    x = tj.randn(1, 3, 5, 5)
    with pytest.raises(RuntimeError, match="channels"):
        F.conv2d(x, tj.randn(2, 2, 3, 3))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        F.conv2d(x, tj.randn(2, 3, 7, 7))
    with pytest.raises(RuntimeError, match="should be the same"):
        F.conv2d(x, tj.randn(2, 3, 3, 3, dtype=tj.float64))
    with pytest.raises(RuntimeError, match="strided"):
        F.conv2d(x, tj.randn(2, 3, 3, 3), stride=2, padding="same")


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1),
                                     ceil_mode=True)])
@needs_torch
def test_max_pool2d_matches_torch(kw):
    x, tx = _both(_rand(2, 3, 9, 8).astype(np.float32))
    y, i = F.max_pool2d(x, return_indices=True, **kw)
    ty, ti = TF.max_pool2d(tx, return_indices=True, **kw)
    _check(y, ty)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    go = _rand(*ty.shape).astype(np.float32)
    y.backward(tj.tensor(go))
    ty.backward(torch.tensor(go))
    _check(x.grad, tx.grad)


@needs_torch
def test_max_pool_nan_and_1d():
    a = _rand(1, 1, 4, 4).astype(np.float32)
    a[0, 0, 1, 1] = np.nan
    y, ty = F.max_pool2d(tj.tensor(a), 2), TF.max_pool2d(torch.tensor(a), 2)
    np.testing.assert_array_equal(np.isnan(y.numpy()), np.isnan(ty.numpy()))
    x, tx = _both(_rand(2, 3, 11).astype(np.float32))
    y, i = F.max_pool1d(x, 3, 2, 1, return_indices=True)
    ty, ti = TF.max_pool1d(tx, 3, 2, 1, return_indices=True)
    _check(y, ty)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=3, stride=1, padding=1, divisor_override=2)])
@needs_torch
def test_avg_pool2d_matches_torch(kw):
    x, tx = _both(_rand(2, 3, 9, 8).astype(np.float32))
    y, ty = F.avg_pool2d(x, **kw), TF.avg_pool2d(tx, **kw)
    _check(y, ty)
    y.sum().backward()
    ty.sum().backward()
    _check(x.grad, tx.grad)


@needs_torch
@pytest.mark.parametrize("size", [(1, 1), (3, 5), (4, None), 2])
def test_adaptive_avg_pool_matches_torch(size):
    x, tx = _both(_rand(2, 3, 9, 8).astype(np.float32))
    y, ty = F.adaptive_avg_pool2d(x, size), TF.adaptive_avg_pool2d(tx, size)
    _check(y, ty)
    y.sum().backward()
    ty.sum().backward()
    _check(x.grad, tx.grad)
    z, tz = _both(_rand(2, 3, 10).astype(np.float32))
    _check(F.adaptive_avg_pool1d(z, 4), TF.adaptive_avg_pool1d(tz, 4))
    _check(F.avg_pool1d(z, 3, 2, 1), TF.avg_pool1d(tz, 3, 2, 1))


@needs_torch
def test_float64_and_float16_dtypes():
    x = tj.randn(1, 2, 5, 5, dtype=tj.float64)
    assert F.conv2d(x, tj.randn(3, 2, 3, 3, dtype=tj.float64)).dtype is tj.float64
    assert F.max_pool2d(x, 2).dtype is tj.float64
    h = tj.randn(1, 2, 4, 4).half()
    assert F.avg_pool2d(h, 2).dtype is tj.float16


@pytest.mark.parametrize("groups,bias", [(1, False), (2, True)])
def test_images_shared_among_numba_threads(groups, bias, monkeypatch):
    """With several numba threads and OpenBLAS's own threads (no per-image products by `_chunked`), a convolution
    by columns whose per-image products are below OpenBLAS's threading size shares its images among numba's
    threads (convgemm's prange twins), its forward and its weight gradient (in parts, summed after): the float64
    reference, and the bits of the serial per-image kernels (what runs while the twins compile)."""
    import time
    import numba
    from tracejit.kernels.cpu import conv, convgemm
    from tracejit.kernels.cpu.blas import ONE_THREAD_MACS, blas_threads, gemm_address
    if not gemm_address(np.float32) or numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numpy's OpenBLAS cblas not found, or numba has one thread")
    saved, saved_blas = numba.get_num_threads(), blas_threads()
    numba.set_num_threads(2)
    blas_threads(2)
    try:
        rng = np.random.default_rng(6)
        x = rng.standard_normal((6, 4, 8, 8)).astype(np.float32)
        w = rng.standard_normal((6, 4 // groups, 1, 1)).astype(np.float32)
        b = rng.standard_normal(6).astype(np.float32) if bias else None
        cols = conv.input_columns(x, 1, 1, (2, 2), (0, 0), (1, 1))
        assert conv._chunked(conv.CHUNKED_FORWARD, 16, cols, w) is None
        assert conv._images_on_threads(3 * 16 * 2, cols, w) is not None
        deadline = time.time() + 120
        got = conv.forward_from_columns(cols, w, groups, b)
        while not convgemm.forward_images_par.signatures and time.time() < deadline:
            time.sleep(0.1)
            got = conv.forward_from_columns(cols, w, groups, b)
        g = rng.standard_normal(got.shape).astype(np.float32)
        dw = conv.weight_grad_from_columns(cols, g, w.shape, groups)
        while not convgemm.weight_grad_images_par.signatures and time.time() < deadline:
            time.sleep(0.1)
            dw = conv.weight_grad_from_columns(cols, g, w.shape, groups)
        assert convgemm.forward_images_par.signatures and convgemm.weight_grad_images_par.signatures
        monkeypatch.setattr(convgemm, "forward_images_par", convgemm.forward_images)
        monkeypatch.setattr(convgemm, "weight_grad_images_par", convgemm.weight_grad_images)
        np.testing.assert_array_equal(conv.forward_from_columns(cols, w, groups, b), got)
        np.testing.assert_array_equal(conv.weight_grad_from_columns(cols, g, w.shape, groups), dw)
        xs = x[:, :, ::2, ::2].astype(np.float64)
        og, cg = 6 // groups, 4 // groups
        want = np.concatenate([np.einsum("oc,nchw->nohw", w[gi * og:(gi + 1) * og, :, 0, 0].astype(np.float64),
                                         xs[:, gi * cg:(gi + 1) * cg]) for gi in range(groups)], 1)
        if bias:
            want += b[None, :, None, None]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        want_dw = np.concatenate([np.einsum("nohw,nchw->oc", g[:, gi * og:(gi + 1) * og].astype(np.float64),
                                            xs[:, gi * cg:(gi + 1) * cg]) for gi in range(groups)], 0)
        np.testing.assert_allclose(dw, want_dw[:, :, None, None], rtol=1e-5, atol=1e-5)
        numba.set_num_threads(1)
        assert conv._images_on_threads(3 * 16 * 2, cols, w) is None            # one numba thread
        numba.set_num_threads(2)
        assert conv._images_on_threads(ONE_THREAD_MACS, cols, w) is None       # OpenBLAS threads that itself
    finally:
        numba.set_num_threads(saved)
        blas_threads(saved_blas)
