"""The autograd graph as PyTorch shows it: grad_fn classes, next_functions, node hooks, custom Functions."""
import pytest

import tracejit
import tracejit.nn.functional as TF

# Snippets whose whole graph (node class, name(), and next_functions: each edge's graph and output_nr, down to
# the leaves) equals PyTorch's. Composites that PyTorch runs as one kernel and tracejit builds from registry ops
# (mse_loss, stack, split, ...: README, "The autograd graph as PyTorch shows it") have a different graph.
SNIPPETS = [
    "x * 2", "x * w", "x + 2", "x + w", "x - 1", "x / 2", "-x", "x ** 2", "x ** x", "x.pow(2)", "2 ** x",
    "x.T", "x.view(6)", "x.reshape(6)", "x[0]", "x[:, 1:]", "x.exp()", "x.relu()", "x.sum()", "x.sum(0)",
    "x.mean()", "x.mean(0)", "x.max()", "x.min()", "x.max(0)[0]", "x.min(1)[0]", "x.permute(1, 0)",
    "x.expand(4, 2, 3)", "x @ x.T", "x.mm(x.T)", "torch.matmul(x, x.T)", "x.sigmoid()",
    "x.tanh()", "torch.softmax(x, 1)", "torch.log_softmax(x, 1)", "x.clone()", "x.to(torch.float64)", "x.abs()",
    "x.sqrt()", "x.log1p()", "x.flatten()", "torch.where(x > 0, x, 0.)", "x.clamp(0, 1)", "x.clamp(min=0)",
    "F.cross_entropy(x, torch.tensor([0, 1]))", "F.nll_loss(x, torch.tensor([0, 1]))",
    "x.gather(1, torch.zeros(2, 1, dtype=torch.long))", "x.lerp(x, 0.5)", "x.amax(1)", "x.logsumexp(1)",
    "x.cumsum(1)", "x.flip(0)", "x.maximum(w)", "x.add(w, alpha=2)", "x.exp().mul_(2)", "x.exp().add_(1)",
    "x.sort()[0]", "x.topk(2)[0]", "x.var()", "x.std()", "x.norm()", "F.gelu(x)", "F.silu(x)", "x.prod()",
    "x.exp().exp()", "x.reciprocal()", "x.rsqrt()", "x.tril()", "x.erf()", "F.softplus(x)", "x.atan2(x)",
    "x.t()", "x.mT", "x.transpose(0, 1)", "x.unsqueeze(0)", "x[None]", "F.linear(x, W)", "3 * x", "2 + x",
    "3 * x ** 3 - x ** 2",
    # composites PyTorch records as one node (AddmmBackward0, with edges bias, input, TBackward0 of the weight)
    "F.linear(x, W, b)", "F.linear(x3, W, b)", "F.linear(w, W, b)", "F.linear(x, W, b[None])",
    "torch.addmm(b, x, W.t())", "torch.addmm(b, x, W.t(), beta=0.5, alpha=2)", "b.addmm(x, W.t(), beta=0)",
    "torch.nn.Linear(3, 4)(x3)",
    # eager layer_norm is PyTorch's one node (NativeLayerNormBackward0: edges input, weight, bias; without a weight
    # or bias PyTorch keeps a (None, 0) edge for it, tracejit none)
    "F.layer_norm(x, (3,), w, w)", "F.layer_norm(x3, (2, 3), x, x * 2)",
    "torch.nn.LayerNorm(3)(x3)",
    # recorded under PyTorch's name: 1 - x is rsub(x, 1) (no edge for the number), 2 / x is x.reciprocal() * 2,
    # square is pow(x, 2), bmm its own node, squeeze a new view even with no size-1 dim
    "1 - x", "torch.rsub(x, 1)", "1 - x.exp()", "2 / x", "1.5 / x.exp()", "x.square()",
    "torch.bmm(x3, x3.transpose(1, 2))", "torch.mv(x, w)", "x @ w", "torch.dot(w, x[0])", "x[1] @ x[0]",
    "torch.vdot(x[0], w)", "x.squeeze()", "x.squeeze(0)", "x.squeeze((0, 1))",
]


def _tree(fn):
    """(class name, name(), [(edge's tree or None, output_nr)]): the whole graph down to the leaves."""
    return (type(fn).__name__, fn.name(), [(_tree(f) if f is not None else None, nr) for f, nr in fn.next_functions])


def _graph(torch, F, snippet):
    x = (torch.ones(2, 3) * 1.5).requires_grad_()
    w = torch.ones(3)
    W = torch.ones(4, 3, requires_grad=True)
    b = torch.ones(4, requires_grad=True)
    x3 = torch.ones(5, 2, 3, requires_grad=True)
    return _tree(eval(snippet, {"torch": torch, "F": F, "x": x, "w": w, "W": W, "b": b, "x3": x3}).grad_fn)


@pytest.mark.parametrize("snippet", SNIPPETS)
def test_graph_as_torch(snippet):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    assert _graph(tracejit, TF, snippet) == _graph(torch, F, snippet)


def test_node_classes_and_edges():
    x = tracejit.ones(3, requires_grad=True)
    y = x * 2
    fn = y.grad_fn
    assert type(fn).__name__ == "MulBackward0" and fn.name() == "MulBackward0"
    assert type((x * 3).grad_fn) is type(fn)            # one class per name
    assert type(x.exp().grad_fn).__name__ == "ExpBackward0"
    (acc, nr), (none, nr2) = fn.next_functions           # unpacks: (None, 0) for the constant
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x and nr == 0
    assert (none, nr2) == (None, 0)
    assert acc.next_functions == ()
    assert x.pow(2).grad_fn.next_functions == ((acc, 0),)     # a Scalar exponent has no edge
    # an index tensor has no edge; the graph still runs
    g = x.gather(0, tracejit.tensor([2, 0]))
    assert len(g.grad_fn.next_functions) == 1
    g.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]


def test_node_hooks_and_metadata():
    x = tracejit.ones(3, requires_grad=True)
    y = x * 2
    seen = []
    y.grad_fn.metadata["tag"] = "scale"
    assert y.grad_fn.metadata == {"tag": "scale"}
    h1 = y.grad_fn.register_prehook(lambda go: seen.append(("pre", len(go))))
    h2 = y.grad_fn.register_hook(lambda gi, go: (seen.append(("post", len(gi), gi[1])), (gi[0] * 10, None))[1])
    y.sum().backward(retain_graph=True)
    assert seen == [("pre", 1), ("post", 2, None)]
    assert x.grad.tolist() == [20.0] * 3
    h1.remove()
    h2.remove()
    x.grad = None
    y.sum().backward()
    assert x.grad.tolist() == [2.0] * 3 and len(seen) == 2
    z = x * 2
    z.grad_fn.register_hook(lambda gi, go: (gi[0],))
    with pytest.raises(RuntimeError, match="incorrect number of values"):
        z.sum().backward()


class Exp(tracejit.autograd.Function):
    @staticmethod
    def forward(ctx, i, k):
        r = i.exp() * k
        ctx.save_for_backward(r)
        ctx.k = k
        return r

    @staticmethod
    def backward(ctx, g):
        (r,) = ctx.saved_tensors
        return g * r, None


def test_custom_function_node():
    x = tracejit.ones(3, requires_grad=True)
    y = Exp.apply(x, 2.0)
    fn = y.grad_fn
    assert type(fn).__name__ == "ExpBackward" and fn.name() == "ExpBackward"
    assert type(Exp.apply(x, 1.0).grad_fn) is type(fn)
    (acc, nr), = fn.next_functions                      # tensor arguments only: no edge for k
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x and nr == 0
    assert fn.k == 2.0 and fn.needs_input_grad == (True, False)
    assert fn.saved_tensors[0] is not None
    y.sum().backward()
    assert x.grad.allclose(tracejit.ones(3).exp() * 2)


def test_custom_function_node_as_torch():
    torch = pytest.importorskip("torch")

    class TExp(torch.autograd.Function):
        forward = Exp.forward
        backward = Exp.backward

    xt = torch.ones(3, requires_grad=True)
    ft = TExp.apply(xt * 1, 2.0).grad_fn
    fj = Exp.apply(tracejit.ones(3, requires_grad=True) * 1, 2.0).grad_fn
    assert type(fj).__name__ == type(ft).__name__.replace("TExp", "Exp")
    assert [type(f).__name__ for f, _ in fj.next_functions] == [type(f).__name__ for f, _ in ft.next_functions]
    assert fj.needs_input_grad == ft.needs_input_grad


def test_compiled_function_node_and_explain_names():
    x = tracejit.ones(2, 3, requires_grad=True)
    f = tracejit.trace(lambda a: (a * a).sum())
    out = f(x)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    assert type(out.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    from tracejit.explain import eager_text
    text = eager_text([(x * 2).sum()])
    assert "SumBackward0" in text and "MulBackward0" in text and "AccumulateGrad" in text
