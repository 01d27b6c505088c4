"""tracejit.jit: TorchScript's entry points (trace, script, the decorators and queries model code uses) compile with
tracejit's tracer: the same numbers as the eager model, PyTorch's state_dict names, guards instead of a frozen path."""
import numpy as np
import pytest

import tracejit as tj
from tracejit import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.drop = nn.Dropout(0.5)
        self.scale = 2.0

    def forward(self, x):
        if tj.jit.is_scripting():
            raise AssertionError("never scripting")
        y = self.drop(self.fc(x)) * self.scale
        return y if self.training else y.relu()

    @tj.jit.ignore
    def helper(self):
        return "kept"

    @tj.jit.export
    def other(self, x):
        return x + 1


@pytest.mark.parametrize("how", ["trace", "script"])
def test_jit_module_runs_traced_with_the_modules_state(how):
    net = Net().eval()
    x = tj.randn(5, 4)
    m = tj.jit.trace(net, x) if how == "trace" else tj.jit.script(net)
    np.testing.assert_allclose(m(x).detach().numpy(), net(x).detach().numpy(), rtol=1e-6)
    assert list(m.state_dict()) == list(net.state_dict()) == ["fc.weight", "fc.bias"]
    assert m.scale == 2.0 and m.helper() == "kept" and m.other(1) == 2
    assert [p is q for p, q in zip(m.parameters(), net.parameters())] == [True, True]
    # train() reaches the module: the traced call is guarded on it (it retraces, it does not replay eval's path)
    m.train()
    assert net.training and net.drop.training
    tj.manual_seed(0)
    a = m(x)
    tj.manual_seed(0)
    b = net(x)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    assert (a.detach().numpy() < 0).any()               # training's path: no relu
    # its weights are the module's: an optimizer step on one is seen by the other
    with tj.no_grad():
        net.fc.bias.add_(1.0)
    m.eval()
    np.testing.assert_allclose(m(x).detach().numpy(), net(x).detach().numpy(), rtol=1e-6)


def test_jit_function_and_helpers():
    def f(a, b):
        return (a * b).sum(1) if tj.jit.is_tracing() else None
    g = tj.jit.trace(f, (tj.ones(2, 3), tj.ones(2, 3)))
    np.testing.assert_allclose(g(tj.ones(2, 3), tj.full((2, 3), 2.0)).detach().numpy(), [6.0, 6.0])
    assert not tj.jit.is_tracing() and not tj.jit.is_scripting()
    assert tj.jit.annotate(list, [1]) == [1]
    assert tj.jit.wait(tj.jit.fork(lambda v: v * 3, 2)) == 6
    assert tj.jit.script(f) is not f
    with pytest.raises(NotImplementedError, match="state_dict"):
        tj.jit.save(g, "x.pt")
    with pytest.raises(RuntimeError, match="function or an nn.Module"):
        tj.jit.script(3)
