"""Layers against PyTorch: same initial weights (copied from torch), same input: same output and gradients."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")


def _sync(ours, theirs):
    ours.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


def compare(make, shape, *, grad_input=True, tol=1e-5, dtype=np.float32, steps=1, x=None, train=True):
    """Run `make(lib)` in both libraries on one input; check outputs, input grads and parameter grads."""
    ours, theirs = make(tj), make(torch)
    _sync(ours, theirs)
    ours.train(train)
    theirs.train(train)
    for _ in range(steps):
        arr = np.random.standard_normal(shape).astype(dtype) if x is None else x
        xa = tj.tensor(arr, requires_grad=grad_input and arr.dtype.kind == "f")
        xb = torch.tensor(arr, requires_grad=grad_input and arr.dtype.kind == "f")
        ya, yb = ours(xa), theirs(xb)
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=tol, atol=tol)
        go = np.random.standard_normal(tuple(yb.shape)).astype(yb.detach().numpy().dtype)
        ya.backward(tj.tensor(go))
        yb.backward(torch.tensor(go))
        if xb.requires_grad:
            np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=tol * 10, atol=tol * 10)
        for (n, pa), (_, pb) in zip(ours.named_parameters(), theirs.named_parameters()):
            if pb.grad is None:
                assert pa.grad is None, n
            else:
                np.testing.assert_allclose(pa.grad.numpy(), pb.grad.numpy(), rtol=tol * 10, atol=tol * 10, err_msg=n)
    for (n, ba), (_, bb) in zip(ours.named_buffers(), theirs.named_buffers()):
        np.testing.assert_allclose(ba.numpy(), bb.numpy(), rtol=tol, atol=tol, err_msg=n)
    return ours, theirs


@pytest.mark.parametrize("make,shape", [
    (lambda L: L.nn.Linear(5, 3), (4, 5)),
    (lambda L: L.nn.Linear(5, 3, bias=False), (2, 7, 5)),
    (lambda L: L.nn.Identity(), (3,)),
    (lambda L: L.nn.ReLU(), (4, 5)),
    (lambda L: L.nn.LeakyReLU(0.2), (4, 5)),
    (lambda L: L.nn.GELU(), (4, 5)),
    (lambda L: L.nn.GELU("tanh"), (4, 5)),
    (lambda L: L.nn.SiLU(), (4, 5)),
    (lambda L: L.nn.ELU(0.7), (4, 5)),
    (lambda L: L.nn.Tanh(), (4, 5)),
    (lambda L: L.nn.Sigmoid(), (4, 5)),
    (lambda L: L.nn.Softplus(2.0), (4, 5)),
    (lambda L: L.nn.Softmax(dim=1), (4, 5)),
    (lambda L: L.nn.LogSoftmax(dim=-1), (2, 3, 5)),
    (lambda L: L.nn.Flatten(), (2, 3, 4, 5)),
    (lambda L: L.nn.Flatten(0, 1), (2, 3, 4)),
    (lambda L: L.nn.Unflatten(1, (3, 4)), (2, 12)),
    (lambda L: L.nn.LayerNorm(5), (3, 5)),
    (lambda L: L.nn.LayerNorm((4, 5), elementwise_affine=False), (2, 4, 5)),
    (lambda L: L.nn.LayerNorm(5, bias=False), (3, 5)),
    (lambda L: L.nn.GroupNorm(2, 4), (3, 4, 5)),
    (lambda L: L.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 9)),
    (lambda L: L.nn.Conv2d(3, 4, 3, padding=1), (2, 3, 6, 6)),
    (lambda L: L.nn.Conv2d(4, 4, (3, 2), stride=(2, 1), dilation=(1, 2), groups=4, bias=False), (2, 4, 7, 6)),
    (lambda L: L.nn.Conv2d(2, 3, 4, padding="same"), (1, 2, 5, 6)),
    (lambda L: L.nn.MaxPool2d(2), (2, 3, 6, 6)),
    (lambda L: L.nn.MaxPool2d(3, 2, 1, ceil_mode=True), (2, 3, 7, 7)),
    (lambda L: L.nn.MaxPool1d(2), (2, 3, 7)),
    (lambda L: L.nn.AvgPool2d(3, 2, 1), (2, 3, 7, 7)),
    (lambda L: L.nn.AvgPool1d(3, 2), (2, 3, 7)),
    (lambda L: L.nn.AdaptiveAvgPool2d((1, 1)), (2, 3, 5, 5)),
    (lambda L: L.nn.AdaptiveAvgPool2d((2, None)), (2, 3, 5, 4)),
    (lambda L: L.nn.AdaptiveAvgPool1d(3), (2, 3, 7)),
    (lambda L: L.nn.Dropout(0.5), (4, 5)),  # compared in eval mode below
])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_layer_matches_torch(make, shape):
    train = not isinstance(make(tj), tj.nn.Dropout)
    compare(make, shape, train=train)


def test_bilinear():
    ours, theirs = tj.nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2)
    _sync(ours, theirs)
    a, b = np.random.standard_normal((5, 3)).astype(np.float32), np.random.standard_normal((5, 4)).astype(np.float32)
    ya, yb = ours(tj.tensor(a), tj.tensor(b)), theirs(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-5, atol=1e-5)
    ya.sum().backward()
    yb.sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(momentum=None), dict(affine=False), dict(track_running_stats=False),
                                dict(momentum=0.3, eps=1e-3)])
def test_batchnorm_training_then_eval(kw):
    ours, theirs = compare(lambda L: L.nn.BatchNorm2d(3, **kw), (4, 3, 5, 5), steps=3, tol=1e-5)
    if theirs.num_batches_tracked is not None:
        assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 3
    else:
        assert ours.num_batches_tracked is None
    x = np.random.standard_normal((2, 3, 5, 5)).astype(np.float32)
    ours.eval()
    theirs.eval()
    np.testing.assert_allclose(ours(tj.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    compare(lambda L: L.nn.BatchNorm1d(4, **kw), (6, 4), steps=2)
    compare(lambda L: L.nn.BatchNorm1d(4, **kw), (6, 4, 3), steps=2)


def test_batchnorm_errors():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        tj.nn.BatchNorm1d(3)(tj.randn(1, 3))
    with pytest.raises(ValueError, match="expected 4D input"):
        tj.nn.BatchNorm2d(3)(tj.randn(2, 3))


def test_embedding():
    idx = np.array([[0, 2, 1], [2, 2, 3]])
    for kw in [dict(), dict(padding_idx=2)]:
        ours, theirs = tj.nn.Embedding(4, 3, **kw), torch.nn.Embedding(4, 3, **kw)
        _sync(ours, theirs)
        ya, yb = ours(tj.tensor(idx)), theirs(torch.tensor(idx))
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy())
        go = np.random.standard_normal(ya.shape).astype(np.float32)
        ya.backward(tj.tensor(go))
        yb.backward(torch.tensor(go))
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6, atol=1e-6)
    e = tj.nn.Embedding(5, 2, padding_idx=-1)
    assert e.padding_idx == 4 and float(e.weight[4].abs().sum()) == 0.0
    pre = tj.nn.Embedding.from_pretrained(tj.ones(3, 2))
    assert not pre.weight.requires_grad and pre(tj.tensor([1])).shape == (1, 2)
    w = np.random.standard_normal((4, 3)).astype(np.float32) * 3
    ours = tj.nn.Embedding(4, 3, max_norm=1.0, _weight=tj.tensor(w))
    theirs = torch.nn.Embedding(4, 3, max_norm=1.0, _weight=torch.tensor(w))
    np.testing.assert_allclose(ours(tj.tensor([0, 1])).detach().numpy(), theirs(torch.tensor([0, 1])).detach().numpy(),
                               rtol=1e-5)


def test_dropout_training():
    d = tj.nn.Dropout(0.25)
    x = tj.ones(200, 100)
    y = d(x)
    np.testing.assert_allclose(np.unique(y.numpy()), [0.0, 1 / 0.75], rtol=1e-6)
    assert abs(float((y == 0).float().mean()) - 0.25) < 0.02
    assert not np.array_equal(d(x).numpy(), y.numpy())  # fresh mask per call
    d.eval()
    assert d(x) is x
    d2 = tj.nn.Dropout2d(0.5)
    y = d2(tj.ones(4, 8, 3, 3))
    per_channel = y.numpy().reshape(32, 9)
    assert all(len(set(r.tolist())) == 1 for r in per_channel)
    with pytest.raises(ValueError):
        tj.nn.Dropout(1.5)


def test_default_init_distribution():
    lin = tj.nn.Linear(100, 50)
    bound = 1 / np.sqrt(100)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= bound + 1e-6 and np.abs(w).max() > 0.9 * bound
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    conv = tj.nn.Conv2d(4, 8, 3)
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / np.sqrt(36) + 1e-6
    bn = tj.nn.BatchNorm2d(3)
    assert bn.weight.detach().numpy().tolist() == [1, 1, 1] and bn.num_batches_tracked.dtype is tj.int64
