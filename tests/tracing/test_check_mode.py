"""trace(check=True) / TRACEJIT_CHECK=1: the first call of each signature is compared with an eager run (outputs,
state updated in place, gradients), within per-dtype tolerances, naming the first op whose value differs."""
import numpy as np
import pytest

import tracejit
import tracejit.nn as nn
import tracejit.nn.functional as F
from tracejit.ops.registry import OPS
from tracejit.tracing import check as C


def test_tolerances_per_dtype():
    f32 = np.array([1.0, 2.0, 3.0], np.float32)
    assert C.differs(f32 * (1 + 5e-5), f32) is None
    assert "rtol=0.0001" in C.differs(f32 * (1 + 1e-3), f32)
    f64 = f32.astype(np.float64)
    assert C.differs(f64 * (1 + 1e-10), f64) is None and C.differs(f64 * (1 + 1e-7), f64)
    assert C.differs(np.array([1, 2]), np.array([1, 2])) is None
    assert "exact" in C.differs(np.array([1, 3]), np.array([1, 2]))
    nan = np.array([np.nan, 1.0, np.inf], np.float32)
    assert C.differs(nan.copy(), nan) is None
    assert C.differs(np.array([0.0, 1.0, np.inf], np.float32), nan)            # NaN where eager has none
    assert C.differs(np.array([np.nan, 1.0, -np.inf], np.float32), nan)        # inf of the other sign
    # a sum with cancellation: the error is judged against the tensor's largest value
    assert C.differs(np.array([1e4, 1e-3], np.float32), np.array([1e4, 1.5e-3], np.float32)) is None
    assert "shape" in C.differs(np.zeros(2), np.zeros(3))


def test_correct_programs_pass_and_run_once():
    calls = []

    def body(x, w):
        calls.append(1)
        h = F.layer_norm(x @ w, (w.shape[1],)).softmax(-1)
        return h.sum(0), (x * 3).long() % 5, x.sum() * 1e-3

    f = tracejit.trace(body, check=True)
    x = tracejit.randn(64, 16, requires_grad=True)
    w = tracejit.randn(16, 8, requires_grad=True)
    a, b, c = f(x, w)
    assert len(calls) == 2                       # traced once, run eagerly once (the check)
    ea, eb, ec = body(x, w)
    np.testing.assert_allclose(a.detach().numpy(), ea.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(b.numpy(), eb.numpy())
    a.sum().backward()                           # the outputs still carry their compiled backward
    assert x.grad is not None and w.grad is not None
    calls.clear()
    f(x, w)
    assert calls == []                           # later calls of that signature are not checked


def test_training_step_is_checked_without_doubling_its_updates():
    tracejit.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    twin = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    twin.load_state_dict(model.state_dict())
    opts = [tracejit.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, twin)]

    def step(m, opt, x, y):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    traced = tracejit.trace(lambda x, y: step(model, opts[0], x, y), check=True)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = tracejit.tensor(rng.standard_normal((5, 6)).astype(np.float32))
        y = tracejit.tensor(rng.integers(0, 3, 5))
        lt, le = traced(x, y), step(twin, opts[1], x, y)
        np.testing.assert_allclose(float(lt), float(le), rtol=1e-5)
    for p, q in zip(model.parameters(), twin.parameters()):     # each step applied once, checked or not
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_wrong_kernel_is_caught_and_its_op_named(monkeypatch):
    op = OPS["exp"]
    monkeypatch.setattr(op, "expr", op.expr.replace("exp(", "expm1("))     # the fused kernel's exp, broken
    f = tracejit.trace(lambda x: (x * 2).exp() + 1, check=True)
    with pytest.raises(C.CheckError, match=r"output 0 differs.*First op whose value differs from eager: "
                                           r"%\d+:f32\[5\] = exp %\d+"):
        f(tracejit.randn(5))
    g = tracejit.trace(lambda x: (x * 2).exp() + 1)      # (not checked: the wrong answer goes unnoticed)
    g(tracejit.randn(5))


def test_a_wrong_gradient_is_caught(monkeypatch):
    from tracejit.tracing import trace as T
    real = T.build_entry

    def broken(*a, **k):
        e = real(*a, **k)
        if e.bwd_fn is not None:
            bwd = e.bwd_fn
            e.bwd_fn = lambda arrays: [g * 1.01 for g in bwd(arrays)]
        return e
    monkeypatch.setattr(T, "build_entry", broken)
    f = tracejit.trace(lambda x: (x * x).sum(), check=True)
    with pytest.raises(C.CheckError, match="gradient with respect to argument 0 differs"):
        f(tracejit.randn(4, requires_grad=True))


def test_whole_program_switch(monkeypatch):
    monkeypatch.setattr(C, "ENABLED", True)          # what TRACEJIT_CHECK=1 sets at import
    assert tracejit.trace(lambda x: x).check and not tracejit.trace(lambda x: x, check=False).check
    monkeypatch.setattr(C, "ENABLED", False)
    assert not tracejit.trace(lambda x: x).check


def test_environment_variable_turns_it_on_for_a_whole_program():
    import os
    import subprocess
    import sys
    code = "import tracejit; print(tracejit.trace(lambda x: x).check, tracejit.trace(lambda x: x, check=False).check)"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for value, want in (("1", "True False"), ("0", "False False")):
        env = dict(os.environ, TRACEJIT_CHECK=value, PYTHONPATH=root)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.stdout.split() == want.split(), out.stderr


def test_backward_through_outputs_after_one_without_grad():
    """(found by the check mode) an integer output before a float one: the backward took the wrong cotangents."""
    f = tracejit.trace(lambda x: (x.sum(0), (x * 3).long(), (x * x).sum()))
    x = tracejit.randn(3, 2, requires_grad=True)
    a, b, c = f(x)
    (a.sum() + 2 * c).backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 + 4 * x.detach().numpy(), rtol=1e-6)
    x.grad = None
    a, b, c = f(x)
    c.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
