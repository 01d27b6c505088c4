"""nn ops without PyTorch (tracejit/ops/nn_ops.py): softmax and log_softmax on both of their paths (the row
kernels and numpy), the legacy implicit dim and dtype=, nll_loss's weights, ignored targets, reductions and second
derivatives, binary cross entropy's clamps, batch norm and layer norm on each path (kernels, numpy, the formulas
with create_graph, the ops' decompositions), gradients reaching their statistics, and the error messages (matched
whole). References are float64 formulas written from the definitions. Each assertion was a surviving mutant of a
mutation-testing run (issue 23)."""
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
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def _raises(exc, msg, fn):
    with pytest.raises(exc) as e:
        fn()
    assert str(e.value) == msg


def _softmax_ref(x, dim):
    """exp(x - max) / sum(exp(x - max)) along dim, one slice at a time (a max of +inf, or of only -inf, gives NaN)."""
    x = np.moveaxis(np.asarray(x, np.float64), dim, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        m = max(row.tolist(), default=-math.inf)
        with np.errstate(invalid="ignore"):
            e = [math.exp(v - m) if not math.isnan(v - m) else math.nan for v in row.tolist()]
        s = sum(e)
        out[idx] = [v / s if s else math.nan for v in e]
    return np.moveaxis(out, -1, dim)


def _rng(seed=0):
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------- softmax, log_softmax


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_softmax_and_log_softmax_along_every_dim_of_each_float_dtype(dim, dtype):
    x = _rng().standard_normal((2, 3, 4)).astype(dtype)
    want = _softmax_ref(x.astype(np.float64), dim)
    tol = {np.float64: 1e-12, np.float32: 1e-6, np.float16: 2e-3}[dtype]
    for fn, ref in ((torch.softmax, want), (torch.log_softmax, np.log(want))):
        got = fn(torch.tensor(x), dim)
        assert got.dtype is torch.tensor(x).dtype
        _close(got.numpy().astype(np.float64), ref, tol)


def test_softmax_rows_of_infinities_and_empty_tensors():
    inf = math.inf
    rows = np.array([[inf, 1.0, 2.0], [-inf, -inf, -inf], [-inf, 0.0, 1.0]])
    for dim in (1, 0):
        want = _softmax_ref(rows, dim)
        _close(torch.softmax(torch.tensor(rows), dim), want)
        with np.errstate(divide="ignore"):
            _close(torch.log_softmax(torch.tensor(rows), dim), np.log(want))
    for shape, dim in (((2, 0), 1), ((0, 3), 1), ((2, 0), 0), ((0, 3), 0)):
        for fn in (torch.softmax, torch.log_softmax):
            got = fn(torch.tensor(np.zeros(shape)), dim)
            assert tuple(got.shape) == shape and got.dtype is torch.float64


def test_softmax_dtype_converts_first_and_an_implicit_dim_is_pytorchs_legacy_choice():
    x = _rng(1).standard_normal((2, 3)).astype(np.float32)
    got = torch.softmax(torch.tensor(x), 0, dtype=torch.float64)
    assert got.dtype is torch.float64
    _close(got, _softmax_ref(x.astype(np.float64), 0))        # computed in float64, not rounded to float32 first
    got = F.log_softmax(torch.tensor(x), 1, dtype=torch.float64)
    assert got.dtype is torch.float64
    _close(got, np.log(_softmax_ref(x.astype(np.float64), 1)))
    i = torch.tensor([1, 2, 3])
    assert torch.softmax(i, 0).dtype is torch.float32                 # an integer input: the default dtype
    _close(torch.softmax(i, 0).numpy().astype(np.float64), _softmax_ref([1.0, 2.0, 3.0], 0), 1e-6)
    # dim=None: 0 for 0-, 1- and 3-d inputs, else 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for shape, implicit in (((), 0), ((4,), 0), ((2, 3), 1), ((2, 3, 4), 0), ((2, 3, 2, 2), 1)):
            a = _rng(2).standard_normal(shape)
            want = _softmax_ref(a, implicit) if shape else np.array(1.0)
            _close(F.softmax(torch.tensor(a), dim=None), want)
            _close(F.log_softmax(torch.tensor(a), dim=None), np.log(want))
    _close(torch.softmax(torch.tensor(2.5, dtype=torch.float64), -1), np.array(1.0))
    _close(torch.log_softmax(torch.tensor(2.5, dtype=torch.float64), 0), np.array(0.0))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("create_graph", [False, True])
def test_softmax_gradients_on_each_path(dim, create_graph):
    # eagerly without create_graph each VJP is one backward op (a row kernel for the last dim, the formula on
    # arrays for another); with create_graph the formula in ops; all equal the Jacobian written out
    rng = _rng(3)
    a, g = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    s = _softmax_ref(a, dim)
    want_soft = s * (g - (g * s).sum(dim, keepdims=True))
    want_log = g - s * g.sum(dim, keepdims=True)
    for fn, want in ((torch.softmax, want_soft), (torch.log_softmax, want_log)):
        x = torch.tensor(a, requires_grad=True)
        (gx,) = torch.autograd.grad(fn(x, dim), x, torch.tensor(g), create_graph=create_graph)
        assert gx.requires_grad is create_graph
        _close(gx, want)
    xt = torch.tensor(a.T.copy()).t()                               # a transposed array: the kernel's copy
    x = xt.detach().requires_grad_()
    (gx,) = torch.autograd.grad(torch.softmax(x, dim), x, torch.tensor(g))
    _close(gx, want_soft)


def test_softmax_backward_ops_and_their_decompositions():
    rng = _rng(4)
    y = _softmax_ref(rng.standard_normal((2, 5)), 1)
    g = rng.standard_normal((2, 5))
    for dim in (1, 0, -1):
        want_soft = y * (g - (g * y).sum(dim, keepdims=True))
        want_log = g - np.exp(y) * g.sum(dim, keepdims=True)
        for name, want in (("softmax_backward", want_soft), ("log_softmax_backward", want_log)):
            args = (torch.tensor(g), torch.tensor(y))
            d = dim % 2
            _close(apply(OPS[name], *args, dim=d), want)
            _close(OPS[name].decompose(*args, dim=d), want)
            # a gradient of another dtype than y: not the row kernel
            got = apply(OPS[name], torch.tensor(g.astype(np.float32)), torch.tensor(y), dim=d)
            _close(got, np.asarray(want), 1e-6)


# ----------------------------------------------------------------------------- nll_loss


def _nll_ref(logp, target, weight, ignore, reduction):
    w = np.array([0.0 if t == ignore else (1.0 if weight is None else weight[t]) for t in target])
    loss = np.array([-logp[i, t] * w[i] if t != ignore else 0.0 for i, t in enumerate(target)])
    if reduction == "none":
        return loss, w
    with np.errstate(invalid="ignore"):
        return (loss.sum() if reduction == "sum" else loss.sum() / w.sum()), w


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_values_and_gradients_with_weights_and_ignored_targets(reduction, weighted):
    rng = _rng(5)
    logp = rng.standard_normal((5, 4))
    target = [1, 3, 2, 3, 0]
    weight = np.array([0.5, 2.0, 1.5, 3.0]) if weighted else None
    for ignore in (3, -100):
        want, w = _nll_ref(logp, target, weight, ignore, reduction)
        x = torch.tensor(logp, requires_grad=True)
        loss = F.nll_loss(x, torch.tensor(target), weight=None if weight is None else torch.tensor(weight),
                          ignore_index=ignore, reduction=reduction)
        assert loss.dtype is torch.float64
        _close(loss, np.asarray(want))
        g = rng.standard_normal(5) if reduction == "none" else np.array(0.7)
        loss.backward(torch.tensor(g))
        grad = np.zeros((5, 4))
        for i, t in enumerate(target):
            if t != ignore:
                grad[i, t] = -w[i] * (g[i] if reduction == "none" else g / (w.sum() if reduction == "mean" else 1))
        _close(x.grad, grad)


def test_nll_loss_when_every_target_is_ignored_is_nan_with_zero_gradients():
    x = torch.tensor(_rng(6).standard_normal((3, 4)), requires_grad=True)
    loss = F.nll_loss(x, torch.tensor([-100, -100, -100]))
    assert math.isnan(loss.item())
    loss.backward()
    _close(x.grad, np.zeros((3, 4)))
    assert F.nll_loss(x, torch.tensor([-100, -100, -100]), reduction="sum").item() == 0.0


def test_nll_loss_second_derivative_through_its_coefficients():
    # d/ds of <d(s * loss)/dx, V>: the coefficient op's own VJP (mean: -w_i V[i, t_i] / sum(w); none: per sample)
    rng = _rng(7)
    logp, V = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    target, weight = [2, 0, 1, 2], np.array([1.5, 0.5, 2.0])
    w = weight[target]
    picked = np.array([V[i, t] for i, t in enumerate(target)])
    for reduction, s0, want in (("mean", np.array(1.3), (-w * picked).sum() / w.sum()),
                                ("sum", np.array(1.3), (-w * picked).sum()),
                                ("none", np.array([1.3, -0.4, 2.0, 0.5]), -w * picked)):
        x = torch.tensor(logp, requires_grad=True)
        s = torch.tensor(s0, requires_grad=True)
        loss = (F.nll_loss(x, torch.tensor(target), weight=torch.tensor(weight), reduction=reduction) * s).sum()
        (gx,) = torch.autograd.grad(loss, x, create_graph=True)
        (gs,) = torch.autograd.grad((gx * torch.tensor(V)).sum(), s)
        _close(gs, np.asarray(want))
        x2 = torch.tensor(logp, requires_grad=True)               # a cotangent that needs no gradient: none
        (gx2,) = torch.autograd.grad(F.nll_loss(x2, torch.tensor(target), reduction=reduction).sum(), x2,
                                     create_graph=True)
        assert not gx2.requires_grad


def test_nll_loss_errors_are_pytorchs():
    x = torch.tensor(_rng(8).standard_normal((3, 4)))
    with pytest.raises(IndexError, match=r"Target 5 is out of bounds\.$"):
        F.nll_loss(x, torch.tensor([1, 5, 0]))
    with pytest.raises(IndexError, match=r"Target -1 is out of bounds\.$"):
        F.nll_loss(x, torch.tensor([1, -1, 4]))
    with pytest.raises(IndexError, match=r"Target 4 is out of bounds\.$"):
        F.nll_loss(x, torch.tensor([1, 4, 0]))
    _raises(ValueError, "Expected input batch_size (3) to match target batch_size (2).",
            lambda: F.nll_loss(x, torch.tensor([1, 2])))
    _raises(RuntimeError, "expected target dtype to be Long or Byte, but got Float",
            lambda: F.nll_loss(x, torch.tensor([1.0, 2.0, 0.0])))
    _raises(RuntimeError, "expected target dtype to be Long or Byte, but got Bool",
            lambda: F.nll_loss(x, torch.tensor([True, False, True])))
    _raises(RuntimeError, "weight tensor should be defined either for all 4 classes or no classes but got weight "
                          "tensor of shape: [3]", lambda: F.nll_loss(x, torch.tensor([1, 2, 0]), weight=torch.ones(3)))
    _raises(ValueError, "avg is not a valid value for reduction",
            lambda: F.nll_loss(x, torch.tensor([1, 2, 0]), reduction="avg"))
    meta = OPS["nll_loss"].meta
    from tracejit.ops.registry import AVal
    _raises(ValueError, "Expected input batch_size (3) to match target batch_size (1).",
            lambda: meta(AVal((3,), torch.float64), AVal((), torch.int64)))
    _raises(ValueError, "Expected input batch_size (1) to match target batch_size (2).",
            lambda: meta(AVal((), torch.float64), AVal((2,), torch.int64)))
    x.requires_grad_()
    w = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    loss = F.nll_loss(x, torch.tensor([1, 2, 0]), weight=w)
    _raises(RuntimeError, "the derivative for 'weight' is not implemented", lambda: loss.backward())


def test_nll_loss_decompositions_compute_what_the_ops_compute():
    rng = _rng(9)
    logp = rng.standard_normal((5, 4))
    target, weight = [1, 3, 2, 3, 0], np.array([0.5, 2.0, 1.5, 3.0])
    for wt in (None, weight):
        for ignore in (3, -100):
            for reduction in ("mean", "sum", "none"):
                want, w = _nll_ref(logp, target, wt, ignore, reduction)
                args = (torch.tensor(logp), torch.tensor(target)) + (() if wt is None else (torch.tensor(wt),))
                got = OPS["nll_loss"].decompose(*args, ignore_index=ignore, reduction=reduction)
                _close(got, np.asarray(want))
                g = np.array([0.3, -1.0, 2.0, 0.5, 1.5]) if reduction == "none" else np.array(0.7)
                cargs = (torch.tensor(g),) + args[1:]
                coef = -w * (g if reduction == "none" else g / (w.sum() if reduction == "mean" else 1.0))
                _close(OPS["nll_loss_coef"].decompose(*cargs, ignore_index=ignore, reduction=reduction), coef)
                _close(apply(OPS["nll_loss_coef"], *cargs, ignore_index=ignore, reduction=reduction), coef)
    with pytest.raises(ValueError, match=r"^avg is not a valid value for reduction$"):
        OPS["nll_loss"].decompose(torch.tensor(logp), torch.tensor(target), reduction="avg")


# ----------------------------------------------------------------------------- binary cross entropy


def test_binary_cross_entropy_clamps_its_logs_at_minus_100_and_its_gradient_denominator():
    x = np.array([0.0, 1.0, 0.5, 1e-30, 0.2, 0.9])
    t = np.array([1.0, 0.0, 0.5, 0.0, 0.3, 1.0])
    with np.errstate(divide="ignore"):
        want = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))
        gx_want = (x - t) / np.maximum(x * (1 - x), 1e-12)
        gt_want = np.log1p(-x) - np.log(x)
    xt, tt = torch.tensor(x, requires_grad=True), torch.tensor(t, requires_grad=True)
    loss = F.binary_cross_entropy(xt, tt, reduction="none")
    _close(loss, want)
    assert loss[0].item() == 100.0 and loss[1].item() == 100.0
    loss.sum().backward()
    _close(xt.grad, gx_want)
    assert xt.grad[3].item() == pytest.approx(1e-18, rel=1e-12)      # x (1 - x) below 1e-12: the clamp
    _close(tt.grad, gt_want)
    x32 = torch.tensor(x[2:].astype(np.float32))
    got = F.binary_cross_entropy(x32, torch.tensor(t[2:]), reduction="none")
    assert got.dtype is torch.float64                                 # promoted as its shape rule says
    _close(got, want[2:], 1e-6)
    assert F.binary_cross_entropy(x32, torch.tensor(t[2:].astype(np.float32))).dtype is torch.float32
    got = F.binary_cross_entropy(torch.tensor(x[2:]), torch.tensor(t[2:].astype(np.float32)), reduction="none")
    assert got.dtype is torch.float64                                 # (PyTorch refuses operands of two dtypes)
    _close(got, -(t[2:].astype(np.float32) * np.log(x[2:]) + (1 - t[2:].astype(np.float32)) * np.log1p(-x[2:])))
    xt = torch.tensor(x[2:], requires_grad=True)                      # only x needs a gradient
    F.binary_cross_entropy(xt, torch.tensor(t[2:]), reduction="sum").backward()
    _close(xt.grad, gx_want[2:])
    tt = torch.tensor(t[2:], requires_grad=True)                      # only t
    F.binary_cross_entropy(torch.tensor(x[2:]), tt, reduction="sum").backward()
    _close(tt.grad, gt_want[2:])


# ----------------------------------------------------------------------------- batch norm


def _bn_ref(x, w=None, b=None, eps=1e-5, mean=None, var=None):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    x = x.astype(np.float64)
    if mean is None:
        mean = x.mean(axes)
        var = ((x - mean.reshape(shape)) ** 2).mean(axes)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y, mean, var


def _bn_grad_ref(x, gy, w, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    n = x.size // x.shape[1]
    _, mean, var = _bn_ref(x, eps=eps)
    invstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    scale = invstd if w is None else invstd * w
    gx = (gy - gy.sum(axes, keepdims=True) / n - xhat * (gy * xhat).sum(axes, keepdims=True) / n) * scale.reshape(shape)
    return gx, (gy * xhat).sum(axes), gy.sum(axes)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "float16", "float32_weight", "no_affine", "2d"])
def test_batch_norm_training_outputs_on_each_path(layout):
    rng = _rng(10)
    x = rng.standard_normal((3, 2, 4, 2)) * 2 + 1
    w, b = rng.standard_normal(2), rng.standard_normal(2)
    xt, wt, bt = torch.tensor(x), torch.tensor(w), torch.tensor(b)
    tol = 1e-12
    if layout == "transposed":            # not C-contiguous: the numpy path
        xt = torch.tensor(np.ascontiguousarray(x.transpose(3, 1, 2, 0))).permute(3, 1, 2, 0)
        assert not xt.is_contiguous()
    elif layout == "float16":
        x = x.astype(np.float16).astype(np.float64)
        xt, wt, bt = torch.tensor(x.astype(np.float16)), None, None
        w = b = None
        tol = 3e-3
    elif layout == "float32_weight":      # a weight of another dtype than x: the numpy path
        w = w.astype(np.float32).astype(np.float64)
        wt = torch.tensor(w.astype(np.float32))
        tol = 1e-6
    elif layout == "no_affine":
        wt = bt = w = b = None
    elif layout == "2d":
        x = x[:, :, 0, 0]
        xt = torch.tensor(x)
    y, mean, var = _native_batch_norm(xt, wt, bt, training=True, eps=1e-5)
    ry, rmean, rvar = _bn_ref(x, w, b)
    assert y.dtype is xt.dtype and mean.dtype is xt.dtype and var.dtype is xt.dtype
    for got, want in ((y, ry), (mean, rmean), (var, rvar)):
        _close(got.numpy().astype(np.float64), want, tol)


def test_batch_norm_eval_uses_the_running_statistics_given():
    rng = _rng(11)
    x = rng.standard_normal((2, 3, 4))
    rm, rv, w, b = rng.standard_normal(3), rng.uniform(0.5, 2, 3), rng.standard_normal(3), rng.standard_normal(3)
    args = [torch.tensor(v) for v in (x, w, b, rm, rv)]
    y, mean, var = _native_batch_norm(*args, training=False, eps=0.1)
    ry, _, _ = _bn_ref(x, w, b, 0.1, rm, rv)
    _close(y, ry)
    _close(mean, rm)
    _close(var, rv)
    y, _, _ = _native_batch_norm(torch.tensor(x.astype(np.float16)), None, None, torch.tensor(rm), torch.tensor(rv),
                                 training=False, eps=0.1)
    assert y.dtype is torch.float16
    _close(y.numpy().astype(np.float64), _bn_ref(x.astype(np.float16).astype(np.float64), None, None, 0.1, rm, rv)[0],
           3e-3)


def test_batch_norm_errors_are_pytorchs():
    z = torch.tensor(np.zeros((2, 3)))
    _raises(ValueError, "batch_norm: expected at least 2D input (got 1D input)",
            lambda: _native_batch_norm(torch.tensor(np.zeros(2)), training=True, eps=1e-5))
    _raises(RuntimeError, "batch_norm: expected a floating point input but got tracejit.int64",
            lambda: _native_batch_norm(torch.tensor(np.zeros((2, 3), np.int64)), training=True, eps=1e-5))
    for k, what in enumerate(("weight", "bias", "running_mean", "running_var")):
        args = [None] * 4
        args[k] = torch.tensor(np.ones(4))
        _raises(RuntimeError, f"{what} should contain 3 elements not 4",
                lambda: _native_batch_norm(z, *args, training=True, eps=1e-5))
    _raises(RuntimeError, "weight should contain 3 elements not 6",
            lambda: _native_batch_norm(z, torch.tensor(np.ones((2, 3))), training=True, eps=1e-5))
    one = torch.tensor(np.ones(3))
    for rm, rv in ((None, None), (one, None), (None, one)):
        _raises(ValueError, "batch_norm: running_mean and running_var are required when training=False",
                lambda: _native_batch_norm(z, None, None, rm, rv, training=False, eps=1e-5))
    _raises(ValueError, "Expected more than 1 value per channel when training, got input size (1, 3)",
            lambda: _native_batch_norm(torch.tensor(np.zeros((1, 3))), training=True, eps=1e-5))
    _raises(ValueError, "Expected more than 1 value per channel when training, got input size (1, 3, 1)",
            lambda: _native_batch_norm(torch.tensor(np.zeros((1, 3, 1))), training=True, eps=1e-5))
    _native_batch_norm(torch.tensor(np.zeros((1, 3, 2))), training=True, eps=1e-5)      # 2 values a channel
    _native_batch_norm(torch.tensor(np.zeros((1, 3))), None, None, one, one, training=False, eps=1e-5)


@pytest.mark.parametrize("path", ["kernel", "transposed", "create_graph"])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_gradients_on_each_path(path, affine):
    rng = _rng(12)
    x = rng.standard_normal((3, 2, 5)) * 1.5 + 0.5
    gy = rng.standard_normal((3, 2, 5))
    w, b = rng.standard_normal(2), rng.standard_normal(2)
    xt = torch.tensor(x, requires_grad=True)
    wt, bt = (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) if affine else (None, None)
    gyt = torch.tensor(gy)
    if path == "transposed":                   # a gradient that is not C-contiguous: the formula on arrays
        gyt = torch.tensor(np.ascontiguousarray(gy.transpose(2, 1, 0))).permute(2, 1, 0)
    y, _, _ = _native_batch_norm(xt, wt, bt, training=True, eps=1e-5)
    inputs = (xt, wt, bt) if affine else (xt,)
    grads = torch.autograd.grad(y, inputs, gyt, create_graph=path == "create_graph")
    gx, gw, gb = _bn_grad_ref(x, gy, w if affine else None)
    _close(grads[0], gx, 1e-10)
    if affine:
        _close(grads[1], gw, 1e-10)
        _close(grads[2], gb, 1e-10)
    assert grads[0].requires_grad is (path == "create_graph")


def test_batch_norm_backward_op_paths_and_decompositions_agree_with_the_formula():
    rng = _rng(13)
    x, gy = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    w = rng.standard_normal(3)
    _, mean, var = _bn_ref(x)
    invstd = 1 / np.sqrt(var + 1e-5)
    gx, gw, gb = _bn_grad_ref(x, gy, w)
    r = lambda v: torch.tensor(v.reshape(1, 3, 1))     # noqa: E731
    # the kernel (C-contiguous operands), and the formula for a Fortran-ordered one
    for gyv, xv in ((gy, x), (np.asfortranarray(gy), x), (gy, np.asfortranarray(x))):
        args = (torch.tensor(gyv), torch.tensor(xv), r(mean), r(invstd), r(invstd * w))
        for got in (apply(OPS["batch_norm_backward"], *args), OPS["batch_norm_backward"].decompose(*args)):
            _close(got[0], gx, 1e-10)                     # (gx, sum of gy * xhat, sum of gy), sums as (1, C, 1)
            _close(got[1], gw.reshape(1, 3, 1), 1e-10)
            _close(got[2], gb.reshape(1, 3, 1), 1e-10)


def test_batch_norm_decomposition_in_training_and_eval():
    rng = _rng(14)
    x = rng.standard_normal((2, 3, 2, 2))
    w, b, rm, rv = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3), rng.uniform(0.5, 2, 3)
    dec = OPS["batch_norm"].decompose
    for wv, bv in ((w, b), (None, None), (w, None), (None, b)):
        t = lambda v: None if v is None else torch.tensor(v)     # noqa: E731
        y, mean, var = dec(torch.tensor(x), t(wv), t(bv), training=True, eps=1e-5)
        ry, rmean, rvar = _bn_ref(x, wv, bv)
        _close(y, ry)
        _close(mean, rmean)
        _close(var, rvar)
        y, mean, var = dec(torch.tensor(x), t(wv), t(bv), torch.tensor(rm), torch.tensor(rv), training=False, eps=0.2)
        _close(y, _bn_ref(x, wv, bv, 0.2, rm, rv)[0])
        _close(mean, rm)
        _close(var, rv)


def test_batch_norm_gradients_reaching_its_batch_statistics():
    # d/dx of sum(a * mean) + sum(c * var) = a / n + 2 c (x - mean) / n per channel (mean and var are outputs)
    rng = _rng(15)
    x = rng.standard_normal((3, 2, 4))
    a, c, gy = rng.standard_normal(2), rng.standard_normal(2), rng.standard_normal((3, 2, 4))
    n = 12
    _, mean, _ = _bn_ref(x)
    stat = a.reshape(1, 2, 1) / n + 2 * c.reshape(1, 2, 1) * (x - mean.reshape(1, 2, 1)) / n
    for use_y, use_mean, use_var in ((False, True, True), (False, True, False), (False, False, True),
                                     (True, True, True)):
        xt = torch.tensor(x, requires_grad=True)
        y, m, v = _native_batch_norm(xt, training=True, eps=1e-5)
        loss = 0.0
        want = np.zeros_like(x)
        if use_y:
            loss = loss + (y * torch.tensor(gy)).sum()
            want = want + _bn_grad_ref(x, gy, None)[0]
        if use_mean:
            loss = loss + (m * torch.tensor(a)).sum()
            want = want + a.reshape(1, 2, 1) / n
        if use_var:
            loss = loss + (v * torch.tensor(c)).sum()
            want = want + 2 * c.reshape(1, 2, 1) * (x - mean.reshape(1, 2, 1)) / n
        (gx,) = torch.autograd.grad(loss, xt)
        _close(gx, want, 1e-10)
    assert stat.shape == x.shape


# ----------------------------------------------------------------------------- layer norm


def _ln_ref(x, k, w=None, b=None, eps=1e-5):
    dims = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(dims, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(dims, keepdims=True) + eps)
    y = (x - mean) * rstd
    return y * (1 if w is None else w) + (0 if b is None else b), mean, rstd


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_op_outputs_and_gradients_on_each_path(k, affine):
    rng = _rng(16)
    x = rng.standard_normal((2, 3, 4)) * 2 + 1
    norm = x.shape[3 - k:]
    w, b = rng.standard_normal(norm), rng.standard_normal(norm)
    gy = rng.standard_normal(x.shape)
    ry, rmean, rrstd = _ln_ref(x, k, w if affine else None, b if affine else None)
    xhat = (x - rmean) * rrstd
    dims, lead = tuple(range(3 - k, 3)), tuple(range(3 - k))
    gyw = gy * (w if affine else 1)
    gx = (gyw - gyw.mean(dims, keepdims=True) - xhat * (gyw * xhat).mean(dims, keepdims=True)) * rrstd
    gw, gb = (gy * xhat).sum(lead), gy.sum(lead)
    for create_graph in (False, True):
        xt = torch.tensor(x, requires_grad=True)
        wt, bt = (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) if affine else (None, None)
        y, mean, rstd = apply(OPS["layer_norm"], *((xt, wt, bt) if affine else (xt, None, None)), k=k, eps=1e-5)
        _close(y, ry, 1e-10)
        _close(mean, rmean, 1e-10)
        _close(rstd, rrstd, 1e-10)
        grads = torch.autograd.grad(y, (xt, wt, bt) if affine else (xt,), torch.tensor(gy), create_graph=create_graph)
        _close(grads[0], gx, 1e-10)
        if affine:
            _close(grads[1], gw, 1e-10)
            _close(grads[2], gb, 1e-10)
        assert grads[0].requires_grad is create_graph
    for got, want in zip(OPS["layer_norm_backward"].decompose(torch.tensor(gy), torch.tensor(x), torch.tensor(rmean),
                                                             torch.tensor(rrstd), torch.tensor(w) if affine else None,
                                                             k=k), (gx, gw, gb)):
        _close(got, want, 1e-10)
    got = apply(OPS["layer_norm_backward"], torch.tensor(gy.astype(np.float32)), torch.tensor(x), torch.tensor(rmean),
                torch.tensor(rrstd), torch.tensor(w) if affine else None, k=k)
    for g, want in zip(got, (gx, gw, gb)):
        _close(g, want, 1e-5)


def test_layer_norm_gradients_reaching_its_statistics():
    # mean = sum(x) / D and rstd = (var + eps)^-1/2: d/dx sum(a mean) = a / D, d/dx sum(c rstd) = -c rstd^3 (x - mean) / D
    rng = _rng(17)
    x = rng.standard_normal((3, 4))
    a, c, gy = rng.standard_normal((3, 1)), rng.standard_normal((3, 1)), rng.standard_normal((3, 4))
    _, mean, rstd = _ln_ref(x, 1)
    for use_y, use_mean, use_rstd in ((False, True, False), (False, False, True), (True, True, True)):
        xt = torch.tensor(x, requires_grad=True)
        y, m, r = apply(OPS["layer_norm"], xt, None, None, k=1, eps=1e-5)
        loss, want = 0.0, np.zeros_like(x)
        if use_y:
            loss = loss + (y * torch.tensor(gy)).sum()
            xhat = (x - mean) * rstd
            want = want + (gy - gy.mean(1, keepdims=True) - xhat * (gy * xhat).mean(1, keepdims=True)) * rstd
        if use_mean:
            loss = loss + (m * torch.tensor(a)).sum()
            want = want + a / 4
        if use_rstd:
            loss = loss + (r * torch.tensor(c)).sum()
            want = want - c * rstd ** 3 * (x - mean) / 4
        (gx,) = torch.autograd.grad(loss, xt)
        _close(gx, want, 1e-10)


# ----------------------------------------------------------------------------- class-value checks


def test_one_hot_checks_class_values_with_pytorchs_messages():
    _raises(RuntimeError, "Class values must be non-negative.", lambda: F.one_hot(torch.tensor([1, -1]), 3))
    _raises(RuntimeError, "Class values must be smaller than num_classes.", lambda: F.one_hot(torch.tensor([1, 3]), 3))
    np.testing.assert_array_equal(F.one_hot(torch.tensor([0, 2]), 3).numpy(), [[1, 0, 0], [0, 0, 1]])
    from tracejit.ops.nn_ops import check_classes
    x = torch.tensor(np.array([0, 2, 1]))
    np.testing.assert_array_equal(check_classes(x, 3).numpy(), [0, 2, 1])
    _raises(RuntimeError, "Class values must be smaller than num_classes.", lambda: check_classes(x, 2))
    assert tuple(check_classes(torch.tensor(np.zeros(0, np.int64)), 0).shape) == (0,)


def test_unpool_index_check_passes_indices_inside_the_plane_and_names_the_first_outside():
    from tracejit.ops.nn_ops import check_unpool_index
    i = torch.tensor(np.array([[0, 11], [5, 3]]))
    np.testing.assert_array_equal(check_unpool_index(i, (3, 4)).numpy(), [[0, 11], [5, 3]])
    _raises(RuntimeError, "Found an invalid max index: 12 (output volumes are of size 3x4)",
            lambda: check_unpool_index(torch.tensor(np.array([1, 12, -1])), (3, 4)))
    _raises(RuntimeError, "Found an invalid max index: -1 (output volumes are of size 2x1x2)",
            lambda: check_unpool_index(torch.tensor(np.array([[-1, 0]])), (2, 1, 2)))
    assert tuple(check_unpool_index(torch.tensor(np.zeros((2, 0), np.int64)), (0, 3)).shape) == (2, 0)


def test_nll_loss_ignores_a_row_whatever_its_log_probabilities_and_float32_layer_norm_backward():
    # an ignored sample adds 0 even where its log-probabilities are -inf (not -(0 * inf)), in the op and its parts
    logp = np.array([[-0.5, -np.inf, -1.0], [-1.2, -0.3, -2.0]])
    for got in (F.nll_loss(torch.tensor(logp), torch.tensor([-100, 1]), reduction="sum"),
                OPS["nll_loss"].decompose(torch.tensor(logp), torch.tensor([-100, 1]), ignore_index=-100,
                                          reduction="sum")):
        _close(got, np.array(0.3))
    rng = _rng(18)
    x, gy = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    _, mean, rstd = _ln_ref(x.astype(np.float64), 1)
    got = apply(OPS["layer_norm_backward"], torch.tensor(gy), torch.tensor(x), torch.tensor(mean.astype(np.float32)),
                torch.tensor(rstd.astype(np.float32)), None, k=1)
    assert [g.dtype for g in got] == [torch.float32] * 3
    xhat = (x - mean) * rstd
    _close(got[1].numpy().astype(np.float64), (gy * xhat).sum(0), 1e-5)
    _close(got[2].numpy().astype(np.float64), gy.sum(0).astype(np.float64), 1e-5)


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_of_large_values_shifts_by_the_maximum_on_each_path(dim):
    """Values near 400 in float64: exp of the unshifted (or wrongly shifted, x + max ~ 800) value overflows, the
    shifted one does not. dim 0 takes the numpy formula, dim 1 the row kernel."""
    x = np.array([[400.0, 0.0, -3.0], [401.0, 1.5, 2.0]])
    t = torch.tensor(x)

    def ref(row):
        m = max(row)
        e = [math.exp(v - m) for v in row]
        return [v / sum(e) for v in e], [v - m - math.log(sum(e)) for v in row]
    cols = [ref(list(x[:, j] if dim == 0 else x[j, :])) for j in range(x.shape[1 - dim])]
    want_s = np.array([c[0] for c in cols]).T if dim == 0 else np.array([c[0] for c in cols])
    want_l = np.array([c[1] for c in cols]).T if dim == 0 else np.array([c[1] for c in cols])
    np.testing.assert_allclose(F.softmax(t, dim).numpy(), want_s, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(F.log_softmax(t, dim).numpy(), want_l, rtol=1e-12)


def test_batch_norm_in_training_takes_one_channel_of_two_values():
    """[2, 1]: one channel, two values per channel, which is enough in training (the check counts values per
    channel: size // C)."""
    x = torch.tensor([[1.0], [3.0]], dtype=torch.float64)
    y = F.batch_norm(x, None, None, training=True, eps=1e-5)
    np.testing.assert_allclose(y.numpy(), [[-1 / math.sqrt(1 + 1e-5)], [1 / math.sqrt(1 + 1e-5)]], rtol=1e-12)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got input size \(1, 1\)"):
        F.batch_norm(torch.tensor([[1.0]]), None, None, training=True)
