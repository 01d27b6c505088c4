"""Compiled graphs on cuda: fused @cuda.jit kernels, device buffers planned once, device in the cache key.
The oracle is eager CPU."""
import numpy as np

import tracejit as torch
import tracejit.nn as nn
import tracejit.nn.functional as F

from simutil import close


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _step(model, opt, loss_fn):
    def step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def _train(device, traced, loss_fn, x, y, steps=2):
    model = _mlp().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = _step(model, opt, loss_fn)
    if traced:
        step = torch.trace(step)
    x, y = x.to(device), y.to(device)
    losses = [step(x, y) for _ in range(steps)]
    return losses, list(model.parameters()), step


def test_traced_mlp_training_step_on_cuda_equals_eager_cpu():
    x = torch.randn(5, 4)
    y = torch.randn(5, 3)
    le, pe, _ = _train("cpu", False, F.mse_loss, x, y)
    ld, pd, step = _train("cuda", True, F.mse_loss, x, y)
    for a, b in zip(ld, le):
        close(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(pd, pe):
        close(a, b, rtol=1e-5, atol=1e-6)
    # the compiled program runs fused CUDA kernels from the disk cache
    src = step.graph(x.cuda(), y.cuda()).entry.fwd_fn.source()
    assert "@cuda.jit" in src and "cuda.grid(1)" in src


def test_traced_cross_entropy_step_on_cuda_equals_eager_cpu():
    x = torch.randn(6, 4)
    t = torch.tensor([0, 2, 1, 1, 0, 2])
    le, pe, _ = _train("cpu", False, F.cross_entropy, x, t)
    ld, pd, _ = _train("cuda", True, F.cross_entropy, x, t)
    for a, b in zip(ld + pd, le + pe):
        close(a, b, rtol=1e-5, atol=1e-6)


def test_device_is_part_of_the_signature():
    @torch.trace
    def f(a, b):
        return (a * b + 1).relu().sum(1)

    a, b = torch.randn(3, 4), torch.randn(4)
    rc = f(a, b)
    rd = f(a.cuda(), b.cuda())
    assert f.cache_info()["traces"] == 2
    close(rd, rc)
    f(a.cuda(), b.cuda())
    assert f.cache_info()["traces"] == 2 and f.cache_info()["hits"] == 1


def test_traced_grads_and_interpreter_on_cuda():
    def fn(x, w):
        return torch.softmax(x @ w, 1).amax(1).mean() + (x.t() ** 2).sum() * 0.5

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    ref = fn(x, w)
    ge = torch.autograd.grad(ref, [x, w])
    for backend in ("numba", "interpreter"):
        xd = x.detach().cuda().requires_grad_()
        wd = w.detach().cuda().requires_grad_()
        out = torch.trace(fn, backend=backend)(xd, wd)
        close(out, ref, rtol=1e-5)
        for a, b in zip(torch.autograd.grad(out, [xd, wd]), ge):
            close(a, b, rtol=1e-5)


def test_buffers_are_reused_and_returned_values_are_not_clobbered():
    @torch.trace
    def f(x):
        return x * 2 + 1, (x - 1).exp()

    x = torch.arange(6.0).reshape(2, 3).cuda()
    a1, b1 = f(x)
    a2, b2 = f(x + 1)
    close(a1, torch.arange(6.0).reshape(2, 3) * 2 + 1)
    close(a2, (torch.arange(6.0).reshape(2, 3) + 1) * 2 + 1)
    close(b1, (torch.arange(6.0).reshape(2, 3) - 1).exp())


def test_traced_adam_step_with_cpu_step_counter():
    # Adam keeps its step counter on the CPU (a 0-d tensor, a scalar on any device, as in PyTorch)
    x = torch.randn(5, 4)
    y = torch.tensor([0, 1, 2, 1, 0])

    def run(device, traced):
        model = _mlp().to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        step = _step(model, opt, F.cross_entropy)
        step = torch.trace(step) if traced else step
        losses = [step(x.to(device), y.to(device)) for _ in range(3)]
        return losses + list(model.parameters())

    for a, b in zip(run("cuda", True), run("cpu", False)):
        close(a, b, rtol=1e-5, atol=1e-6)
    assert torch.nn.functional.dropout(torch.ones(4).cuda(), 0.5).device.type == "cuda"


def test_traced_module_retraces_after_moving_and_rejects_mixed_devices():
    import pytest
    model = _mlp()
    f = torch.trace(lambda x: model(x).sum())
    x = torch.randn(2, 4)
    ref = f(x)
    with pytest.raises(RuntimeError, match="same device"):
        f(x.cuda())                     # inputs on cuda, parameters still on the CPU
    model.cuda()
    close(f(x.cuda()), ref, rtol=1e-5)
    with pytest.raises(RuntimeError, match="same device"):
        f(x)                            # parameters on cuda now, input on the CPU


def test_planned_buffers_share_memory_and_views_keep_theirs():
    # %a's only direct reader is the transpose; the transposed view is read after other kernels wrote buffers
    # of its size and dtype: the plan (passes/buffers.py) must keep %a's memory until then
    def f(x, w):
        b = torch.tanh(x * 2).t()
        for _ in range(3):
            x = torch.tanh(x @ w) * 0.5 + x
        return (b.t() * (x @ w)).sum()

    x, w = torch.randn(4, 4), torch.randn(4, 4)
    tf = torch.trace(f)
    got = tf(x.cuda(), w.cuda())
    close(got, f(x, w), rtol=1e-5, atol=1e-6)
    cg = tf.graph(x.cuda(), w.cuda()).entry.fwd_fn
    assert len(cg.plan.arenas) < len(cg._requests)
