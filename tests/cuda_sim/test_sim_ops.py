"""Reductions, softmax, matmul, shape and indexing ops on cuda against eager CPU (values and gradients),
device plumbing (creation, .to, repr, errors), and ops without a CUDA kernel."""
import numpy as np
import pytest

import tracejit as torch
import tracejit.nn.functional as F

from simutil import close


def _pair(*shape, grad=True, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    cpu = torch.tensor(a, requires_grad=grad)
    return cpu, cpu.detach().cuda().requires_grad_(grad)


def _same(fn, *pairs, grad=True, rtol=2e-6, atol=1e-6):
    ye = fn(*[p[0] for p in pairs])
    yd = fn(*[p[1] for p in pairs])
    close(yd, ye, rtol, atol)
    if grad and ye.requires_grad:
        ct = np.random.default_rng(1).standard_normal(tuple(ye.shape)).astype(np.float32)
        ge = torch.autograd.grad(ye, [p[0] for p in pairs], torch.tensor(ct), allow_unused=True)
        gd = torch.autograd.grad(yd, [p[1] for p in pairs], torch.tensor(ct).cuda(), allow_unused=True)
        for a, b in zip(gd, ge):
            if b is not None:
                close(a, b, rtol, atol)


# ----------------------------------------------------------------------------- reductions

@pytest.mark.parametrize("fn", [
    lambda x: x.sum(), lambda x: x.sum(1), lambda x: x.sum((0, 2), keepdim=True), lambda x: x.mean(),
    lambda x: x.mean(-1), lambda x: x.amax(1), lambda x: x.amin((0, 1)), lambda x: x.t().sum(0) if x.ndim == 2 else
    x.transpose(0, 2).sum(2), lambda x: x.max(), lambda x: x.sum(()),
], ids=["sum", "sum1", "sum02k", "mean", "mean-1", "amax1", "amin01", "sum_view", "max", "sum_none"])
def test_reductions(fn):
    _same(fn, _pair(2, 3, 5))


def test_reductions_of_other_dtypes_and_nan():
    i = torch.tensor([[3, -1, 7], [2, 2, 0]])
    b = i > 1
    for fn in (lambda t: t.sum(1), lambda t: t.amax(0), lambda t: t.amin(), lambda t: t.all(1), lambda t: t.any(0)):
        close(fn(i.cuda()), fn(i))
        close(fn(b.cuda()), fn(b))
    x = torch.tensor([[1.0, float("nan"), 3.0], [-1.0, 0.0, 2.0]])
    close(x.cuda().amax(1), x.amax(1))
    close(x.cuda().amin(0), x.amin(0))
    close(x.cuda().sum(1), x.sum(1))


def test_index_and_composite_reductions():
    x = torch.tensor([[1.0, 5.0, 5.0, -2.0], [float("nan"), 2.0, float("nan"), 9.0], [0.5, -3.0, 7.0, 7.0]])
    for fn in (lambda t: t.argmax(1), lambda t: t.argmin(0), lambda t: t.argmax(), lambda t: t.max(1).values,
               lambda t: t.max(1).indices, lambda t: t.min(0, keepdim=True).indices, lambda t: t.prod(1)):
        a, b = fn(x.cuda()), fn(x)
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.cpu().numpy(), b.numpy(), equal_nan=True)
    for fn in (lambda t: t.max(1).values, lambda t: t.var(1), lambda t: t.std(0, correction=0),
               lambda t: t.logsumexp(1), lambda t: t.norm(), lambda t: torch.vector_norm(t, 3, 1),
               lambda t: torch.vector_norm(t, float("inf"), 0)):
        _same(fn, _pair(3, 4), rtol=1e-5)


# ----------------------------------------------------------------------------- softmax, matmul

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax(dim):
    _same(lambda x: torch.softmax(x, dim) + torch.log_softmax(x, dim), _pair(3, 6))


def test_softmax_rows_with_infinities():
    x = torch.tensor([[1.0, -float("inf"), 2.0], [-float("inf")] * 3, [float("inf"), 1.0, 0.0]])
    close(torch.softmax(x.cuda(), 1), torch.softmax(x, 1))
    close(torch.log_softmax(x.cuda(), 1), torch.log_softmax(x, 1))


@pytest.mark.parametrize("case", ["2d", "transposed", "batched_broadcast", "vector", "mv", "dot", "addmm", "linear_3d"])
def test_matmul(case):
    if case == "2d":
        _same(lambda a, b: a @ b, _pair(5, 6), _pair(6, 3, seed=1))
    elif case == "transposed":
        _same(lambda a, b: a @ b.t(), _pair(5, 6), _pair(3, 6, seed=1))
    elif case == "batched_broadcast":
        _same(lambda a, b: a @ b, _pair(2, 1, 3, 4), _pair(3, 4, 2, seed=1))
    elif case == "vector":
        _same(lambda a, b: a @ b, _pair(4), _pair(4, 3, seed=1))
    elif case == "mv":          # mv, dot, addmm are ops with a `decompose` rule: on cuda their parts run
        _same(lambda a, b: torch.mv(a, b), _pair(5, 4), _pair(4, seed=1))
    elif case == "dot":
        _same(lambda a, b: torch.dot(a, b) * a, _pair(4), _pair(4, seed=1))
    elif case == "addmm":
        _same(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), _pair(3, seed=2), _pair(5, 4), _pair(4, 3, seed=1))
    else:
        _same(lambda x, w, b: torch.nn.functional.linear(x, w, b), _pair(2, 5, 4), _pair(3, 4, seed=1),
              _pair(3, seed=2))
    i = torch.tensor([[1, 2], [3, 4]])
    close(i.cuda() @ i.cuda(), i @ i)


# ----------------------------------------------------------------------------- shape ops

@pytest.mark.parametrize("fn", [
    lambda x: x.reshape(6, 2) * 2, lambda x: x.t().reshape(-1), lambda x: x.view(2, 2, 3).sum(1),
    lambda x: x.permute(1, 0).contiguous(), lambda x: x[None].expand(2, 4, 3) * 1.5, lambda x: x[1:, ::2],
    lambda x: x[:, 1], lambda x: x.flip(0), lambda x: x.roll(1, 1), lambda x: torch.cat([x, x * 2], 0),
    lambda x: torch.stack([x, x], 1), lambda x: torch.tril(x), lambda x: torch.triu(x, 1), lambda x: x.squeeze(),
    lambda x: x.unsqueeze(0).transpose(0, 2),
], ids=["reshape", "reshape_view", "view", "permute", "expand", "slice", "select", "flip", "roll", "cat", "stack",
        "tril", "triu", "squeeze", "transpose"])
def test_shape_ops(fn):
    _same(fn, _pair(4, 3))


def test_in_place_updates_write_through_views():
    x = torch.arange(12.0).reshape(3, 4)
    d = x.cuda()
    d[1].mul_(10)
    d[:, 0] = 5.0
    d.t()[2].add_(torch.ones(3).cuda())
    x[1].mul_(10)
    x[:, 0] = 5.0
    x.t()[2].add_(torch.ones(3))
    close(d, x)
    d.zero_()
    assert not d.cpu().numpy().any()
    with pytest.raises(RuntimeError, match="read-only"):
        torch.ones(3).cuda().expand(2, 3).add_(1)


# ----------------------------------------------------------------------------- indexing

def test_indexing_ops():
    idx = torch.tensor([2, 0, 2])
    _same(lambda x: x[idx] * 2, _pair(3, 4))
    _same(lambda x: x[idx, 1:], _pair(3, 4))
    _same(lambda x: x[:, torch.tensor([[1, 0], [3, 3]])], _pair(3, 4))
    _same(lambda x: x[x.detach() > 0] if x.device.type == "cpu" else x[(x.detach() > 0).cpu()], _pair(3, 4))
    g = torch.tensor([[0, 0], [1, 3], [2, 1]])
    _same(lambda x: torch.gather(x, 1, g.to(x.device)), _pair(3, 4))
    _same(lambda x, s: torch.scatter_add(x, 1, g.to(x.device), s), _pair(3, 4), _pair(3, 2, seed=1))
    _same(lambda x, s: torch.scatter(x, 1, g.to(x.device), s), _pair(3, 4), _pair(3, 2, seed=1), grad=False)
    _same(lambda x, v: torch.index_put(x, (torch.tensor([0, 2]),), v), _pair(3, 4), _pair(4, seed=1))
    _same(lambda x, v: torch.index_put(x, (torch.tensor([0, 0]),), v, accumulate=True), _pair(3, 4),
          _pair(4, seed=1))
    # repeated targets without accumulating: the last write wins, as on the CPU (a GPU's thread order must not decide)
    _same(lambda x, v: torch.index_put(x, (torch.tensor([0, 2, 0, 0]),), v), _pair(3, 4), _pair(4, 4, seed=1),
          grad=False)
    many = torch.zeros(3, 300, dtype=torch.int64)
    _same(lambda x, s: torch.scatter(x, 1, many.to(x.device), s), _pair(3, 4), _pair(3, 300, seed=1), grad=False)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.gather(torch.ones(2, 3).cuda(), 1, torch.tensor([[0, 5]]).cuda())


def test_cross_entropy_and_losses():
    t = torch.tensor([2, 0, 1, 1])
    _same(lambda x: F.cross_entropy(x, t.to(x.device)), _pair(4, 3))
    _same(lambda x, y: F.mse_loss(x, y) + F.l1_loss(x, y), _pair(4, 3), _pair(4, 3, seed=1))
    # nll_loss with class weights, an ignored target, every reduction; all targets ignored (NaN loss, zero grad)
    t = torch.tensor([2, 0, 1, 1, 2])
    w = torch.tensor([0.5, 2.0, 1.5])
    for red in ("mean", "sum", "none"):
        _same(lambda x: F.cross_entropy(x, t.to(x.device), weight=w.to(x.device), ignore_index=1, reduction=red),
              _pair(5, 3))
    _same(lambda x: F.cross_entropy(x, torch.full((5,), -100).to(x.device)) * 1, _pair(5, 3), grad=False)
    x = _pair(5, 3)[1]
    F.cross_entropy(x, torch.full((5,), -100).cuda()).backward()
    assert x.grad.cpu().numpy().tolist() == [[0.0] * 3] * 5


# ----------------------------------------------------------------------------- device plumbing

def test_devices_creation_and_conversion():
    d = torch.zeros(2, 3, device="cuda")
    assert d.device == torch.device("cuda", 0) and str(d.device) == "cuda:0" and d.is_cuda
    assert torch.ones(2, device="cuda:0").device.type == "cuda"
    assert torch.arange(4, device=torch.device("cuda")).cpu().tolist() == [0, 1, 2, 3]
    assert torch.tensor([1.5], device="cuda").item() == 1.5
    assert torch.zeros_like(d).device.type == "cuda" and torch.randn(3, device="cuda").device.type == "cuda"
    assert torch.full_like(d, 2.0).cpu().numpy().sum() == 12
    c = d.cpu()
    assert c.device.type == "cpu" and c.cpu() is c and d.cuda() is d and d.to("cuda") is d
    assert d.to("cpu", torch.float64).dtype == torch.float64
    assert "device='cuda:0'" in repr(d)
    assert bool(torch.tensor(1.0).cuda() > 0)
    with pytest.raises(TypeError, match="cpu"):
        d.numpy()
    with pytest.raises(RuntimeError, match="same device"):
        d + torch.zeros(2, 3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.zeros(2, 3) * d
    assert torch.cuda.is_available() and torch.cuda.device_count() == 1
    torch.cuda.synchronize()


def test_to_device_is_differentiable():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x.cuda() * 3).sum()
    y.backward()
    assert x.grad.device.type == "cpu" and x.grad.tolist() == [3.0, 3.0]
    m = torch.nn.Linear(2, 2)
    assert m.cuda().weight.device.type == "cuda" and m.cpu().weight.device.type == "cpu"


def test_ops_without_a_kernel_say_so():
    x = torch.ones(3).cuda()
    with pytest.raises(NotImplementedError, match=r"'cumsum'.*\.cpu\(\)"):
        x.cumsum(0)
