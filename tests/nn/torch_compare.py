"""Differential checks against PyTorch shared by the nn tests: the same function run by both libraries on the same
arrays, values and gradients compared; the same bad input raising the same exception class."""
import numpy as np
import pytest

import tracejit as tj


def torch_or_skip():
    return pytest.importorskip("torch")


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def both(fn, arrays, tol=1e-5, grad=None):
    """fn(lib, *tensors) run by torch and tracejit on the same arrays (float ones require grad; `grad`: only the
    positions listed): the outputs and the gradients of sum(out**2 * w) (w fixed random) are compared. Returns
    tracejit's output."""
    torch = torch_or_skip()
    res = []
    for lib in (torch, tj):
        xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f" and (grad is None or i in grad))
              for i, a in enumerate(arrays)]
        out = fn(lib, *xs)
        w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(arrays[0].dtype))
        if any(x.requires_grad for x in xs):
            (out * out * w).sum().backward()
        res.append((out, [x.grad.numpy() for x in xs if x.requires_grad]))
    (tout, tgrads), (jout, jgrads) = res
    assert tuple(jout.shape) == tuple(tout.shape)
    close(jout.detach().numpy(), tout.detach().numpy(), tol)
    assert len(jgrads) == len(tgrads)
    for a, b in zip(jgrads, tgrads):
        close(a, b, tol)
    return jout


def same_error(fn, *args, **kwargs):
    """fn(lib, *args, **kwargs) raises the same exception class in both libraries; returns tracejit's message."""
    torch = torch_or_skip()
    with pytest.raises(Exception) as want:
        fn(torch, *args, **kwargs)
    with pytest.raises(type(want.value)) as got:
        fn(tj, *args, **kwargs)
    return str(got.value)
