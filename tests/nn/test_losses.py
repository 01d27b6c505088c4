"""Losses against PyTorch: values and input gradients for every reduction and option."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")

R = np.random.default_rng(1)


def _pair(arr, grad=False):
    return tj.tensor(arr, requires_grad=grad), torch.tensor(arr, requires_grad=grad)


def check(make, inp, target, tol=1e-5, extra=None):
    for reduction in ("none", "mean", "sum"):
        xa, xb = _pair(inp, grad=True)
        ta, tb = _pair(target)
        la, lb = make(tj, reduction)(xa, ta), make(torch, reduction)(xb, tb)
        np.testing.assert_allclose(la.detach().numpy(), lb.detach().numpy(), rtol=tol, atol=tol, err_msg=reduction)
        go = R.standard_normal(tuple(lb.shape)).astype(lb.detach().numpy().dtype)
        la.backward(tj.tensor(go))
        lb.backward(torch.tensor(go))
        np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=tol * 10, atol=tol, err_msg=reduction)


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def test_regression_losses():
    x, y = f32(4, 3), f32(4, 3)
    check(lambda L, r: L.nn.MSELoss(reduction=r), x, y)
    check(lambda L, r: L.nn.L1Loss(reduction=r), x, y)
    check(lambda L, r: L.nn.SmoothL1Loss(reduction=r), x, y * 2)
    check(lambda L, r: L.nn.SmoothL1Loss(reduction=r, beta=0.5), x, y * 2)
    check(lambda L, r: L.nn.HuberLoss(reduction=r, delta=0.7), x, y * 2)


@pytest.mark.parametrize("kw", [dict(), dict(ignore_index=1), dict(label_smoothing=0.2),
                                dict(weight=True), dict(weight=True, ignore_index=0, label_smoothing=0.1)])
def test_cross_entropy_class_indices(kw):
    x = f32(6, 4)
    t = np.array([0, 1, 3, 1, 2, 0])
    w = np.array([0.5, 1.0, 2.0, 1.5], np.float32)

    def make(L, r):
        k = dict(kw)
        if k.pop("weight", False):
            k["weight"] = L.tensor(w)
        return L.nn.CrossEntropyLoss(reduction=r, **k)
    check(make, x, t)
    check(make, f32(2, 4, 3, 2), R.integers(0, 4, (2, 3, 2)))  # spatial (N, C, d1, d2)


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.3), dict(weight=True)])
def test_cross_entropy_probabilities(kw):
    x = f32(5, 4)
    p = np.exp(f32(5, 4))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    w = np.array([0.5, 1.0, 2.0, 1.5], np.float32)

    def make(L, r):
        k = dict(kw)
        if k.pop("weight", False):
            k["weight"] = L.tensor(w)
        return L.nn.CrossEntropyLoss(reduction=r, **k)
    check(make, x, p)


def test_nll_loss():
    x = np.log(np.random.dirichlet(np.ones(3), 5)).astype(np.float32)
    t = np.array([0, 2, 1, 1, 0])
    check(lambda L, r: L.nn.NLLLoss(reduction=r), x, t)
    check(lambda L, r: L.nn.NLLLoss(reduction=r, weight=L.tensor([1.0, 2.0, 0.5]), ignore_index=2), x, t)
    with pytest.raises(IndexError):
        tj.nn.NLLLoss()(tj.tensor(x), tj.tensor([0, 5, 1, 1, 0]))


def test_binary_losses():
    p = (1 / (1 + np.exp(-f32(4, 3)))).astype(np.float32)
    y = (R.random((4, 3)) > 0.5).astype(np.float32)
    check(lambda L, r: L.nn.BCELoss(reduction=r), p, y)
    check(lambda L, r: L.nn.BCELoss(reduction=r, weight=L.tensor([1.0, 2.0, 3.0])), p, y)
    z = f32(4, 3) * 5
    check(lambda L, r: L.nn.BCEWithLogitsLoss(reduction=r), z, y)
    check(lambda L, r: L.nn.BCEWithLogitsLoss(reduction=r, pos_weight=L.tensor([0.5, 2.0, 3.0])), z, y)
    check(lambda L, r: L.nn.BCEWithLogitsLoss(reduction=r, weight=L.tensor([0.5, 2.0, 3.0]),
                                              pos_weight=L.tensor([2.0, 2.0, 1.0])), z, y)
    assert "pos_weight" in tj.nn.BCEWithLogitsLoss(pos_weight=tj.ones(3)).state_dict()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kl_div():
    x = np.log(np.random.dirichlet(np.ones(4), 3)).astype(np.float32)
    t = np.random.dirichlet(np.ones(4), 3).astype(np.float32)
    check(lambda L, r: L.nn.KLDivLoss(reduction=r), x, t)


def test_legacy_reduction_args_and_bad_reduction():
    assert tj.nn.MSELoss(size_average=False).reduction == "sum"
    assert tj.nn.MSELoss(reduce=False).reduction == "none"
    with pytest.raises(ValueError):
        tj.nn.MSELoss(reduction="avg")(tj.ones(2), tj.ones(2))
