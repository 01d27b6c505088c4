"""The compiled face against the eager face: values, gradients, caching, in-place training steps, errors."""
import logging

import numpy as np
import pytest

import tracejit as torch
import tracejit.nn.functional as F


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a.detach()), np.asarray(b.detach()), rtol=tol, atol=tol)


def test_outputs_and_grads_match_eager(backend):
    def f(x, w, b):
        return (torch.tanh(x @ w + b) * torch.sigmoid(x @ w) + 0.5 * (x @ w) ** 2).mean()

    tf = torch.trace(f, backend=backend)
    x, w, b = torch.randn(5, 3), torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    le = f(x, w, b)
    ge = torch.autograd.grad(le, (w, b))
    lt = tf(x, w, b)
    assert lt.grad_fn.name() == "CompiledFunctionBackward"
    gt = torch.autograd.grad(lt, (w, b))
    close(le, lt)
    for a, c in zip(ge, gt):
        close(a, c)


def test_mlp_cross_entropy_sgd_step_matches_eager_loop(backend):
    torch.manual_seed(0)
    W1, b1 = torch.randn(8, 16) * 0.3, torch.zeros(16)
    W2, b2 = torch.randn(16, 4) * 0.3, torch.zeros(4)
    params_t = [p.clone().requires_grad_() for p in (W1, b1, W2, b2)]
    params_e = [p.clone().requires_grad_() for p in (W1, b1, W2, b2)]
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))

    def step(params, x, y):
        w1, c1, w2, c2 = params
        loss = F.cross_entropy(F.relu(x @ w1 + c1) @ w2 + c2, y)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= 0.1 * p.grad
                p.grad = None
        return loss.detach()

    traced = torch.trace(lambda x, y: step(params_t, x, y), backend=backend)
    for _ in range(5):
        lt = traced(x, y)
        le = step(params_e, x, y)
        close(lt, le)
    for a, b in zip(params_t, params_e):
        close(a, b)
    assert traced.cache_info()["traces"] == 1
    assert all(p.grad is None for p in params_t)


def test_cache_hits_and_retraces_on_new_shape(caplog, backend):
    calls = []

    @torch.trace(backend=backend)
    def f(x):
        calls.append(1)
        return (x * 2).sum(0)

    with caplog.at_level(logging.INFO, logger="tracejit"):
        a = f(torch.ones(3, 2))
        f(torch.ones(3, 2))
        b = f(torch.ones(5, 2))
        c = f(torch.ones(3, 2))
    assert len(calls) == 2
    assert f.cache_info()["entries"] == 2 and f.cache_info()["hits"] == 2
    assert a.tolist() == [6.0, 6.0] and b.tolist() == [10.0, 10.0] and c.tolist() == [6.0, 6.0]
    msgs = [r.getMessage() for r in caplog.records if "tracing" in r.getMessage()]
    assert len(msgs) == 2 and "float32[3, 2] -> float32[5, 2]" in msgs[1]


def test_cache_limit_raises_clear_error():
    f = torch.trace(lambda x: x + 1, max_cache_size=2)
    f(torch.ones(1))
    f(torch.ones(2))
    with pytest.raises(torch.TraceError, match="cache limit"):
        f(torch.ones(3))


def test_static_argnums_and_python_values_are_baked():
    calls = []

    @torch.trace(static_argnums=(1,))
    def f(x, n):
        calls.append(n)
        for _ in range(n):
            x = x * 2
        return x

    assert f(torch.ones(2), 3).tolist() == [8.0, 8.0]
    assert f(torch.ones(2), 3).tolist() == [8.0, 8.0]
    assert f(torch.ones(2), 1).tolist() == [2.0, 2.0]
    assert calls == [3, 1]


def test_grad_of_grad_through_traced_function():
    def f(x):
        return (x ** 3 * torch.sin(x)).sum()
    tf = torch.trace(f)
    xe = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    xt = xe.detach().clone().requires_grad_()
    (ge,) = torch.autograd.grad(f(xe), xe, create_graph=True)
    (gt,) = torch.autograd.grad(tf(xt), xt, create_graph=True)
    close(ge, gt)
    (gge,) = torch.autograd.grad(ge.sum(), xe)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    close(gge, ggt)


def test_lifted_globals_get_gradients_like_eager():
    W = torch.randn(3, 3, requires_grad=True)
    f = torch.trace(lambda x: (x @ W).exp().sum())
    f(torch.ones(2, 3)).backward()
    g = W.grad.clone()
    W.grad = None
    (torch.ones(2, 3) @ W).exp().sum().backward()
    close(g, W.grad)


@pytest.mark.parametrize("body, what", [
    (lambda x: x if x.sum() > 0 else -x, "bool"),
    (lambda x: x * float(x.sum()), "float"),
    (lambda x: x * x.sum().item(), "item"),
    (lambda x: torch.tensor(x.tolist()), "tolist"),
    (lambda x: x.numpy(), "numpy"),
    (lambda x: x.nonzero(), "nonzero"),
    (lambda x: x[x > 0], "mask"),
])
def test_value_dependent_code_raises_trace_error_with_user_line(body, what):
    f = torch.trace(body)
    with pytest.raises(torch.TraceError) as ei:
        f(torch.randn(4))
    msg = str(ei.value)
    assert "test_trace.py:" in msg and "static" in msg and "eagerly" in msg
    assert isinstance(ei.value, RuntimeError)


def test_trace_error_leaves_lifted_tensors_intact():
    W = torch.ones(2, requires_grad=True)
    f = torch.trace(lambda x: (x * W) if (x * W).sum() > 0 else x)
    with pytest.raises(torch.TraceError):
        f(torch.ones(2))
    assert W.tolist() == [1.0, 1.0] and W.requires_grad


def test_random_ops_draw_fresh_numbers_each_call():
    f = torch.trace(lambda x: x + torch.rand(3))
    a, b = f(torch.zeros(3)), f(torch.zeros(3))
    assert not np.allclose(a.numpy(), b.numpy())
    assert f.cache_info()["traces"] == 1


def test_make_graph_and_text_form():
    g = torch.make_graph(lambda x, w: torch.relu(x @ w), torch.randn(128, 64), torch.randn(64, 512))
    text = g.text()
    assert "%2:f32[128,512] = matmul %0 %1" in text
    assert "= relu %2" in text
    assert "digraph" in g.to_dot()


def test_print_happens_once_at_trace_time(capsys):
    @torch.trace
    def f(x):
        print("tracing!")
        return x + 1
    f(torch.ones(1))
    f(torch.ones(1))
    assert capsys.readouterr().out.count("tracing!") == 1


def test_nested_outputs_and_non_tensor_outputs():
    @torch.trace
    def f(d):
        return {"s": d["a"] + d["b"], "pair": (d["a"] * 2, 7)}
    out = f({"a": torch.ones(2), "b": torch.ones(2)})
    assert out["s"].tolist() == [2.0, 2.0] and out["pair"][1] == 7


def test_custom_function_in_traced_code_uses_its_backward():
    class ClipGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g.clamp(-0.5, 0.5)

    W = torch.tensor([3.0, -3.0], requires_grad=True)

    @torch.trace
    def step():
        loss = (ClipGrad.apply(W) * torch.tensor([2.0, -2.0])).sum()
        loss.backward()
        return loss.detach()
    step()
    assert W.grad.tolist() == [0.5, -0.5]
