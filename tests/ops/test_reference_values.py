"""Forward values of every registry op against an independent float64 reference, without torch.

Each reference is written here from the op's definition: elementwise math through Python's `math` module one
element at a time (not numpy's ufuncs, which most eager implementations call), reductions, shape and index ops
by loops or by numpy spelled differently from the implementation. The coverage test makes a new op add its
reference. (Derivatives are checked by gradcheck in test_gradcheck.py and at kinks in test_kinks.py; the traced
face equals the eager one op by op in tests/tracing/test_ops_traced.py.)
"""
import itertools
import math

import numpy as np
import pytest

import tracejit as tj
from tracejit.ops.registry import call
import tracejit.nn.functional as F
from tracejit.ops.registry import OPS

_rng = np.random.default_rng(7)
N = _rng.standard_normal((3, 4))                 # any value
N2 = _rng.standard_normal((3, 4))
ROW = _rng.standard_normal(4)
P = _rng.uniform(0.3, 3.0, (3, 4))               # positive
U = _rng.uniform(-0.95, 0.95, (3, 4))            # inside (-1, 1)
PR = _rng.uniform(0.05, 0.95, (3, 4))            # probabilities
I1 = _rng.integers(-50, 50, (3, 4))
I2 = _rng.integers(1, 9, (3, 4)) * np.where(_rng.random((3, 4)) < 0.5, -1, 1)
SPECIAL = np.array([0.0, -0.0, 1.5, -2.5, 0.5, -0.5, np.inf, -np.inf, np.nan])


def V(f, otype=float):
    """Apply a scalar function of Python floats elementwise (broadcasting the operands)."""
    return lambda *xs: np.vectorize(f, otypes=[otype])(*xs)


def _sigmoid(x):
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def _round_half_even(x):
    if not math.isfinite(x):
        return x
    return float(round(x))      # Python's round is half-to-even, like PyTorch's


def _sign(x):
    return math.nan if x != x else (1.0 if x > 0 else -1.0 if x < 0 else 0.0)


def _pyrem(a, b):               # Python's % has the divisor's sign, as torch.remainder
    return a - b * math.floor(a / b)


def _softplus(x, beta=1.0, threshold=20.0):
    return x if beta * x > threshold else math.log1p(math.exp(beta * x)) / beta


def _gelu(x):
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _gelu_tanh_derivative(x):
    k, c = math.sqrt(2 / math.pi), 0.044715
    t = math.tanh(k * (x + c * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x)


def _loops(shape):
    return itertools.product(*[range(s) for s in shape])


def _sum_axes(x, axes, keep=False):
    axes = tuple(a % x.ndim for a in axes)
    out_shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    out = np.zeros(out_shape)
    for idx in _loops(x.shape):
        out[tuple(0 if i in axes else j for i, j in enumerate(idx))] += x[idx]
    return out if keep else out.reshape([s for i, s in enumerate(x.shape) if i not in axes])


def _softmax_rows(x):           # over the last dim, by Python loops
    out = np.empty_like(x)
    for idx in _loops(x.shape[:-1]):
        row = [float(v) for v in x[idx]]
        m = max(row)
        e = [math.exp(v - m) for v in row]
        s = math.fsum(e)
        out[idx] = [v / s for v in e]
    return out


def _conv2d(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i, k, p, q in _loops((n, o, oh, ow)):
        out[i, k, p, q] = b[k] + sum(xp[i, ch, p * stride + u, q * stride + v] * w[k, ch, u, v]
                                     for ch in range(c) for u in range(kh) for v in range(kw))
    return out


def _pool(x, k, fn, pad=0, fill=0.0):
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 2 * pad, w + 2 * pad), fill)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - k) // k + 1, (w + 2 * pad - k) // k + 1
    out = np.zeros((n, c, oh, ow))
    for i, ch, p, q in _loops(out.shape):
        out[i, ch, p, q] = fn(xp[i, ch, p * k:p * k + k, q * k:q * k + k])
    return out


def _adaptive(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i, ch, p, q in _loops(out.shape):
        r0, r1 = (p * h) // oh, -((-(p + 1) * h) // oh)
        c0, c1 = (q * w) // ow, -((-(q + 1) * w) // ow)
        out[i, ch, p, q] = x[i, ch, r0:r1, c0:c1].mean()
    return out


def _nll(logp, target, weight, ignore):
    num = den = 0.0
    for i, t in enumerate(target):
        if t != ignore:
            num -= weight[t] * logp[i, t]
            den += weight[t]
    return num / den


_W = np.array([0.5, 1.5, 1.0, 2.0])
_T = np.array([1, 0, 3, 2, 1])
_IDX = np.array([[0, 3, 1, 1], [2, 2, 0, 1], [3, 0, 0, 2]])

# name -> (tracejit function, inputs as numpy arrays, reference function of the same arrays in float64)
UNARY_MATH = {
    "abs": abs, "neg": lambda x: -x, "positive": lambda x: +x, "exp": math.exp, "exp2": lambda x: 2.0 ** x,
    "expm1": math.expm1, "sin": math.sin, "cos": math.cos, "atan": math.atan, "sinh": math.sinh,
    "cosh": math.cosh, "tanh": math.tanh, "sigmoid": _sigmoid, "relu": lambda x: max(x, 0.0), "erf": math.erf,
    "sign": _sign, "floor": math.floor, "ceil": math.ceil, "trunc": math.trunc,
    "frac": lambda x: x - math.trunc(x), "round": _round_half_even, "square": lambda x: x * x,
    "silu": lambda x: x * _sigmoid(x), "gelu": _gelu, "softplus": _softplus,
    "elu": lambda x: x if x > 0 else math.expm1(x), "leaky_relu": lambda x: x if x > 0 else 0.01 * x,
}
POSITIVE_MATH = {"log": math.log, "log2": math.log2, "log10": math.log10, "log1p": math.log1p,
                 "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x), "reciprocal": lambda x: 1 / x}
UNIT_MATH = {"asin": math.asin, "acos": math.acos, "tan": math.tan}


def _erfinv_bisect(y):
    if abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    lo, hi = -6.0, 6.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if math.erf(mid) < y else (lo, mid)
    return lo if abs(math.erf(lo) - y) <= abs(math.erf(hi) - y) else hi


def _lgamma_ref(x):
    """math.lgamma, with PyTorch's +inf at the poles (Python raises there)."""
    return math.inf if math.isinf(x) or (x <= 0 and x == math.floor(x)) else math.lgamma(x)


def _polygamma_ref(n, x):
    """mpmath's polygamma at 60 digits (its default 15 lose the cancelling sums at negative arguments), with
    PyTorch's values at the poles."""
    mpmath = pytest.importorskip("mpmath")
    if x <= 0 and x == math.floor(x):
        return (math.copysign(math.inf, -x) if x == 0 else math.nan) if n == 0 else math.inf if n % 2 else -math.inf
    with mpmath.workdps(60):
        return float(mpmath.polygamma(n, mpmath.mpf(x)))


_GAMMA_X = np.array([-0.0, 0.0, -3.0, -2.5, -0.3, 1e-300, 1e-8, 0.5, 1.0, 1.4616321449683622, 2.0, 7.25, 1e4,
                     1e15, -1e6 + 0.25, -70.5])


# ----------------------------------------------------------------------------- linear algebra by hand
_SQ = _rng.standard_normal((3, 3)) + 2 * np.eye(3)
_SPD = (lambda m: m @ m.T + np.eye(3))(_rng.standard_normal((3, 3)))
_SYM2 = np.array([[2.0, 0.7], [0.7, -1.0]])
_UNPOOL_IDX = np.array([[[0, 9, 4], [13, 20, 23]], [[7, 2, 10], [12, 19, 17]]])     # one per 2x2 window


def _unpool2d(x, idx, out):
    """Each value written at its flat index of a zero (out) plane, by loops."""
    y = np.zeros(x.shape[:-2] + out)
    for c in range(x.shape[0]):
        for r in range(x.shape[1]):
            for k in range(x.shape[2]):
                y[c, idx[c, r, k] // out[1], idx[c, r, k] % out[1]] = x[c, r, k]
    return y
_NS2 = np.array([[0.3, -2.1], [1.7, -0.4]])          # complex eigenvalues


def _expm_sym(a):
    """exp of a symmetric matrix from its eigenvectors: V diag(exp(w)) V^T."""
    w, v = np.linalg.eigh(a)
    return (v * [math.exp(x) for x in w]) @ v.T


def _expm2(a):
    """exp of a 2x2 matrix in closed form: e^m (cosh(q) I + sinh(q) / q (A - m I)), m the mean of the diagonal and
    q^2 = ((a - d) / 2)^2 + b c (q complex when that is negative)."""
    import cmath
    m = (a[0, 0] + a[1, 1]) / 2
    q = cmath.sqrt(((a[0, 0] - a[1, 1]) / 2) ** 2 + a[0, 1] * a[1, 0])
    c, sq = cmath.cosh(q), (cmath.sinh(q) / q if q != 0 else 1.0)
    return math.exp(m) * np.array([[(c + sq * (a[i, j] - m) if i == j else sq * a[i, j]).real for j in range(2)]
                                   for i in range(2)])


def _det3(a):
    return math.fsum([a[0, 0] * a[1, 1] * a[2, 2], a[0, 1] * a[1, 2] * a[2, 0], a[0, 2] * a[1, 0] * a[2, 1],
                      -a[0, 2] * a[1, 1] * a[2, 0], -a[0, 0] * a[1, 2] * a[2, 1], -a[0, 1] * a[1, 0] * a[2, 2]])


def _adjugate3(a):
    """The transposed cofactor matrix: inv(a) = adj(a) / det(a)."""
    def cof(i, j):
        r, c = [k for k in range(3) if k != i], [k for k in range(3) if k != j]
        return (-1) ** (i + j) * (a[r[0], c[0]] * a[r[1], c[1]] - a[r[0], c[1]] * a[r[1], c[0]])
    return np.array([[cof(j, i) for j in range(3)] for i in range(3)])


def _cholesky(a):
    """Cholesky-Banachiewicz, row by row."""
    n = len(a)
    L = np.zeros_like(a)
    for i in range(n):
        for j in range(i + 1):
            s = a[i, j] - math.fsum(L[i, k] * L[j, k] for k in range(j))
            L[i, j] = math.sqrt(s) if i == j else s / L[j, j]
    return L


def _gram_schmidt_r(a):
    """R of a = QR by modified Gram-Schmidt (R's rows may differ from LAPACK's by a sign)."""
    q, n = a.astype(float).copy(), a.shape[1]
    r = np.zeros((n, n))
    for j in range(n):
        for k in range(j):
            r[k, j] = math.fsum(q[:, k] * q[:, j])
            q[:, j] -= r[k, j] * q[:, k]
        r[j, j] = math.sqrt(math.fsum(q[:, j] ** 2))
        q[:, j] /= r[j, j]
    return r


def _eigvecs2_squared(a):
    """Squared components of a symmetric 2x2's unit eigenvectors, eigenvalues ascending (closed form)."""
    m, d = (a[0, 0] + a[1, 1]) / 2, math.hypot((a[0, 0] - a[1, 1]) / 2, a[0, 1])
    cols = []
    for lam in (m - d, m + d):
        v = np.array([a[0, 1], lam - a[0, 0]])
        cols.append(v * v / math.fsum(v * v))
    return np.array(cols).T


def _singular2(a):
    """Singular values of a 2x2: square roots of the eigenvalues of a^T a (closed form), descending."""
    g = a.T @ a
    m, d = (g[0, 0] + g[1, 1]) / 2, math.hypot((g[0, 0] - g[1, 1]) / 2, g[0, 1])
    return np.array([math.sqrt(m + d), math.sqrt(m - d)])


def _pinv_tall2(a):
    """(a^T a)^-1 a^T for a full-column-rank (n, 2) matrix, the 2x2 inverse written out."""
    g = np.array([[math.fsum(a[:, i] * a[:, j]) for j in range(2)] for i in range(2)])
    det = g[0, 0] * g[1, 1] - g[0, 1] * g[1, 0]
    ginv = np.array([[g[1, 1], -g[0, 1]], [-g[1, 0], g[0, 0]]]) / det
    return ginv @ a.T

CASES = {}
for _n, _f in UNARY_MATH.items():
    CASES[_n] = (getattr(tj, _n, None) or getattr(F, _n), [N], V(_f))
for _n, _f in POSITIVE_MATH.items():
    CASES[_n] = (getattr(tj, _n), [P], V(_f))
for _n, _f in UNIT_MATH.items():
    CASES[_n] = (getattr(tj, _n), [U], V(_f))

CASES.update({
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), [N], V(_gelu_tanh)),
    # gelu's VJP as one op: g * gelu'(x), by the derivatives written out (Phi(x) + x phi(x); the tanh form's
    # chain rule), with math's erf/exp/tanh
    "gelu_backward": (lambda g, x: call("gelu_backward", g, x), [N, N],
                      V(lambda g, x: g * (0.5 * (1 + math.erf(x / math.sqrt(2)))
                                          + x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi)))),
    "gelu_backward_tanh": (lambda g, x: call("gelu_backward", g, x, approximate="tanh"), [N, N],
                           V(lambda g, x: g * _gelu_tanh_derivative(x))),
    "softplus_beta": (lambda x: F.softplus(x * 10, beta=2.0, threshold=5.0), [N],
                      V(lambda x: _softplus(x * 10, 2.0, 5.0))),
    "clamp": (lambda x: x.clamp(-0.5, 0.25), [N], V(lambda x: min(max(x, -0.5), 0.25))),
    "cast": (lambda x: (x * 1000).to(tj.int32), [N], V(lambda x: float(math.trunc(x * 1000)))),
    "clone": (lambda x: x.clone(), [N], lambda x: x + 0.0),
    "contiguous": (lambda x: x.t().contiguous(), [N], lambda x: np.array([[x[j, i] for j in range(3)]
                                                                          for i in range(4)])),
    "isnan": (tj.isnan, [SPECIAL], V(math.isnan, bool)),
    "isinf": (tj.isinf, [SPECIAL], V(math.isinf, bool)),
    "isfinite": (tj.isfinite, [SPECIAL], V(math.isfinite, bool)),
    "signbit": (tj.signbit, [SPECIAL], V(lambda x: math.copysign(1.0, x) < 0, bool)),
    "logical_not": (tj.logical_not, [SPECIAL], V(lambda x: not x, bool)),
    "bitwise_not": (lambda i: ~i, [I1], V(lambda i: -i - 1, int)),
    "bitwise_and": (lambda i, j: i & j, [I1, I2], V(lambda i, j: i & j, int)),
    "bitwise_or": (lambda i, j: i | j, [I1, I2], V(lambda i, j: i | j, int)),
    "bitwise_xor": (lambda i, j: i ^ j, [I1, I2], V(lambda i, j: i ^ j, int)),
    "add": (lambda x, y: x + y, [N, ROW], V(lambda a, b: a + b)),
    "sub": (lambda x, y: x - 2 * y, [N, ROW], V(lambda a, b: a - 2 * b)),
    "mul": (lambda x, y: x * y, [N, ROW], V(lambda a, b: a * b)),
    "div": (lambda x, y: x / y, [N, P], V(lambda a, b: a / b)),
    "pow": (lambda x, y: x ** y, [P, N], V(lambda a, b: a ** b)),
    "atan2": (tj.atan2, [N, N2], V(math.atan2)),
    "maximum": (tj.maximum, [N, N2], V(max)),
    "minimum": (tj.minimum, [N, N2], V(min)),
    "fmax": (tj.fmax, [SPECIAL, SPECIAL[::-1].copy()], V(lambda a, b: b if a != a else a if b != b else max(a, b))),
    "fmin": (tj.fmin, [SPECIAL, SPECIAL[::-1].copy()], V(lambda a, b: b if a != a else a if b != b else min(a, b))),
    "remainder": (tj.remainder, [N * 5, P], V(_pyrem)),
    "fmod": (tj.fmod, [N * 5, P], V(math.fmod)),
    "floor_divide": (lambda a, b: a // b, [I1, I2], V(lambda a, b: a // b, int)),
    "remainder_int": (tj.remainder, [I1, I2], V(lambda a, b: a % b, int)),
    "eq": (lambda a, b: a == b, [I1 % 3, I2 % 3], V(lambda a, b: a == b, bool)),
    "ne": (lambda a, b: a != b, [I1 % 3, I2 % 3], V(lambda a, b: a != b, bool)),
    "lt": (lambda a, b: a < b, [N, N2], V(lambda a, b: a < b, bool)),
    "le": (lambda a, b: a <= b, [I1 % 3, I2 % 3], V(lambda a, b: a <= b, bool)),
    "gt": (lambda a, b: a > b, [N, N2], V(lambda a, b: a > b, bool)),
    "ge": (lambda a, b: a >= b, [I1 % 3, I2 % 3], V(lambda a, b: a >= b, bool)),
    "logical_and": (tj.logical_and, [I1 % 2, I2 % 3], V(lambda a, b: bool(a) and bool(b), bool)),
    "logical_or": (tj.logical_or, [I1 % 2, I2 % 3], V(lambda a, b: bool(a) or bool(b), bool)),
    "logical_xor": (tj.logical_xor, [I1 % 2, I2 % 3], V(lambda a, b: bool(a) != bool(b), bool)),
    "where": (lambda x, y: tj.where(x > 0, x, y), [N, N2], V(lambda a, b: a if a > 0 else b)),
    "lerp": (lambda x, y, w: tj.lerp(x, y, w), [N, N2, PR], V(lambda a, b, w: a + w * (b - a))),
    "binary_cross_entropy": (lambda x, t: F.binary_cross_entropy(x, t, reduction="none"), [PR, PR[::-1].copy()],
                             V(lambda x, t: -(t * math.log(x) + (1 - t) * math.log(1 - x)))),
    # reductions
    "sum": (lambda x: x.sum((0, 2)), [N.reshape(3, 2, 2)], lambda x: _sum_axes(x, (0, 2))),
    "mean": (lambda x: x.mean(1, keepdim=True), [N], lambda x: _sum_axes(x, (1,), True) / 4),
    "prod": (lambda x: x.prod(0), [N], lambda x: np.array([math.prod(x[:, j]) for j in range(4)])),
    "amax": (lambda x: x.amax(1), [N], lambda x: np.array([max(r) for r in x])),
    "amin": (lambda x: x.amin(0), [N], lambda x: np.array([min(c) for c in x.T])),
    "max_dim": (lambda x: x.max(1).values, [N], lambda x: np.array([max(r) for r in x])),
    "max_dim_indices": (lambda x: x.max(1).indices, [N], lambda x: np.array([list(r).index(max(r)) for r in x])),
    "min_dim": (lambda x: x.min(0).indices, [N], lambda x: np.array([list(c).index(min(c)) for c in x.T])),
    "argmax": (lambda x: x.argmax(1), [N], lambda x: np.array([list(r).index(max(r)) for r in x])),
    "argmin": (lambda x: x.argmin(), [N], lambda x: np.array(list(x.ravel()).index(min(x.ravel())))),
    "all": (lambda x: (x > -1).all(1), [N], lambda x: np.array([all(v > -1 for v in r) for r in x])),
    "any": (lambda x: (x > 1).any(0), [N], lambda x: np.array([any(v > 1 for v in c) for c in x.T])),
    "var": (lambda x: x.var(1), [N], lambda x: np.array([sum((v - sum(r) / 4) ** 2 for v in r) / 3 for r in x])),
    "var_correction0": (lambda x: x.var(correction=0), [N],
                        lambda x: np.array(sum((v - x.sum() / 12) ** 2 for v in x.ravel()) / 12)),
    "std": (lambda x: x.std(0), [N],
            lambda x: np.array([math.sqrt(sum((v - sum(c) / 3) ** 2 for v in c) / 2) for c in x.T])),
    "logsumexp": (lambda x: x.logsumexp(1), [N * 30], lambda x: np.array([
        max(r) + math.log(math.fsum(math.exp(v - max(r)) for v in r)) for r in x])),
    "vector_norm": (lambda x: x.norm(3, dim=1), [N],
                    lambda x: np.array([math.fsum(abs(v) ** 3 for v in r) ** (1 / 3) for r in x])),
    "vector_norm_inf": (lambda x: x.norm(float("inf")), [N], lambda x: np.array(max(abs(v) for v in x.ravel()))),
    "softmax": (lambda x: x.softmax(-1), [N * 10], _softmax_rows),
    "log_softmax": (lambda x: x.log_softmax(0), [N * 10], lambda x: np.log(_softmax_rows(x.T)).T),
    "cumsum": (lambda x: x.cumsum(1), [N], lambda x: np.array([[math.fsum(r[:j + 1]) for j in range(4)]
                                                               for r in x])),
    "cumprod": (lambda x: x.cumprod(0), [N], lambda x: np.array([[math.prod(x[:i + 1, j]) for j in range(4)]
                                                                 for i in range(3)])),
    "sort": (lambda x: x.sort(1, descending=True).values, [N], lambda x: np.array([sorted(r)[::-1] for r in x])),
    "topk": (lambda x: x.topk(2, dim=1).values, [N], lambda x: np.array([sorted(r)[::-1][:2] for r in x])),
    # shape ops
    "reshape": (lambda x: x.t().reshape(2, 6), [N], lambda x: np.array(
        [[x.T.ravel().tolist()[6 * i + j] for j in range(6)] for i in range(2)])),
    "view": (lambda x: x.view(4, 3), [N], lambda x: np.array([x.ravel()[3 * i:3 * i + 3] for i in range(4)])),
    "permute": (lambda x: x.permute(2, 0, 1), [N.reshape(3, 2, 2)], lambda x: np.array(
        [[[x[i, j, k] for j in range(2)] for i in range(3)] for k in range(2)])),
    "expand": (lambda x: x.expand(2, 3, 4), [ROW.reshape(1, 4)], lambda x: np.array([[x[0]] * 3] * 2)),
    "cat": (lambda x, y: tj.cat([x, y], 0), [N, N2], lambda x, y: np.array(list(x) + list(y))),
    "stack": (lambda x, y: tj.stack([x, y], 1), [N, N2], lambda x, y: np.array([[x[i], y[i]] for i in range(3)])),
    "flip": (lambda x: x.flip((0, 1)), [N], lambda x: np.array([list(r)[::-1] for r in x][::-1])),
    "roll": (lambda x: x.roll(1, 1), [N], lambda x: np.array([[r[(j - 1) % 4] for j in range(4)] for r in x])),
    "tril": (lambda x: x.tril(-1), [N], lambda x: np.array([[x[i, j] if j <= i - 1 else 0 for j in range(4)]
                                                           for i in range(3)])),
    "triu": (lambda x: x.triu(1), [N], lambda x: np.array([[x[i, j] if j >= i + 1 else 0 for j in range(4)]
                                                          for i in range(3)])),
    "slice": (lambda x: x[1:, ::2], [N], lambda x: np.array([[x[i, j] for j in (0, 2)] for i in (1, 2)])),
    # indexing
    "index": (lambda x: x[tj.tensor([2, 0, 2])], [N], lambda x: np.array([x[2], x[0], x[2]])),
    "index_mask": (lambda x: x[x > 0], [N], lambda x: np.array([v for v in x.ravel() if v > 0])),
    "index_put": (lambda x, v: x.index_put((tj.tensor([0, 2, 0]),), v, accumulate=True), [N, ROW],
                  lambda x, v: np.array([x[0] + 2 * v, x[1], x[2] + v])),
    "gather": (lambda x: x.gather(1, tj.tensor(_IDX)), [N],
               lambda x: np.array([[x[i, _IDX[i, j]] for j in range(4)] for i in range(3)])),
    "scatter_add": (lambda x, s: x.scatter_add(1, tj.tensor(_IDX), s), [N, N2], lambda x, s: _scatter_add_ref(x, s)),
    "scatter_reduce": (lambda x, s: x.scatter_reduce(1, tj.tensor(_IDX), s, "amin", include_self=False), [N, N2],
                       lambda x, s: _scatter_amin_ref(x, s)),
    "cummax": (lambda x: x.cummax(1).values, [N], lambda x: np.array([[max(r[:j + 1]) for j in range(4)] for r in x])),
    "cummin": (lambda x: x.cummin(0).indices, [I1 % 3], lambda x: np.array(
        [[max(k for k in range(i + 1) if x[k, j] == min(x[:i + 1, j])) for j in range(4)] for i in range(3)])),
    "logcumsumexp": (lambda x: x.logcumsumexp(1), [N], lambda x: np.array(
        [[math.log(math.fsum(math.exp(v) for v in r[:j + 1])) for j in range(4)] for r in x])),
    "mode": (lambda x: x.mode(1).values, [I1 % 3], lambda x: np.array(
        [min(v for v in r if list(r).count(v) == max(list(r).count(u) for u in r)) for r in x])),
    "searchsorted": (lambda s, v: tj.searchsorted(s, v, right=True), [np.sort(ROW), N],
                     lambda s, v: np.array([[sum(1 for b in s if b <= a) for a in r] for r in v])),
    "histc": (lambda x: tj.histc(x, 4, -1.0, 1.0), [N.ravel().copy()], lambda x: np.array(
        [float(sum(1 for v in x if -1 + k * 0.5 <= v < -0.5 + k * 0.5 or (k == 3 and v == 1.0))) for k in range(4)])),
    # linear algebra
    "matmul": (lambda a, b: a @ b, [N.reshape(3, 2, 2), N2.reshape(2, 6)[:, :3].copy()],
               lambda a, b: np.array([[[math.fsum(a[k, i, m] * b[m, j] for m in range(2)) for j in range(3)]
                                       for i in range(2)] for k in range(3)])),
    "mv": (lambda a, v: tj.mv(a, v), [N, ROW], lambda a, v: np.array([math.fsum(a[i] * v) for i in range(3)])),
    "dot": (lambda a, b: tj.dot(a, b), [ROW, N[0].copy()], lambda a, b: np.array(math.fsum(a * b))),
    "addmm": (lambda c, a, b: tj.addmm(c, a, b, beta=0.5, alpha=2.0), [ROW[:3].copy(), N, N2.T.copy()],
              lambda c, a, b: np.array([[0.5 * c[j] + 2.0 * math.fsum(a[i] * b[:, j]) for j in range(3)]
                                        for i in range(3)])),
    "einsum": (lambda a, b: tj.einsum("ij,kj->ik", a, b), [N, N2],
               lambda a, b: np.array([[math.fsum(a[i] * b[k]) for k in range(3)] for i in range(3)])),
    # erfinv by bisection on math.erf, at -1, 1 and beyond them (closer to +-1 than 0.9999 neither is this exact:
    # erf's rounding there moves the inverse by more than 1e-12 relative)
    # the gamma family at poles, negative, tiny and large arguments: math.lgamma; mpmath for digamma and polygamma
    # (digamma's zero near 1.4616 compared at atol 1e-13)
    "lgamma": (lambda x: tj.lgamma(x), [np.concatenate([_GAMMA_X, [-1e300, 1e300, np.inf, -np.inf]])],
               lambda x: np.array([_lgamma_ref(v) for v in x])),
    "digamma": (lambda x: tj.digamma(x), [_GAMMA_X], lambda x: np.array([_polygamma_ref(0, v) for v in x])),
    "polygamma": (lambda x: tj.cat([tj.polygamma(1, x), tj.polygamma(2, x), tj.polygamma(5, x)]), [_GAMMA_X],
                  lambda x: np.array([_polygamma_ref(n, v) for n in (1, 2, 5) for v in x])),
    "erfinv": (lambda x: tj.erfinv(x), [np.array([-1.0, -0.9999, -0.7, -1e-3, 0.0, 2e-9, 0.3, 0.99, 1.0, 1.5])],
               lambda x: np.array([_erfinv_bisect(v) for v in x])),
    # decompositions, against closed forms (2x2, 3x3) and textbook algorithms; sign-free quantities where LAPACK's
    # signs are a convention (|R|, squared eigenvectors)
    "linalg_det": (lambda a: tj.linalg.det(a), [_SQ], lambda a: np.array(_det3(a))),
    "linalg_slogdet": (lambda a: tj.linalg.slogdet(a).logabsdet, [_SQ], lambda a: np.array(math.log(abs(_det3(a))))),
    "linalg_inv": (lambda a: tj.linalg.inv(a), [_SQ], lambda a: _adjugate3(a) / _det3(a)),
    "linalg_solve": (lambda a, b: tj.linalg.solve(a, b), [_SQ, ROW[:3].copy()], lambda a, b: np.array(
        [_det3(np.column_stack([b if k == j else a[:, k] for k in range(3)])) / _det3(a) for j in range(3)])),
    "linalg_cholesky": (lambda a: tj.linalg.cholesky(a), [_SPD], lambda a: _cholesky(a)),
    "linalg_qr": (lambda a: tj.linalg.qr(a).R.abs(), [N[:, :3].copy()], lambda a: np.abs(_gram_schmidt_r(a))),
    "linalg_eigh": (lambda a: tj.linalg.eigh(a).eigenvectors ** 2, [_SYM2], lambda a: _eigvecs2_squared(a)),
    "linalg_svd": (lambda a: tj.linalg.svd(a).S, [_SQ[:2, :2].copy()], lambda a: _singular2(a)),
    "linalg_pinv": (lambda a: tj.linalg.pinv(a), [N[:, :2].copy()], lambda a: _pinv_tall2(a)),
    "matrix_exp": (lambda a, b: tj.cat([tj.linalg.matrix_exp(a).reshape(-1), tj.linalg.matrix_exp(b).reshape(-1)]),
                   [_SPD / 2, _NS2], lambda a, b: np.concatenate([_expm_sym(a).ravel(), _expm2(b).ravel()])),
    # nn
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [
        _rng.standard_normal((2, 2, 5, 5)), _rng.standard_normal((3, 2, 3, 3)), _rng.standard_normal(3)],
        lambda x, w, b: _conv2d(x, w, b, 2, 1)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [_rng.standard_normal((1, 2, 4, 6))], lambda x: _pool(x, 2, np.max)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, padding=1), [_rng.standard_normal((1, 2, 4, 4))],
                   lambda x: _pool(x, 2, lambda b: b.sum() / 4, pad=1)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [_rng.standard_normal((1, 2, 5, 4))],
                            lambda x: _adaptive(x, 2, 3)),
    "nll_loss": (lambda x: F.nll_loss(x, tj.tensor(_T), weight=tj.tensor(_W), ignore_index=2),
                 [_rng.standard_normal((5, 4))], lambda x: np.array(_nll(x, _T, _W, 2))),
    "one_hot": (lambda i: F.one_hot(i, 6), [np.abs(I1) % 6], lambda i: np.array(
        [[[int(i[r, c] == k) for k in range(6)] for c in range(4)] for r in range(3)])),
    "cross_entropy": (lambda x: F.cross_entropy(x, tj.tensor(_T)), [_rng.standard_normal((5, 4))],
                      lambda x: np.array(_nll(np.log(_softmax_rows(x)), _T, np.ones(4), -100))),
    "max_unpool": (lambda x, i: F.max_unpool2d(x, i, 2), [_rng.standard_normal((2, 2, 3)), _UNPOOL_IDX],
                   lambda x, i: _unpool2d(x, i, (4, 6))),
})


def _batch_norm_ref(x, w, b, eps=1e-5):
    """Per channel, by loops: the batch's mean and biased variance, then (x - mean) / sqrt(var + eps) * w + b."""
    out = np.empty_like(x)
    for c in range(x.shape[1]):
        vals = [float(v) for v in x[:, c].ravel()]
        mean = math.fsum(vals) / len(vals)
        var = math.fsum((v - mean) ** 2 for v in vals) / len(vals)
        for idx in itertools.product(*[range(d) for d in x.shape]):
            if idx[1] == c:
                out[idx] = (x[idx] - mean) / math.sqrt(var + eps) * w[c] + b[c]
    return out


def _layer_norm_ref(x, w, b, eps=1e-5):
    """Per row of the last dim, by loops: the row's mean and biased variance, then (x - mean) / sqrt(var + eps) * w
    + b."""
    out = np.empty_like(x)
    for idx in itertools.product(*[range(d) for d in x.shape[:-1]]):
        vals = [float(v) for v in x[idx]]
        mean = math.fsum(vals) / len(vals)
        var = math.fsum((v - mean) ** 2 for v in vals) / len(vals)
        for j, v in enumerate(vals):
            out[idx + (j,)] = (v - mean) / math.sqrt(var + eps) * w[j] + b[j]
    return out


CASES.update({
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b),
                   [_rng.standard_normal((3, 2, 4)), _rng.standard_normal(4), _rng.standard_normal(4)],
                   _layer_norm_ref),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   [_rng.standard_normal((3, 2, 2, 3)), _rng.standard_normal(2), _rng.standard_normal(2)],
                   _batch_norm_ref),
    "to_memory_format": (lambda x: x.contiguous(memory_format=tj.channels_last), [_rng.standard_normal((2, 3, 2, 2))],
                         lambda x: x),
})


def _scatter_amin_ref(x, s):
    out = x.copy()
    for i, j in _loops(_IDX.shape):
        k = _IDX[i, j]
        seen = [s[i, jj] for jj in range(_IDX.shape[1]) if _IDX[i, jj] == k]
        out[i, k] = min(seen)
    return out


def _scatter_add_ref(x, s):
    out = x.copy()
    for i, j in _loops(_IDX.shape):
        out[i, _IDX[i, j]] += s[i, j]
    return out


def _sdpa_ref(q, k, v):
    """Causal attention with scale 0.7 by loops: query l sees keys j <= l."""
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for b, l in _loops(q.shape[:-1]):
        s = [0.7 * sum(q[b, l, e] * k[b, j, e] for e in range(q.shape[-1])) for j in range(l + 1)]
        m = max(s)
        w = [math.exp(x - m) for x in s]
        for j in range(l + 1):
            out[b, l] += w[j] / sum(w) * v[b, j]
    return out


CASES["scaled_dot_product_attention"] = (
    lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.7),
    [_rng.standard_normal((2, 3, 4)), _rng.standard_normal((2, 3, 4)), _rng.standard_normal((2, 3, 5))], _sdpa_ref)


def _scan_ref(h, xs, w):
    """h_{t+1} = tanh(h_t w + x_t), y_t = h_t * x_t, from the last step to the first: (final h, sum of the y)."""
    ys = np.zeros_like(h)
    for t in range(len(xs) - 1, -1, -1):
        ys += h * xs[t]
        h = np.tanh(h @ w + xs[t])
    return h + ys


def _scan_case(h, xs, w):
    c, ys = tj.scan(lambda c, x: (tj.tanh(c @ w + x), c * x), h, xs, reverse=True, as_op=True)
    return c + ys.sum(0)


CASES["scan"] = (_scan_case, [_rng.standard_normal((2, 3)), _rng.standard_normal((5, 2, 3)),
                              _rng.standard_normal((3, 3))], _scan_ref)


# ops whose forward value is covered by a case under another name
COVERED_BY = {
    "check_classes": "one_hot", "check_index": "index_select", "check_unpool_index": "max_unpool",
    "scatter": "scatter_add", "nll_loss_coef": "cross_entropy",
    # backward-only ops: their values are gradients, checked by gradcheck (test_gradcheck.py)
    "index_backward": None, "conv2d_backward_input": None, "conv2d_backward_weight": None,
    "max_pool2d_backward": None, "avg_pool2d_backward": None, "adaptive_avg_pool2d_backward": None,
    "sdpa_backward": None, "layer_norm_backward": None, "softmax_backward": None,
    "log_softmax_backward": None, "batch_norm_backward": None,   # (also tests/nn/test_batch_norm.py's float64 sums)
    # random ops: no value to compare; their distributions are checked by test_random_ops below
    "rand": None, "randn": None, "randint": None, "bernoulli": None, "randperm": None, "multinomial": None,
    # collectives need an MPI job: tests/distributed/scripts/collectives.py checks their values against numpy there
    "all_reduce_start": None, "broadcast_start": None, "all_gather_start": None, "reduce_scatter_start": None,
    "comm_wait": None,
}


def test_every_op_has_a_reference():
    missing = set(OPS) - set(CASES) - set(COVERED_BY)
    assert not missing, f"add a reference value case for: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_value_matches_reference(name):
    fn, inputs, ref = CASES[name]
    got = fn(*[tj.tensor(a) for a in inputs]).numpy()
    want = np.asarray(ref(*[np.asarray(a) for a in inputs]))
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == bool or got.dtype == bool:
        assert got.dtype == bool and np.array_equal(got, want.astype(bool))
    elif want.dtype.kind in "iu" or (inputs and all(np.asarray(a).dtype.kind in "iu" for a in inputs)):
        assert got.dtype.kind in "iu" and np.array_equal(got, want), (got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13, equal_nan=True)


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "erf", "gelu", "log", "softmax", "logsumexp"])
def test_float32_within_float32_rounding(name):
    fn, inputs, ref = CASES[name]
    got = fn(*[tj.tensor(np.asarray(a, np.float32)) for a in inputs])
    assert got.dtype == tj.float32
    want = ref(*[np.asarray(a, np.float32).astype(np.float64) for a in inputs])
    np.testing.assert_allclose(got.numpy(), want, rtol=3e-6, atol=1e-7)   # 25-50 float32 ulp (vmath's own tests: <= 2.5)


def test_random_ops():
    tj.manual_seed(0)
    u = tj.rand(20000).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    z = tj.randn(20000, dtype=tj.float64).numpy()
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    k = tj.randint(3, 7, (20000,)).numpy()
    assert set(np.unique(k)) == {3, 4, 5, 6} and k.dtype == np.int64
    b = tj.bernoulli(tj.full((20000,), 0.3)).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.015


def test_kthvalue_median_aminmax_match_a_sort_reference():
    """kthvalue, median and aminmax (compositions of sort, amin and amax, not registry ops) against Python's
    sorted() along each dim: values, indices, keepdim shapes; the lower median of an even count; errors."""
    x = tj.tensor(N)
    for dim in (0, 1, -1):
        d = dim % 2
        n = N.shape[d]
        rows = np.moveaxis(N, d, -1)                     # [other, n]
        for k in range(1, n + 1):
            for keepdim in (False, True):
                v, i = tj.kthvalue(x, k, dim, keepdim)
                want_v = np.array([sorted(r)[k - 1] for r in rows])
                want_i = np.array([list(r).index(sorted(r)[k - 1]) for r in rows])
                if keepdim:
                    want_v, want_i = np.expand_dims(want_v, d), np.expand_dims(want_i, d)
                assert v.numpy().shape == want_v.shape and i.numpy().dtype == np.int64
                np.testing.assert_array_equal(v.numpy(), want_v)
                np.testing.assert_array_equal(i.numpy(), want_i)
        m, mi = tj.median(x, dim)
        k = (n + 1) // 2                                  # (the lower of the two middle values when n is even)
        np.testing.assert_array_equal(m.numpy(), [sorted(r)[k - 1] for r in rows])
        np.testing.assert_array_equal(mi.numpy(), [list(r).index(sorted(r)[k - 1]) for r in rows])
        assert tuple(tj.median(x, dim, keepdim=True).values.shape) == tuple(np.expand_dims(m.numpy(), d).shape)
    assert tj.median(x).item() == sorted(N.ravel())[5] and tj.median(x).shape == ()
    assert math.isnan(tj.median(tj.zeros(0, dtype=tj.float64)).item())
    v, i = tj.kthvalue(tj.tensor(2.5), 1)
    assert v.item() == 2.5 and i.item() == 0 and v.shape == () and i.shape == ()
    for k in (0, 5):
        with pytest.raises(RuntimeError, match=r"^kthvalue\(\): selected number k out of range for dimension 1$"):
            tj.kthvalue(x, k, 1)
    lo, hi = tj.aminmax(x)
    assert lo.item() == N.min() and hi.item() == N.max() and lo.shape == hi.shape == ()
    lo, hi = tj.aminmax(x, dim=1, keepdim=True)
    np.testing.assert_array_equal(lo.numpy(), [[min(r)] for r in N])
    np.testing.assert_array_equal(hi.numpy(), [[max(r)] for r in N])
    lo, hi = tj.aminmax(x, dim=0)
    np.testing.assert_array_equal(lo.numpy(), [min(c) for c in N.T])
    np.testing.assert_array_equal(hi.numpy(), [max(c) for c in N.T])
    lo, hi = tj.aminmax(x, keepdim=True)
    assert lo.shape == hi.shape == (1, 1)
