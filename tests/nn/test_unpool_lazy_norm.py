"""MaxUnpool1d/2d/3d, the lazy batch and instance norms, and error types, each against PyTorch 2.13: values,
gradients, argument handling and the exception (type and message) for the same bad input."""
import copy

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
    "output_size too small 3d": lambda lib: lib.nn.functional.max_unpool3d(
        lib.zeros(1, 1, 2, 2), _long(lib, 1, 1, 2, 2), (1, 2, 2), output_size=[1, 4, 2]),
    "output_size length": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 2), 2,
                                                                     output_size=(4,)),
    "negative output size": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(1, 2, 2), _long(lib, 1, 2, 2), 1,
                                                                       padding=3),
    "input too small for kernel dims": lambda lib: lib.nn.functional.max_unpool3d(lib.zeros(2, 2), _long(lib, 2, 2), 1),
}


@pytest.mark.parametrize("case", list(BAD_UNPOOL))
def test_max_unpool_errors(case):
    _same_raise(BAD_UNPOOL[case])


@pytest.mark.parametrize("nd, bad", [(1, 4), (1, -1), (2, 16), (2, -3), (3, 64), (3, -1)])
@pytest.mark.parametrize("module", [False, True])
def test_max_unpool_invalid_index_raises_as_torch_when_traced(nd, bad, module):
    """An index outside the output plane raises torch's RuntimeError (same message) from the compiled program too,
    on any call (the check is a node of the graph, not a trace-time test): first a good call, then the bad one."""
    shape = (2, 1) + (2,) * nd

    def indices(lib, last):     # distinct in each plane, the last one `last`
        i = lib.arange(2 ** nd).repeat(2).reshape(shape)
        i.view(-1)[-1] = last
        return i
    with pytest.raises(RuntimeError) as want:
        getattr(torch.nn.functional, f"max_unpool{nd}d")(torch.ones(shape), indices(torch, bad), 2)
    unpool = getattr(tj.nn, f"MaxUnpool{nd}d")(2) if module else \
        (lambda v, i: getattr(tj.nn.functional, f"max_unpool{nd}d")(v, i, 2))
    x = tj.ones(shape, requires_grad=True)
    x.grad = tj.zeros(shape)            # (whether .grad is None is part of the signature)
    step = tj.trace(lambda v, i: (lambda r: (r.backward(), r.detach())[1])((unpool(v, i) * 2).sum()))
    good = indices(tj, 2 ** nd - 1)
    assert float(step(x, good)) == 2.0 * x.numel()
    for _ in range(2):
        with pytest.raises(RuntimeError) as got:
            step(x, indices(tj, bad))
        assert str(got.value) == str(want.value)
    assert float(step(x, good)) == 2.0 * x.numel() and step.cache_info()["traces"] == 1


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


# ----------------------------------------------------------------------------- lazy batch and instance norms

LAZY = [("LazyBatchNorm1d", (4, 3), {}), ("LazyBatchNorm1d", (4, 3, 5), {"affine": False}),
        ("LazyBatchNorm2d", (2, 3, 4, 4), {"bias": False}), ("LazyBatchNorm3d", (2, 3, 2, 2, 3), {"momentum": None}),
        ("LazyInstanceNorm1d", (2, 3, 5), {}), ("LazyInstanceNorm2d", (2, 3, 4, 4), {"affine": False}),
        ("LazyInstanceNorm3d", (2, 3, 2, 2, 3), {"track_running_stats": False}),
        ("LazyBatchNorm2d", (2, 3, 4, 4), {"track_running_stats": False, "affine": False})]


def _lazy_run(lib, name, shape, kw):
    """Builds the lazy module, records its state before and after two training calls and one eval call."""
    m = getattr(lib.nn, name)(dtype=lib.float64, **kw)
    before = (repr(m), sorted(m.state_dict()), [(n, type(b).__name__) for n, b in m.named_buffers()],
              [(n, type(p).__name__) for n, p in m.named_parameters()], m.has_uninitialized_params())
    x = lib.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
    outs = [m(x) for _ in range(2)]
    outs[-1].pow(2).sum().backward()
    m.eval()
    outs.append(m(x))
    state = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    return before, (type(m).__name__, repr(m), m.num_features), state, [o.detach().numpy() for o in outs], \
        x.grad.numpy()


@pytest.mark.parametrize("name,shape,kw", LAZY)
def test_lazy_norm_materializes_as_torch(name, shape, kw):
    t, j = _both(lambda lib: _lazy_run(lib, name, shape, kw))
    assert j[0] == t[0]
    assert j[1] == t[1]
    assert list(j[2]) == list(t[2])
    for k in t[2]:
        assert j[2][k].shape == t[2][k].shape
        _close(j[2][k], t[2][k], 1e-10)
    for a, b in zip(j[3], t[3]):
        _close(a, b, 1e-10)
    _close(j[4], t[4], 1e-10)


def test_lazy_norm_buffers_are_uninitialized_until_first_call():
    m = tj.nn.LazyBatchNorm2d()
    assert isinstance(m.running_mean, tj.nn.UninitializedBuffer)
    assert isinstance(m.running_var, tj.nn.parameter.UninitializedBuffer)
    assert isinstance(m.weight, tj.nn.UninitializedParameter)
    assert m.num_batches_tracked.item() == 0
    opt = tj.optim.SGD(m.parameters(), lr=0.1)
    m(tj.ones(2, 4, 3, 3)).sum().backward()
    opt.step()
    assert type(m) is tj.nn.BatchNorm2d and type(m.running_mean) is tj.Tensor
    assert tuple(m.weight.shape) == (4,) and m.weight is opt.param_groups[0]["params"][0]


@pytest.mark.parametrize("name", ["LazyBatchNorm1d", "LazyBatchNorm2d"])
def test_lazy_norm_load_state_dict(name):
    """Loading materializes the lazy tensors with the loaded shapes; num_features stays 0, as in PyTorch."""
    shape = (2, 3) + (2,) * int(name[-2])
    a = RNG.standard_normal(shape).astype(np.float32)
    res = []
    for lib in (torch, tj):
        src = getattr(lib.nn, name.replace("Lazy", ""))(3)
        src.running_mean.fill_(2.0)
        src.weight.data.fill_(3.0)
        m = getattr(lib.nn, name)()
        m.load_state_dict(src.state_dict())
        out = m(lib.tensor(a))
        res.append((type(m).__name__, m.num_features, {k: v.numpy() for k, v in m.state_dict().items()},
                    out.detach().numpy()))
    assert res[1][:2] == res[0][:2]
    for k in res[0][2]:
        _close(res[1][2][k], res[0][2][k])
    _close(res[1][3], res[0][3], 1e-5)


def test_instance_norm_num_features_mismatch():
    _same_raise(lambda lib: lib.nn.InstanceNorm2d(4, affine=True)(lib.ones(2, 3, 2, 2)))
    with pytest.warns(UserWarning, match="does not match num_features"):
        tj.nn.InstanceNorm1d(4)(tj.ones(3, 5))


def test_instance_norm_running_stats_traced_equals_eager():
    a = RNG.standard_normal((2, 3, 4, 5))
    eager, traced = tj.nn.InstanceNorm2d(3, track_running_stats=True), tj.nn.InstanceNorm2d(3, track_running_stats=True)
    step = tj.trace(lambda x: traced(x))
    for _ in range(3):
        want = eager(tj.tensor(a))
        _close(step(tj.tensor(a)).numpy(), want.numpy(), 1e-12)
    _close(traced.running_mean.numpy(), eager.running_mean.numpy(), 1e-12)
    _close(traced.running_var.numpy(), eager.running_var.numpy(), 1e-12)


# ----------------------------------------------------------------------------- errors as PyTorch's

ERRORS = {
    "adaptive_max_pool1d empty length": lambda lib: lib.nn.functional.adaptive_max_pool1d(lib.zeros(2, 3, 0), 2),
    "adaptive_max_pool2d empty height": lambda lib: lib.nn.functional.adaptive_max_pool2d(lib.zeros(2, 3, 0, 4), 2),
    "adaptive_max_pool2d empty channels": lambda lib: lib.nn.functional.adaptive_max_pool2d(lib.zeros(2, 0, 3, 4), 2),
    "adaptive_max_pool2d unbatched empty": lambda lib: lib.nn.functional.adaptive_max_pool2d(lib.zeros(3, 4, 0), 2),
    "adaptive_max_pool2d indices empty channels": lambda lib: lib.nn.functional.adaptive_max_pool2d(
        lib.zeros(2, 0, 3, 4), 2, return_indices=True),
    "adaptive_max_pool3d empty": lambda lib: lib.nn.AdaptiveMaxPool3d(2)(lib.zeros(2, 3, 2, 0, 4)),
    "uninitialized parameter shape": lambda lib: lib.nn.parameter.UninitializedParameter().shape,
    "uninitialized buffer shape": lambda lib: lib.nn.parameter.UninitializedBuffer().shape,
    "lazy weight shape": lambda lib: lib.nn.LazyLinear(3).weight.shape,
    "matrix_norm narrowing": lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3, dtype=lib.float64), dtype=lib.float32),
    "matrix_norm nuc narrowing": lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3, dtype=lib.float64), "nuc",
                                                                    dtype=lib.float32),
    "matrix_norm to half": lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3), 2, dtype=lib.float16),
    "matrix_norm integer dtype": lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3), dtype=lib.int64),
    "matrix_norm integer input": lambda lib: lib.linalg.matrix_norm(lib.ones(3, 3, dtype=lib.int64),
                                                                    dtype=lib.float64),
    "vector_norm narrowing": lambda lib: lib.linalg.vector_norm(lib.ones(3, dtype=lib.float64), dtype=lib.float32),
    "norm narrowing": lambda lib: lib.linalg.norm(lib.ones(3, 3, dtype=lib.float64), dim=(0, 1), dtype=lib.float32),
    "norm fro narrowing": lambda lib: lib.linalg.norm(lib.ones(3, 3, dtype=lib.float64), "fro", dtype=lib.float32),
    "norm three dims": lambda lib: lib.linalg.norm(lib.ones(2, 3, 4), dim=(0, 1, 2)),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_as_torch(case):
    _same_raise(ERRORS[case])


def test_uninitialized_use_is_still_value_error():
    with pytest.raises(ValueError, match="uninitialized parameter"):
        tj.nn.parameter.UninitializedParameter() + 1


@pytest.mark.parametrize("fn", [
    lambda lib: lib.linalg.matrix_norm(lib.arange(9.0).reshape(3, 3), dtype=lib.float64),
    lambda lib: lib.linalg.matrix_norm(lib.arange(9.0, dtype=lib.float16).reshape(3, 3), 1, dtype=lib.float32),
    lambda lib: lib.linalg.norm(lib.arange(24.0).reshape(2, 3, 4), dim=(0, 2), dtype=lib.float64),
    lambda lib: lib.linalg.vector_norm(lib.arange(4.0), 3, dtype=lib.float64),
])
def test_norm_widening_dtype(fn):
    t, j = _both(fn)
    assert str(j.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    _close(j.numpy(), t.numpy(), 1e-3)


# ----------------------------------------------------------------------------- uninitialized parameters and buffers

LAZY_TENSORS = {
    "parameter": lambda lib: lib.nn.parameter.UninitializedParameter(),
    "parameter float64 no grad": lambda lib: lib.nn.parameter.UninitializedParameter(False, dtype=lib.float64),
    "buffer": lambda lib: lib.nn.parameter.UninitializedBuffer(),
    "buffer int64": lambda lib: lib.nn.parameter.UninitializedBuffer(dtype=lib.int64),
    "LazyLinear weight": lambda lib: lib.nn.LazyLinear(3).weight,
    "LazyBatchNorm1d running_var": lambda lib: lib.nn.LazyBatchNorm1d().running_var,
}

# what torch answers about an uninitialized tensor (an empty 1-d tensor of its dtype), or the exception it raises
LAZY_QUERIES = {
    "size()": lambda u: tuple(u.size()), "size(0)": lambda u: u.size(0), "size(-1)": lambda u: u.size(-1),
    "size(1)": lambda u: u.size(1), "shape": lambda u: u.shape, "ndim": lambda u: u.ndim, "dim()": lambda u: u.dim(),
    "ndimension()": lambda u: u.ndimension(), "numel()": lambda u: u.numel(), "nelement()": lambda u: u.nelement(),
    "len": lambda u: len(u), "iter": lambda u: list(u), "repr": repr, "str": str, "format": lambda u: f"{u}",
    "dtype": lambda u: str(u.dtype).split(".")[-1], "device": lambda u: str(u.device),
    "is_floating_point": lambda u: u.is_floating_point(), "requires_grad": lambda u: u.requires_grad,
    "element_size": lambda u: u.element_size(), "is_contiguous": lambda u: u.is_contiguous(),
    "numpy": lambda u: u.numpy(), "tolist": lambda u: u.tolist(), "item": lambda u: u.item(),
    "add": lambda u: u + 1, "sum": lambda u: u.sum(), "share_memory_": lambda u: u.share_memory_(),
    "deepcopy": lambda u: (lambda c: (repr(c), str(c.dtype).split(".")[-1], c.requires_grad))(copy.deepcopy(u)),
}


def _answer(fn):
    try:
        return "=", fn()
    except Exception as e:      # noqa: BLE001  (the exception class is the answer compared)
        return "raises", type(e).__name__ if not isinstance(e, ValueError) else "ValueError"


@pytest.mark.parametrize("make", list(LAZY_TENSORS))
def test_uninitialized_tensors_answer_as_torch(make):
    """size() is (0,) and ndim 1, dtype, device and is_floating_point() answer; shape raises RuntimeError; numel(),
    dim(), values, ops and formatting raise ValueError; repr and str are <UninitializedParameter>; a parameter
    deep-copies to a new uninitialized one, a buffer does not (PyTorch 2.13's answers, query by query)."""
    for name, query in LAZY_QUERIES.items():
        want = _answer(lambda: query(LAZY_TENSORS[make](torch)))
        got = _answer(lambda: query(LAZY_TENSORS[make](tj)))
        assert got == want, (name, got, want)


def test_lazy_module_prints_and_deep_copies_as_torch():
    for name in ("LazyLinear", "LazyConv2d"):
        res = []
        for lib in (torch, tj):
            m = getattr(lib.nn, name)(3, **({"kernel_size": 2} if "Conv" in name else {}))
            c = copy.deepcopy(m)
            assert m.has_uninitialized_params() and c.has_uninitialized_params()
            x = lib.ones((2, 4) if "Linear" in name else (1, 2, 3, 3))
            out = c(x)
            res.append((str(m), str(c), [repr(p) for p in m.parameters()], tuple(out.shape),
                        [tuple(p.shape) for p in c.parameters()], m.has_uninitialized_params()))
        assert res[1] == res[0]
