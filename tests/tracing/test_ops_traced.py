"""Every registry op through both faces: the traced function (each backend) equals eager mode in values
and gradients. A new op must add a case here (the coverage test fails otherwise)."""
import numpy as np
import pytest

import tracejit as torch
import tracejit.nn.functional as F
from tracejit.ops.registry import OPS, call

P = lambda *s: ("pos", s)      # noqa: E731  strictly positive input
N = lambda *s: ("any", s)      # noqa: E731
U = lambda *s: ("unit", s)     # noqa: E731  inside (-1, 1)
I = lambda *s: ("int", s)      # noqa: E731

CASES = {
    "abs": (lambda x: x.abs(), [N(3, 4)]), "neg": (lambda x: -x, [N(3)]), "positive": (lambda x: +x * 1, [N(3)]),
    "exp": (torch.exp, [N(3, 2)]), "exp2": (torch.exp2, [N(3)]), "log": (torch.log, [P(3)]),
    "log2": (torch.log2, [P(3)]), "log10": (torch.log10, [P(3)]), "log1p": (torch.log1p, [P(3)]),
    "expm1": (torch.expm1, [N(3)]), "sqrt": (torch.sqrt, [P(3)]), "rsqrt": (torch.rsqrt, [P(3)]),
    "square": (torch.square, [N(3)]), "sin": (torch.sin, [N(3)]), "cos": (torch.cos, [N(3)]),
    "tan": (torch.tan, [U(3)]), "asin": (torch.asin, [U(3)]), "acos": (torch.acos, [U(3)]),
    "atan": (torch.atan, [N(3)]), "sinh": (torch.sinh, [N(3)]), "cosh": (torch.cosh, [N(3)]),
    "tanh": (torch.tanh, [N(3)]), "sigmoid": (torch.sigmoid, [N(3)]), "relu": (torch.relu, [N(4, 3)]),
    "erf": (torch.erf, [N(3)]), "reciprocal": (torch.reciprocal, [P(3)]), "sign": (lambda x: torch.sign(x) * x, [N(3)]),
    "floor": (lambda x: torch.floor(x) + x, [N(3)]), "ceil": (lambda x: torch.ceil(x) + x, [N(3)]),
    "trunc": (lambda x: torch.trunc(x) + x, [N(3)]), "frac": (torch.frac, [N(3)]),
    "round": (lambda x: torch.round(x) + x, [N(3)]), "silu": (F.silu, [N(3)]),
    "gelu": (lambda x: F.gelu(x) + F.gelu(x, approximate="tanh"), [N(5)]),
    "gelu_backward": (lambda g, x: call("gelu_backward", g, x) * call("gelu_backward", x, g, approximate="tanh"),
                      [N(5), N(5)]), "softplus": (F.softplus, [N(3)]),
    "elu": (F.elu, [N(4)]), "leaky_relu": (F.leaky_relu, [N(4)]), "clamp": (lambda x: x.clamp(-0.5, 0.5), [N(5)]),
    "cast": (lambda x: x.double().float() * x, [N(3)]), "logical_not": (lambda x: x * ~(x > 0), [N(4)]),
    "isnan": (lambda x: x * torch.isnan(x), [N(3)]), "isinf": (lambda x: x * torch.isinf(x), [N(3)]),
    "isfinite": (lambda x: x * torch.isfinite(x), [N(3)]),
    "bitwise_not": (lambda i: ~i, [I(3)]), "bitwise_and": (lambda i, j: i & j, [I(3), I(3)]),
    "bitwise_or": (lambda i, j: i | j, [I(3), I(3)]), "bitwise_xor": (lambda i, j: i ^ j, [I(3), I(3)]),
    "signbit": (lambda x: x * torch.signbit(x), [N(3)]),
    "add": (lambda x, y: x + y, [N(3, 1), N(4)]), "sub": (lambda x, y: x - 2 * y, [N(3, 4), N(4)]),
    "mul": (lambda x, y: x * y, [N(2, 3), N(3)]), "div": (lambda x, y: x / y, [N(3), P(2, 3)]),
    "pow": (lambda x, y: x ** y + x ** 2 + 2 ** y, [P(3), N(3)]), "maximum": (torch.maximum, [N(3), N(2, 3)]),
    "minimum": (torch.minimum, [N(3), N(3)]), "fmax": (torch.fmax, [N(3), N(3)]), "fmin": (torch.fmin, [N(3), N(3)]),
    "remainder": (torch.remainder, [N(4), P(4)]), "fmod": (torch.fmod, [N(4), P(4)]),
    "floor_divide": (lambda x, y: torch.floor_divide(x, y) + x, [N(4), P(4)]), "atan2": (torch.atan2, [N(3), N(3)]),
    "eq": (lambda x, y: x * (x == y), [N(3), N(3)]), "ne": (lambda x, y: x * (x != y), [N(3), N(3)]),
    "lt": (lambda x, y: x * (x < y), [N(3), N(3)]), "le": (lambda x, y: x * (x <= y), [N(3), N(3)]),
    "gt": (lambda x, y: x * (x > y), [N(3), N(3)]), "ge": (lambda x, y: x * (x >= y), [N(3), N(3)]),
    "logical_and": (lambda x, y: x * ((x > 0) & (y > 0)), [N(3), N(3)]),
    "logical_or": (lambda x, y: x * ((x > 0) | (y > 0)), [N(3), N(3)]),
    "logical_xor": (lambda x, y: x * ((x > 0) ^ (y > 0)), [N(3), N(3)]),
    "where": (lambda x, y: torch.where(x > 0, x, y), [N(3, 2), N(2)]),
    "lerp": (lambda x, y, w: torch.lerp(x, y, w), [N(3), N(3), U(3)]),
    "sum": (lambda x: x.sum(1) + x.sum(), [N(3, 4)]), "mean": (lambda x: x.mean((0, 2), keepdim=True), [N(2, 3, 4)]),
    "amax": (lambda x: x.amax(1), [N(3, 4)]), "amin": (lambda x: x.amin(0), [N(3, 4)]),
    "all": (lambda x: x * (x > -10).all(), [N(3)]), "any": (lambda x: x * (x > 10).any(), [N(3)]),
    "prod": (lambda x: x.prod(1), [N(3, 4)]), "var": (lambda x: x.var(1), [N(3, 4)]),
    "std": (lambda x: x.std(0, correction=0), [N(3, 4)]), "logsumexp": (lambda x: x.logsumexp(1), [N(3, 4)]),
    "vector_norm": (lambda x: x.norm() + torch.vector_norm(x, 3, 1).sum(), [N(3, 4)]),
    "argmax": (lambda x: x.sum(1) * x.argmax(1), [N(3, 4)]), "argmin": (lambda x: x.sum(1) * x.argmin(1), [N(3, 4)]),
    "max_dim": (lambda x: x.max(1).values, [N(3, 4)]), "min_dim": (lambda x: x.min(0).values, [N(3, 4)]),
    "sort": (lambda x: x.sort(1).values * torch.arange(4.0), [N(3, 4)]),
    "topk": (lambda x: x.topk(2, 1).values, [N(3, 4)]), "cumsum": (lambda x: x.cumsum(1), [N(3, 4)]),
    "cumprod": (lambda x: x.cumprod(0), [P(3, 4)]),
    "reshape": (lambda x: x.t().reshape(12) * torch.arange(12.0), [N(3, 4)]),
    "view": (lambda x: x.view(4, 3) * torch.arange(3.0), [N(3, 4)]),
    "permute": (lambda x: x.permute(2, 0, 1) * torch.arange(4.0).reshape(4, 1, 1), [N(2, 3, 4)]),
    "expand": (lambda x: x.expand(3, 4) * torch.arange(12.0).reshape(3, 4), [N(1, 4)]),
    "clone": (lambda x: x.clone() * 2, [N(3)]), "contiguous": (lambda x: x.t().contiguous() * 2, [N(2, 3)]),
    "cat": (lambda x, y: torch.cat([x, y, x], 1) * torch.arange(8.0), [N(2, 3), N(2, 2)]),
    "flip": (lambda x: x.flip(1) * torch.arange(4.0), [N(3, 4)]),
    "roll": (lambda x: x.roll(1, 0) * torch.arange(3.0).reshape(3, 1), [N(3, 4)]),
    "tril": (torch.tril, [N(3, 3)]), "triu": (lambda x: torch.triu(x, 1), [N(3, 3)]),
    "slice": (lambda x: x[1:, ::2] * 3, [N(3, 4)]),
    "index": (lambda x: x[torch.tensor([2, 0, 2])] * 2, [N(3, 4)]),
    "index_backward": (lambda x: torch.autograd.grad((x[torch.tensor([1, 1])] ** 2).sum(), x, create_graph=True)[0],
                       [N(3, 2)]),
    "index_put": (lambda x, v: torch.index_put(x, (torch.tensor([0, 2]),), v) * 2, [N(3, 4), N(4)]),
    "gather": (lambda x: torch.gather(x, 1, torch.tensor([[0, 0], [1, 3], [2, 1]])), [N(3, 4)]),
    "scatter": (lambda x, s: torch.scatter_add(x, 1, torch.tensor([[0, 0], [1, 3], [2, 1]]), s), [N(3, 4), N(3, 2)]),
    "matmul": (lambda a, b: a @ b, [N(2, 3, 4), N(4, 5)]),
    "einsum": (lambda a, b: torch.einsum("bij,jk->bik", a, b), [N(2, 3, 4), N(4, 5)]),
    "mv": (lambda a, v: torch.mv(a, v) + a @ v.exp(), [N(3, 4), N(4)]),
    "erfinv": (lambda x: torch.erfinv(x) * 2, [U(3, 4)]),
    "lgamma": (lambda x: torch.lgamma(x) + torch.lgamma(-x), [P(3, 4)]),
    "digamma": (lambda x: torch.digamma(x) + torch.digamma(-x), [P(3, 4)]),
    "polygamma": (lambda x: torch.polygamma(1, x) + torch.polygamma(2, x) * torch.polygamma(3, -x), [P(3, 4)]),
    "scatter_reduce": (lambda x, s: torch.scatter_reduce(x, 1, torch.tensor([[0, 0], [1, 3], [2, 1]]), s, "amax",
                                                         include_self=False), [N(3, 4), N(3, 2)]),
    "cummax": (lambda x: torch.cummax(x, 1).values * 2, [N(3, 4)]), "cummin": (lambda x: x.cummin(0).values, [N(3, 4)]),
    "logcumsumexp": (lambda x: torch.logcumsumexp(x, 1), [N(3, 4)]), "mode": (lambda x: x.mode(1).values, [I(3, 6)]),
    "searchsorted": (lambda s, v: torch.searchsorted(s.sort().values, v) * 2, [N(5), N(3, 4)]),
    "histc": (lambda x: torch.histc(x, 5, -1.0, 1.0) + torch.histc(x, 5), [N(4, 5)]),
    "linalg_inv": (lambda a: torch.linalg.inv(a + 3 * torch.eye(3)), [N(2, 3, 3)]),
    "linalg_solve": (lambda a, b: torch.linalg.solve(a + 3 * torch.eye(3), b), [N(3, 3), N(3, 2)]),
    "linalg_det": (lambda a: torch.linalg.det(a) * 2, [N(2, 3, 3)]),
    "linalg_slogdet": (lambda a: torch.linalg.slogdet(a).logabsdet, [N(3, 3)]),
    "linalg_cholesky": (lambda a: torch.linalg.cholesky(a @ a.mT + torch.eye(3)), [N(3, 3)]),
    "linalg_qr": (lambda a: torch.linalg.qr(a).R.abs(), [N(4, 3)]),
    "linalg_eigh": (lambda a: torch.linalg.eigh(a + a.mT).eigenvalues, [N(3, 3)]),
    "linalg_svd": (lambda a: torch.linalg.svd(a, full_matrices=False).S, [N(4, 3)]),
    "linalg_pinv": (lambda a: torch.linalg.pinv(a), [N(3, 2)]),
    # (3 * a: a 1-norm above 1/2, so the squarings the op chooses when it runs are part of the case)
    "matrix_exp": (lambda a: torch.linalg.matrix_exp(3 * a), [N(2, 3, 3)]),
    "dot": (lambda a, b: torch.dot(a, b) * a + a @ b.exp(), [N(4), N(4)]),
    "addmm": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0) + torch.addmm(c, a, b, beta=0), [N(5), N(3, 4), N(4, 5)]),
    "softmax": (lambda x: torch.softmax(x, 1) * torch.arange(4.0), [N(3, 4)]),
    "log_softmax": (lambda x: torch.log_softmax(x, 0) * torch.arange(4.0), [N(3, 4)]),
    "binary_cross_entropy": (lambda x, t: F.binary_cross_entropy(x.sigmoid(), t.sigmoid(), reduction="none"),
                             [N(3, 4), N(3, 4)]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), [N(1, 2, 5, 5), N(3, 2, 3, 3)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [N(1, 2, 4, 4)]),
    "scaled_dot_product_attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                                     + F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(3, 3).triu() > 0),
                                     [N(2, 3, 4), N(2, 3, 4), N(2, 3, 2)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [N(1, 2, 4, 4)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 2), [N(1, 2, 4, 4)]),
    "nll_loss": (lambda x: F.nll_loss(torch.log_softmax(x, 1), torch.tensor([1, 0, 3, 3]), ignore_index=0,
                                      weight=torch.tensor([1.0, 0.5, 2.0, 1.5, 1.0], dtype=torch.float64)), [N(4, 5)]),
    "check_classes": (lambda i: F.one_hot(torch.remainder(i, 3), 3) * 2, [I(5)]),
    "check_index": (lambda x, i: torch.index_select(x, 0, torch.remainder(i, 3)) * 2, [N(3, 4), I(5)]),
    "check_unpool_index": (lambda x, i: F.max_unpool1d(x, torch.remainder(i, 10).reshape(1, 5), 2), [N(1, 5), I(5)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, torch.zeros(3), torch.ones(3), w, b, training=True) * x,
                   [N(4, 3, 2, 2), N(3), N(3)]),
    "to_memory_format": (lambda x: x.contiguous(memory_format=torch.channels_last) * x, [N(2, 3, 2, 2)]),
    # eager: the Python loop; traced: one scan node (its body and its backward's body compiled once)
    "scan": (lambda h, xs, w: _scan_sum(h, xs, w, False) + _scan_sum(h, xs, w.t(), True), [N(2, 3), N(4, 2, 3), N(3, 3)]),
    # (eager F.layer_norm runs the op; a trace of F.layer_norm records the composite: the op itself, traced here)
    "layer_norm": (lambda x, w, b: call("layer_norm", x, w, b, k=1, eps=1e-5)[0] * x
                   + call("layer_norm", x, None, None, k=2, eps=1e-5)[0], [N(4, 2, 3), N(3), N(3)]),
}
# ops reached only as the derivative of another op's VJP, or with random results
DERIVATIVE_ONLY = {"conv2d_backward_input", "conv2d_backward_weight", "max_pool2d_backward", "avg_pool2d_backward",
                   "adaptive_avg_pool2d_backward", "nll_loss_coef", "sdpa_backward", "layer_norm_backward",
                   "softmax_backward", "log_softmax_backward", "batch_norm_backward"}
RANDOM = {"rand", "randn", "randint", "bernoulli", "randperm", "multinomial"}
# collectives need an MPI job: tests/distributed/scripts/collectives.py runs each of them traced against numpy
COLLECTIVE = {"all_reduce_start", "broadcast_start", "all_gather_start", "reduce_scatter_start", "comm_wait"}


def _scan_sum(h, xs, w, reverse):
    c, ys = torch.scan(lambda c, x: (torch.tanh(c @ w + x), c * x.sigmoid()), h, xs, reverse=reverse)
    return c + ys.sum(0)


def _make(spec, rng):
    kind, shape = spec
    if kind == "int":
        return torch.tensor(rng.integers(0, 8, shape))
    a = rng.standard_normal(shape)
    if kind == "pos":
        a = np.abs(a) + 0.5
    elif kind == "unit":
        a = np.tanh(a) * 0.9
    return torch.tensor(a, requires_grad=True)


def test_every_registry_op_has_a_case():
    missing = set(OPS) - set(CASES) - DERIVATIVE_ONLY - RANDOM - COLLECTIVE
    assert not missing, f"add traced-vs-eager cases for: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_traced_equals_eager(name, backend):
    fn, specs = CASES[name]
    if name not in OPS:
        pytest.skip(f"{name} is not a registry op in this build")
    rng = np.random.default_rng(abs(hash(name)) % 2 ** 32)
    inputs = [_make(s, rng) for s in specs]
    twins = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    ye = fn(*inputs)
    yt = torch.trace(fn, backend=backend)(*twins)
    assert yt.dtype == ye.dtype and tuple(yt.shape) == tuple(ye.shape)
    np.testing.assert_allclose(yt.detach().numpy(), ye.detach().numpy(), rtol=1e-6, atol=1e-7)
    diff = [i for i, t in enumerate(inputs) if t.requires_grad]
    if ye.requires_grad and diff:
        ct = torch.tensor(rng.standard_normal(tuple(ye.shape)))
        ge = torch.autograd.grad(ye, [inputs[i] for i in diff], ct, allow_unused=True)
        gt = torch.autograd.grad(yt, [twins[i] for i in diff], ct, allow_unused=True)
        for a, b in zip(ge, gt):
            if a is None:
                assert b is None or not np.any(b.numpy())
            else:
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7)
