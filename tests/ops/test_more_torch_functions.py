"""unfold, repeat_interleave, diff, kron, cummax/cummin, logcumsumexp, nan_to_num, rot90, block_diag, cartesian_prod,
combinations, tril/triu_indices, heaviside, logaddexp(2), hypot, copysign, quantile/nanquantile, mode,
unique_consecutive, bincount, histc, bucketize, searchsorted and scatter_reduce's modes against PyTorch: values and
dtypes (float32, float64, integers where PyTorch takes them), gradients (float64), errors (kind and message), and
traced = eager where the output's shape does not depend on values."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


def _lib_tensor(lib, a, grad):
    t = lib.tensor(a)
    return t.requires_grad_(True) if grad and t.dtype.is_floating_point else t


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [v for x in r for v in _flat(x)]
    return [r]


def _same(got, want, tol):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if not hasattr(b, "dtype") or not hasattr(b, "shape"):
            assert str(a).split(".")[-1] == str(b).split(".")[-1]
            continue
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)
        assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol, equal_nan=True)


def check(fn, *arrays, grad=True, tol=None):
    """fn(lib, *tensors) with tracejit and torch: same outputs; with grad, the same gradients of a random weighting
    of the floating outputs with respect to the floating inputs."""
    res = {}
    for lib in (tj, torch):
        ins = [_lib_tensor(lib, a, grad) for a in arrays]
        out = fn(lib, *ins)
        res[lib] = (ins, _flat(out))
    (ti, to), (pi, po) = res[tj], res[torch]
    f64 = any(np.asarray(a).dtype == np.float64 for a in arrays)
    _same(to, po, tol or (1e-12 if f64 else 2e-6))
    if grad:
        rng = np.random.default_rng(1)
        pairs = [(a, b) for a, b in zip(to, po) if hasattr(b, "requires_grad") and b.requires_grad]
        if not pairs:
            return
        ws = [rng.standard_normal(tuple(b.shape)) for _, b in pairs]
        lt = sum((a * tj.tensor(w).to(a.dtype)).sum() for (a, _), w in zip(pairs, ws))
        lp = sum((b * torch.tensor(w).to(b.dtype)).sum() for (_, b), w in zip(pairs, ws))
        xs_t = [t for t in ti if t.requires_grad]
        xs_p = [t for t in pi if t.requires_grad]
        gt = tj.autograd.grad(lt, xs_t, allow_unused=True)
        gp = torch.autograd.grad(lp, xs_p, allow_unused=True)
        for a, b in zip(gt, gp):
            if b is None or a is None:          # no gradient on one side: zeros on the other
                assert a is None or not a.numpy().any()
                assert b is None or not b.numpy().any()
                continue
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9 if f64 else 1e-5, atol=1e-9 if f64 else 1e-5)


def error(fn, *arrays):
    """fn raises the same kind of error with the same message in both libraries."""
    got = []
    for lib in (tj, torch):
        with pytest.raises(Exception) as e:
            fn(lib, *[lib.tensor(a) for a in arrays])
        got.append((type(e.value).__name__, str(e.value)))
    assert got[0][0] == got[1][0], got
    return got


def same_error(fn, *arrays):
    got = error(fn, *arrays)
    assert got[0][1] == got[1][1], got


def traced_equals_eager(fn, *arrays, tol=1e-6):
    ins = [tj.tensor(a) for a in arrays]
    want = _flat(fn(*ins))
    got = _flat(tj.trace(fn)(*[tj.tensor(a) for a in arrays]))
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol, equal_nan=True)


RNG = np.random.default_rng(0)
X64 = RNG.standard_normal((3, 5))
X32 = X64.astype(np.float32)
XI = RNG.integers(-4, 5, (3, 5))


# ----------------------------------------------------------------------------- group 1: composed

@pytest.mark.parametrize("x", [X64, X32, XI], ids=["f64", "f32", "i64"])
def test_windows_and_repeats(x):
    check(lambda L, t: t.unfold(1, 2, 1), x)
    check(lambda L, t: t.unfold(0, 2, 2), x)
    check(lambda L, t: t.unfold(-1, 3, 2), x)
    check(lambda L, t: t.unfold(1, 5, 1), x)
    check(lambda L, t: L.repeat_interleave(t, 2), x)
    check(lambda L, t: t.repeat_interleave(3, dim=1), x)
    check(lambda L, t: t.repeat_interleave(L.tensor([1, 0, 2]), dim=0), x)
    check(lambda L, t: L.repeat_interleave(t, L.tensor([2]), dim=-1, output_size=10), x)
    check(lambda L, t: L.diff(t), x)
    check(lambda L, t: L.diff(t, n=2, dim=0), x)
    check(lambda L, t: t.diff(n=3, dim=1, prepend=t[:, :1] * 2, append=t[:, -2:]), x)
    check(lambda L, t: L.diff(t, n=7), x)
    check(lambda L, t: L.kron(t, t[:2, :2]), x)
    check(lambda L, t: L.kron(t[0], t), x)
    check(lambda L, t: t[:2, :2].kron(t[0, :3]), x)
    for k in (-3, -1, 0, 1, 2, 3, 6):
        check(lambda L, t: L.rot90(t, k), x)
    check(lambda L, t: L.rot90(t.reshape(3, 1, 5), 1, [2, 0]), x)
    check(lambda L, t: t.reshape(3, 5, 1).rot90(3, (-2, -3)), x)
    check(lambda L, t: L.block_diag(t, t[0], t[1, 1], t[:2, :1]), x)
    check(lambda L, t: L.cartesian_prod(t[0], t[1, :2], t[2, :3]), x)
    check(lambda L, t: L.cartesian_prod(t[0]), x)
    for r, w in ((2, False), (3, False), (2, True), (3, True), (6, False), (1, True), (0, False)):
        check(lambda L, t: L.combinations(t[0], r, w), x)


def test_repeat_interleave_counts_and_mixed_dtypes():
    check(lambda L, t: L.repeat_interleave(t), np.array([2, 0, 3]))
    check(lambda L, a: L.diff(a, prepend=L.zeros(3, 1, dtype=L.float64)), X32)
    check(lambda L, a: L.diff(a), np.array([True, False, False, True]))
    check(lambda L, a: L.diff(a), np.array([1, 3, 2], np.uint8))
    check(lambda L, a, b: L.kron(a, b), np.array([1, 2]), np.array([[1.0, 2], [3, 4]]))
    check(lambda L, a, b: L.block_diag(a, b), np.array([[1, 2]], np.int32), np.array([3.0]))
    check(lambda L: L.block_diag(), grad=False)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_tril_triu_indices(dtype):
    for row, col, off in ((3, 3, 0), (3, 3, -1), (2, 4, 1), (4, 2, -5), (4, 2, 5), (0, 3, 0), (5, 1, 2)):
        for name in ("tril_indices", "triu_indices"):
            check(lambda L: getattr(L, name)(row, col, off, dtype=getattr(L, np.dtype(dtype).name)), grad=False)


def test_windows_errors():
    x = X64
    same_error(lambda L, t: t.unfold(1, 6, 1), x)
    same_error(lambda L, t: t.unfold(1, 2, 0), x)
    same_error(lambda L, t: t.repeat_interleave(-1), x)
    same_error(lambda L, t: t.repeat_interleave(L.tensor([-1, 2, 1]), dim=0), x)
    error(lambda L, t: t.repeat_interleave(L.tensor([1, 2]), dim=0), x)
    error(lambda L, t: t.repeat_interleave(L.tensor([1, 2, 1]), dim=0, output_size=3), x)
    same_error(lambda L, t: L.diff(t, n=-1), x)
    same_error(lambda L, t: L.diff(t[0, 0]), x)
    error(lambda L, t: L.diff(t, prepend=t[0]), x)
    same_error(lambda L, t: L.rot90(t, 1, [0]), x)
    same_error(lambda L, t: L.rot90(t, 1, [1, 1]), x)
    same_error(lambda L, t: L.rot90(t, 1, [0, -2]), x)
    same_error(lambda L, t: L.rot90(t[0], 1), x)
    same_error(lambda L, t: L.rot90(t, 1, [0, 5]), x)
    same_error(lambda L, t: L.block_diag(t, t.reshape(3, 5, 1)), x)
    same_error(lambda L, t: L.cartesian_prod(t, t[0]), x)
    same_error(lambda L, t: L.cartesian_prod(t[0], t[0].long()), x)
    same_error(lambda L, t: L.combinations(t), x)
    same_error(lambda L, t: L.combinations(t[0], -1), x)
    same_error(lambda L: L.tril_indices(-1, 2))
    same_error(lambda L: L.triu_indices(2, -1))
    error(lambda L: L.tril_indices(3, 3, dtype=L.float32))


def test_windows_traced_equal_eager():
    traced_equals_eager(lambda t: t.unfold(1, 2, 2) * 2, X32)
    traced_equals_eager(lambda t: tj.repeat_interleave(t, 2, dim=0) + 1, X32)
    traced_equals_eager(lambda t: tj.diff(t, 2, prepend=t[:, :1]), X32)
    traced_equals_eager(lambda t: tj.kron(t, t[:2, :2]), X32)
    traced_equals_eager(lambda t: tj.rot90(t, 3) + tj.rot90(t, 1).flip(0), X32)
    traced_equals_eager(lambda t: tj.block_diag(t, t[0], t[1, 1]), X32)
    traced_equals_eager(lambda t: tj.cartesian_prod(t[0], t[1]), X32)
    traced_equals_eager(lambda t: tj.combinations(t[0], 3, True), X32)
    traced_equals_eager(lambda t: t[tuple(tj.tril_indices(3, 5, 1))], X32)
    traced_equals_eager(lambda t: t[tuple(tj.triu_indices(3, 5, -1))], X32)


EDGES = np.array([[0.0, -0.0, 1.5, -2.0, NAN], [INF, -INF, 3.0, -INF, INF], [1e300, -1e300, 0.5, 7.0, -7.0]])


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_elementwise(dt):
    x, y = X64.astype(dt), np.roll(X64, 1, 1).astype(dt)
    x[0, 0] = y[0, 0]                                            # a tie: the gradients split evenly
    x[1, 1] = 0.0
    check(lambda L, a, b: L.logaddexp(a, b), x, y)
    check(lambda L, a, b: a.logaddexp2(b), x, y)
    check(lambda L, a, b: L.hypot(a, b), x, y)
    check(lambda L, a, b: L.copysign(a, b), x, y)
    check(lambda L, a: a.copysign(-2.0), x)
    check(lambda L, a, b: L.heaviside(a, b), x, y, grad=False)     # (PyTorch has no derivative)
    e = EDGES.astype(dt)
    check(lambda L, a: L.nan_to_num(a), e)
    check(lambda L, a: a.nan_to_num(1.0, 2.0, -3.0), e)
    check(lambda L, a: L.nan_to_num(a, posinf=5.0), e)
    flipped = np.ascontiguousarray(e[:, ::-1])
    check(lambda L, a, b: (L.logaddexp(a, b), L.logaddexp2(a, b), L.hypot(a, b), L.copysign(a, b)), e, flipped,
          grad=False)
    check(lambda L, a: (L.logaddexp(a, a), L.logaddexp2(a, a), L.hypot(a, a), L.heaviside(a, a)), e, grad=False)
    big = np.array([3e20, -4e30, 1e-30], dt)
    check(lambda L, a: L.hypot(a, a * 1.5), big)


def test_elementwise_integers_and_errors():
    check(lambda L, a, b: L.copysign(a, b), XI, np.roll(XI, 1), grad=False)
    check(lambda L, a, b: L.copysign(a, b), X32, X64)
    check(lambda L, a: L.nan_to_num(a), XI)
    check(lambda L, a: L.nan_to_num(a), np.array([True, False]))
    check(lambda L, a, b: L.heaviside(a, b), XI, np.roll(XI, 1), grad=False)
    check(lambda L, a, b: (L.logaddexp(a, b).dtype, L.hypot(a, b).dtype), X32, X64, grad=False)
    same_error(lambda L, a, b: L.heaviside(a, b), XI, X64)
    error(lambda L, a: L.logaddexp(a, a), XI)
    error(lambda L, a: L.hypot(a, a), XI)
    x = tj.tensor(EDGES.copy())
    x.nan_to_num_()
    assert x.numpy().tolist() == torch.tensor(EDGES).nan_to_num().tolist()


def test_elementwise_traced_equal_eager():
    x, y = X32, np.roll(X32, 1, 1)
    traced_equals_eager(lambda a, b: tj.logaddexp(a, b) + tj.logaddexp2(a, b) * tj.hypot(a, b), x, y)
    traced_equals_eager(lambda a, b: tj.copysign(a, b) - tj.heaviside(a, b), x, y)
    traced_equals_eager(lambda a: tj.nan_to_num(a, 1.0), EDGES.astype(np.float32))


def test_cumulative():
    for x in (X64, X32, XI, EDGES, EDGES.astype(np.float32), np.array([[1.0, 1, 2, 2, 1, 3, 3]])):
        for d in (0, 1, -1):
            check(lambda L, a: L.cummax(a, d), x)
            check(lambda L, a: a.cummin(d), x)
    for x in (X64, X32, np.array([[-1000.0, 0.0, -INF, 5, 1000, -1000]]), np.array([[-INF, -INF, 1.0]])):
        check(lambda L, a: L.logcumsumexp(a, 1), x)
        check(lambda L, a: a.logcumsumexp(0), x)
    check(lambda L, a: (L.cummax(a, 0), L.cummin(a, 0), L.logcumsumexp(a, 0)), np.array(2.5))
    check(lambda L, a: L.logcumsumexp(a * a, 1), X64)          # a second derivative runs through the VJP too
    xs = [tj.tensor(X64, requires_grad=True), torch.tensor(X64, requires_grad=True)]
    g2 = []
    for lib, x in zip((tj, torch), xs):
        g, = lib.autograd.grad(lib.logcumsumexp(x, 1).sum(), x, create_graph=True)
        g2.append(lib.autograd.grad((g * g).sum(), x)[0].numpy())
    np.testing.assert_allclose(g2[0], g2[1], rtol=1e-9, atol=1e-12)
    same_error(lambda L, a: L.cummax(a, 2), X64)
    error(lambda L, a: L.logcumsumexp(a, 0), XI)


def test_cumulative_traced_equal_eager():
    traced_equals_eager(lambda a: tj.cummax(a, 1).values + tj.cummin(a, 0).values, X32)
    traced_equals_eager(lambda a: tj.cummax(a, 1).indices * 2 + tj.cummin(a, 1).indices, X32)
    traced_equals_eager(lambda a: tj.logcumsumexp(a, 1) * 2, X32)


QX = np.array([[0.5, -1.0, 2.0, 7.0, 3.0, 3.0], [1.0, NAN, 4.0, -2.0, NAN, 0.0], [NAN] * 6, [1, 2, 3, 4, 5, 6.0]])


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_quantile(interp, dt):
    x = X64.astype(dt)
    qs = np.array([0.0, 0.1, 0.25, 0.5, 0.7, 0.75, 1.0], dt)
    for name in ("quantile", "nanquantile"):
        for dim, keep in ((None, False), (None, True), (0, False), (1, True), (-1, False)):
            check(lambda L, a: getattr(L, name)(a, 0.3, dim, keep, interpolation=interp), x)
            check(lambda L, a, q: getattr(a, name)(q, dim, keep, interpolation=interp), x, qs)
            check(lambda L, a, q: getattr(L, name)(a, q[3], dim, keep, interpolation=interp), x, qs)
        check(lambda L, a, q: getattr(L, name)(a, q, 1, interpolation=interp), QX.astype(dt), qs, grad=False)
        check(lambda L, a: getattr(L, name)(a, 0.5), np.array(2.0, dt))
    x2 = np.array([[1.0, 2.0, 2.0, 5.0, 5.0]], dt)   # ties and exact halves (round half to even for nearest)
    check(lambda L, a, q: L.quantile(a, q, 1, interpolation=interp), x2, np.array([0.125, 0.375, 0.5, 0.625], dt))


def test_quantile_errors_and_traced():
    same_error(lambda L, a: L.quantile(a, 1.5), X64)
    same_error(lambda L, a: L.nanquantile(a, -0.5), X64)
    same_error(lambda L, a: L.quantile(a.long(), 0.5), X64)
    same_error(lambda L, a: L.quantile(a, L.tensor([0.5], dtype=L.float32)), X64)
    same_error(lambda L, a: L.quantile(a, L.tensor([[0.5]], dtype=L.float64)), X64)
    same_error(lambda L, a: L.quantile(a, L.tensor([0.5, 2.0], dtype=L.float64)), X64)
    same_error(lambda L, a: L.quantile(a, 0.5, interpolation="cubic"), X64)
    same_error(lambda L, a: L.quantile(a[:0], 0.5), X64)
    traced_equals_eager(lambda a, q: tj.quantile(a, q, 1, True) + tj.nanquantile(a, 0.3), X32,
                        np.array([0.2, 0.9], np.float32))
    traced_equals_eager(lambda a: tj.nanquantile(a, 0.4, 1, interpolation="nearest"), QX.astype(np.float32))


def test_mode():
    for x in (np.array([3, 1, 2, 1, 2, 3, 3, 1]), np.array([[2.0, 1, 1, 2], [5, 5, 0, 0], [1, 2, 3, 4]]),
              RNG.integers(0, 3, (4, 7)).astype(np.float64), RNG.integers(0, 3, (4, 7)).astype(np.float32),
              RNG.integers(0, 3, (4, 7, 2)), np.array(4.0)):
        for d in range(-max(x.ndim, 1), max(x.ndim, 1)):
            check(lambda L, a: L.mode(a, d), x)
            check(lambda L, a: a.mode(d, keepdim=True), x)
    same_error(lambda L, a: L.mode(a, 0), np.zeros((0,)))
    traced_equals_eager(lambda a: tj.mode(a, 1).values * 2 + tj.mode(a, 0, True).indices.sum(),
                        RNG.integers(0, 3, (4, 7)).astype(np.float32))


def test_unique_consecutive():
    x = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    for kw in ({}, {"return_inverse": True}, {"return_counts": True}, {"return_inverse": True, "return_counts": True}):
        check(lambda L, a: L.unique_consecutive(a, **kw), x)
        check(lambda L, a: a.reshape(2, 4).unique_consecutive(**kw), x)
        check(lambda L, a: L.unique_consecutive(a, **kw), np.array([1.0, 1.0, 2.0, NAN, NAN, 2.0]), grad=False)
        m = np.array([[1, 1], [1, 1], [2, 3], [2, 3], [1, 1]])
        for d in (0, 1, -1):
            check(lambda L, a: L.unique_consecutive(a, dim=d, **kw), m)
        check(lambda L, a: L.unique_consecutive(a, dim=0, **kw), m.astype(np.float64), grad=False)
    check(lambda L, a: L.unique_consecutive(a), np.array(3))
    check(lambda L, a: L.unique_consecutive(a, return_counts=True), np.zeros((0,)), grad=False)
    with pytest.raises(tj.TraceError, match="unique_consecutive"):      # eager only: its shape depends on values
        tj.trace(lambda a: tj.unique_consecutive(a))(tj.tensor(x))


# ----------------------------------------------------------------------------- group 2: lookups

def test_bincount():
    x = np.array([0, 3, 3, 1, 7, 3])
    check(lambda L, a: L.bincount(a), x)
    check(lambda L, a: a.bincount(minlength=10), x)
    check(lambda L, a: a.bincount(minlength=2), x)
    check(lambda L, a: L.bincount(a[:0]), x)
    check(lambda L, a: L.bincount(a[:0], minlength=3), x)
    check(lambda L, a: L.bincount(a.to(L.uint8)), x)
    for w in (np.arange(6.0), np.arange(6.0).astype(np.float32), np.arange(6), np.arange(6) % 2 == 0):
        check(lambda L, a, b: L.bincount(a, b), x, w, grad=False)
        check(lambda L, a, b: L.bincount(a, b, 9), x, w, grad=False)
    same_error(lambda L, a: L.bincount(a - 1), x)
    same_error(lambda L, a: L.bincount(a.reshape(2, 3)), x)
    same_error(lambda L, a: L.bincount(a, minlength=-1), x)
    same_error(lambda L, a: L.bincount(a, L.ones(2)), x)
    error(lambda L, a: L.bincount(a.double()), x)
    with pytest.raises(tj.TraceError, match="bincount"):
        tj.trace(lambda a: tj.bincount(a))(tj.tensor(x))


def test_histc():
    for dt in (np.float64, np.float32):
        x = (RNG.standard_normal(1000) * 3).astype(dt)
        for bins, lo, hi in ((100, 0, 0), (7, -2, 3), (10, -1.3, 1.7), (1, 0, 0), (5, 2, 2), (13, -10, 10)):
            check(lambda L, a: L.histc(a, bins, lo, hi), x, grad=False)
            check(lambda L, a: a.reshape(10, 100).histc(bins=bins, min=lo, max=hi), x, grad=False)
        edges = np.array([0.0, 1, 2, 3, 4, 4, -1, 5, 2.5, NAN], dt)
        check(lambda L, a: L.histc(a, 4, 0, 4), edges, grad=False)
        check(lambda L, a: L.histc(a, 3), np.array([2.0, 2.0], dt), grad=False)
        check(lambda L, a: L.histc(a, 3), np.zeros(0, dt), grad=False)
    same_error(lambda L, a: L.histc(a, 0), X64)
    same_error(lambda L, a: L.histc(a, 4, 3, 1), X64)
    same_error(lambda L, a: L.histc(a), np.array([1.0, INF]))
    error(lambda L, a: L.histc(a), XI)
    traced_equals_eager(lambda a: tj.histc(a, 6, -1, 1) + tj.histc(a, 6), X32)


SEQ = np.array([1.0, 3, 3, 5, 7, 7, 7, 9])


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int64, np.int32])
def test_searchsorted_and_bucketize(dt):
    s = SEQ.astype(dt)
    v = np.array([[0, 1, 3, 4, 7, 9, 10], [3, 3, 5, 6, 8, 1, 2]]).astype(dt)
    for kw in ({}, {"right": True}, {"side": "right"}, {"side": "left"}, {"out_int32": True}):
        check(lambda L, a, b: L.searchsorted(a, b, **kw), s, v, grad=False)
        check(lambda L, a, b: L.searchsorted(L.stack([a, a * 2]), b, **kw), s, v, grad=False)
        check(lambda L, a, b: L.searchsorted(a, b[0, 2], **kw), s, v, grad=False)
        check(lambda L, a: L.searchsorted(a, 4, **kw), s, grad=False)
        kb = {k: w for k, w in kw.items() if k != "side"}
        check(lambda L, a, b: L.bucketize(b, a, **kb), s, v, grad=False)
        check(lambda L, a: L.bucketize(5, a, **kb), s, grad=False)
    perm = np.array([3, 0, 7, 1, 6, 2, 5, 4])
    check(lambda L, a, b, p: L.searchsorted(a, b, sorter=p), s[perm], v, np.argsort(perm), grad=False)
    check(lambda L, a, b: L.searchsorted(a, b), s, v.astype(np.float64), grad=False)


def test_searchsorted_nan_errors_traced():
    s = np.array([1.0, 2.0, NAN])
    check(lambda L, a, b: (L.searchsorted(a, b), L.searchsorted(a, b, right=True)), s,
          np.array([NAN, 0.5, 1.5, 2.0, 3.0]), grad=False)
    check(lambda L, a, b: L.searchsorted(a, b), np.zeros(0), np.array([1.0]), grad=False)
    same_error(lambda L, a, b: L.searchsorted(a, b, side="left", right=True), SEQ, SEQ)
    same_error(lambda L, a, b: L.searchsorted(a, b, side="middle"), SEQ, SEQ)
    same_error(lambda L, a, b: L.searchsorted(a.reshape(2, 4), b.reshape(4, 2)), SEQ, SEQ)
    same_error(lambda L, a, b: L.bucketize(b, a.reshape(2, 4)), SEQ, SEQ)
    traced_equals_eager(lambda a, b: tj.searchsorted(a, b) + tj.bucketize(b, a, right=True), SEQ.astype(np.float32),
                        X32 * 5)


# ----------------------------------------------------------------------------- group 3: scatter_reduce

SI = np.array([[0, 0, 2, 2, 2], [1, 0, 1, 3, 3]])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    base = RNG.standard_normal((2, 4))
    src = RNG.standard_normal((2, 5))
    src[0, 1] = src[0, 0]                   # ties among the sources: amax/amin split the gradient
    base[1, 3] = src[1, 3]                  # a tie between self and a source
    src[1, 2] = 0.0                         # a zero: prod's gradient
    grad = not (reduce == "prod" and include_self)      # (the old path: no derivative, see the summary)
    for dt in (np.float64, np.float32):
        check(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(SI), s, reduce, include_self=include_self),
              base.astype(dt), src.astype(dt), grad=grad)
        check(lambda L, x, s: x.scatter_reduce(0, L.tensor(SI[:, :3] % 2), s[:, :3], reduce, include_self=include_self),
              base.astype(dt), src.astype(dt), grad=grad)
    check(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(SI), s, reduce, include_self=include_self),
          RNG.integers(-5, 6, (2, 4)), RNG.integers(-5, 6, (2, 5)), grad=False)
    if grad:
        traced_equals_eager(lambda x, s: tj.scatter_reduce(x, 1, tj.tensor(SI), s, reduce,
                                                           include_self=include_self) * 2,
                            base.astype(np.float32), src.astype(np.float32))


def test_scatter_reduce_prod_zeros_and_errors():
    base = np.array([[0.0, 2.0, 3.0, 0.0]])
    src = np.array([[0.0, 5.0, 0.0, 4.0, 2.0]])
    idx = np.array([[0, 1, 1, 2, 2]])
    check(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx), s, "prod", include_self=False), base, src)
    check(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx), s, "amax", include_self=False), base, src)
    check(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx), s, "mean", include_self=True), base, src)
    same_error(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx), s.float(), "mean"), base, src)
    error(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx) + 3, s, "amax"), base, src)
    error(lambda L, x, s: L.scatter_reduce(x, 1, L.tensor(idx), s, "median"), base, src)
    x = tj.tensor(base)
    x.scatter_reduce_(1, tj.tensor(idx), tj.tensor(src), "amin", include_self=False)
    assert x.tolist() == torch.tensor(base).scatter_reduce_(1, torch.tensor(idx), torch.tensor(src), "amin",
                                                            include_self=False).tolist()
