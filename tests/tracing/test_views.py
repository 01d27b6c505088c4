"""View semantics in compiled programs: every view op after every layout-changing op computes the same traced
as eagerly as in PyTorch (values, gradients, strides, and the same error where a view is illegal), and an
in-place update of a view lands in its base (and in the base's other views) in traced programs as eagerly."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")

# layout-changing ops, applied to a [2, 3, 4] non-leaf tensor (both libraries' tensors have these methods)
PRODUCERS = {
    "plain": lambda x: x,
    "transpose": lambda x: x.transpose(1, 2),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose_contiguous": lambda x: x.transpose(1, 2).contiguous(),
    "narrow": lambda x: x.narrow(2, 1, 2),
    "step_slice": lambda x: x[:, ::2],
    "select": lambda x: x[1],
    "expand": lambda x: x[:, :1].expand(2, 3, 4),
    "unsqueeze_transpose": lambda x: x.unsqueeze(1).transpose(0, 2),
    "elementwise_of_transpose": lambda x: x.transpose(0, 2) * 2,
    "clone_of_transpose": lambda x: x.transpose(1, 2).clone(),       # clone keeps the layout (preserve_format)
    "t_of_flat": lambda x: x.reshape(6, 4).t(),
}

CONSUMERS = {
    "view_flat": lambda y: y.view(-1),
    "view_merge_last": lambda y: y.view(*y.shape[:-2], -1),
    "view_split_last": lambda y: y.view(*y.shape[:-1], 1, y.shape[-1]),
    "reshape": lambda y: y.reshape(-1, y.shape[-1]),
    "flatten": lambda y: y.flatten(1),
    "expand": lambda y: y.unsqueeze(0).expand(2, *y.shape),
    "narrow": lambda y: y.narrow(-1, 1, 1),
    "unsqueeze": lambda y: y.unsqueeze(-1),
    "permute": lambda y: y.permute(*reversed(range(y.ndim))),
    "t": lambda y: y.reshape(y.shape[0], -1).t(),
    "transpose": lambda y: y.transpose(0, -1),
    "contiguous_view": lambda y: y.contiguous().view(-1),
    "transpose_contiguous_view": lambda y: y.transpose(0, 1).contiguous().view(y.shape[1], -1),
}


def _strides(t):
    # the stride of a size-1 dim means nothing, and numpy and PyTorch pick different ones
    return tuple(st if n != 1 else None for n, st in zip(t.shape, t.stride()))


def _run(lib, fns, x0, traced=None):
    """Each of `fns` (x, strides) -> tensor on one input; -> (outputs, x's gradient, strides) or the error."""
    x = lib.tensor(x0, requires_grad=True)
    strides = []

    def all_of(x):
        return tuple(fn(x * 1, strides) for fn in fns)
    try:
        ys = tj.trace(all_of, backend=traced)(x) if traced else all_of(x)
    except RuntimeError as e:
        return e
    loss = 0
    for y in ys:
        loss = loss + (y * lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)).astype(np.float32))).sum()
    loss.backward()
    return [y.detach().numpy() for y in ys], x.grad.numpy(), strides


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_view_after_layout_change(producer):
    x0 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7 - 1
    prod = PRODUCERS[producer]

    def case(cons):
        def fn(x, strides):
            y = prod(x)
            strides.append(_strides(y))
            z = cons(y)
            strides.append((_strides(z), z.is_contiguous()))
            return z * 1
        return fn
    legal = []
    for cname, cons in CONSUMERS.items():
        if isinstance(_run(torch, [case(cons)], x0), RuntimeError):
            # PyTorch refuses (a view across non-contiguous dims): so do both faces, with PyTorch's message
            for traced in (None, "interpreter"):
                err = _run(tj, [case(cons)], x0, traced)
                assert isinstance(err, RuntimeError) and "view size is not compatible" in str(err), (cname, traced)
        else:
            legal.append(cname)
    fns = [case(CONSUMERS[c]) for c in legal]
    ref, eager = _run(torch, fns, x0), _run(tj, fns, x0)
    # the layouts are the tracer's business: the reference interpreter runs the matrix (numba: tests below)
    traced = _run(tj, fns, x0, "interpreter")
    for got in (eager, traced):
        for c, a, b in zip(legal, got[0], ref[0]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=c)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-5)
        assert got[2] == ref[2]        # the tracer's strides are eager mode's and PyTorch's


# in-place updates through views of a non-leaf base b = x * 1 ([3, 4]); the function returns the base and
# another view of it read after the update (PyTorch regenerates such views; so does the tracer)
INPLACE = {
    "select_mul": lambda b: b[1].mul_(2),
    "narrow_add": lambda b: b.narrow(1, 1, 2).add_(b[:, :2] * 3),
    "transpose_mul": lambda b: b.t().mul_(torch_or_tj(b).arange(3.0)),
    "view_add": lambda b: b.view(-1).add_(1.5),
    "step_slice_zero": lambda b: b[:, ::2].zero_(),
    "chain_fill": lambda b: b.t()[1:3].fill_(0.25),
    "setitem_on_view": lambda b: b[1].__setitem__(slice(0, 2), 7.0),
    "view_of_view_mul": lambda b: b.view(2, 6)[:, 1:].view(2, 5).mul_(-1),
    "copy_into_row": lambda b: b[0].copy_(b[2] * 2),
    "twice": lambda b: (b[0].mul_(3), b[:, 1].add_(1)),
}


def torch_or_tj(t):
    return torch if isinstance(t, torch.Tensor) else tj


def _inplace_fn(update):
    def fn(x):
        b = x * 1
        other = b[:, 1:]            # made before the update, read after it
        update(b)
        return b * 1, other.sum(0) * 1
    return fn


def _grads(lib, fn, x0, wrap=lambda f: f):
    x = lib.tensor(x0, requires_grad=True)
    b, o = wrap(fn)(x)
    loss = (b * lib.tensor(np.linspace(0.5, 2, 12, dtype=np.float32).reshape(3, 4))).sum() + (o * o).sum()
    loss.backward()
    return b.detach().numpy(), o.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_on_views(name, backend):
    x0 = np.arange(12, dtype=np.float32).reshape(3, 4) / 5 - 1
    fn = _inplace_fn(INPLACE[name])
    ref = _grads(torch, fn, x0)
    eager = _grads(tj, fn, x0)
    traced = _grads(tj, fn, x0, lambda f: tj.trace(f, backend=backend))
    for r, e, t in zip(ref, eager, traced):
        np.testing.assert_allclose(e, r, rtol=1e-6, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(t, r, rtol=1e-6, atol=1e-6, err_msg=name)


def test_attention_head_merge_numba(backend):
    """The transformer's `(att @ v).transpose(1, 2).contiguous().view(b, t, c)`, and the split before it."""
    B, T, C, H = 2, 5, 8, 2
    x0 = np.random.default_rng(0).standard_normal((B, T, 3 * C)).astype(np.float32)

    def fn(lib, x):
        q, k, v = x.split(C, dim=2)
        q, k, v = [a.view(B, T, H, C // H).transpose(1, 2) for a in (q, k, v)]
        att = (q @ k.transpose(-2, -1)).softmax(-1)
        return (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    res = []
    for lib, wrap in ((torch, None), (tj, None), (tj, backend)):
        x = lib.tensor(x0, requires_grad=True)
        f = (lambda x: fn(lib, x)) if wrap is None else tj.trace(lambda x: fn(tj, x), backend=wrap)
        y = f(x)
        (y * y).sum().backward()
        res.append((y.detach().numpy(), x.grad.numpy()))
    for got in res[1:]:
        np.testing.assert_allclose(got[0], res[0][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], res[0][1], rtol=1e-5, atol=1e-5)


def test_inplace_on_view_of_argument_and_parameter_written_back():
    """A view of an argument (or a lifted parameter) updated in place inside a traced function updates the
    caller's tensor, as eagerly."""
    p = tj.zeros(3, 4)

    @tj.trace
    def f(x):
        x[:, 1].add_(1)
        p.t()[2].copy_(x[:, 1])
        return x.sum()

    x = tj.zeros(3, 4)
    for _ in range(2):
        f(x)
    ref = np.zeros((3, 4), np.float32)
    ref[:, 1] = 2
    np.testing.assert_array_equal(x.numpy(), ref)
    np.testing.assert_array_equal(p.numpy()[:, 2], ref[:, 1])


def test_inplace_on_expanded_view_is_refused_traced_as_eagerly():
    def f(x):
        y = (x * 1)[:1].expand(3, 4)
        y.mul_(2)
        return y
    x = tj.ones(3, 4)
    with pytest.raises(RuntimeError, match="read-only"):
        f(x)
    with pytest.raises(RuntimeError, match="read-only"):
        tj.trace(f)(x)


def test_view_of_noncontiguous_argument():
    """A traced function receiving a transposed tensor: its strides are part of the signature, so view()
    refuses it as eagerly, and the contiguous signature has its own program."""
    f = tj.trace(lambda x: x.view(-1) * 2)
    a = tj.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(f(a).numpy(), np.arange(6.0) * 2)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        f(a.t())
    g = tj.trace(lambda x: x.contiguous().view(-1) * 2)
    np.testing.assert_array_equal(g(a.t()).numpy(), np.arange(6.0).reshape(2, 3).T.reshape(-1) * 2)


def test_compiled_view_after_elided_contiguous_is_a_copy_not_an_error():
    """`.contiguous()` is a no-op on values, and passes may drop it: the compiled program's `view` node
    still computes the values (numpy's reshape copies where it cannot alias)."""
    from tracejit.ops.registry import OPS
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(0, 2, 1)
    out = OPS["view"].impl(a, shape=(2, 12))
    np.testing.assert_array_equal(out, np.ascontiguousarray(a).reshape(2, 12))
