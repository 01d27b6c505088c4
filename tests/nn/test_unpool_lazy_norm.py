"""MaxUnpool1d/2d/3d, the lazy batch and instance norms, and error types, each against PyTorch 2.13: values,
gradients, argument handling and the exception (type and message) for the same bad input."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _both(fn):
    """fn(lib) run by torch and tracejit: (torch's result, tracejit's)."""
    return fn(torch), fn(tj)


def _same_raise(fn):
    """fn(lib) raises the same exception type with the same message in both libraries."""
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(type(want.value)) as got:
        fn(tj)
    assert str(got.value) == str(want.value)


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- max unpooling

POOLS = [  # (pool name, unpool name, input shape, kernel, stride, padding)
    ("max_pool1d", "max_unpool1d", (2, 3, 9), 3, 2, 1),
    ("max_pool1d", "max_unpool1d", (3, 8), 2, None, 0),
    ("max_pool2d", "max_unpool2d", (2, 3, 6, 7), 2, None, 0),
    ("max_pool2d", "max_unpool2d", (3, 7, 5), (3, 2), (2, 1), (1, 0)),
    ("max_pool3d", "max_unpool3d", (2, 2, 4, 5, 6), 2, None, 0),
    ("max_pool3d", "max_unpool3d", (2, 5, 4, 6), (3, 2, 2), (2, 2, 1), 1),
]


@pytest.mark.parametrize("pool,unpool,shape,k,s,p", POOLS)
def test_max_unpool_values_and_grad(pool, unpool, shape, k, s, p):
    a = RNG.standard_normal(shape)
    w = RNG.standard_normal(shape)
    res = []
    for lib in (torch, tj):
        F = lib.nn.functional
        x = lib.tensor(a, requires_grad=True)
        y, idx = getattr(F, pool)(x, k, s, p, return_indices=True)
        assert idx.dtype == lib.int64
        v = y.detach().requires_grad_()
        out = getattr(F, unpool)(v, idx, k, s, p, output_size=shape[-int(pool[-2]):])
        ((out * lib.tensor(w[tuple(slice(0, n) for n in out.shape)])) ** 2).sum().backward()
        res.append((out.detach().numpy(), v.grad.numpy()))
    (tout, tgrad), (jout, jgrad) = res
    assert jout.shape == tout.shape
    _close(jout, tout)
    _close(jgrad, tgrad)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_modules_with_output_size(nd):
    shape = (2, 3) + (7,) * nd
    a = RNG.standard_normal(shape)
    res = []
    for lib in (torch, tj):
        nn = lib.nn
        pool = getattr(nn, f"MaxPool{nd}d")(2, return_indices=True)
        unpool = getattr(nn, f"MaxUnpool{nd}d")(2)
        x = lib.tensor(a)
        y, idx = pool(x)
        v = y.requires_grad_()
        out = unpool(v, idx, output_size=x.shape)
        out.sum().backward()
        res.append((repr(unpool), unpool.kernel_size, unpool.stride, unpool.padding, out.detach().numpy(),
                    v.grad.numpy()))
    for t, j in zip(*res):
        if isinstance(t, np.ndarray):
            _close(j, t)
        else:
            assert j == t
    assert res[1][4].shape == shape


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_of_adaptive_max_pool(nd):
    shape = (2, 3) + (5,) * nd
    a = RNG.standard_normal(shape)
    t, j = _both(lambda lib: getattr(lib.nn.functional, f"max_unpool{nd}d")(
        *getattr(lib.nn.functional, f"adaptive_max_pool{nd}d")(lib.tensor(a), 3, return_indices=True),
        2, output_size=shape[2:]).numpy())
    _close(j, t)


def test_max_unpool_repeated_indices_grad():
    """Overlapping windows give one index twice: the gradient reads that position for both values."""
    a = np.array([[[0.0, 5.0, 1.0, 2.0]]])
    res = []
    for lib in (torch, tj):
        y, idx = lib.nn.functional.max_pool1d(lib.tensor(a), 3, 1, return_indices=True)
        v = y.requires_grad_()
        out = lib.nn.functional.max_unpool1d(v, idx, 3, 1)
        (out * lib.arange(4.0, dtype=lib.float64)).sum().backward()
        res.append((idx.numpy(), v.grad.numpy()))
    np.testing.assert_array_equal(res[1][0], res[0][0])
    _close(res[1][1], res[0][1])


def test_max_unpool_traced_equals_eager():
    a = RNG.standard_normal((2, 3, 6, 6))
    w = tj.tensor(RNG.standard_normal((2, 3, 6, 6)))

    def f(v, idx):
        return (tj.nn.functional.max_unpool2d(v, idx, 2) * w).sum()

    y, idx = tj.nn.functional.max_pool2d(tj.tensor(a), 2, return_indices=True)
    v = y.requires_grad_()
    loss = f(v, idx)
    loss.backward()
    want, wgrad = float(loss), v.grad.numpy().copy()
    step = tj.trace(lambda t, i: (lambda r: (r.backward(), r.detach())[1])(f(t, i)))
    for _ in range(2):
        v.grad = None
        _close(float(step(v, idx)), want, 1e-12)
        _close(v.grad.numpy(), wgrad, 1e-12)


def _long(lib, *shape, fill=0):
    return lib.full(shape, fill, dtype=lib.int64)


BAD_UNPOOL = {
    "int32 indices 2d": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), lib.zeros(1, 2, 2).int(), 1),
    "int32 indices 3d": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 2, 2, 2),
                                                                   lib.zeros(1, 2, 2, 2).int(), 1),
    "float indices": lambda lib: lib.nn.functional.max_unpool1d(lib.zeros(2, 2), lib.zeros(2, 2), 1),
    "2-d input to 2d": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(2, 2), _long(lib, 2, 2), 1),
    "5-d input to 2d": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 1, 1, 2, 2), _long(lib, 1, 1, 1, 2, 2),
                                                                  1),
    "1-d input to 1d": lambda lib: lib.nn.functional.max_unpool1d(lib.zeros(3), _long(lib, 3), 1),
    "3-d input to 3d": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(2, 2, 2), _long(lib, 2, 2, 2), 1),
    "indices shape": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 1), 1),
    "empty channel dim": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 0, 2), _long(lib, 1, 0, 2), 1),
    "empty 3d dim": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 2, 0, 2, 2), _long(lib, 1, 2, 0, 2, 2), 1),
    "empty 1d length": lambda lib: lib.nn.functional.max_unpool1d(lib.zeros(2, 2, 0), _long(lib, 2, 2, 0), 2),
    "index too large": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 2, fill=4), 1),
    "negative index": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 1, 2, 2), _long(lib, 1, 1, 2, 2, fill=-1),
                                                                 1),
    "index too large 1d": lambda lib: lib.nn.functional.max_unpool1d(lib.zeros(2, 3), _long(lib, 2, 3, fill=7), 2),
    "zero stride 3d": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 2, 2, 2), _long(lib, 1, 2, 2, 2), 1,
                                                                 stride=0),
    "negative stride 3d": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 2, 2, 2), _long(lib, 1, 2, 2, 2),
                                                                     (1, 2, 2), stride=(1, -2, 2)),
    "integer input": lambda lib: lib.nn.functional.max_unpool2d(_long(lib, 1, 2, 2), _long(lib, 1, 2, 2), 1),
    "output_size too large": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 2), 2,
                                                                        output_size=(6, 5)),
    "output_size too small 3d": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 1, 2, 2), _long(lib, 1, 1, 2, 2),
                                                                           (1, 2, 2), output_size=[1, 4, 2]),
    "output_size length": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 2), 2,
                                                                     output_size=(4,)),
    "negative output size": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 2), 1,
                                                                       padding=3),
    "input too small for kernel dims": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(2, 2), _long(lib, 2, 2), 1),
}


@pytest.mark.parametrize("case", list(BAD_UNPOOL))
def test_max_unpool_errors(case):
    _same_raise(BAD_UNPOOL[case])


@pytest.mark.parametrize("fn", [
    lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(0, 2, 2, 2), _long(lib, 0, 2, 2, 2), 2),
    lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 2, 2, 2), _long(lib, 1, 2, 2, 2), 1, padding=(1, 0, 0)),
    lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 2), 2, output_size=(1, 1, 5, 3)),
    lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(1, 2, 2, 2), _long(lib, 1, 2, 2, 2), 1, padding=-1),
])
def test_max_unpool_edge_shapes(fn):
    t, j = _both(fn)
    assert tuple(j.shape) == tuple(t.shape)
    _close(j.numpy(), t.numpy())
