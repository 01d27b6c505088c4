"""Every differentiable registry op passes gradcheck in float64 (analytic VJP vs central differences),
a representative subset passes gradgradcheck (the VJP rules are themselves differentiable), and
gradcheck itself catches wrong derivatives. Needs no torch."""
import math

import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F
from tracejit.autograd import Function, GradcheckError, gradcheck, gradgradcheck
from tracejit.ops.registry import OPS

_rng = np.random.default_rng(1234)


def N(*shape):
    return tj.tensor(_rng.standard_normal(shape), requires_grad=True)


def P(*shape):
    return tj.tensor(_rng.uniform(0.5, 2.0, shape), requires_grad=True)


_W4 = tj.tensor([0.5, 1.5, 1.0, 2.0], dtype=tj.float64)      # class weights (they get no gradient, as in PyTorch)


def U(*shape, low=-0.9, high=0.9):
    return tj.tensor(_rng.uniform(low, high, shape), requires_grad=True)


def I(*shape, high=3):  # noqa: E743
    return tj.tensor(_rng.integers(0, high, shape))


def C(values):
    return tj.tensor(np.asarray(values, np.float64), requires_grad=True)


def _scatter_index():
    return tj.tensor([[0, 3], [1, 2], [2, 0]])


def _scan_recurrence(h, xs, w, reverse):
    c, ys = tj.scan(lambda c, x: (tj.tanh(c @ w + x), c * x), h, xs, reverse=reverse, as_op=True)
    return c + ys.sum(0)


# op name -> (function, inputs[, gradcheck keyword arguments]); the function must exercise that op
CASES = {
    "abs": (lambda x: x.abs(), [N(2, 3)]),
    "neg": (lambda x: -x, [N(2, 3)]),
    "positive": (lambda x: tj.positive(x), [N(3)]),
    "exp": (lambda x: x.exp(), [N(2, 3)]),
    "exp2": (lambda x: x.exp2(), [N(3)]),
    "log": (lambda x: x.log(), [P(2, 3)]),
    "log2": (lambda x: x.log2(), [P(3)]),
    "log10": (lambda x: x.log10(), [P(3)]),
    "log1p": (lambda x: x.log1p(), [P(3)]),
    "expm1": (lambda x: x.expm1(), [N(3)]),
    "sqrt": (lambda x: x.sqrt(), [P(2, 3)]),
    "rsqrt": (lambda x: x.rsqrt(), [P(3)]),
    "square": (lambda x: x.square(), [N(3)]),
    "sin": (lambda x: x.sin(), [N(3)]),
    "cos": (lambda x: x.cos(), [N(3)]),
    "tan": (lambda x: x.tan(), [U(3)]),
    "asin": (lambda x: x.asin(), [U(3)]),
    "acos": (lambda x: x.acos(), [U(3)]),
    "atan": (lambda x: x.atan(), [N(3)]),
    "sinh": (lambda x: x.sinh(), [N(3)]),
    "cosh": (lambda x: x.cosh(), [N(3)]),
    "tanh": (lambda x: x.tanh(), [N(2, 3)]),
    "sigmoid": (lambda x: x.sigmoid(), [N(2, 3)]),
    "relu": (lambda x: x.relu(), [N(2, 3)]),
    "erf": (lambda x: x.erf(), [N(3)]),
    "reciprocal": (lambda x: x.reciprocal(), [P(3)]),
    "sign": (lambda x: x.sign() * 3, [N(3)]),
    "floor": (lambda x: (x * 3).floor(), [N(3)]),
    "ceil": (lambda x: (x * 3).ceil(), [N(3)]),
    "round": (lambda x: (x * 3).round() + (x * 30).round(decimals=1), [N(3)]),
    "trunc": (lambda x: (x * 3).trunc(), [N(3)]),
    "frac": (lambda x: (x * 3).frac(), [N(3)]),
    "silu": (lambda x: F.silu(x), [N(3)]),
    "gelu": (lambda x: F.gelu(x) + F.gelu(x * 2, approximate="tanh"), [N(4)]),
    "softplus": (lambda x: F.softplus(x) + F.softplus(x * 10, beta=2.0, threshold=5.0), [N(5)]),
    "elu": (lambda x: F.elu(x, alpha=0.7), [N(4)]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), [N(4)]),
    "clamp": (lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0.1), [N(6)]),
    "cast": (lambda x: x.float().double(), [N(3)], {"eps": 1e-2, "atol": 1e-4}),
    "add": (lambda x, y: x + y, [N(2, 3), N(3)]),
    "sub": (lambda x, y: tj.sub(x, y, alpha=2), [N(2, 3), N(2, 1)]),
    "mul": (lambda x, y: x * y, [N(2, 3), N(3)]),
    "div": (lambda x, y: x / y, [N(2, 3), P(3)]),
    "pow": (lambda x, y: x ** y + x ** 2.5 + 1.5 ** y, [P(2, 3), N(3)]),
    "maximum": (lambda x, y: tj.maximum(x, y), [N(2, 3), N(3)]),
    "minimum": (lambda x, y: tj.minimum(x, y), [N(2, 3), N(2, 3)]),
    "fmax": (lambda x, y: tj.fmax(x, y), [N(2, 3), N(3)]),
    "fmin": (lambda x, y: tj.fmin(x, y), [N(3), N(3)]),
    "remainder": (lambda x, y: tj.remainder(x * 5, y), [N(2, 3), P(3)]),
    "fmod": (lambda x, y: tj.fmod(x * 5, y), [N(2, 3), P(3)]),
    "floor_divide": (lambda x, y: tj.div(x * 5, y, rounding_mode="floor"), [N(3), P(3)]),
    "atan2": (lambda x, y: tj.atan2(x, y), [N(2, 3), N(3)]),
    "where": (lambda x, y: tj.where(x > 0, x, y) + tj.where(y > 0, 2.0, x), [N(2, 3), N(3)]),
    "lerp": (lambda x, y, w: tj.lerp(x, y, w) + tj.lerp(x, y, 0.3), [N(2, 3), N(3), U(2, 1)]),
    "binary_cross_entropy": (lambda x, t: F.binary_cross_entropy(x, t, reduction="none"),
                             [U(2, 3, low=0.05, high=0.95), U(2, 3, low=0.0, high=1.0)]),
    "sum": (lambda x: x.sum((0, 2)) + x.sum(1, keepdim=True).sum(), [N(2, 3, 2)]),
    "mean": (lambda x: x.mean(1) * x.mean(), [N(2, 3)]),
    "prod": (lambda x, z: x.prod(1).sum() + x.prod() + z.prod() + z.prod(0).sum(),
             [N(2, 3), C([[2.0, 0.0, 3.0], [0.0, 0.0, 1.0]])]),
    "amax": (lambda x: x.amax(1) + x.max(), [N(2, 3)]),
    "amin": (lambda x: x.amin((0, 1), keepdim=True) + x.min(), [N(2, 3)]),
    "max_dim": (lambda x: x.max(1).values + x.max(0, keepdim=True).values.sum(), [N(2, 3)]),
    "min_dim": (lambda x: x.min(-1, keepdim=True).values, [N(2, 3)]),
    "var": (lambda x: x.var(1) + x.var(correction=0) + x.var(0, correction=2, keepdim=True).sum(), [N(3, 4)]),
    "std": (lambda x: x.std(1) + x.std(unbiased=False), [N(3, 4)]),
    "logsumexp": (lambda x: x.logsumexp(1) + tj.logsumexp(x, (0, 1)), [N(2, 3)]),
    "vector_norm": (lambda x: x.norm() + x.norm(1, dim=1) + x.norm(float("inf"), dim=0).sum() + x.norm(3, 1)
                    + x.norm(0.5) + x.norm(float("-inf")), [N(2, 3)]),
    "cumsum": (lambda x: x.cumsum(1), [N(2, 3)]),
    "cumprod": (lambda x, z: x.cumprod(1).sum() + z.cumprod(-1), [N(2, 3), C([[1.5, 0.0, 2.0, 0.0, 3.0],
                                                                              [0.0, 2.0, 3.0, -1.0, 0.5]])]),
    "sort": (lambda x: x.sort(1).values * tj.arange(3.0) + x.sort(0, descending=True).values, [N(2, 3)]),
    "topk": (lambda x: x.topk(2, dim=1).values * tj.arange(2.0), [N(2, 3)]),
    "softmax": (lambda x: x.softmax(1) * tj.arange(3.0), [N(2, 3)]),
    "scaled_dot_product_attention": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                                     + F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.7),
                                     [N(2, 3, 2), N(2, 4, 2), N(2, 4, 3), N(3, 4)]),
    "log_softmax": (lambda x: x.log_softmax(0) * tj.arange(3.0), [N(2, 3)]),
    # the scan op run eagerly (as_op): a tanh recurrence reading a captured weight, both directions
    "scan": (lambda h, xs, w: _scan_recurrence(h, xs, w, False) + _scan_recurrence(h, xs, w, True),
             [N(2, 3), N(4, 2, 3), N(3, 3)]),
    "reshape": (lambda x: x.t().reshape(-1) * tj.arange(6.0), [N(2, 3)]),
    "view": (lambda x: x.view(3, 2) * tj.arange(2.0), [N(2, 3)]),
    "permute": (lambda x: x.permute(2, 0, 1) * tj.arange(3.0), [N(2, 3, 2)]),
    "expand": (lambda x: x.expand(3, 2, 3) * tj.arange(3.0), [N(2, 1)]),
    "clone": (lambda x: x.clone(), [N(3)]),
    "contiguous": (lambda x: x.t().contiguous(), [N(2, 3)]),
    "cat": (lambda x, y: tj.cat([x, y, x], 1), [N(2, 3), N(2, 1)]),
    "flip": (lambda x: x.flip((0, 1)) * tj.arange(3.0), [N(2, 3)]),
    "roll": (lambda x: x.roll(1, 1) * tj.arange(3.0) + x.roll(2) * 2, [N(2, 3)]),
    "tril": (lambda x: x.tril(-1), [N(3, 3)]),
    "triu": (lambda x: x.triu(1), [N(3, 4)]),
    "slice": (lambda x: x[1, ::2] + x[:, None, 1:3].sum(), [N(3, 4)]),
    "index": (lambda x: x[tj.tensor([0, 2, 0])] * 2 + x[x > 0].sum(), [N(3, 2)]),
    "index_put": (lambda x, v: x.index_put((tj.tensor([0, 2, 0]),), v, accumulate=True)
                  + x.index_put((tj.tensor([1]),), v), [N(3, 2), N(2)]),
    "gather": (lambda x: x.gather(1, tj.tensor([[0, 0, 2], [1, 2, 1]])), [N(2, 3)]),
    "scatter": (lambda x, s: x.scatter(1, _scatter_index(), s) + x.scatter_add(1, _scatter_index(), s * 2),
                [N(3, 4), N(3, 2)]),
    "scatter_reduce": (lambda x, s: x.scatter_reduce(1, _scatter_index(), s, "amax", include_self=False)
                       + x.scatter_reduce(1, _scatter_index(), s, "mean") * x, [N(3, 4), N(3, 2)]),
    "cummax": (lambda x: x.cummax(1).values * tj.arange(4.0), [N(3, 4)]),
    "cummin": (lambda x: x.cummin(0).values * tj.arange(4.0), [N(3, 4)]),
    "logcumsumexp": (lambda x: x.logcumsumexp(1) * tj.arange(4.0), [N(3, 4)]),
    "mode": (lambda x: x.mode(1).values + x.mode(0, keepdim=True).values.sum(), [N(3, 4)]),   # (distinct values)
    "matmul": (lambda a, b, v: a @ b + (a @ v).unsqueeze(-1), [N(2, 2, 3), N(3, 2), N(3)]),
    "einsum": (lambda a, b: tj.einsum("bij,jk->bik", a, b) + tj.einsum("...ij->...j", a).unsqueeze(1)
               + tj.einsum("ii,bji->bj", b, a).unsqueeze(-1), [N(2, 2, 3), N(3, 3)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1), [N(1, 2, 4, 4), N(3, 2, 3, 3), N(3)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [N(1, 2, 4, 4)]),
    "to_memory_format": (lambda x: x.contiguous(memory_format=tj.channels_last) * x, [N(2, 3, 2, 2)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True) ** 2, [N(3, 2, 2, 3), N(2), N(2)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (3,), w, b) ** 2 + F.layer_norm(x, (2, 3)) * x,
                   [N(2, 2, 3), N(3), N(3)]),
    "addmm": (lambda c, a, b: tj.addmm(c, a, b, beta=0.5, alpha=2.0) ** 2, [N(3), N(2, 4), N(4, 3)]),
    "mv": (lambda a, v: tj.mv(a, v) ** 2, [N(3, 4), N(4)]),
    "erfinv": (lambda x: x.erfinv(), [U(3, 2)]),
    # the gamma family: positive arguments and negative non-integers (U(-0.9, -0.1) - 2 lies between two poles)
    "lgamma": (lambda x, y: x.lgamma() + (y - 2).lgamma(), [P(3, 2), U(3, 2, low=-0.9, high=-0.1)]),
    "digamma": (lambda x, y: x.digamma() + (y - 2).digamma(), [P(3, 2), U(3, 2, low=-0.9, high=-0.1)]),
    "polygamma": (lambda x, y: tj.polygamma(1, x) + tj.polygamma(2, y - 2) + x.polygamma(3),
                  [P(3, 2), U(3, 2, low=-0.9, high=-0.1)]),
    # decompositions (tests/ops/test_linalg_decompositions.py checks more shapes and modes): symmetric inputs where
    # the op reads one triangle, squared eigen/singular vectors (their signs are arbitrary)
    "linalg_inv": (lambda a: tj.linalg.inv(a), [C(_rng.standard_normal((2, 3, 3)) + 2 * np.eye(3))]),
    "linalg_solve": (lambda a, b: tj.linalg.solve(a, b), [C(_rng.standard_normal((3, 3)) + 2 * np.eye(3)), N(3, 2)]),
    "linalg_det": (lambda a: tj.linalg.det(a), [N(2, 3, 3)]),
    "linalg_slogdet": (lambda a: tj.linalg.slogdet(a).logabsdet, [N(3, 3)]),
    "linalg_cholesky": (lambda a: tj.linalg.cholesky(a @ a.mT + 3 * tj.eye(3, dtype=tj.float64)), [N(3, 3)]),
    "linalg_qr": (lambda a: (lambda r: (r.Q, r.R))(tj.linalg.qr(a)), [N(4, 3)]),
    "linalg_eigh": (lambda a: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(tj.linalg.eigh(a + a.mT)), [N(3, 3)]),
    "linalg_svd": (lambda a: (lambda r: (r.U ** 2, r.S, r.Vh ** 2))(tj.linalg.svd(a, full_matrices=False)),
                   [N(4, 3)]),
    "linalg_pinv": (lambda a: tj.linalg.pinv(a), [N(3, 2)]),
    "matrix_exp": (lambda a: tj.linalg.matrix_exp(2 * a), [N(2, 3, 3)]),
    "dot": (lambda a, b: tj.dot(a, b) ** 2, [N(4), N(4)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, padding=1), [N(1, 2, 4, 4)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [N(1, 2, 5, 4)]),
    "nll_loss": (lambda x: F.nll_loss(x, tj.tensor([1, 0, 2, 3, 1]), weight=_W4, ignore_index=3), [N(5, 4)]),
}

# composed functions (no op of their own) worth checking: losses and the composite shape/linalg ops
COMPOSED = {
    "cross_entropy": (lambda x: F.cross_entropy(x, tj.tensor([1, 0, 2])), [N(3, 4)]),
    "cross_entropy_weighted_smooth": (lambda x: F.cross_entropy(x, tj.tensor([1, 0, 2]), weight=_W4,
                                                                label_smoothing=0.2, ignore_index=0), [N(3, 4)]),
    "cross_entropy_probs": (lambda x, t: F.cross_entropy(x, t.softmax(1)), [N(3, 4), N(3, 4)]),
    "nll_loss_sum": (lambda x: F.nll_loss(x, tj.tensor([1, 0, 2]), reduction="sum"), [N(3, 4)]),
    "nll_loss_none_nd": (lambda x: F.nll_loss(x, tj.tensor([[1, 0], [2, 2]]), reduction="none"), [N(2, 3, 2)]),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), [N(2, 3), N(2, 3)]),
    "l1_loss": (lambda x, y: F.l1_loss(x, y), [N(2, 3), N(2, 3)]),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x * 2, y, beta=0.5), [N(2, 3), N(2, 3)]),
    "bce_with_logits": (lambda x, t, p: F.binary_cross_entropy_with_logits(x, t, pos_weight=p),
                        [N(2, 3), U(2, 3, low=0.0, high=1.0), P(3)]),
    "setitem": (lambda x, v: _setitem(x, v), [N(3, 4), N(4)]),
    "view_inplace": (lambda x, w: _view_inplace(x, w), [N(3, 4), N(2)]),
    "stack_split": (lambda x, y: sum(t.sum() * (k + 1) for k, t in enumerate(tj.stack([x, y], 1).split(1, 0))),
                    [N(3, 2), N(3, 2)]),
    "diag": (lambda x, v: x.diag() + tj.diag(v).sum(0), [N(3, 3), N(3)]),
    "take_along_dim": (lambda x: tj.take_along_dim(x, x.argsort(1), 1) * tj.arange(3.0), [N(2, 3)]),
    "index_add": (lambda x, s: x.index_add(0, tj.tensor([2, 0, 2]), s, alpha=2.0), [N(3, 2), N(3, 2)]),
    "masked_fill": (lambda x, v: x.masked_fill(x > 0, v), [N(3, 4), C(1.5)]),
    "outer_inner_dot": (lambda a, b: tj.outer(a, b).sum(0) + tj.inner(a, b) + tj.dot(a, b), [N(3), N(3)]),
    "normalize": (lambda x: F.normalize(x, dim=1), [N(2, 3)]),
    "hardswish_mish": (lambda x: F.hardswish(x * 4) + F.mish(x), [N(5)]),
    "xlogy": (lambda x, y: tj.xlogy(x, y), [N(3), P(3)]),
}


def _view_inplace(x, w):
    y = x * 1
    y[1:, ::2].mul_(w)
    y.view(-1)[0].add_(w[0])
    return y


def _setitem(x, v):
    y = x * 1
    y[1] = v
    y[:, 0] = y[:, 0] * 3
    return y


ALL = {**CASES, **COMPOSED}


def _unpack(entry):
    fn, inputs = entry[0], entry[1]
    kw = entry[2] if len(entry) > 2 else {}
    return fn, inputs, kw


@pytest.mark.parametrize("name", sorted(ALL))
def test_gradcheck(name):
    fn, inputs, kw = _unpack(ALL[name])
    assert gradcheck(fn, inputs, **kw)


# the derivative-only ops (backward ops whose own VJPs make second derivatives) run under gradgradcheck
DERIVATIVE_ONLY = {"index_backward": "index", "conv2d_backward_input": "conv2d",
                   "conv2d_backward_weight": "conv2d", "max_pool2d_backward": "max_pool2d",
                   "avg_pool2d_backward": "avg_pool2d", "adaptive_avg_pool2d_backward": "adaptive_avg_pool2d",
                   "nll_loss_coef": "nll_loss", "gelu_backward": "gelu"}

GRADGRAD = ["mul", "exp", "tanh", "sigmoid", "pow", "matmul", "softmax", "log_softmax", "sum", "mean", "logsumexp",
            "slice", "index", "gather", "div", "cumprod", "var", "vector_norm", "prod", "einsum", "binary_cross_entropy",
            "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "where", "scatter", "gelu", "std", "nll_loss",
            "scaled_dot_product_attention", "batch_norm", "layer_norm", "addmm", "mv", "dot", "scan",
            "matrix_exp"]
GRADGRAD_COMPOSED = ["cross_entropy", "setitem", "index_add", "view_inplace"]
# second derivatives at exact zeros of cumprod/prod are not exact in tracejit (first derivatives are):
# gradgradcheck those on zero-free inputs
GRADGRAD_INPUTS = {"cumprod": lambda: [N(2, 3), N(2, 5)], "prod": lambda: [N(2, 3), N(2, 3)]}


@pytest.mark.parametrize("name", GRADGRAD + GRADGRAD_COMPOSED)
def test_gradgradcheck(name):
    fn, inputs, kw = _unpack(ALL[name])
    if name in GRADGRAD_INPUTS:
        inputs = GRADGRAD_INPUTS[name]()
    assert gradgradcheck(fn, inputs, **kw)


def test_nll_loss_weight_has_no_derivative():
    x, w = N(3, 4), P(4)
    loss = F.nll_loss(x, tj.tensor([1, 0, 2]), weight=w)
    with pytest.raises(RuntimeError, match="derivative for 'weight' is not implemented"):
        loss.backward()


def test_every_differentiable_op_is_gradchecked():
    differentiable = {n for n, op in OPS.items() if op.vjp is not None}
    missing = differentiable - set(CASES) - set(DERIVATIVE_ONLY)
    assert not missing, f"add gradcheck cases for: {sorted(missing)}"
    assert set(DERIVATIVE_ONLY.values()) <= set(GRADGRAD)


# ----------------------------------------------------------------------------- gradcheck checks itself

class _WrongSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x          # should be 2 * x


class _FirstOrderOnlySquare(Function):
    """Right first derivative, but computed from detached values: its second derivative is wrong (0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x.detach()


class _RightSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x


def test_gradcheck_detects_a_wrong_derivative():
    x = N(2, 3)
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(_WrongSquare.apply, (x,))
    assert gradcheck(_WrongSquare.apply, (x,), raise_exception=False) is False
    assert gradcheck(_RightSquare.apply, (x,))


def test_gradgradcheck_detects_a_wrong_second_derivative():
    x = N(3)
    assert gradcheck(_FirstOrderOnlySquare.apply, (x,))
    assert gradgradcheck(_FirstOrderOnlySquare.apply, (x,), raise_exception=False) is False
    assert gradgradcheck(_RightSquare.apply, (x,))


def test_gradcheck_detects_a_missing_derivative():
    # an output that should depend on x but whose graph was cut: analytic 0, numeric 2x
    x = N(3)
    assert gradcheck(lambda t: (t * t).detach() + t, (x,), raise_exception=False) is False


def test_gradcheck_handles_non_contiguous_inputs():
    x = tj.tensor(_rng.standard_normal((3, 2))).t().requires_grad_()
    assert not x.is_contiguous()
    assert gradcheck(lambda t: t * tj.arange(3.0), (x,))
    assert gradcheck(lambda t: t.exp() * tj.arange(3.0), (x,))


def test_gradcheck_multiple_outputs_and_unused_inputs():
    x, y = N(3), N(2)
    assert gradcheck(lambda a, b: (a.exp(), a.sum() * 2), (x, y))
    assert gradcheck(lambda a, b: a.sort(), (x, y))  # integer indices output is ignored


def test_nondifferentiable_points_follow_pytorch():
    """relu'(0)=0, abs'(0)=0, sqrt'(0)=inf, ties split like PyTorch (checked without torch)."""
    x = C([0.0, 1.0, -1.0])
    (g,) = tj.autograd.grad(x.relu().sum(), x)
    assert g.tolist() == [0.0, 1.0, 0.0]
    (g,) = tj.autograd.grad(x.abs().sum(), x)
    assert g.tolist() == [0.0, 1.0, -1.0]
    z = C([0.0, 4.0])
    (g,) = tj.autograd.grad(z.sqrt().sum(), z)
    assert g.tolist() == [math.inf, 0.25]
    t = C([1.0, 3.0, 3.0])
    (g,) = tj.autograd.grad(t.max(), t)
    assert g.tolist() == [0.0, 0.5, 0.5]
    (g,) = tj.autograd.grad(t.max(0).values, t)
    assert g.tolist() == [0.0, 1.0, 0.0]
    a, b = C([1.0, 2.0]), C([1.0, 3.0])
    ga, gb = tj.autograd.grad(tj.maximum(a, b).sum(), (a, b))
    assert ga.tolist() == [0.5, 0.0] and gb.tolist() == [0.5, 1.0]
