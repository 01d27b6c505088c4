"""torch.nn.functional activations with inplace= (positional too) and their modules, against PyTorch: values,
the input changed or not, gradients through an in-place activation of a non-leaf, traced = eager; selu, celu,
glu, hardshrink, softshrink; PyTorch's errors."""
import numpy as np
import pytest

import tracejit
import tracejit.nn as nn
import tracejit.nn.functional as F

CASES = [("relu", ()), ("relu6", ()), ("leaky_relu", (0.2,)), ("elu", (0.7,)), ("hardtanh", (-0.5, 0.8)),
         ("silu", ()), ("hardswish", ()), ("hardsigmoid", ()), ("mish", ()), ("selu", ()), ("celu", (0.6,))]
MODULES = [("ReLU", ()), ("ReLU6", ()), ("LeakyReLU", (0.2,)), ("ELU", (0.7,)), ("Hardtanh", (-0.5, 0.8)),
           ("SiLU", ()), ("Hardswish", ()), ("Hardsigmoid", ()), ("Mish", ()), ("SELU", ()), ("CELU", (0.6,))]


def _x():
    return np.random.default_rng(0).normal(0, 3, (4, 6)).astype(np.float32)


def _run(lib, name, args, inplace):
    x = lib.tensor(_x(), requires_grad=True)
    y = x * 1.0                                            # a non-leaf: in-place on it is allowed
    out = getattr(lib.nn.functional, name)(y, *args, inplace)     # inplace positionally, as PyTorch allows
    same = out is y
    (out * lib.arange(24, dtype=lib.float32).reshape(4, 6)).sum().backward()
    return out.detach().numpy(), same, x.grad.numpy(), y.detach().numpy()


@pytest.mark.parametrize("name,args", CASES)
@pytest.mark.parametrize("inplace", [False, True])
def test_functional_inplace_as_torch(name, args, inplace):
    torch = pytest.importorskip("torch")
    ours, theirs = _run(tracejit, name, args, inplace), _run(torch, name, args, inplace)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    assert ours[1] == theirs[1] == inplace                 # the result is the input itself when in place
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5, atol=1e-6)     # the input changed, or not


@pytest.mark.parametrize("name,args", MODULES)
def test_modules_honour_inplace(name, args):
    torch = pytest.importorskip("torch")
    for inplace in (False, True):
        res = []
        for lib in (tracejit, torch):
            m = getattr(lib.nn, name)(*args, inplace=inplace)
            x = lib.tensor(_x())
            res.append((m(x).numpy().copy(), x.numpy().copy(), repr(m)))
        np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-6)
        assert res[0][2] == res[1][2]


def test_inplace_activation_traced_equals_eager():
    net = nn.Sequential(nn.Linear(6, 5), nn.ReLU(inplace=True), nn.Linear(5, 4), nn.LeakyReLU(0.1, inplace=True),
                        nn.Linear(4, 3), nn.SELU(inplace=True))
    x = tracejit.tensor(_x())

    def loss(x):
        return (F.hardtanh(net(x), -0.5, 0.5, True) ** 2).sum()
    eager = loss(x)
    eager.backward()
    g = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    traced = tracejit.trace(loss)(x)
    traced.backward()
    np.testing.assert_allclose(traced.item(), eager.item(), rtol=1e-6)
    for a, p in zip(g, net.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,args", [("glu", (0,)), ("glu", (-1,)), ("hardshrink", (0.7,)),
                                       ("softshrink", (0.7,))])
def test_more_activations_as_torch(name, args):
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tracejit, torch):
        x = lib.tensor(_x(), requires_grad=True)
        y = getattr(lib.nn.functional, name)(x, *args)
        (y * y).sum().backward()
        res.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-5)


def test_errors_as_torch():
    x = tracejit.ones(3, 5)
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 5"):
        F.glu(x)
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(x, 1.0, -1.0)
    leaf = tracejit.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        F.selu(leaf, inplace=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        F.relu(leaf, True)


def test_leaky_relu_gradient_is_exact_in_float64():
    # the negative slope multiplies the gradient in its own dtype (a float32 mask rounded 0.1 before)
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, 2.0, -3.0, 0.0, -1e-300])
    a, b = tracejit.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.leaky_relu(a, 0.1).sum().backward()
    torch.nn.functional.leaky_relu(b, 0.1).sum().backward()
    assert a.grad.dtype == tracejit.float64
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
