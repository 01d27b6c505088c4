"""tracejit.compile: torch.compile's spelling (functions traced, modules wrapped as OptimizedModule with PyTorch's
`_orig_mod.` state_dict names), so programs that call torch.compile run unchanged."""
import numpy as np
import pytest

import tracejit as tj
from tracejit.tracing.trace import TracedFunction


def _model():
    tj.manual_seed(0)
    return tj.nn.Sequential(tj.nn.Linear(6, 8), tj.nn.Dropout(0.5), tj.nn.ReLU(), tj.nn.Linear(8, 3))


def test_compile_a_training_step_as_a_decorator_with_and_without_arguments():
    x, y = tj.randn(5, 6), tj.randint(0, 3, (5,))
    losses = []
    for deco in (None, tj.compile, tj.compile(mode="max-autotune", fullgraph=True, dynamic=False)):
        m = _model()
        m.eval()
        opt = tj.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = tj.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss

        f = step if deco is None else deco(step)
        assert deco is None or isinstance(f, TracedFunction)
        losses.append([float(f(x, y)) for _ in range(3)])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-6)
    np.testing.assert_allclose(losses[2], losses[0], rtol=1e-6)


def test_compile_a_module():
    m = _model()
    cm = tj.compile(m)
    assert isinstance(cm, tj.nn.Module) and type(cm).__name__ == "OptimizedModule" and cm._orig_mod is m
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in m.state_dict()]
    assert [id(p) for p in cm.parameters()] == [id(p) for p in m.parameters()]
    x = tj.randn(4, 6)
    cm.eval()
    assert not m.training
    out = cm(x)
    np.testing.assert_allclose(out.detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    out.square().sum().backward()
    g = m[0].weight.grad.numpy().copy()
    m.zero_grad()
    m(x).square().sum().backward()
    np.testing.assert_allclose(g, m[0].weight.grad.numpy(), rtol=1e-5)
    cm.train()              # dropout on again: the guard retraces, draws differ from eval's numbers
    assert not np.allclose(cm(x).detach().numpy(), out.detach().numpy())
    assert tj.compile(m, disable=True) is m


def test_compile_matches_pytorchs_state_dict_names():
    torch = pytest.importorskip("torch")
    ours, theirs = tj.compile(tj.nn.Linear(2, 3)), torch.compile(torch.nn.Linear(2, 3))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    with pytest.raises(RuntimeError, match="expected a callable or an nn.Module"):
        tj.compile(3)
