"""tracejit.special and the erfinv op against torch.special: values and gradients (float64), float32 within a few
ulp, the edges (+-1, beyond, NaN), traced = eager."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["erf", "erfinv", "expit", "logit", "log1p", "expm1", "exp2", "ndtr", "ndtri"])
def test_special_matches_torch(name):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.02, 0.98, 50) if name in ("logit", "ndtri") else \
        rng.uniform(-0.999, 0.999, 50) if name == "erfinv" else rng.standard_normal(50)
    a, b = tj.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = getattr(tj.special, name)(a), getattr(torch.special, name)(b)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-12, atol=1e-14)
    ya.sum().backward()
    yb.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10)


def test_erfinv_float32_edges_and_traced():
    x = np.concatenate([np.linspace(-1, 1, 20001), [-1.5, 1.5, np.nan, -0.0]]).astype(np.float32)
    got = tj.erfinv(tj.tensor(x)).numpy()
    want = torch.erfinv(torch.tensor(x)).numpy()
    ok = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~ok & ~np.isnan(want)],
                                                                            want[~ok & ~np.isnan(want)])
    ulp = np.abs(got[ok] - want[ok]) / np.spacing(np.maximum(np.abs(want[ok]), np.float32(1e-30)))
    assert ulp.max() <= 2, ulp.max()
    f = tj.trace(lambda t: tj.erfinv(t * 0.5) + tj.special.ndtri(t.abs() * 0.5 + 0.25))
    t = tj.tensor(x[np.isfinite(x)])
    np.testing.assert_allclose(f(t).numpy(), (tj.erfinv(t * 0.5) + tj.special.ndtri(t.abs() * 0.5 + 0.25)).numpy(),
                               rtol=1e-6, atol=1e-7)
    y = t.clone().requires_grad_(True)
    tj.erfinv(y * 0.5).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), 0.5 * np.sqrt(np.pi) / 2 * np.exp(
        tj.erfinv(t * 0.5).numpy().astype(np.float64) ** 2), rtol=1e-5)
