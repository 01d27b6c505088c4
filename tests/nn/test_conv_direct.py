"""kernels/cpu/convtile.py: float32 convolutions by register tiles, read in place from the padded input, against
float64 references (numpy, no torch), for every row layout the kernels distinguish: output rows of 16 positions or a
multiple (read in place, one image row per tile row), of 8 (two image rows), of 4, 2 and 1 (through panels), weight
gradient panels that cross images and a last partial one; kernels 3 wide (unrolled) and not; strides along the
height and along the width (column planes), dilation, unequal padding, non-square kernels; output channel counts
around the tiles' 6 rows and 16 columns; one numba thread and two."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit.kernels.cpu import conv, convtile


def _reference(x, w, b, stride, padding, dilation, g):
    """float64 forward, input gradient and weight gradient by explicit sums over the kernel taps."""
    x, w, g = (a.astype(np.float64) for a in (x, w, g))
    N, C, H, W = x.shape
    O, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    OH, OW = g.shape[2:]
    y = np.zeros((N, O, OH, OW)) + (0 if b is None else b.astype(np.float64)[None, :, None, None])
    gxp = np.zeros_like(xp)
    gw = np.zeros(w.shape)
    for i in range(kh):
        for j in range(kw):
            win = (slice(None), slice(None), slice(i * dh, i * dh + sh * (OH - 1) + 1, sh),
                   slice(j * dw, j * dw + sw * (OW - 1) + 1, sw))
            y += np.einsum("nchw,oc->nohw", xp[win], w[:, :, i, j])
            gxp[win] += np.einsum("nohw,oc->nchw", g, w[:, :, i, j])
            gw[:, :, i, j] = np.einsum("nohw,nchw->oc", g, xp[win])
    return y, gxp[:, :, ph:ph + H, pw:pw + W], gw


CASES = [  # N, C, H, W, O, (kh, kw), stride, padding, dilation
    (3, 16, 16, 16, 16, (3, 3), (1, 1), (1, 1), (1, 1)),     # rows of 16, in place; K = 144
    (2, 5, 8, 8, 13, (3, 3), (1, 1), (1, 1), (1, 1)),        # rows of 8: two image rows per tile row
    (4, 5, 4, 4, 11, (3, 3), (1, 1), (1, 1), (1, 1)),        # rows of 4 through panels; O < 16
    (3, 3, 2, 8, 20, (1, 3), (1, 1), (0, 1), (1, 1)),        # rows of 8, 1 x 3 kernel, unequal padding
    (5, 2, 8, 2, 7, (3, 1), (1, 1), (1, 0), (1, 1)),         # rows of 2 (scalar panel runs)
    (2, 3, 16, 1, 6, (3, 1), (1, 1), (1, 0), (1, 1)),        # rows of 1
    (2, 16, 8, 8, 32, (1, 1), (1, 1), (0, 0), (1, 1)),       # 1x1: BLAS's (not direct)
    (2, 4, 6, 34, 33, (2, 3), (1, 1), (0, 0), (1, 1)),       # rows of 32, O = 33 (tiles of 6 and a tail of 3)
    (2, 3, 9, 16, 17, (3, 3), (2, 1), (1, 1), (1, 1)),       # stride 2 along the height only
    (2, 3, 12, 16, 5, (5, 5), (1, 1), (2, 2), (1, 1)),       # in place, 5 kernel columns (a loop, not unrolled)
    (2, 3, 12, 20, 4, (3, 3), (1, 1), (2, 3), (2, 2)),       # dilation 2, rows of 20 -> not direct: reference
    (5, 3, 8, 8, 5, (3, 3), (1, 1), (1, 1), (1, 1)),         # 320 positions: the last wide panel is partial
    (1, 64, 4, 4, 64, (3, 3), (1, 1), (1, 1), (1, 1)),       # K = 576, 16 positions in all
    (2, 3, 16, 16, 7, (3, 3), (2, 2), (1, 1), (1, 1)),       # stride 2: two column planes, rows of 8 in place
    (2, 5, 8, 9, 9, (3, 3), (2, 2), (1, 1), (1, 1)),         # stride 2, odd width, rows of 4 through panels
    (2, 3, 16, 32, 5, (2, 2), (2, 2), (0, 0), (1, 1)),       # stride 2, a 2-wide kernel: panels
    (1, 2, 12, 48, 4, (3, 3), (1, 3), (1, 1), (1, 2)),       # stride 3, dilation 2: taps in planes 0, 2, 1
    (2, 16, 8, 8, 32, (1, 1), (2, 2), (0, 0), (1, 1)),       # 1x1 stride 2 (a downsample): input gradient direct
    (2, 4, 15, 15, 5, (3, 3), (2, 2), (1, 1), (1, 1)),       # stride 2, odd input: the last taps fall past it
    (2, 4, 18, 18, 6, (3, 3), (2, 2), (0, 0), (1, 1)),       # stride 2, no padding: the last input row unread
    (2, 4, 10, 18, 9, (3, 3), (1, 1), (0, 0), (1, 1)),       # Winograd forward without padding (input grad not)
    (2, 3, 8, 16, 5, (3, 3), (1, 1), (0, 0), (1, 1)),        # Winograd input gradient (g padded by 2), forward not
    (2, 4, 4, 32, 6, (3, 3), (1, 1), (1, 1), (1, 1)),        # Winograd rows of two vectors of 8 tiles
    (3, 8, 8, 8, 16, (3, 3), (1, 1), (1, 1), (1, 1)),        # Winograd weight gradient, a partial block of images
    (5, 8, 4, 16, 32, (3, 3), (1, 1), (0, 1), (1, 1)),       # the same, unequal padding, tiles of 2 rows
    (2, 8, 12, 12, 16, (3, 3), (1, 1), (1, 1), (1, 1)),      # rows of 12: Winograd only, 4 + 2 tiles a row
    (3, 8, 14, 14, 16, (3, 3), (1, 1), (1, 1), (1, 1)),      # 7 tiles a row: 4 + 2 + 1; blocks of 2 images
    (2, 64, 48, 48, 64, (3, 3), (1, 1), (1, 1), (1, 1)),     # an image in chunks of 10 tile rows, the last of 4
]


@pytest.fixture(params=[(1, True), (2, True), (3, True), (2, False)], ids=["1", "2", "3", "2-direct"])
def threads(request, monkeypatch):
    """The batch split over one, two or three Python threads for these small products too (the prange variants,
    compiled in the background at first use, left out here: see test_prange_variants_give_the_threads_bits); the
    last: Winograd off, so that the direct tiles compute the 3x3 stride-1 convolutions too."""
    n, wino = request.param
    monkeypatch.setattr(convtile, "_threads", lambda macs: n)
    monkeypatch.setattr(convtile, "_ready_variant", lambda name, args: None)
    monkeypatch.setattr(convtile, "WINOGRAD", wino)
    return n


@pytest.mark.parametrize("N,C,H,W,O,kernel,stride,padding,dilation", CASES)
def test_direct_convolution_matches_float64_sums(N, C, H, W, O, kernel, stride, padding, dilation, threads):
    rng = np.random.default_rng(N * 100 + C * 10 + O)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((O, C) + kernel).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    OH, OW = (conv.conv_out_size(s, k, st, p, d) for s, k, st, p, d in zip((H, W), kernel, stride, padding, dilation))
    g = rng.standard_normal((N, O, OH, OW)).astype(np.float32)
    y, gx, gw = _reference(x, w, b, stride, padding, dilation, g)
    taken = convtile.direct(np.float32, 1, stride, padding, dilation, kernel, (OH, OW))
    assert taken == ((OW % 16 == 0 or 16 % OW == 0) and kernel != (1, 1))   # not: rows of 20, 1x1
    if taken:
        tol = dict(rtol=1e-4, atol=1e-4 * np.sqrt(C * kernel[0] * kernel[1]))
        y1 = convtile.forward(x, w, b, stride, padding, dilation)      # (planes filled image by image inside)
        np.testing.assert_allclose(y1, y, **tol)
        # the planes copied first (conv_planes' node, then conv2d_from_planes): the same bits
        xp = convtile.planes(x, stride, padding)
        np.testing.assert_array_equal(convtile.forward_from_planes(xp, w, b, stride, dilation, (OH, OW)), y1)
        np.testing.assert_allclose(convtile.weight_grad(x, g, w.shape, stride, padding, dilation), gw,
                                   rtol=1e-4, atol=1e-4 * np.sqrt(N * OH * OW))
    if convtile.direct_input_grad(np.float32, 1, stride, padding, dilation, kernel, (H, W)):
        np.testing.assert_allclose(convtile.input_grad(g, w, x.shape, stride, padding, dilation), gx, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(O * kernel[0] * kernel[1]))
    # the public entry points, whichever path they take, agree with the same reference
    np.testing.assert_allclose(conv.conv2d_forward(x, w, stride, padding, dilation, 1, b), y, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(conv.conv2d_input_grad(g, w, x.shape, stride, padding, dilation, 1), gx,
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(conv.conv2d_weight_grad(x, g, w.shape, stride, padding, dilation, 1), gw,
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape,S,pad", [((2, 3, 5, 16), 1, (1, 1)), ((2, 3, 5, 13), 1, (2, 0)),
                                         ((2, 2, 4, 9), 2, (1, 1)), ((1, 2, 3, 10), 3, (0, 2))])
def test_column_planes_hold_the_padded_columns_by_residue(shape, S, pad, threads):
    """planes(x)[n, c, p, h, q] = the zero-padded x at column S*q + p (numpy's copies on one thread, the `_fill`
    kernel's threads on two)."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    Wq = -(-xp.shape[3] // S)
    xp = np.pad(xp, ((0, 0), (0, 0), (0, 0), (0, Wq * S - xp.shape[3])))
    want = xp.reshape(xp.shape[:3] + (Wq, S)).transpose(0, 1, 4, 2, 3)
    np.testing.assert_array_equal(convtile.planes(x, (1, S), pad), want)


def test_which_convolutions_run_direct():
    """float32, one group, more than one tap, rows that tile by 16, any strides; the input gradient of stride 1
    needs a padding below the kernel's reach (g padded, never cropped); a strided one, g's rows tiling by 16 (any
    kernel, 1x1 too)."""
    d = convtile.direct
    assert d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (16, 16))
    assert d(np.float32, 1, (2, 1), (1, 1), (1, 1), (3, 3), (8, 16))
    assert not d(np.float64, 1, (1, 1), (1, 1), (1, 1), (3, 3), (16, 16))
    assert not d(np.float32, 2, (1, 1), (1, 1), (1, 1), (3, 3), (16, 16))
    assert d(np.float32, 1, (1, 2), (1, 1), (1, 1), (3, 3), (16, 8))
    assert not d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (3, 12))       # 36 positions
    assert not d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (4, 12))       # rows of 12
    assert not d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (0, 16))
    assert not d(np.float32, 1, (1, 1), (0, 0), (1, 1), (1, 1), (16, 16))
    assert d(np.float32, 1, (1, 1), (0, 0), (1, 1), (1, 2), (16, 16))
    di = convtile.direct_input_grad
    assert di(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (8, 8))
    assert di(np.float32, 1, (2, 1), (1, 1), (1, 1), (3, 3), (8, 8))            # g 4 x 8
    assert di(np.float32, 1, (2, 2), (0, 0), (1, 1), (1, 1), (16, 16))          # g 8 x 8, a 1x1 kernel
    assert di(np.float32, 1, (1, 2), (1, 1), (1, 1), (3, 3), (8, 8))            # g 8 x 4: two rows a tile row
    assert not di(np.float32, 1, (2, 2), (1, 1), (1, 1), (3, 3), (6, 16))       # g 3 x 8: 24 positions
    assert not di(np.float32, 1, (2, 2), (1, 1), (1, 1), (3, 3), (24, 24))      # g rows of 12
    assert not di(np.float64, 1, (2, 2), (1, 1), (1, 1), (3, 3), (16, 16))
    assert not di(np.float32, 2, (2, 2), (1, 1), (1, 1), (3, 3), (16, 16))
    assert not di(np.float32, 1, (1, 1), (3, 1), (1, 1), (3, 3), (8, 8))       # padding 3 > reach 2 of a 3x3
    # given the channels (C, O): also where Winograd computes the forward and the weight gradient (any even size,
    # O a multiple of 16, C >= 8), or the input gradient (O >= 4)
    assert d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (4, 12), (8, 16))
    assert d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (56, 56), (64, 64))
    assert not d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (56, 56), (64, 24))
    assert not d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (56, 56), (4, 16))
    assert not d(np.float32, 1, (2, 2), (1, 1), (1, 1), (3, 3), (28, 28), (64, 64))
    assert not d(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (7, 7), (64, 64))
    assert di(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (14, 14), (16, 5))
    assert not di(np.float32, 1, (1, 1), (1, 1), (1, 1), (3, 3), (14, 14), (16, 3))
    assert not di(np.float32, 1, (1, 1), (3, 3), (1, 1), (3, 3), (14, 14), (16, 16))


def test_traced_resnet_layer_convolves_in_place():
    """A float32 3x3 'same' convolution of a traced training step needs no columns: no conv_columns node (the
    BLAS path's shared im2col) is left in the compiled graph; the forward fills one padded copy of x as it goes
    (conv2d_planes_forward) and the weight gradient reads it; its numbers equal eager's."""
    rng = np.random.default_rng(0)
    x = tj.tensor(rng.standard_normal((4, 8, 16, 16)).astype(np.float32))
    w0 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.1

    def step(x, w):
        y = F.conv2d(x, w, padding=1)
        (y * y).sum().backward()
        return y.detach(), w.grad

    def run(fn):
        w = tj.tensor(w0, requires_grad=True)
        return [t.numpy() for t in fn(x, w)]
    traced = tj.trace(step)
    got, want = run(traced), run(step)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
    graph = traced.graph(x, tj.tensor(w0, requires_grad=True)).entry.fwd_fn.graph
    names = [n.op.name for n in graph.nodes]
    assert "conv_columns" not in names and "conv_planes" not in names, names
    assert names.count("conv2d_planes_forward") == 1 and "conv2d_weight_grad_from_planes" in names, names
    assert "conv2d" not in names and "conv2d_backward_weight" not in names, names


def _traced_and_eager(x0, w0, **conv):
    """A step convolving x0 with w0 (F.conv2d's keywords `conv`) and back, traced and eager: (its outputs and the
    gradients of x and w, traced; the same, eager; the op names of the traced graph)."""
    def step(x, w):
        y = F.conv2d(x, w, **conv)
        (y * y).sum().backward()
        return y.detach(), x.grad, w.grad

    def run(fn):
        return [t.numpy() for t in fn(tj.tensor(x0, requires_grad=True), tj.tensor(w0, requires_grad=True))]
    traced = tj.trace(step)
    got, want = run(traced), run(step)
    graph = traced.graph(tj.tensor(x0, requires_grad=True), tj.tensor(w0, requires_grad=True)).entry.fwd_fn.graph
    return got, want, [n.op.name for n in graph.nodes]


@pytest.mark.parametrize("n", [1, 2])
def test_traced_winograd_only_layer_equals_eager(n, monkeypatch):
    """A 3x3 layer on 12x12 images (rows of 12: the direct tiles do not take it, Winograd does), traced, on one or
    two Python threads: the planes shared by the forward and the weight gradient as for a direct convolution, the
    numbers eager's and within float32 rounding of the BLAS path's."""
    monkeypatch.setattr(convtile, "_threads", lambda macs: n)
    monkeypatch.setattr(convtile, "_ready_variant", lambda name, args: None)
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((3, 8, 12, 12)).astype(np.float32)
    w0 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.1
    got, want, names = _traced_and_eager(x0, w0, padding=1)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
    assert names.count("conv2d_planes_forward") == 1 and names.count("conv2d_weight_grad_from_planes") == 1, names
    with monkeypatch.context() as m:
        m.setattr(convtile, "ENABLED", False)
        blas = _traced_and_eager(x0, w0, padding=1)[1]
    for a, b in zip(got, blas):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("stride", [1, 2])
def test_traced_conv_gradients_equal_eager(stride, threads):
    """A direct convolution whose input needs a gradient, traced: the weight gradient reads the padded copy of the
    input the forward filled (conv2d_planes_forward); the numbers equal eager's."""
    rng = np.random.default_rng(stride)
    x0 = rng.standard_normal((4, 8, 16, 16)).astype(np.float32)
    w0 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.1
    got, want, names = _traced_and_eager(x0, w0, stride=stride, padding=1)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
    assert names.count("conv2d_planes_forward") == 1 and names.count("conv2d_weight_grad_from_planes") == 1, names
    assert names.count("conv2d_backward_input") == 1, names


def test_an_empty_batch_convolves_to_empty_and_zero_gradients():
    x = np.ones((0, 2, 4, 4), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    assert convtile.forward(x, w, None, (1, 1), (1, 1), (1, 1)).shape == (0, 3, 4, 4)
    np.testing.assert_array_equal(convtile.weight_grad(x, np.ones((0, 3, 4, 4), np.float32), w.shape, (1, 1),
                                                       (1, 1), (1, 1)), np.zeros(w.shape, np.float32))


_OTHER_LANES = """
import json, numpy as np
from tracejit.kernels.cpu import conv, convtile
out = {"lanes": convtile.LANES, "mr": convtile.MR, "err": []}
rng = np.random.default_rng(0)
cases = ((2, 16, 16, 16, 20, (1, 1)), (3, 5, 8, 8, 13, (1, 1)), (2, 3, 16, 16, 7, (2, 2)), (1, 40, 4, 4, 33, (1, 1)))
for N, C, H, W, O, stride, wino in [c + (w,) for w in (True, False) for c in cases]:
    convtile.WINOGRAD = wino             # (the stride-1 cases: Winograd's products, then the direct tiles)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
    OH, OW = (conv.conv_out_size(s, 3, st, 1, 1) for s, st in zip((H, W), stride))
    g = rng.standard_normal((N, O, OH, OW)).astype(np.float32)
    a = (stride, (1, 1), (1, 1))
    assert convtile.direct(np.float32, 1, *a, (3, 3), (OH, OW))
    got = [convtile.forward(x, w, None, *a), convtile.input_grad(g, w, x.shape, *a),
           convtile.weight_grad(x, g, w.shape, *a)]
    convtile.ENABLED = False             # the reference: conv.py's im2col and BLAS products
    want = [conv.conv2d_forward(x, w, *a, 1, None), conv.conv2d_input_grad(g, w, x.shape, *a, 1),
            conv.conv2d_weight_grad(x, g, w.shape, *a, 1)]
    convtile.ENABLED = True
    out["err"].append([float(np.abs(p - q).max() / np.abs(q).max()) for p, q in zip(got, want)])
print(json.dumps(out))
"""


def test_the_other_vector_width_computes_the_same_numbers():
    """The tiles of the width this CPU does not pick (16 lanes on AVX2, 8 on AVX-512; TRACEJIT_CONV_LANES, in a
    child process: the width is fixed at import) give the BLAS path's numbers: rows of 16 and of 8 positions in
    place, a strided convolution's column planes, a panel, output channels around the tiles' rows; the stride-1
    cases by Winograd's products and by the direct tiles."""
    import json
    import os
    import subprocess
    import sys
    lanes = 8 if convtile.LANES == 16 else 16
    env = dict(os.environ, TRACEJIT_CONV_LANES=str(lanes))
    r = subprocess.run([sys.executable, "-c", _OTHER_LANES], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["lanes"] == lanes and out["mr"] == (16 if lanes == 16 else 6), out
    for errs in out["err"]:
        assert max(errs) < 1e-5, out["err"]


_ASM_512 = """
import json, re, numba, numpy as np
from tracejit.kernels.cpu import convtile, vector_info
xp = np.zeros((2, 16, 1, 18, 18), np.float32)
args = (np.zeros((0, 0, 0, 0), np.float32), 0, 0, xp, np.zeros((16, 144), np.float32), np.zeros(0, np.float32),
        3, 3, 1, 1, 1, np.zeros((2, 16, 16, 16), np.float32))
sig = tuple(numba.typeof(a) for a in args)
convtile._forward.compile(sig)              # compiled only: this CPU may not run AVX-512
asm = convtile._forward.inspect_asm(sig)
hot = max(re.split(r"\\n(?=\\.LBB\\S*:)", asm), key=lambda b: len(re.findall(r"vfmadd\\w+ps", b)))
print(json.dumps({"info": vector_info(), "lanes": convtile.LANES,
                  "zmm_fma": len(re.findall(r"vfmadd\\w+ps\\s.*zmm", hot)),
                  "ymm_fma": len(re.findall(r"vfmadd\\w+ps\\s.*ymm", hot)),
                  "vector_spills": len(re.findall(r"mm\\d+.*\\(%rsp\\)|\\(%rsp\\).*mm\\d+", hot))}))
"""


def test_avx512_tiles_are_16_float_vectors_kept_in_registers(tmp_path):
    """Compiled for an AVX-512 CPU (sapphirerapids, 512-bit vectors preferred; not run), the forward's hot loop is
    3 unrolled steps of 16 rows: 48 FMAs on 512-bit registers, none on 256-bit ones, and no accumulator spilled to
    the stack. (At 8 lanes and 6 rows AVX2's 16 registers spill a few: 48 FMAs and ~30 stack moves.)"""
    import json
    import os
    import subprocess
    import sys
    feats = ",".join("+" + f for f in ("avx512f", "avx512vl", "avx512dq", "avx512bw", "avx512cd", "evex512", "avx2",
                                       "avx", "fma", "f16c", "bmi", "bmi2", "lzcnt", "popcnt", "sse4.2", "sse4.1",
                                       "ssse3", "sse3", "sse2", "sse", "cx16", "movbe")) + ",-prefer-256-bit"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_CPU", "TRACEJIT_VECTOR", "TRACEJIT_CONV"))}
    env.update(NUMBA_CPU_NAME="sapphirerapids", NUMBA_CPU_FEATURES=feats, NUMBA_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _ASM_512], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["info"]["vector_bits"] == 512 and out["lanes"] == 16, out
    # (48 with this numba's LLVM: 3 unrolled steps of 16 rows; another LLVM may unroll its loop further)
    assert out["zmm_fma"] >= 48 and out["zmm_fma"] % 16 == 0, out
    assert out["ymm_fma"] == 0 and out["vector_spills"] == 0, out


@pytest.mark.parametrize("C,O,H,stride,wino", [(16, 16, 8, (1, 1), True), (3, 16, 8, (1, 1), True),
                                               (16, 16, 8, (1, 1), False), (8, 16, 8, (2, 2), True)])
def test_prange_variants_give_the_threads_bits(C, O, H, stride, wino, monkeypatch):
    """A large convolution's prange variants (numba's threads) and its serial kernels on slices of the batch (Python
    threads, while the variants compile in the background) give the same bits, so the switch between them changes
    no result: 5 images in 3 parts (the weight gradient's parts added in order), in place and through panels."""
    rng = np.random.default_rng(C + O)
    x = rng.standard_normal((5, C, H, H)).astype(np.float32)
    w = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
    g = rng.standard_normal((5, O, H // stride[0], H // stride[1])).astype(np.float32)
    monkeypatch.setattr(convtile, "_threads", lambda macs: 3)
    monkeypatch.setattr(convtile, "WINOGRAD", wino)
    got, taken = {}, set()

    def variant(name, args):
        taken.add(name)
        return convtile.parallel_variant(name)
    for path, ready in (("threads", lambda name, args: None), ("prange", variant)):
        monkeypatch.setattr(convtile, "_ready_variant", ready)
        got[path] = [convtile.forward(x, w, None, stride, (1, 1), (1, 1)),
                     convtile.weight_grad(x, g, w.shape, stride, (1, 1), (1, 1)),
                     convtile.input_grad(g, w, x.shape, stride, (1, 1), (1, 1))]
    for a, b in zip(got["threads"], got["prange"]):
        np.testing.assert_array_equal(a, b)
    if not (wino and stride == (1, 1)):
        assert taken == {"_forward", "_weight_grad", "_input_grad_padded" if stride == (1, 1) else "_input_grad_cols"}
    elif C >= 8:
        assert taken == {"_wino", "_wino_weight_grad"}
    else:       # (a 3-channel input: its forward and weight gradient direct, its input gradient (of 16) Winograd's)
        assert taken == {"_forward", "_weight_grad", "_wino"}


def test_winograd_takes_the_3x3_stride_1_layers_it_computes_faster():
    """Which convolutions go to Winograd's F(2x2, 3x3): 3x3 layers of stride 1 and even output sizes (the ResNet
    bench's, ImageNet ResNets' 56, 28, 14), not strided or dilated ones, not 5x5 kernels, not odd sizes, not an
    input of fewer than 4 channels, not a row of tiles too large for L2; blocks of images where they are small,
    chunks of tile rows where they are large."""
    ok = lambda *a: convtile.winograd(*a)     # noqa: E731
    one = (1, 1)
    for C, H in ((16, 16), (32, 8), (64, 4), (4, 16), (64, 56), (128, 28), (256, 14), (16, 12)):
        assert ok((3, 3), one, one, (C, C), (H, H))
    assert not ok((3, 3), (2, 2), one, (16, 16), (8, 8))
    assert not ok((3, 3), one, (2, 2), (16, 16), (16, 16))
    assert not ok((5, 5), one, one, (16, 16), (16, 16))
    assert not ok((3, 3), one, one, (16, 16), (15, 16))
    assert not ok((3, 3), one, one, (512, 512), (7, 7))
    assert not ok((3, 3), one, one, (3, 16), (16, 16))
    assert not ok((3, 3), one, one, (4096, 4096), (16, 16))
    blocks = convtile._wino_blocks.py_func
    assert blocks(16, 16, 16, 16) == (1, 8) and blocks(4, 4, 64, 64) == (16, 2) and blocks(8, 8, 32, 32) == (4, 4)
    assert blocks(56, 56, 64, 64) == (1, 9)            # 9 of 28 tile rows a chunk: 64 x 252 floats <= 16K
