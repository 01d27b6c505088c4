"""The per-call fast paths of @trace (issue 4, small tensors) keep every guard and every aliasing rule.

A call with positional CPU tensors builds its signature key without _flatten, and an entry that reads only
its arguments skips the guard check: a changed shape, dtype, requires_grad or grad mode must still retrace;
tensors the function reads without receiving them are still checked. Gradients handed to leaves are fresh
arrays (a backward program with small outputs allocates them for each call), and kernels never receive
read-only or broadcast operands (numba types those in Python: tens of microseconds per call).
"""
import numpy as np
import pytest

import tracejit


def _chain(x):
    for i in range(4):
        x = (x * 0.75 + 0.125).tanh() if i % 2 else (x * 0.5 - 0.25).abs()
    return x


def test_fast_signature_still_retraces_on_every_guard(backend):
    f = tracejit.trace(_chain, backend=backend)
    a = np.linspace(-1, 1, 6, dtype=np.float32)
    x = tracejit.tensor(a)
    f(x)
    f(x)
    assert f.cache_info()["traces"] == 1
    cases = [tracejit.tensor(a.astype(np.float64)), tracejit.tensor(a[:5].copy()),
             tracejit.tensor(a, requires_grad=True), tracejit.tensor(a.reshape(2, 3))]
    for i, t in enumerate(cases):
        np.testing.assert_allclose(f(t).detach().numpy(), _chain(t).detach().numpy(), rtol=1e-6)
        assert f.cache_info()["traces"] == 2 + i
        f(t)
        assert f.cache_info()["traces"] == 2 + i
    with tracejit.no_grad():
        y = f(cases[2])
    assert f.cache_info()["traces"] == 6 and y.grad_fn is None and not y.requires_grad
    y = f(cases[2])
    assert y.grad_fn is not None


def test_fast_path_still_checks_lifted_tensors(backend):
    w = tracejit.ones(4)
    f = tracejit.trace(lambda x: x * w, backend=backend)
    x = tracejit.ones(4)
    f(x)
    w.data = tracejit.ones(4, dtype=tracejit.float64)        # the global it reads changed dtype
    assert f(x).dtype == tracejit.float64
    assert f.cache_info()["traces"] == 2


def test_outer_backward_gradients_are_fresh_each_call(backend):
    f = tracejit.trace(_chain, backend=backend)
    x = tracejit.tensor(np.linspace(-1, 1, 8, dtype=np.float32), requires_grad=True)
    f(x).sum().backward()
    g1 = x.grad
    keep = g1.numpy().copy()
    x.grad = None
    f(x).sum().backward()
    g2 = x.grad
    np.testing.assert_array_equal(g1.numpy(), keep)           # the second call did not write into the first
    np.testing.assert_array_equal(g2.numpy(), keep)
    assert not np.shares_memory(g1.numpy(), g2.numpy())
    f(x).sum().backward()                                     # accumulates into the existing .grad
    np.testing.assert_allclose(x.grad.numpy(), 2 * keep, rtol=1e-6)
    np.testing.assert_array_equal(g1.numpy(), keep)
    xe = tracejit.tensor(np.linspace(-1, 1, 8, dtype=np.float32), requires_grad=True)
    _chain(xe).sum().backward()
    np.testing.assert_allclose(keep, xe.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_big_outer_gradients_reuse_memory_without_copies(monkeypatch):
    # the numba backend's backward program keeps its big outputs to write the next call's gradients into them;
    # the leaf's .grad takes such an array over (no copy) and the program never writes into one the user holds
    from tracejit._tensor import Tensor
    clones = []
    clone = Tensor.clone
    monkeypatch.setattr(Tensor, "clone", lambda self, *a, **k: clones.append(1) or clone(self, *a, **k))
    f = tracejit.trace(_chain, backend="numba")
    a = np.linspace(-1, 1, 1 << 17, dtype=np.float32)
    x = tracejit.tensor(a, requires_grad=True)
    f(x).sum().backward()
    first = id(x.grad._data)
    x.grad = None
    f(x).sum().backward()
    assert id(x.grad._data) == first and not clones            # the same memory, not copied
    g1, keep = x.grad, x.grad.numpy().copy()
    x.grad = None
    x.data = tracejit.tensor(a * 0.5)
    f(x).sum().backward()                                      # g1 still held: a fresh array for this call
    np.testing.assert_array_equal(g1.numpy(), keep)
    xe = tracejit.tensor(a * 0.5, requires_grad=True)
    _chain(xe).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.shares_memory(g1.numpy(), x.grad.numpy()) and not clones


def test_grad_inside_is_one_program_and_equals_eager(backend):
    def g(x):
        (d,) = tracejit.autograd.grad(_chain(x).sum(), x)
        return d
    f = tracejit.trace(g, backend=backend)
    x = tracejit.tensor(np.linspace(-1, 1, 16, dtype=np.float32), requires_grad=True)
    r1 = f(x)
    keep = r1.numpy().copy()
    r2 = f(x)
    np.testing.assert_allclose(r1.numpy(), g(x).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(r1.numpy(), keep)
    assert not np.shares_memory(r1.numpy(), r2.numpy())
    (entry,) = [e for es in f.cache.values() for e in es]
    assert entry.bwd_fn is None                              # forward and backward in one compiled program
    if backend == "numba":
        for _, _, disp in entry.fwd_fn.kernels:              # sum's broadcast ones reach it as a C array
            for sig in disp.signatures:
                assert all(t.layout == "C" and t.mutable for t in sig if hasattr(t, "layout")), sig


def test_outer_backward_kernels_get_plain_arrays():
    f = tracejit.trace(_chain, backend="numba")
    x = tracejit.tensor(np.linspace(-1, 1, 8, dtype=np.float32), requires_grad=True)
    f(x).sum().backward()
    f(x).mean().backward()
    (entry,) = [e for es in f.cache.values() for e in es]
    for _, _, disp in entry.bwd_fn.kernels:                  # the incoming gradient is a broadcast: copied
        for sig in disp.signatures:
            assert all(t.layout == "C" and t.mutable for t in sig if hasattr(t, "layout")), sig
