"""F.interpolate and nn.Upsample: PyTorch's output sizes, source coordinates and gradients for every supported mode,
traced = eager, and PyTorch's errors."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F

CASES = [((2, 3, 5), m) for m in ("nearest", "nearest-exact", "linear")] + \
    [((2, 3, 5, 7), m) for m in ("nearest", "nearest-exact", "bilinear")] + \
    [((1, 2, 3, 4, 5), m) for m in ("nearest", "trilinear")]
SIZES = [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.5), dict(size=3), dict(size=11),
         dict(scale_factor=2.5, recompute_scale_factor=True)]


@pytest.mark.parametrize("shape, mode", CASES, ids=[f"{len(s)}d-{m}" for s, m in CASES])
def test_interpolate_matches_pytorch(shape, mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for kw in SIZES:
        for align_corners in ((None,) if mode.startswith("nearest") else (False, True)):
            x = rng.standard_normal(shape).astype(np.float32)
            tx, jx = torch.tensor(x, requires_grad=True), tj.tensor(x, requires_grad=True)
            to = torch.nn.functional.interpolate(tx, mode=mode, align_corners=align_corners, **kw)
            jo = F.interpolate(jx, mode=mode, align_corners=align_corners, **kw)
            assert tuple(jo.shape) == tuple(to.shape), (kw, align_corners)
            np.testing.assert_allclose(jo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
            g = rng.standard_normal(tuple(to.shape)).astype(np.float32)
            to.backward(torch.tensor(g))
            jo.backward(tj.tensor(g))
            np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_upsample_traced_equals_eager_and_gradcheck():
    from tracejit.autograd.gradcheck import gradcheck
    m = tj.nn.Sequential(tj.nn.Conv2d(2, 3, 3, padding=1), tj.nn.Upsample(scale_factor=2, mode="bilinear"),
                         tj.nn.Upsample(size=(9, 5), mode="nearest"))
    x = tj.randn(2, 2, 4, 3)

    def loss(x):
        return m(x).square().mean()

    want = loss(x)
    step = tj.trace(loss)
    for _ in range(2):
        np.testing.assert_allclose(float(step(x)), float(want), rtol=1e-6)
    xd = tj.randn(1, 1, 3, 4, dtype=tj.float64, requires_grad=True)
    assert gradcheck(lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear", align_corners=True), (xd,))
    assert gradcheck(lambda t: F.interpolate(t, size=(5, 2), mode="nearest"), (xd,))


def test_interpolate_errors():
    x = tj.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4D input"):
        F.interpolate(tj.randn(1, 2, 4), scale_factor=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="'bicubic' is not supported"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(3, 3, 3))
