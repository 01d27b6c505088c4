"""batch_norm, one registry op: values against a float64 numpy reference, gradients by gradcheck (first and
second order), traced = eager over training steps (running statistics included), the traced kernels it makes,
and against PyTorch (functional, in-place ReLU after it, errors)."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit.autograd import gradcheck, gradgradcheck
from tracejit.passes.fusion import fused_nodes


def _ref(x, w, b, mean=None, var=None, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if mean is None:
        mean, var = x.mean(axes), x.var(axes)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return y * w.reshape(shape) + b.reshape(shape), mean, var


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (3, 2, 4, 5)])
def test_forward_and_running_stats_against_float64_reference(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 3 + 1
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    rm, rv = np.zeros(shape[1]), np.ones(shape[1])
    trm, trv = tj.tensor(rm), tj.tensor(rv)
    y = F.batch_norm(tj.tensor(x), trm, trv, tj.tensor(w), tj.tensor(b), training=True, momentum=0.25)
    ry, mean, var = _ref(x, w, b)
    n = x.size // shape[1]
    np.testing.assert_allclose(y.numpy(), ry, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(trm.numpy(), 0.25 * mean, rtol=1e-12)
    np.testing.assert_allclose(trv.numpy(), 0.75 + 0.25 * var * n / (n - 1), rtol=1e-12)
    ye = F.batch_norm(tj.tensor(x), trm, trv, tj.tensor(w), tj.tensor(b), training=False)
    np.testing.assert_allclose(ye.numpy(), _ref(x, w, b, trm.numpy(), trv.numpy())[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_gradcheck_float64(training, affine):
    rng = np.random.default_rng(1)
    x = tj.tensor(rng.standard_normal((3, 2, 3, 2)), requires_grad=True)
    w = tj.tensor(rng.standard_normal(2), requires_grad=True) if affine else None
    b = tj.tensor(rng.standard_normal(2), requires_grad=True) if affine else None
    rm, rv = tj.tensor(rng.standard_normal(2)), tj.tensor(rng.random(2) + 0.5)
    if training:
        f = lambda x, *wb: F.batch_norm(x, None, None, *wb, training=True) ** 2  # noqa: E731
    else:  # eval: the running statistics are differentiable inputs too
        rm.requires_grad_()
        rv.requires_grad_()
        f = lambda x, rm, rv, *wb: F.batch_norm(x, rm, rv, *wb, training=False) ** 2  # noqa: E731
    ins = (x,) + (() if training else (rm, rv)) + ((w, b) if affine else ())
    assert gradcheck(f, ins)
    assert gradgradcheck(f, ins)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,layout", [((6, 3), "C"), ((4, 3, 5), "C"), ((3, 2, 4, 5), "C"),
                                          ((3, 2, 4, 5), "channels_last")])
def test_eager_backward_op_equals_the_formula(dtype, shape, layout):
    """Eagerly, with no graph of the gradient, the training backward is one op (batch_norm_backward: a numba pass
    per channel); its gradients equal the VJP's formula (what a graph of the gradient and traced programs use)
    and the float64 reference's, for 2-D, 3-D and 4-D inputs (the kernel) and a channels_last one (the formula)."""
    from tracejit.ops.nn_ops import _bn_train_grads
    from tracejit.ops.registry import OPS, apply
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    if layout == "channels_last":
        x, g = (np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) for a in (x, g))
    C = shape[1]
    per = (1, C) + (1,) * (len(shape) - 2)
    mean = x.astype(np.float64).mean((0,) + tuple(range(2, len(shape))))
    var = x.astype(np.float64).var((0,) + tuple(range(2, len(shape))))
    invstd = (1 / np.sqrt(var + 1e-5)).reshape(per)
    scale = invstd * rng.standard_normal(C).reshape(per)
    args = [tj.tensor(a.astype(dtype)) for a in (g, x, mean.reshape(per), invstd, scale)]
    with tj.no_grad():
        op = [t.numpy() for t in apply(OPS["batch_norm_backward"], *args)]
        formula = [t.numpy() for t in _bn_train_grads(*args)]
    n = x.size // C
    axes = (0,) + tuple(range(2, len(shape)))
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    xhat = (x64 - mean.reshape(per)) * invstd
    sg, sgx = g64.sum(axes, keepdims=True), (g64 * xhat).sum(axes, keepdims=True)
    ref = [(g64 - sg / n - xhat * sgx / n) * scale, sgx, sg]
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for a, b, r in zip(op, formula, ref):
        assert a.dtype == dtype and a.shape == r.shape
        np.testing.assert_allclose(a, r, **tol)
        np.testing.assert_allclose(b, r, **tol)


def test_eager_backward_runs_the_kernel_once_and_a_graph_of_the_gradient_does_not(monkeypatch):
    """backward() runs batch_norm_backward's kernel (one call); with create_graph=True the VJP is the formula
    (differentiable again), and both give the same gradients."""
    from tracejit.kernels.cpu import norm
    calls = []
    kernel = norm.batch_norm_backward_channels
    monkeypatch.setattr(norm, "batch_norm_backward_channels", lambda *a: (calls.append(1), kernel(*a))[1])
    rng = np.random.default_rng(2)
    x0, w0 = rng.standard_normal((4, 3, 2, 5)), rng.standard_normal(3)
    grads = []
    for create_graph in (False, True):
        x, w = tj.tensor(x0, requires_grad=True), tj.tensor(w0, requires_grad=True)
        y = F.batch_norm(x, None, None, w, None, training=True)
        (gx, gw) = tj.autograd.grad((y * y).sum(), (x, w), create_graph=create_graph)
        grads.append((gx.detach().numpy(), gw.detach().numpy()))
        assert len(calls) == 1 and gx.requires_grad == create_graph
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_gradients_of_the_batch_statistics_outputs():
    # the op's mean and variance outputs are differentiable too (nothing in nn reads their gradient)
    from tracejit.ops.nn_ops import _native_batch_norm
    x = tj.tensor(np.random.default_rng(2).standard_normal((4, 3, 2)), requires_grad=True)
    w = tj.tensor(np.array([0.5, 2.0, -1.0]), requires_grad=True)

    def f(x, w):
        y, m, v = _native_batch_norm(x, w, None, training=True, eps=1e-5)
        return y.sum() * 0.0 + (y ** 3).sum() + (m * m).sum() + (v * 3.0).sum()
    assert gradcheck(f, (x, w))


def _net(lib, momentum=0.1):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=momentum), nn.ReLU(inplace=True),
                         nn.Flatten(), nn.Linear(4 * 36, 3), nn.BatchNorm1d(3, momentum=momentum))


@pytest.mark.parametrize("backend", ["numba", "interpreter"])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_traced_training_steps_equal_eager(backend, momentum):
    rng = np.random.default_rng(3)
    tj.manual_seed(0)
    nets = [_net(tj, momentum) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    steps = []
    for k, net in enumerate(nets):
        opt = tj.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, net=net, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        steps.append(tj.trace(step, backend=backend) if k else step)
    for _ in range(3):
        x, y = tj.tensor(rng.standard_normal((5, 2, 6, 6)).astype(np.float32)), tj.tensor(rng.integers(0, 3, 5))
        le, lt = steps[0](x, y), steps[1](x, y)
        np.testing.assert_allclose(lt.numpy(), le.numpy(), rtol=1e-5)
    for (k, a), (_, b) in zip(nets[0].state_dict().items(), nets[1].state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
    assert int(nets[1][1].num_batches_tracked) == 3
    for net in nets:      # eval: the running statistics
        net.eval()
    x = tj.tensor(rng.standard_normal((2, 2, 6, 6)).astype(np.float32))
    np.testing.assert_allclose(tj.trace(nets[1], backend=backend)(x).detach().numpy(), nets[0](x).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_traced_batch_norm_relu_is_one_row_kernel_each_way():
    bn = tj.nn.BatchNorm2d(4)
    x = tj.randn(8, 4, 5, 6, requires_grad=True)
    w = tj.randn(120, 3)

    def step(x):
        y = tj.relu(bn(x)).reshape(8, 120) @ w     # the gradient reaching BN comes from a product
        (y * y).sum().backward()
        return x.grad

    tf = tj.trace(step)
    gx = tf(x)
    x2 = x.detach().clone().requires_grad_()
    np.testing.assert_allclose(gx.numpy(), step(x2).numpy(), rtol=1e-4, atol=1e-5)
    g = tf.graph(x).entry.fwd_fn.graph
    rows = [n for n in fused_nodes(g) if n.attrs.get("rows") == ((8,), (4,), (5, 6))]
    bodies = [[b.op.name for b in n.attrs["body"].nodes] for n in rows]
    # forward: statistics, normalization and ReLU in one kernel; backward: both sums and the input gradient
    assert any({"mean", "var", "relu"} <= set(b) for b in bodies), bodies
    bwd = [n for n, b in zip(rows, bodies) if b.count("sum") >= 2 and "rsqrt" in b]
    assert len(bwd) == 1 and [o.shape for o in bwd[0].outputs].count((8, 4, 5, 6)) == 1, bodies
    assert len(rows) == 2 and not [n for n in g.nodes if n.op.name in ("batch_norm", "mean", "var", "sum")]


@pytest.fixture
def torch():       # a fixture, not a module-level importorskip: without torch only these tests skip
    return pytest.importorskip("torch")


@pytest.mark.parametrize("training", [True, False])
def test_functional_against_torch_with_inplace_relu(training, torch):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    rm, rv = rng.standard_normal(3).astype(np.float32), (rng.random(3) + 0.5).astype(np.float32)
    go = rng.standard_normal(x.shape).astype(np.float32)
    res = []
    for L in (tj, torch):
        xs = [L.tensor(a, requires_grad=True) for a in (x, w, b)]
        stats = [L.tensor(rm.copy()), L.tensor(rv.copy())]
        y = L.nn.functional.batch_norm(xs[0], *stats, xs[1], xs[2], training=training, momentum=0.2, eps=1e-3)
        assert y.grad_fn.name() == "NativeBatchNormBackward0"
        y = y.relu_()
        y.backward(L.tensor(go))
        res.append([y.detach().numpy()] + [t.grad.numpy() for t in xs] + [s.numpy() for s in stats])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_errors_as_torch(torch):
    x = tj.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(x, tj.zeros(4), tj.ones(4), training=False)
    with pytest.raises(RuntimeError, match="weight should contain 3 elements not 2"):
        F.batch_norm(x, None, None, tj.ones(2), training=True)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(tj.randn(1, 3), None, None, training=True)
    train = lambda x, rm, rv: F.batch_norm(x, rm, rv, training=True)  # noqa: E731
    for fn in (train, tj.trace(train)):     # the running statistics a training call updates are checked too
        with pytest.raises(RuntimeError, match="running_var should contain 3 elements not 4"):
            fn(x, tj.zeros(3), tj.ones(4))
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        torch.nn.functional.batch_norm(torch.randn(4, 3, 2), torch.zeros(4), torch.ones(4))
