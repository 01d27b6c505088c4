"""passes/transpose.py: (A @ B).T -> B.T @ A.T when the product is read by nothing else."""
import numpy as np

import tracejit as tj
from tracejit.backends.interpreter import run
from tracejit.passes.transpose import transposed_products


def _ops(g):
    return [n.op.name for n in g.nodes]


def test_rewrites_a_transposed_product_and_keeps_its_value():
    x, w = tj.randn(5, 3), tj.randn(3, 4)
    g = tj.make_graph(lambda x, w: (x @ w).t() * 2, x, w)
    h = transposed_products(g)
    assert "matmul" in _ops(h) and _ops(h).index("matmul") > _ops(h).index("permute")    # permutes feed it
    m = next(n for n in h.nodes if n.op.name == "matmul" and n.inputs[0].producer is not None)
    assert m.inputs[0].producer.op.name == "permute" and m.inputs[1].producer.op.name == "permute"
    want = (x.numpy() @ w.numpy()).T * 2
    (got,) = run(h, [x.numpy(), w.numpy()])
    assert np.allclose(got, want, rtol=1e-6) and got.shape == (4, 5)


def test_keeps_a_product_read_elsewhere():
    x, w = tj.randn(5, 3), tj.randn(3, 4)

    def read_twice(x, w):
        y = x @ w
        return y.t(), y.sum()

    def returned(x, w):
        y = x @ w
        return y.t(), y

    def read_twice_and_returned(x, w):       # 2 readers + 1 return: 3 uses (not 2 - 1)
        y = x @ w
        return y.t(), y * 3, y

    for f in (read_twice, returned, read_twice_and_returned):
        g = tj.make_graph(f, x, w)
        h = transposed_products(g)
        assert _ops(h) == _ops(g), (f.__name__, _ops(h))
        (m,) = [n for n in h.nodes if n.op.name == "matmul"]
        assert all(i.producer is None for i in m.inputs)       # still x @ w, not w.T @ x.T


def test_a_linear_weight_gradient_comes_out_laid_out_as_the_weight():
    lin = tj.nn.Linear(6, 4)
    x = tj.randn(8, 6)

    @tj.trace
    def step(x):
        lin(x).square().sum().backward()

    step(x)
    g = lin.weight.grad
    assert g.numpy().flags.c_contiguous
    lin2 = tj.nn.Linear(6, 4)
    lin2.load_state_dict(lin.state_dict())
    lin2(x).square().sum().backward()
    assert np.allclose(g.numpy(), lin2.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_transposed_operand_is_read_through_not_transposed_twice():
    # (g.T @ x).T, the weight gradient of x @ W.T: becomes x.T @ g (g itself, not a transpose of g.T)
    x, g = tj.randn(5, 3), tj.randn(5, 4)
    h = transposed_products(tj.make_graph(lambda x, g: (g.t() @ x).t() * 2, x, g))
    (m,) = [n for n in h.nodes if n.op.name == "matmul"]
    assert m.inputs[1] is h.inputs[1] and m.inputs[0].producer.op.name == "permute"
    assert not any(n.op.name == "permute" and n.inputs[0].producer is not None and
                   n.inputs[0].producer.op.name == "permute" for n in h.nodes)
    (got,) = run(h, [x.numpy(), g.numpy()])
    assert np.allclose(got, (g.numpy().T @ x.numpy()).T * 2, rtol=1e-6)


def test_batched_products_read_across_their_rows_are_computed_the_other_way_round():
    """A batched product read only through a permute whose last axis is the product's row axis: B.T @ A.T
    (the last two axes swapped) computed instead, then permuted the same way, or not at all where that is the whole
    permute; the values equal the interpreter's of the original graph. A permute that keeps the row axis inner
    stays as it is."""
    q, d = tj.randn(2, 3, 5, 4), tj.randn(2, 3, 5, 6)
    cases = [(lambda q, d: (q.transpose(-2, -1) @ d).transpose(-2, -1) * 2, True),       # attention's dK: whole
             (lambda q, d: (q.transpose(-2, -1) @ d).permute(0, 3, 1, 2) + 1, False),     # and a head split after
             (lambda q, d: (q.transpose(-2, -1) @ d).permute(1, 0, 2, 3) + 1, None)]      # rows stay inner
    for f, whole in cases:
        g = tj.make_graph(f, q, d)
        h = transposed_products(g)
        want = run(g, [q.numpy(), d.numpy()])[0]
        (got,) = run(h, [q.numpy(), d.numpy()])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        (m,) = [n for n in h.nodes if n.op.name == "matmul"]
        if whole is None:
            assert _ops(h) == _ops(g)
            continue
        assert m.inputs[1] is h.inputs[0], "q.T.T read as q itself"
        reader = [n for n in h.nodes if any(i is m.outputs[0] for i in n.inputs)]
        assert [n.op.name for n in reader] == (["mul"] if whole else ["permute"])


def test_the_attention_key_gradient_comes_out_laid_out_as_the_key():
    """Traced: the gradient of k in softmax(q @ k.T) @ v is computed in k's layout (B.T @ A.T), not as a view
    across the rows of a product, and equals the eager one."""
    rng = np.random.default_rng(0)
    q, k, v = (tj.tensor(rng.standard_normal((2, 3, 8, 4)).astype(np.float32), requires_grad=True)
               for _ in range(3))

    def f(q, k, v):
        return (((q @ k.transpose(-2, -1)).softmax(-1) @ v) ** 2).sum()

    @tj.trace
    def step(q, k, v):
        f(q, k, v).backward()

    step(q, k, v)
    got = k.grad.numpy()
    assert got.flags.c_contiguous
    q2, k2, v2 = (tj.tensor(t.detach().numpy(), requires_grad=True) for t in (q, k, v))
    f(q2, k2, v2).backward()
    np.testing.assert_allclose(got, k2.grad.numpy(), rtol=1e-5, atol=1e-6)
