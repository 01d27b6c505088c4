"""nn ops without PyTorch (tracejit/ops/nn_ops.py), second round: what the survivors of a mutation-testing run
over the functions tests/ops/test_nn_ops_edges.py was not first written for showed unchecked (issue 23). float32
and float16 inputs keep their dtype through every output and gradient (the shape rules' dtypes), float16 batch
norm computes its statistics in float32, softmax's numpy path warns of nothing, the row kernels' operands of a
3-d input, batch norm's gradients in eval and each gradient gated by its own input, a 0-d softmax's dim checked.
References are float64 formulas written from the definitions."""
import math
import warnings

import numpy as np
import pytest

import tracejit as torch
import tracejit.nn.functional as F
from tracejit.ops.nn_ops import _native_batch_norm
from tracejit.ops.registry import OPS, apply


def _close(got, want, tol=1e-12):
    got = got.detach().numpy() if hasattr(got, "numpy") else np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol, equal_nan=True)


def _rng(seed=0):
    return np.random.default_rng(100 + seed)


# ----------------------------------------------------------------------------- softmax, log_softmax


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_of_a_0d_tensor_checks_its_dim(fn):
    """PyTorch takes dim 0 or -1 of a 0-d tensor and refuses any other (tracejit used to take any dim)."""
    x = torch.tensor(2.5, dtype=torch.float64)
    for d in (0, -1):
        _close(fn(x, d), np.array(1.0 if fn is torch.softmax else 0.0))
    for d in (1, -2, 3):
        with pytest.raises(IndexError) as e:
            fn(x, d)
        assert str(e.value) == f"Dimension out of range (expected to be in range of [-1, 0], but got {d})"


def test_softmax_dtype_argument_also_narrows():
    """dtype= converts the input first, to a narrower dtype too (float64 input, float32 result)."""
    x = _rng(1).standard_normal((2, 3))
    for fn in (torch.softmax, torch.log_softmax):
        got = fn(torch.tensor(x), 1, dtype=torch.float32)
        assert got.dtype is torch.float32
        e = np.exp(x - x.max(1, keepdims=True))
        ref = e / e.sum(1, keepdims=True)
        _close(got, ref if fn is torch.softmax else np.log(ref), 1e-6)


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_of_infinite_rows_warns_of_nothing(dim):
    """A row (or column) holding +inf, or only -inf, is NaN (inf - inf), silently, on the numpy path (dim 0) and
    the row kernel's (dim 1), as PyTorch: no RuntimeWarning of numpy's."""
    inf = math.inf
    x = np.array([[inf, 1.0, -inf], [-inf, 2.0, -inf], [-inf, 0.5, -inf]])
    x = x if dim == 1 else np.ascontiguousarray(x.T)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = torch.softmax(torch.tensor(x), dim).numpy()
        ls = torch.log_softmax(torch.tensor(x), dim).numpy()
    s, ls = (s, ls) if dim == 1 else (s.T, ls.T)
    assert np.isnan(s[0]).all() and np.isnan(ls[0]).all()
    np.testing.assert_array_equal(s[1], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(ls[1], [-inf, 0.0, -inf])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_gradients_of_a_3d_input_along_its_last_dim(dtype):
    """The backward row kernels get the gradient as [N, D] rows too (3-d: 6 rows of 4)."""
    rng = _rng(2)
    a, g = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    e = np.exp(a - a.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for fn, want in ((torch.softmax, s * (g - (g * s).sum(-1, keepdims=True))),
                     (torch.log_softmax, g - s * g.sum(-1, keepdims=True))):
        x = torch.tensor(a.astype(dtype), requires_grad=True)
        (gx,) = torch.autograd.grad(fn(x, -1), x, torch.tensor(g.astype(dtype)))
        assert gx.dtype is x.dtype
        _close(gx, want, tol)


# ----------------------------------------------------------------------------- nll_loss


def test_nll_loss_of_float32_keeps_float32_in_its_loss_and_gradient():
    rng = _rng(3)
    logp = rng.standard_normal((4, 3)).astype(np.float32)
    target, weight = [2, 0, -100, 1], np.array([1.5, 0.5, 2.0], np.float32)
    w = np.array([weight[2], weight[0], 0.0, weight[1]], np.float64)
    picked = np.array([logp[0, 2], logp[1, 0], 0.0, logp[3, 1]], np.float64)
    for reduction in ("none", "sum", "mean"):
        x = torch.tensor(logp, requires_grad=True)
        loss = F.nll_loss(x, torch.tensor(target), weight=torch.tensor(weight), reduction=reduction)
        assert loss.dtype is torch.float32
        want = -w * picked
        _close(loss, want if reduction == "none" else np.asarray(want.sum() / (w.sum() if reduction == "mean" else 1)),
               1e-6)
        loss.sum().backward()
        assert x.grad.dtype is torch.float32
        grad = np.zeros((4, 3))
        for i, t in enumerate(target):
            if t >= 0:
                grad[i, t] = -w[i] / (w.sum() if reduction == "mean" else 1)
        _close(x.grad, grad, 1e-6)
        g = np.ones(4, np.float32) if reduction == "none" else np.array(1.0, np.float32)
        coef = apply(OPS["nll_loss_coef"], torch.tensor(g), torch.tensor(target), torch.tensor(weight),
                     ignore_index=-100, reduction=reduction)
        assert coef.dtype is torch.float32                     # the shape rule's dtype: the cotangent's
        _close(coef, -w / (w.sum() if reduction == "mean" else 1), 1e-6)


# ----------------------------------------------------------------------------- batch norm


def _bn_ref(x, w=None, b=None, eps=1e-5):
    """Batch norm in training in float64: (y, mean, biased var, xhat)."""
    from test_nn_ops_edges import _bn_ref as y_mean_var
    y, mean, var = y_mean_var(x, w, b, eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return y, mean, var, (x.astype(np.float64) - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)


def test_batch_norm_of_float32_keeps_float32_in_its_outputs_and_gradients():
    rng = _rng(4)
    x, gy = rng.standard_normal((3, 2, 4)).astype(np.float32), rng.standard_normal((3, 2, 4)).astype(np.float32)
    w, b = rng.standard_normal(2).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    ry, rmean, rvar, xhat = _bn_ref(x, w.astype(np.float64), b.astype(np.float64))
    n = 12
    scale = w / np.sqrt(rvar + 1e-5)
    g64 = gy.astype(np.float64)
    gx_want = (g64 - g64.sum((0, 2), keepdims=True) / n - xhat * (g64 * xhat).sum((0, 2), keepdims=True) / n) * \
        scale.reshape(1, 2, 1)
    for affine in (True, False):
        xt = torch.tensor(x, requires_grad=True)
        wt, bt = (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) if affine else (None, None)
        y, mean, var = _native_batch_norm(xt, wt, bt, training=True, eps=1e-5)
        assert (y.dtype, mean.dtype, var.dtype) == (torch.float32,) * 3
        _close(y, ry if affine else xhat, 1e-5)
        _close(mean, rmean, 1e-6)
        _close(var, rvar, 1e-5)
        grads = torch.autograd.grad(y, (xt, wt, bt) if affine else (xt,), torch.tensor(gy))
        assert all(g.dtype is torch.float32 for g in grads)
        _close(grads[0], gx_want if affine else gx_want / w.reshape(1, 2, 1), 1e-4)
        if affine:
            _close(grads[1], (g64 * xhat).sum((0, 2)), 1e-4)
            _close(grads[2], g64.sum((0, 2)), 1e-5)


def test_batch_norm_of_float16_computes_its_statistics_in_float32():
    """float16 takes the numpy formula with float32 statistics: (x - mean)^2 of values 300 apart is 90000, past
    float16's largest (65504), and would make the variance inf and y 0."""
    x = np.array([[-300.0, 10.0], [300.0, 30.0], [-100.0, 20.0], [100.0, 40.0]]) + 50.0
    for rows in (x, np.asfortranarray(x)):
        y, mean, _ = _native_batch_norm(torch.tensor(rows.astype(np.float16)), training=True, eps=1e-5)
        assert y.dtype is torch.float16
        ry, rmean, _, _ = _bn_ref(x)
        _close(y, ry, 5e-3)                # (float16: a few units in the last place)
        _close(mean, rmean, 1e-3)


def test_batch_norm_of_float16_gradients():
    rng = _rng(5)
    x = (rng.standard_normal((3, 2, 4)) * 2 + 1).astype(np.float16).astype(np.float64)
    gy = rng.standard_normal((3, 2, 4)).astype(np.float16).astype(np.float64)
    _, _, var, xhat = _bn_ref(x)
    gx_want = (gy - gy.mean((0, 2), keepdims=True) - xhat * (gy * xhat).mean((0, 2), keepdims=True)) / \
        np.sqrt(var.reshape(1, 2, 1) + 1e-5)
    xt = torch.tensor(x.astype(np.float16), requires_grad=True)
    y, _, _ = _native_batch_norm(xt, training=True, eps=1e-5)
    (gx,) = torch.autograd.grad(y, xt, torch.tensor(gy.astype(np.float16)))
    assert gx.dtype is torch.float16
    _close(gx, gx_want, 2e-2)


def test_batch_norm_eval_gradients_each_gated_by_its_own_input():
    """Eval: y = (x - rm) * s + b, s = w / sqrt(rv + eps): dy/dx = s, dy/dw = xhat, dy/db = 1, dy/drm = -s,
    dy/drv = -(x - rm) s / (2 (rv + eps)). Each gradient is computed for the input that needs it (x alone, the
    weight without the bias, the running mean without the running variance); the batch-mean output of eval (the
    running mean) adds nothing to x's gradient. (tracejit differentiates the running statistics given as inputs;
    PyTorch refuses them requiring grad.)"""
    rng = _rng(6)
    x, gy = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 4))
    w, b, rm, rv = rng.standard_normal(2), rng.standard_normal(2), rng.standard_normal(2), rng.uniform(0.5, 2, 2)
    eps = 0.1
    r = lambda v: v.reshape(1, 2, 1)     # noqa: E731
    s = w / np.sqrt(rv + eps)
    xhat = (x - r(rm)) / np.sqrt(r(rv) + eps)
    want = {"x": gy * r(s), "w": (gy * xhat).sum((0, 2)), "b": gy.sum((0, 2)), "rm": -gy.sum((0, 2)) * s,
            "rv": (-gy * (x - r(rm)) * r(s) / (2 * (r(rv) + eps))).sum((0, 2))}
    for needs in (("x",), ("w",), ("x", "w", "b"), ("w", "rm"), ("rm",), ("rv",), ("x", "rm", "rv")):
        t = {k: torch.tensor(v, requires_grad=k in needs) for k, v in (("x", x), ("w", w), ("b", b), ("rm", rm),
                                                                       ("rv", rv))}
        y, mean, _ = _native_batch_norm(t["x"], t["w"], t["b"], t["rm"], t["rv"], training=False, eps=eps)
        grads = torch.autograd.grad((y * torch.tensor(gy)).sum(), [t[k] for k in needs])
        for k, g in zip(needs, grads):
            _close(g, want[k], 1e-10)
    xt = torch.tensor(x, requires_grad=True)           # no weight: s = 1 / sqrt(rv + eps); the mean output used
    y, mean, _ = _native_batch_norm(xt, None, None, torch.tensor(rm), torch.tensor(rv), training=False, eps=eps)
    (gx,) = torch.autograd.grad((y * torch.tensor(gy)).sum() + (mean * torch.tensor(np.array([0.7, -1.3]))).sum(),
                                xt)
    _close(gx, gy / np.sqrt(r(rv) + eps), 1e-12)


def test_batch_norm_in_training_with_running_statistics_updated_in_place_still_differentiates():
    """F.batch_norm updates the running statistics in place after the op: they are no inputs of the training
    op, so the in-place update does not invalidate anything its backward reads."""
    rng = _rng(7)
    x, gy = rng.standard_normal((4, 2, 3)), rng.standard_normal((4, 2, 3))
    rm, rv = torch.tensor(np.zeros(2)), torch.tensor(np.ones(2))
    xt = torch.tensor(x, requires_grad=True)
    y = F.batch_norm(xt, rm, rv, training=True, momentum=0.5)
    (y * torch.tensor(gy)).sum().backward()
    _, mean, var, xhat = _bn_ref(x)
    _close(rm, 0.5 * mean)
    _close(rv, 0.5 + 0.5 * var * 12 / 11)
    gx = (gy - gy.mean((0, 2), keepdims=True) - xhat * (gy * xhat).mean((0, 2), keepdims=True)) / \
        np.sqrt(var.reshape(1, 2, 1) + 1e-5)
    _close(xt.grad, gx, 1e-10)


# ----------------------------------------------------------------------------- layer norm


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_of_float32_keeps_float32_in_its_statistics(affine):
    """The op's three outputs have the shape rule's dtype, x's (the statistics too)."""
    rng = _rng(8)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w, b = (torch.tensor(rng.standard_normal(4).astype(np.float32)),
            torch.tensor(rng.standard_normal(4).astype(np.float32))) if affine else (None, None)
    outs = apply(OPS["layer_norm"], torch.tensor(x), w, b, k=1, eps=1e-5)
    metas = OPS["layer_norm"].meta(torch.tensor(x), w, b, k=1, eps=1e-5)
    assert [o.dtype for o in outs] == [m.dtype for m in metas] == [torch.float32] * 3
    x64 = x.astype(np.float64)
    mean = x64.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x64 - mean) ** 2).mean(1, keepdims=True) + 1e-5)
    _close(outs[1], mean, 1e-6)
    _close(outs[2], rstd, 1e-5)
