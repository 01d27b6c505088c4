"""The backward engine's public behaviour (backward, grad, hooks, callbacks, anomaly mode), PyTorch's semantics and
messages: what each argument does, beyond the gradients of single ops that tests/ops checks."""
import numpy as np
import pytest

import tracejit as torch
from tracejit.autograd import engine


def _x(*values, dtype=torch.float32):
    return torch.tensor(np.array(values, dtype=np.float64), dtype=dtype, requires_grad=True)


def test_errors_carry_pytorchs_messages():
    x = _x(1.0, 2.0)
    with pytest.raises(RuntimeError, match="^element 0 of tensors does not require grad and does not have a grad_fn$"):
        torch.ones(2).sum().backward()
    with pytest.raises(RuntimeError, match="^grad can be implicitly created only for scalar outputs$"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match=r"^Mismatch in shape: grad_output\[0\] has a shape of \(3,\) and "
                                           r"output\[0\] has a shape of \(2,\)\.$"):
        (x * 2).backward(torch.ones(3))
    with pytest.raises(RuntimeError, match=r"^'inputs' argument to backward\(\) cannot be empty\.$"):
        (x * 2).sum().backward(inputs=[])
    with pytest.raises(RuntimeError, match="^One of the differentiated Tensors does not require grad$"):
        torch.autograd.grad((x * 2).sum(), [x, torch.ones(2)])
    with pytest.raises(RuntimeError, match=r"^One of the differentiated Tensors appears to not have been used in the "
                                           r"graph\. Set allow_unused=True if this is the desired behavior\.$"):
        torch.autograd.grad((x * 2).sum(), [x, _x(1.0)])
    with pytest.raises(RuntimeError, match=r"^Final callbacks can only be installed during backward pass\.$"):
        engine.queue_callback(lambda: None)


def test_grad_leaves_dot_grad_alone_and_handles_unused_inputs():
    x, u = _x(1.0, 2.0), _x(3.0)
    gx, gu = torch.autograd.grad((x * x).sum(), [x, u], allow_unused=True)
    assert gx.tolist() == [2.0, 4.0] and gu is None
    assert x.grad is None and u.grad is None and not gx.requires_grad
    gx, gu = torch.autograd.grad((x * x).sum(), [x, u], materialize_grads=True)
    assert gu.tolist() == [0.0] and gu.dtype == torch.float32 and x.grad is None


def test_create_graph_keeps_the_graph_and_gives_differentiable_gradients():
    x = _x(1.0, 2.0)
    y = (x ** 3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad and g.tolist() == [3.0, 12.0]
    (g2,) = torch.autograd.grad(y, x)           # y's graph was kept (retain_graph defaults to create_graph)
    assert g2.tolist() == [3.0, 12.0] and not g2.requires_grad
    y = (x ** 3).sum()
    y.backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.tolist() == [3.0, 12.0]
    (h,) = torch.autograd.grad(x.grad.sum(), x)     # d/dx of 3 x^2
    assert h.tolist() == [6.0, 12.0]
    x.grad = None
    y.backward()                                # kept by the create_graph backward
    assert x.grad.tolist() == [3.0, 12.0] and not x.grad.requires_grad
    (x ** 3).sum().backward()
    assert not x.grad.requires_grad             # create_graph is False by default


def test_a_leafs_own_gradient_requiring_grad_is_copied_without_its_graph():
    x = _x(1.0, 2.0)
    g = torch.tensor([1.0, 3.0], requires_grad=True)
    x.backward(g)
    assert x.grad.tolist() == [1.0, 3.0] and not x.grad.requires_grad
    g.data.mul_(0)
    assert x.grad.tolist() == [1.0, 3.0]


def test_backward_inputs_accumulates_into_those_leaves_only():
    a, b = _x(1.0, 2.0), _x(3.0, 4.0)
    (a * b).sum().backward(inputs=[a])
    assert a.grad.tolist() == [3.0, 4.0] and b.grad is None
    (a * b).sum().backward(inputs=b)
    assert b.grad.tolist() == [1.0, 2.0] and a.grad.tolist() == [3.0, 4.0]


def test_several_roots_sum_their_gradients():
    x, w = _x(1.0, 2.0), _x(5.0)
    y = x * 3
    z = y * 2                   # y is an ancestor of z
    v = w * 4                   # a graph of its own
    torch.autograd.backward([y, y, z, v], [torch.ones(2), torch.full((2,), 10.0), torch.ones(2), torch.ones(1)])
    assert x.grad.tolist() == [3.0 * 11 + 6.0] * 2 and w.grad.tolist() == [4.0]
    x.grad = None
    y = x * x                   # saves x
    z = y * 2
    torch.autograd.backward([z, y], [torch.ones(2), torch.ones(2)])     # y after z, which it feeds
    assert x.grad.tolist() == [6.0, 12.0]
    x.grad = None
    torch.autograd.backward([z.detach() * 0 + x, x * x], [torch.ones(2), torch.ones(2)])   # a leaf's own gradient
    assert x.grad.tolist() == [3.0, 5.0]


def test_gradient_must_be_a_tensor_and_a_0d_one_is_used():
    x = _x(1.0, 2.0)
    for g in ([1.0, 3.0], np.array([1.0, 3.0])):   # PyTorch's TypeError, not a gradient per element
        with pytest.raises(TypeError, match="^gradients can be either Tensors or None, but got (float|float64)$"):
            (x * 2).backward(g)
    with pytest.raises(TypeError, match="^gradients can be either Tensors or None, but got ndarray$"):
        torch.autograd.grad(x * 2, x, [np.ones(2)])
    assert x.grad is None
    (x * 2).sum().backward(torch.tensor(0.5))       # a 0-d output with a gradient given: not replaced by 1
    assert x.grad.tolist() == [1.0, 1.0]
    x.grad = None
    (x * 2).sum(0, keepdim=True).backward()         # one element, not 0-d: an implicit 1 too
    assert x.grad.tolist() == [2.0, 2.0]
    s = _x(2.0).sum()
    leaf = torch.tensor(2.0, requires_grad=True)
    leaf.backward()
    assert leaf.grad.dtype == torch.float32 and leaf.grad.item() == 1.0 and s.requires_grad


def test_a_given_gradient_is_cast_to_its_outputs_dtype():
    x = _x(1.0, 2.0)
    x.backward(torch.tensor([1.0, 3.0], dtype=torch.float64))      # a leaf's own gradient, as PyTorch: cast
    assert x.grad.dtype == torch.float32 and x.grad.tolist() == [1.0, 3.0]
    (x * 2).backward(torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert x.grad.dtype == torch.float32 and x.grad.tolist() == [3.0, 5.0]


def test_gradient_dtype_follows_the_input_after_promotion():
    x = _x(1.0, 2.0)
    w = torch.tensor(np.array([0.5, 0.25]))         # float64: x * w is float64
    (x * w).sum().backward()
    assert x.grad.dtype == torch.float32 and x.grad.tolist() == [0.5, 0.25]


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * 2 + b

    @staticmethod
    def backward(ctx, g):
        return None, g          # no gradient for a


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2            # a tensor, not a tuple


def test_a_node_that_receives_no_gradient_is_skipped_and_the_rest_runs():
    for first in (True, False):
        x = _x(1.0, 2.0)
        a, b = x * 3, x.exp()
        out = _Twice.apply(a, b) if first else _Twice.apply(a, b) + (x * 0).detach()
        out.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    x = _x(1.0, 2.0, 3.0)
    _Double.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_retained_gradients_accumulate_and_follow_create_graph():
    x = _x(1.0, 2.0)
    y = x * x
    y.retain_grad()
    z = (y * y).sum()
    z.backward(retain_graph=True)
    assert y.grad.tolist() == [2.0, 8.0] and not y.grad.requires_grad
    z.backward(create_graph=True)
    assert y.grad.tolist() == [4.0, 16.0] and y.grad.requires_grad
    y3 = x * 2
    y3.retain_grad()
    y3.backward(torch.ones(2, requires_grad=True))      # a gradient that requires grad: retained detached
    assert y3.grad.tolist() == [1.0, 1.0] and not y3.grad.requires_grad
    y2 = x * 2
    y2.retain_grad()
    s = y2.sum()
    del y2                      # the retained tensor is gone: nothing to write
    s.backward()


def test_node_hooks_see_and_replace_gradients():
    x = _x(1.0, 2.0)
    y = x * 3
    y.grad_fn.register_prehook(lambda gout: (gout[0] * 2,))
    seen = []

    def post(gin, gout):
        seen.append((gin[0].tolist(), gout[0].tolist()))
    y.grad_fn.register_hook(post)
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0] and seen == [([6.0, 6.0], [2.0, 2.0])]

    def wrong(gin, gout):
        return gin + gin[:1]      # x * 3: two inputs (the 3 too, as PyTorch wraps it)
    x.grad = None
    y = x * 3
    y.grad_fn.register_hook(wrong)
    with pytest.raises(RuntimeError, match=r"^hook 'wrong' has returned an incorrect number of values \(got 3, but "
                                           r"expected 2\)$"):
        y.sum().backward()
    import functools
    y = x ** 2                  # one edge (no edge for the exponent)
    y.grad_fn.register_hook(functools.partial(wrong))
    with pytest.raises(RuntimeError, match=r"^hook 'functools\.partial\(<function .*wrong.*\)' has returned an "
                                           r"incorrect number of values \(got 2, but expected 1\)$"):
        y.sum().backward()
    seen = []
    z = _Double.apply(x)
    z.grad_fn.register_hook(lambda gin, gout: seen.append(len(gin)))
    z.sum().backward()
    assert seen == [1]


def test_post_accumulate_hook_gets_the_leaf_and_callbacks_run_in_order_after_backward():
    x = _x(1.0, 2.0)
    got, order = [], []
    x.register_post_accumulate_grad_hook(lambda t: got.append(t.grad.tolist()))

    def queue(g):
        engine.queue_callback(lambda: order.append(("first", x.grad is not None)))
        engine.queue_callback(lambda: order.append(("second", x.grad is not None)))
        return g
    y = x * 2
    y.register_hook(queue)
    y.sum().backward()
    assert got == [[2.0, 2.0]] and order == [("first", True), ("second", True)]


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_anomaly_mode_nan_check_and_its_message():
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with torch.autograd.detect_anomaly():
        y = (x.sqrt() * torch.tensor([0.0, 1.0])).sum()       # 0 * inf at x = 0
        with pytest.raises(RuntimeError, match="Function 'SqrtBackward0' returned nan values in its 0th output") as e:
            y.backward()
    assert "y = (x.sqrt()" in str(e.value)                   # the forward line, recorded in anomaly mode
    y = (x.sqrt() * torch.tensor([0.0, 1.0])).sum()           # recorded outside anomaly mode
    with torch.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match=r"called at:\n\(forward trace not recorded\)$"):
            y.backward()
    with torch.autograd.detect_anomaly(check_nan=False):
        (x.sqrt() * torch.tensor([0.0, 1.0])).sum().backward()  # no check
    with torch.autograd.detect_anomaly():
        (x * torch.tensor([2.0, 3.0]) + 1).sum().backward()    # finite, a None gradient for the constant
    x.grad = None
    (x.sqrt() * torch.tensor([0.0, 1.0])).sum().backward()     # anomaly mode off: NaN gradients pass
    assert np.isnan(x.grad.numpy()[0])


def test_backward_twice_inside_a_trace_accumulates():
    x = torch.tensor([1.0, 2.0], requires_grad=True)

    def step(x):
        (x * x).sum().backward()
        (x * 3).sum().backward()
        return x.grad * 1

    np.testing.assert_allclose(torch.trace(step, backend="interpreter")(x).numpy(), [5.0, 7.0])


def test_gradients_reach_a_later_output_of_a_multi_output_node():
    # batch_norm's outputs (y, mean, var): sum(y) does not depend on x, mean's gradient is 1/4 per element
    from tracejit.ops.registry import OPS, apply
    x = torch.tensor(np.arange(12.0).reshape(4, 3) ** 1.5, requires_grad=True)
    for through_a_node in (True, False):
        x.grad = None
        y, mean, _ = apply(OPS["batch_norm"], x, None, None, training=True, eps=1e-5)
        if through_a_node:
            (y.sum() + mean.sum()).backward()
        else:
            torch.autograd.backward([y, mean], [torch.ones(4, 3, dtype=torch.float64),
                                                torch.ones(3, dtype=torch.float64)])
        np.testing.assert_allclose(x.grad.numpy(), np.full((4, 3), 0.25), atol=1e-12)
