"""PyTorch's autograd tutorial numbers, with `import tracejit as torch`."""
import pytest

import tracejit as torch


def test_retain_graph_accumulates():
    x = torch.tensor(2.0)
    w = torch.tensor(1.0, requires_grad=True)
    y = (x + w) * (w + 1)
    y.backward(retain_graph=True)
    assert w.grad.item() == 5.0
    y.backward()
    assert w.grad.item() == 10.0


def test_second_backward_through_freed_graph_raises():
    w = torch.tensor(1.0, requires_grad=True)
    y = (w * w).exp()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_grad_of_grad():
    x = torch.tensor(3.0, requires_grad=True)
    (g,) = torch.autograd.grad(x ** 2, x, create_graph=True)
    assert g.item() == 6.0
    (gg,) = torch.autograd.grad(g, x)
    assert gg.item() == 2.0


def test_non_scalar_backward_needs_gradient():
    x = torch.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        y.backward()
    y.backward(torch.tensor([1.0, 0.1, 0.01]))
    assert x.grad.tolist() == pytest.approx([2.0, 0.2, 0.02])


def test_nonleaf_grad_is_none_unless_retained():
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    z = y.sum()
    y.retain_grad()
    h = x * 1
    z2 = h.sum()
    z.backward()
    z2.backward()
    assert y.grad.tolist() == [1.0, 1.0]
    assert h.grad is None
    assert x.grad.tolist() == [4.0, 4.0]


def test_inplace_on_leaf_raises_and_version_check():
    w = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.add_(1)
    a = torch.ones(3, requires_grad=True) * 2
    b = a.exp()
    c = a * b
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_inplace_nonleaf_gradient():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.mul_(y)          # y = 4x^2
    y[0] = 0.0         # drop the first element
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 16.0, 24.0]


def test_grad_fn_names_and_next_functions():
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([2.0], requires_grad=True)
    c = a * b
    assert c.grad_fn.name() == "MulBackward0"
    assert type(c.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    assert c.grad_fn._saved_self is a and c.grad_fn._saved_other is b
    d = c.exp()
    assert d.grad_fn._saved_result.tolist() == d.tolist()
    assert "grad_fn=<ExpBackward0>" in repr(d)


def test_hooks():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: g + 1)
    y.sum().backward()
    assert x.grad.tolist() == [21.0, 21.0]


def test_no_grad_modes():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad

    @torch.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    torch.set_grad_enabled(False)
    assert not torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    with torch.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert torch.is_grad_enabled()
    with torch.inference_mode():
        assert not (x * 2).requires_grad


def test_custom_function():
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            r = i.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    x = torch.tensor([0.0, 1.0], requires_grad=True, dtype=torch.float64)
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward"
    y.sum().backward()
    assert x.grad.tolist() == pytest.approx([1.0, 2.718281828459045])
    assert torch.autograd.gradcheck(Exp.apply, (torch.randn(4, dtype=torch.float64, requires_grad=True),))


def test_anomaly_mode_names_forward_op():
    x = torch.tensor([0.0], requires_grad=True)
    with torch.autograd.detect_anomaly():
        y = x.sqrt() * 0.0   # 0 * inf = nan in backward
        with pytest.raises(RuntimeError, match="returned nan values"):
            y.sum().backward()


def test_profiler_table():
    with torch.autograd.profiler.profile() as prof:
        x = torch.randn(10)
        (x * 2).sum()
    table = prof.key_averages().table()
    assert "mul" in table and "sum" in table


def test_leaf_grad_never_aliases_a_tensor_the_user_holds():
    x = torch.ones(3, requires_grad=True)
    g = torch.ones(3)
    (x * 1).backward(g)          # MulBackward returns a fresh array: may be taken over
    y = torch.ones(3, requires_grad=True)
    (y + 0).backward(g)          # AddBackward passes g itself through: must be copied
    y.grad.mul_(5)
    x.grad.mul_(3)
    assert g.tolist() == [1.0, 1.0, 1.0]
    assert y.grad.tolist() == [5.0, 5.0, 5.0] and x.grad.tolist() == [3.0, 3.0, 3.0]
