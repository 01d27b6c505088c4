"""torch.autograd.functional (vjp, jvp, vhp, hvp, jacobian, hessian) against PyTorch's on the same float64 inputs:
single tensors and tuples in and out, results' shapes and nesting, create_graph (a gradient through the result),
strict mode's errors and v's checks."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)
A, B = RNG.standard_normal(3), RNG.standard_normal((2, 3))


def two(lib):
    return lambda x, w: (lib.tanh(w @ x) * x.sum(), (x * x).sum())


def scalar(lib):
    return lambda x, w: (lib.tanh(w @ x) ** 2).sum() + (x ** 3).sum()


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)


def _run(name, fn, inputs, *rest, **kw):
    conv = lambda lib, xs: tuple(lib.tensor(x) for x in xs) if isinstance(xs, tuple) else lib.tensor(xs)  # noqa
    want = getattr(torch.autograd.functional, name)(fn(torch), conv(torch, inputs), *[conv(torch, r) for r in rest],
                                                    **kw)
    got = getattr(tj.autograd.functional, name)(fn(tj), conv(tj, inputs), *[conv(tj, r) for r in rest], **kw)
    _same(got, want)
    return got


@pytest.mark.parametrize("name,fn,inputs,v", [
    ("vjp", two, (A, B), (RNG.standard_normal(2), np.float64(0.7))),
    ("jvp", two, (A, B), (RNG.standard_normal(3), RNG.standard_normal((2, 3)))),
    ("vjp", lambda lib: lambda x: lib.sin(x) * x, A, RNG.standard_normal(3)),
    ("jvp", lambda lib: lambda x: lib.sin(x) * x, A, RNG.standard_normal(3)),
    ("vhp", scalar, (A, B), (RNG.standard_normal(3), RNG.standard_normal((2, 3)))),
    ("hvp", scalar, (A, B), (RNG.standard_normal(3), RNG.standard_normal((2, 3)))),
    ("vhp", lambda lib: lambda x: (lib.exp(x) * x).sum(), A, RNG.standard_normal(3)),
])
def test_products_equal_torch(name, fn, inputs, v):
    _run(name, fn, inputs, v)


@pytest.mark.parametrize("fn,inputs", [(two, (A, B)), (lambda lib: lambda x: lib.sin(x) * x, A),
                                       (lambda lib: lambda x: (lib.sigmoid(x), x.sum()), A),
                                       (lambda lib: lambda x, w: w @ x, (A, B))])
def test_jacobian_equals_torch(fn, inputs):
    _run("jacobian", fn, inputs)


@pytest.mark.parametrize("fn,inputs", [(scalar, (A, B)), (lambda lib: lambda x: (lib.exp(x) * x).sum(), A)])
def test_hessian_equals_torch(fn, inputs):
    _run("hessian", fn, inputs)


def test_create_graph_lets_a_gradient_through_the_result():
    res = {}
    for lib in (torch, tj):
        x = lib.tensor(A, requires_grad=True)
        _, g = lib.autograd.functional.vjp(lambda t: (t ** 3).sum(), x, create_graph=True)
        assert g.requires_grad
        g.sum().backward()                        # d/dx sum(3 x^2) = 6 x
        res[lib] = x.grad.numpy()
        _, h = lib.autograd.functional.vjp(lambda t: (t ** 3).sum(), x)
        assert not h.requires_grad
    np.testing.assert_allclose(res[tj], res[torch], rtol=1e-13)
    np.testing.assert_allclose(res[tj], 6 * A, rtol=1e-13)


def test_unused_inputs_get_zeros_and_strict_raises():
    f = lambda lib: lambda x, w: (x * 2).sum()                            # noqa: E731
    _run("vjp", f, (A, B))
    _run("jacobian", f, (A, B))
    for lib, err in ((torch, RuntimeError), (tj, RuntimeError)):
        with pytest.raises(err, match="independent of input 1"):
            lib.autograd.functional.vjp(f(lib), (lib.tensor(A), lib.tensor(B)), strict=True)
        with pytest.raises(err, match="does not require gradients"):
            lib.autograd.functional.vjp(lambda x: lib.ones(2), lib.tensor(A), lib.ones(2), strict=True)


def test_v_is_checked_as_torch_does():
    for lib in (torch, tj):
        with pytest.raises(RuntimeError, match="v can only be None"):
            lib.autograd.functional.vjp(lambda x: x * 2, lib.tensor(A))
        with pytest.raises(RuntimeError, match="invalid size"):
            lib.autograd.functional.vjp(lambda x: x * 2, lib.tensor(A), lib.ones(4, dtype=lib.float64))
        with pytest.raises(RuntimeError, match="single element"):
            lib.autograd.functional.hessian(lambda x: x * 2, lib.tensor(A))
