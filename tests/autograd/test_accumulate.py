"""AccumulateGrad takes over a gradient nobody else can see (no copy), and copies every other one."""
import numpy as np
import pytest

import tracejit as torch


@pytest.fixture
def clones(monkeypatch):
    calls = []
    orig = torch.Tensor.clone

    def counting(self, *a, **k):
        calls.append(self)
        return orig(self, *a, **k)
    monkeypatch.setattr(torch.Tensor, "clone", counting)
    return calls


def test_fresh_gradients_are_taken_over(clones):
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    ((x * 2) * w).sum().backward()
    assert clones == []
    assert x.grad.tolist() == [2.0] * 3 and w.grad.tolist() == [2.0] * 3


def test_one_gradient_flowing_to_two_leaves_is_not_shared():
    c = torch.ones(3, requires_grad=True)
    d = torch.ones(3, requires_grad=True)
    (c + d).backward(torch.ones(3))        # AddBackward hands the same tensor to both leaves
    assert not np.shares_memory(c.grad.numpy(), d.grad.numpy())
    c.grad.mul_(2)
    assert d.grad.tolist() == [1.0] * 3


def test_retained_and_hooked_gradients_are_not_aliased():
    w = torch.ones(3, requires_grad=True)
    h = w * 1
    h.retain_grad()
    (h * 3).sum().backward()
    w.grad.mul_(10)
    assert h.grad.tolist() == [3.0] * 3

    kept = []
    v = torch.ones(3, requires_grad=True)
    v.register_hook(lambda g: kept.append(g))
    (v * 2).sum().backward()
    v.grad.mul_(7)
    assert kept[0].tolist() == [2.0] * 3


def test_broadcast_gradient_is_copied_not_a_readonly_view():
    x = torch.ones(3, requires_grad=True)
    x.sum().backward()                     # SumBackward expands a scalar: a view
    x.grad.add_(1)
    assert x.grad.tolist() == [2.0] * 3


def test_user_gradient_requiring_grad_leaves_no_graph_in_dot_grad():
    x = torch.ones(3, requires_grad=True)
    g = torch.ones(3, requires_grad=True)
    (x * 1).backward(g * 2)
    assert x.grad.grad_fn is None and not x.grad.requires_grad
    assert x.grad.tolist() == [2.0] * 3


def test_a_copied_gradient_takes_its_leafs_layout():
    # PyTorch's layout contract: a Linear weight's gradient comes out of the backward as a transposed view and is
    # copied row-major like the weight (what the fused optimizer step needs)
    lin = torch.nn.Linear(3, 4)
    x = torch.randn(5, 3)
    lin(x).sum().backward()
    g = lin.weight.grad
    assert g.is_contiguous() and g.numpy().flags.c_contiguous
    np.testing.assert_allclose(g.numpy(), np.ones((4, 1), np.float32) * x.numpy().sum(0), rtol=1e-6)


def test_adamw_steps_a_linear_in_one_kernel_per_parameter(monkeypatch):
    lin = torch.nn.Linear(3, 4)
    opt = torch.optim.AdamW(lin.parameters())
    lin(torch.randn(5, 3)).sum().backward()
    from tracejit.optim.adam import Adam
    orig = Adam._fused_eager
    taken = []
    monkeypatch.setattr(Adam, "_fused_eager", lambda self: taken.append(orig(self)) or taken[-1])
    opt.step()
    assert taken == [True]
