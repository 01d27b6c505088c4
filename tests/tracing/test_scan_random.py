"""Loop bodies of varied structure on random data: a traced scan (numba: residuals chosen by the partition,
invariants and accumulations moved out of the loop; interpreter; checkpointing) computes the eager Python loop's
loss and gradients, and so does its second derivative. The bodies mix matrix products with captured weights
(transposed or not), elementwise ops of the carries and x_t, accumulating carries (products and sums of per-step
values) and outputs of several kinds."""
import numpy as np
import pytest

import tracejit


def _body(seed):
    """combine_fn((h, acc, tot), x) built from the seed's choices (over seeds 0-7 each choice takes each value)."""
    act = [lambda v: v.tanh(), lambda v: v.sigmoid(), lambda v: (-v.abs()).exp(), lambda v: v * 0.5][seed % 4]
    transposed, with_bias, acc_kind, y_kind = seed % 2 == 1, seed // 2 % 2 == 1, seed // 2 % 3, seed % 3

    def make(w, b):
        def step(carry, x):
            h, acc, tot = carry
            z = x + h @ (w.t() if transposed else w)
            if with_bias:
                z = z + b
            h2 = act(z)
            if acc_kind == 0:
                acc = acc + z.t() @ x            # products of per-step values the loops stack (z is no y: kept)
            elif acc_kind == 1:
                acc = acc + (h2 * x).t() @ h2
            else:
                acc = acc * 0.9 + h2.t() @ h2     # an accumulation that is not a plain sum
            tot = tot + h2.sum(0)
            y = (h2, h * x) if y_kind == 0 else (h2.sum(-1),) if y_kind == 1 else (h2 + acc.sum(),)
            return (h2, acc, tot), y
        return step
    return make


def _loss(make, w, b, h0, xs, **kw):
    acc0 = tracejit.zeros(4, 4, dtype=h0.dtype)
    tot0 = tracejit.zeros(4, dtype=h0.dtype)
    (h, acc, tot), ys = tracejit.scan(make(w, b), (h0, acc0, tot0), xs, **kw)
    return h.sum() + (acc ** 2).sum() * 0.01 + tot.sum() + sum((y * y).sum() for y in ys)


@pytest.mark.parametrize("seed", range(8))
def test_random_loop_bodies_traced_equal_eager(seed):
    rng = np.random.default_rng(100 + seed)
    make = _body(seed)
    reverse, checkpoint = seed // 4 == 1, seed % 3 == 2
    ins = [tracejit.tensor(rng.standard_normal(s) * 0.5, requires_grad=True)
           for s in ((4, 4), (4,), (3, 4), (5, 3, 4))]

    def f(w, b, h0, xs):
        return _loss(make, w, b, h0, xs, reverse=reverse, checkpoint=checkpoint)
    def grads(loss, wrt, **kw):         # (b is unused by a body without the bias: zeros)
        return [np.zeros(t.shape) if g is None else g for g, t in
                zip(tracejit.autograd.grad(loss, wrt, allow_unused=True, **kw), wrt)]
    le = f(*ins)
    ge = grads(le, ins)
    for backend in ("numba", "interpreter"):
        twins = [t.detach().clone().requires_grad_() for t in ins]
        lt = tracejit.trace(f, backend=backend)(*twins)
        gt = grads(lt, twins)
        np.testing.assert_allclose(lt.item(), le.item(), rtol=1e-11)
        for a, c in zip(ge, gt):
            np.testing.assert_allclose(np.asarray(c), np.asarray(a), rtol=1e-9, atol=1e-11)
    # the loop as one op eagerly, and its second derivative, equal the Python loop's
    lo = _loss(make, *ins, as_op=True, reverse=reverse, checkpoint=checkpoint)
    go = tracejit.autograd.grad(lo, ins[2:], create_graph=True)
    gl = tracejit.autograd.grad(f(*ins), ins[2:], create_graph=True)
    (h_eager,) = tracejit.autograd.grad(sum((g * g).sum() for g in gl), ins[0])
    (h_op,) = tracejit.autograd.grad(sum((g * g).sum() for g in go), ins[0])
    np.testing.assert_allclose(h_op.numpy(), h_eager.numpy(), rtol=1e-9, atol=1e-11)
