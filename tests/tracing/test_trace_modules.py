"""Tracing nn.Modules: lifted parameters and buffers, train/eval in the guards, fresh dropout masks."""
import logging

import numpy as np

import tracejit as torch
import tracejit.nn as nn


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))


def test_trace_module_matches_eager_in_eval_and_updates_buffers_in_train(caplog):
    m = _model()
    tm = torch.trace(m)
    x = torch.randn(16, 4)
    rm0 = m[1].running_mean.clone()
    tm(x)
    assert not np.allclose(m[1].running_mean.numpy(), rm0.numpy())    # buffer written back
    assert int(m[1].num_batches_tracked) == 1
    m.eval()
    with caplog.at_level(logging.INFO, logger="tracejit"):
        yt = tm(x)
    assert any("train()/eval()" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(yt.detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert tm.cache_info()["traces"] == 2


def test_dropout_in_traced_module_draws_fresh_masks():
    m = nn.Sequential(nn.Dropout(0.5))
    tm = torch.trace(m)
    x = torch.ones(1000)
    a, b = tm(x), tm(x)
    assert not np.array_equal(a.numpy(), b.numpy())
    assert 0.3 < float((a == 0).float().mean()) < 0.7


def test_gradients_of_traced_module_match_eager():
    m = _model()
    m.eval()
    x = torch.randn(16, 4)
    m(x).pow(2).sum().backward()
    ge = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    torch.trace(m)(x).pow(2).sum().backward()
    for a, p in zip(ge, m.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)


def test_traced_method():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        @torch.trace
        def forward(self, x):
            return self.lin(x).tanh()

    m = M()
    x = torch.randn(2, 3)
    y = m(x)
    with torch.no_grad():
        ref = torch.tanh(x @ m.lin.weight.t() + m.lin.bias)
    np.testing.assert_allclose(y.detach().numpy(), ref.numpy(), rtol=1e-6)


def _train_pair(make_opt):
    def mk():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        return m, make_opt(m.parameters())
    return mk(), mk()


def _step(m, o, x, y):
    o.zero_grad()
    loss = nn.functional.cross_entropy(m(x), y)
    loss.backward()
    o.step()
    return loss.detach()


import pytest  # noqa: E402


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: torch.optim.Adam(p, lr=0.01),
    lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    lambda p: torch.optim.RMSprop(p, lr=0.01),
    lambda p: torch.optim.Adadelta(p, lr=0.5, weight_decay=0.01),
    lambda p: torch.optim.Adamax(p, lr=0.01),
    lambda p: torch.optim.NAdam(p, lr=0.01),
    lambda p: torch.optim.RAdam(p, lr=0.01),        # its plain steps, then (from step 6) the rectified one
    lambda p: torch.optim.Rprop(p, lr=0.01),
], ids=["sgd-nesterov", "adam", "adamw", "rmsprop", "adadelta", "adamax", "nadam", "radam", "rprop"])
def test_whole_training_step_traced_from_the_first_step(make_opt, backend):
    (me, oe), (mt, ot) = _train_pair(make_opt)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    traced = torch.trace(lambda: _step(mt, ot, x, y), backend=backend)
    for _ in range(6):
        le, lt = _step(me, oe, x, y), traced()
        np.testing.assert_allclose(lt.item(), le.item(), rtol=1e-5)
    for p, q in zip(me.parameters(), mt.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)
    # the first call creates the optimizer state (run once), the second traces the steady step, then hits
    assert traced.cache_info() == {"entries": 1, "traces": 2, "hits": 4, "limit": traced.max_cache_size}
    assert all(isinstance(v, torch.Tensor) and not v.is_tracer
               for st in ot.state.values() for v in st.values() if isinstance(v, torch.Tensor))


def test_tensor_stored_during_the_trace_is_real_after_the_run():
    keep = {}

    @torch.trace
    def f(x):
        keep["y"] = x * 2      # escapes: becomes a real tensor after the run
        return x + 1
    f(torch.ones(2))
    assert keep["y"].tolist() == [2.0, 2.0]


def test_scheduler_changing_lr_retraces_and_matches_eager(caplog):
    (me, oe), (mt, ot) = _train_pair(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5))
    se = torch.optim.lr_scheduler.StepLR(oe, step_size=2, gamma=0.5)
    st = torch.optim.lr_scheduler.StepLR(ot, step_size=2, gamma=0.5)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    traced = torch.trace(lambda: _step(mt, ot, x, y))
    with caplog.at_level(logging.INFO, logger="tracejit"):
        for _ in range(6):
            np.testing.assert_allclose(traced().item(), _step(me, oe, x, y).item(), rtol=1e-5)
            se.step()
            st.step()
    for p, q in zip(me.parameters(), mt.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert any("'lr': 0.1 -> 0.05" in r.getMessage() for r in caplog.records)


def test_new_learning_rate_retraces_without_compiling_kernels():
    # Python floats of the graph are kernel arguments: the retrace for a new lr reuses every compiled kernel
    from tracejit.backends.numba_cpu.executor import compile_stats
    (me, oe), (mt, ot) = _train_pair(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5))
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    traced = torch.trace(lambda: _step(mt, ot, x, y), backend="numba")
    for _ in range(2):
        np.testing.assert_allclose(traced().item(), _step(me, oe, x, y).item(), rtol=1e-5)
    before = compile_stats()
    for lr in (0.05, 0.025):
        for o in (oe, ot):
            o.param_groups[0]["lr"] = lr
        np.testing.assert_allclose(traced().item(), _step(me, oe, x, y).item(), rtol=1e-5)
    assert compile_stats() == before
    for p, q in zip(me.parameters(), mt.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_step_returning_the_loss_after_its_own_backward_and_update(backend):
    # the loss keeps its graph but a backward inside freed it: no outer backward, and the program takes
    # exactly the function's inputs (the cotangent input the failed derivation added is dropped again)
    def make():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
        return m, torch.optim.SGD(m.parameters(), lr=0.1)

    def step(m, opt, x, y):
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    (me, oe), (mt, ot) = make(), make()
    traced = torch.trace(lambda x, y: step(mt, ot, x, y), backend=backend)
    for _ in range(3):
        np.testing.assert_allclose(float(traced(x, y)), float(step(me, oe, x, y)), rtol=1e-5)
    for a, b in zip(mt.parameters(), me.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert traced.cache_info()["traces"] == 1
