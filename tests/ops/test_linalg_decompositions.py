"""torch.linalg (tracejit/linalg.py and the factorization ops of tracejit/ops/linalg.py): values, dtypes, batching
and errors against PyTorch; every derivative by gradcheck in float64 and against PyTorch's; traced == eager."""
import math
import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(7)


def _spd(*batch, n=3, cond=10.0):
    """Symmetric positive-definite matrices with eigenvalues from 1 to cond."""
    q, _ = np.linalg.qr(_rng.standard_normal(batch + (n, n)))
    w = np.geomspace(1, cond, n)
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


def _pair(a, requires_grad=False):
    a = np.array(a)
    return tj.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def _close(x, y, tol=1e-10):
    if isinstance(x, (tuple, list)):
        for a, b in zip(x, y):
            _close(a, b, tol)
        return
    if x is None or y is None:
        assert x is None and y is None, (x, y)
        return
    xa, ya = x.detach().numpy(), y.detach().numpy()
    assert xa.shape == ya.shape and str(xa.dtype) == str(ya.dtype), (xa.shape, ya.shape, xa.dtype, ya.dtype)
    np.testing.assert_allclose(xa, ya, rtol=tol, atol=tol)


def _grads_match(fn, *arrays, tol=1e-8):
    """fn(lib, *tensors) -> a tensor; its value and the gradient of sum(w * value) equal PyTorch's."""
    tins, pins = zip(*[_pair(a, True) for a in arrays])
    yt, yp = fn(tj, *tins), fn(torch, *pins)
    _close(yt, yp, tol)
    w = _rng.standard_normal(tuple(yp.shape))
    (yt * tj.tensor(w)).sum().backward()
    (yp * torch.tensor(w)).sum().backward()
    for a, b in zip(tins, pins):
        _close(a.grad, b.grad, tol)


# ----------------------------------------------------------------------------- values and gradients vs PyTorch

SQUARE = [(3, 3), (2, 4, 4), (2, 1, 3, 3)]


@pytest.mark.parametrize("shape", SQUARE)
def test_inv_det_slogdet_equal_pytorchs_batched(shape):
    a = _rng.standard_normal(shape) + 2 * np.eye(shape[-1])
    _grads_match(lambda L, x: L.linalg.inv(x), a)
    _grads_match(lambda L, x: L.linalg.det(x), a)
    _grads_match(lambda L, x: L.linalg.slogdet(x).logabsdet, a)
    _grads_match(lambda L, x: L.linalg.slogdet(x).sign * 1.0, a)
    _grads_match(lambda L, x: L.logdet(x @ x.mT), a)
    _grads_match(lambda L, x: x.inverse() + x.det()[..., None, None], a)


@pytest.mark.parametrize("a,cofactor", [([[1.0, 2], [2, 4]], [[4.0, -2], [-2, 1]]),
                                         ([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], [[-3.0, 6, -3], [6, -12, 6],
                                                                                [-3, 6, -3]])])
def test_det_of_a_singular_matrix_has_the_cofactor_gradient(a, cofactor):
    # rank n-1: det = 0, but its gradient (the cofactor matrix) is not zero, and A^-T does not exist.
    # (PyTorch 2.13 returns zeros here: tracejit deliberately gives the derivative, which gradcheck confirms)
    x = _T(a)
    tj.linalg.det(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), cofactor, atol=1e-12)
    assert gradcheck(lambda x: tj.linalg.det(x), [_T(a)])


def test_float32_keeps_its_dtype():
    a = (_rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)).astype(np.float32)
    for f in (lambda L, x: L.linalg.inv(x), lambda L, x: L.linalg.det(x), lambda L, x: L.linalg.svdvals(x),
              lambda L, x: L.linalg.eigvalsh(x), lambda L, x: L.linalg.cholesky(x @ x.mT),
              lambda L, x: L.linalg.matrix_norm(x, "nuc"), lambda L, x: L.linalg.pinv(x)):
        t, p = _pair(a)
        _close(f(tj, t), f(torch, p), 1e-4)


@pytest.mark.parametrize("a_shape,b_shape", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)),
                                             ((2, 3, 3), (3,)), ((2, 1, 3, 3), (4, 3, 2)), ((3, 3), (2, 3, 1))])
def test_solve_broadcasts_vectors_and_batches_as_pytorch(a_shape, b_shape):
    a = _rng.standard_normal(a_shape) + 3 * np.eye(3)
    _grads_match(lambda L, x, y: L.linalg.solve(x, y), a, _rng.standard_normal(b_shape))


def test_solve_right_side():
    a, b = _rng.standard_normal((3, 3)) + 3 * np.eye(3), _rng.standard_normal((2, 3))
    _grads_match(lambda L, x, y: L.linalg.solve(x, y, left=False), a, b)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_murrays_gradient(upper):
    a = _spd(2, n=4, cond=50)
    # the input is symmetrized inside, so both libraries see only symmetric perturbations
    _grads_match(lambda L, x: L.linalg.cholesky(0.5 * (x + x.mT), upper=upper), a)
    _grads_match(lambda L, x: L.cholesky(0.5 * (x + x.mT), upper), a)
    _grads_match(lambda L, x: x.cholesky(), a)      # only the lower triangle is read: a raw gradient, as PyTorch


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(upper):
    a = _spd(2, n=3)
    low = np.linalg.cholesky(a)
    f = np.swapaxes(low, -1, -2) if upper else low
    b = _rng.standard_normal((2, 3, 2))
    # only the factor's triangle is read; PyTorch's gradient lands on the other triangle too, so the factor is
    # made triangular inside (its gradient is then masked in both libraries)
    tri = (lambda L, x: L.triu(x)) if upper else (lambda L, x: L.tril(x))
    _grads_match(lambda L, y, x: L.cholesky_solve(y, tri(L, x), upper=upper), b, f)
    _grads_match(lambda L, x: L.cholesky_inverse(tri(L, x), upper=upper), f[0])


@pytest.mark.parametrize("upper,left,unit", [(True, True, False), (False, True, False), (False, False, True),
                                             (True, False, True)])
def test_solve_triangular(upper, left, unit):
    a = _rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b = _rng.standard_normal((2, 3, 3))
    _grads_match(lambda L, x, y: L.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit), a, b)


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 4, 2), (2, 2, 4)])
def test_qr_reduced_values_and_gradients(shape):
    a = _rng.standard_normal(shape)
    _grads_match(lambda L, x: L.linalg.qr(x).Q, a)
    _grads_match(lambda L, x: L.linalg.qr(x).R, a)
    _grads_match(lambda L, x: L.linalg.qr(x)[0] @ L.linalg.qr(x)[1].sum(-1, keepdim=True), a)


def test_qr_complete_and_r_modes():
    tall = _rng.standard_normal((2, 5, 3))
    t, p = _pair(tall)
    _close(tj.linalg.qr(t, mode="complete"), torch.linalg.qr(p, mode="complete"))
    assert tuple(tj.linalg.qr(t, mode="complete").Q.shape) == (2, 5, 5)
    _close(tj.linalg.qr(t, mode="r"), torch.linalg.qr(p, mode="r"))
    _close(tj.qr(t, some=False), torch.qr(p, some=False))
    _grads_match(lambda L, x: L.linalg.qr(x, mode="complete").R, _rng.standard_normal((4, 4)))
    _grads_match(lambda L, x: L.linalg.qr(x, mode="complete").Q, _rng.standard_normal((3, 5)))


def test_qr_derivatives_pytorch_refuses():
    x = tj.tensor(_rng.standard_normal((4, 2)), requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        tj.linalg.qr(x, mode="complete").Q.sum().backward()
    with pytest.raises(RuntimeError, match="not computed when mode='r'"):
        tj.linalg.qr(x, mode="r").R.sum().backward()


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_values_and_gauge_invariant_gradients(uplo):
    a = _rng.standard_normal((2, 4, 4))
    sym = lambda x: x + x.mT  # noqa: E731
    _grads_match(lambda L, x: L.linalg.eigh(sym(x), UPLO=uplo).eigenvalues, a)
    _grads_match(lambda L, x: L.linalg.eigvalsh(sym(x), UPLO=uplo), a)
    # |V|^2 does not depend on the eigenvectors' signs
    _grads_match(lambda L, x: L.linalg.eigh(sym(x), UPLO=uplo).eigenvectors ** 2, a, tol=1e-7)
    # one triangle only is read
    b = a[0].copy()
    b[np.triu_indices(4, 1) if uplo == "L" else np.tril_indices(4, -1)] = 100.0
    t, p = _pair(b)
    _close(tj.linalg.eigvalsh(t, UPLO=uplo), torch.linalg.eigvalsh(p, UPLO=uplo))


def test_eigh_of_repeated_eigenvalues_gives_infinite_vector_gradients():
    x = tj.eye(3, dtype=tj.float64).requires_grad_()
    (tj.linalg.eigh(x).eigenvectors ** 3).sum().backward()
    assert not np.all(np.isfinite(x.grad.numpy()))
    y = tj.eye(3, dtype=tj.float64).requires_grad_()
    tj.linalg.eigvalsh(y).sum().backward()           # the eigenvalues alone are fine
    np.testing.assert_allclose(y.grad.numpy(), np.eye(3), atol=1e-14)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 2), (2, 2, 5)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_tall_wide_full_and_reduced(shape, full):
    a = _rng.standard_normal(shape)
    t, p = _pair(a)
    u, s, vh = tj.linalg.svd(t, full_matrices=full)
    pu, ps, pvh = torch.linalg.svd(p, full_matrices=full)
    assert tuple(u.shape) == tuple(pu.shape) and tuple(vh.shape) == tuple(pvh.shape)
    _close(s, ps)
    k = min(shape[-2:])
    rebuilt = (u[..., :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(rebuilt.numpy(), a, atol=1e-12)
    # losses invariant to the singular vectors' signs: U^2, Vh^2, U diag(S) Vh
    _grads_match(lambda L, x: L.linalg.svd(x, full_matrices=full).S, a)
    _grads_match(lambda L, x: L.linalg.svd(x, full_matrices=full).U[..., :k] ** 2, a, tol=1e-7)
    _grads_match(lambda L, x: L.linalg.svd(x, full_matrices=full).Vh[..., :k, :] ** 2, a, tol=1e-7)
    _grads_match(lambda L, x: L.linalg.svdvals(x), a)


def test_torch_svd_returns_v():
    a = _rng.standard_normal((4, 3))
    t, p = _pair(a)
    u, s, v = tj.svd(t)
    pu, ps, pv = torch.svd(p)
    _close((u.abs(), s, v.abs()), (pu.abs(), ps, pv.abs()))
    _close(tj.svd(t, compute_uv=False), torch.svd(p, compute_uv=False))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_pinv_and_its_gradient(shape):
    a = _rng.standard_normal(shape)
    _grads_match(lambda L, x: L.linalg.pinv(x), a)
    _grads_match(lambda L, x: L.pinverse(x), a)
    sym = _spd(n=3) - 2 * np.eye(3)
    _grads_match(lambda L, x: L.linalg.pinv(x + x.mT, hermitian=True), sym)


def test_pinv_cuts_small_singular_values_as_pytorch():
    a = np.diag([1.0, 1e-3, 1e-17])
    for kw in ({}, {"rtol": 1e-2}, {"atol": 1e-4}, {"atol": 0.5, "rtol": 1e-6}):
        t, p = _pair(a)
        _close(tj.linalg.pinv(t, **kw), torch.linalg.pinv(p, **kw))


ORDS = ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]


@pytest.mark.parametrize("ord", ORDS)
def test_matrix_norm_all_orders(ord):
    a = _rng.standard_normal((2, 3, 4))
    _grads_match(lambda L, x: L.linalg.matrix_norm(x, ord), a)
    _grads_match(lambda L, x: L.linalg.matrix_norm(x, ord, dim=(0, 2), keepdim=True), a)
    _grads_match(lambda L, x: L.linalg.matrix_norm(x, ord, dim=(-1, 0)), a)
    _grads_match(lambda L, x: L.linalg.norm(x[0], ord), a)


@pytest.mark.parametrize("call", [
    lambda L, x: L.linalg.norm(x), lambda L, x: L.linalg.norm(x, dim=1), lambda L, x: L.linalg.norm(x, 3, dim=-1),
    lambda L, x: L.linalg.norm(x, dim=(1, 2), keepdim=True), lambda L, x: L.linalg.norm(x[0, 0], 1),
    lambda L, x: L.linalg.vector_norm(x, 3.5, dim=(0, 2)), lambda L, x: L.linalg.vector_norm(x, math.inf)])
def test_norm_chooses_vector_or_matrix_as_pytorch(call):
    _grads_match(call, _rng.standard_normal((2, 3, 4)))


def test_cross_multi_dot_matrix_power_vecdot_diagonal():
    a, b = _rng.standard_normal((4, 3)), _rng.standard_normal((1, 3))
    _grads_match(lambda L, x, y: L.linalg.cross(x, y), a, b)
    _grads_match(lambda L, x, y: L.linalg.cross(x.mT, y.mT, dim=0), a, b)
    _grads_match(lambda L, x, y: L.cross(x, y, dim=1), a, b)
    _grads_match(lambda L, x, y: L.linalg.vecdot(x, y), a, b)
    mats = [_rng.standard_normal(s) for s in [(3,), (3, 4), (4, 2), (2, 5), (5,)]]
    _grads_match(lambda L, *m: L.linalg.multi_dot(m), *mats)
    _grads_match(lambda L, *m: L.linalg.multi_dot(m), *mats[1:4])
    sq = _rng.standard_normal((2, 3, 3)) + 2 * np.eye(3)
    for n in (0, 1, 2, 5, -1, -3):
        _grads_match(lambda L, x: L.linalg.matrix_power(x, n) * 1.0, sq)
    _grads_match(lambda L, x: x.matrix_power(3), sq)
    _grads_match(lambda L, x: L.linalg.diagonal(x, offset=1), sq)
    _grads_match(lambda L, x, y: L.linalg.matmul(x, y), a, b.T)


def test_cross_without_dim_takes_the_first_dim_of_size_3_with_a_warning():
    a, b = _rng.standard_normal((3, 3)), _rng.standard_normal((3, 3))
    with pytest.warns(UserWarning, match="without specifying the dim"):
        r = tj.cross(tj.tensor(a), tj.tensor(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(r, torch.cross(torch.tensor(a), torch.tensor(b)))


@pytest.mark.parametrize("a_shape,b_shape", [((5, 3), (5, 2)), ((5, 3), (5,)), ((2, 5, 3), (2, 5)),
                                             ((3, 5), (3, 2))])
def test_lstsq_solution(a_shape, b_shape):
    a, b = _rng.standard_normal(a_shape), _rng.standard_normal(b_shape)
    _grads_match(lambda L, x, y: L.linalg.lstsq(x, y).solution, a, b)
    t, p = _pair(a)
    assert tj.linalg.lstsq(t, tj.tensor(b)).rank.tolist() == torch.linalg.lstsq(p, torch.tensor(b)).rank.tolist()
    _close(tj.linalg.lstsq(t, tj.tensor(b), driver="gelsd").singular_values,
           torch.linalg.lstsq(p, torch.tensor(b), driver="gelsd").singular_values)


def test_lstsq_of_a_rank_deficient_matrix_is_the_least_norm_solution():
    a = np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1], [0, 1, 1]])     # rank 2
    b = _rng.standard_normal((4, 2))
    t, p = _pair(a)
    r, pr = tj.linalg.lstsq(t, tj.tensor(b)), torch.linalg.lstsq(p, torch.tensor(b))
    _close(r.solution, pr.solution, 1e-9)
    assert int(r.rank) == int(pr.rank) == 2


def test_ill_conditioned_solve_and_inverse_match_pytorch():
    h = 1.0 / (np.arange(6)[:, None] + np.arange(6)[None, :] + 1)     # Hilbert 6x6: cond ~ 1.5e7
    b = _rng.standard_normal(6)
    _grads_match(lambda L, x, y: L.linalg.solve(x, y), h, b, tol=1e-5)
    t, p = _pair(h, True)
    tj.linalg.inv(t)[0, 0].backward()
    torch.linalg.inv(p)[0, 0].backward()
    np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-5)


def test_namedtuples_and_methods():
    a = _spd(n=3)
    t = tj.tensor(a)
    assert set(tj.linalg.slogdet(t)._fields) == {"sign", "logabsdet"}
    assert tj.linalg.eigh(t)._fields == ("eigenvalues", "eigenvectors")
    assert tj.linalg.svd(t)._fields == ("U", "S", "Vh")
    assert tj.linalg.qr(t)._fields == ("Q", "R")
    for name in ("inverse", "det", "logdet", "slogdet", "cholesky", "pinverse", "qr", "svd"):
        _close(getattr(tj.tensor(a), name)()[0] if name in ("slogdet", "qr", "svd")
               else getattr(tj.tensor(a), name)(),
               getattr(torch.tensor(a), name)()[0] if name in ("slogdet", "qr", "svd")
               else getattr(torch.tensor(a), name)())
    assert tj.linalg.inv(tj.tensor(a, requires_grad=True)).grad_fn.name() == "LinalgInvExBackward0"


def test_logdet_of_negative_and_zero_determinants():
    t, p = _pair(np.stack([-np.eye(3), np.zeros((3, 3)), 2 * np.eye(3)]))
    _close(tj.logdet(t), torch.logdet(p))
    _close(tj.linalg.slogdet(t), torch.linalg.slogdet(p))


# ----------------------------------------------------------------------------- errors as PyTorch raises them

ERRORS = [
    lambda L: L.linalg.inv(L.zeros(2, 2, dtype=L.float64)),
    lambda L: L.linalg.inv(L.tensor([[[1.0, 0], [0, 1]], [[1.0, 2], [2, 4]]])),
    lambda L: L.linalg.inv(L.ones(2, 3)),
    lambda L: L.linalg.inv(L.ones(3)),
    lambda L: L.linalg.inv(L.eye(2, dtype=L.int64)),
    lambda L: L.linalg.inv(L.eye(2, dtype=L.float16)),
    lambda L: L.linalg.solve(L.zeros(2, 2), L.ones(2)),
    lambda L: L.linalg.solve(L.zeros(3, 2, 2), L.ones(3, 2)),
    lambda L: L.linalg.solve(L.ones(2, 3), L.ones(2)),
    lambda L: L.linalg.solve(L.eye(2), L.ones(3)),
    lambda L: L.linalg.solve(L.eye(2), L.ones(2, 3, 2)),
    lambda L: L.linalg.solve(L.eye(2), L.ones(2, dtype=L.float64)),
    lambda L: L.linalg.det(L.ones(2, 3)),
    lambda L: L.linalg.slogdet(L.ones(4)),
    lambda L: L.linalg.cholesky(-L.eye(3)),
    lambda L: L.linalg.cholesky(L.diag(L.tensor([1.0, -1, 1]))),
    lambda L: L.linalg.cholesky(L.stack([L.eye(2), -L.eye(2)])),
    lambda L: L.linalg.cholesky(L.ones(2, 3)),
    lambda L: L.linalg.eigh(L.ones(2, 3)),
    lambda L: L.linalg.eigh(L.eye(2), UPLO="X"),
    lambda L: L.linalg.qr(L.ones(2, 3), mode="x"),
    lambda L: L.linalg.svd(L.ones(3)),
    lambda L: L.linalg.cross(L.ones(2), L.ones(2)),
    lambda L: L.linalg.cross(L.ones(2, 3), L.ones(4, 1, 3)),
    lambda L: L.linalg.multi_dot([L.ones(2)]),
    lambda L: L.linalg.multi_dot([L.ones(3, 3, 3), L.ones(3, 3)]),
    lambda L: L.linalg.matrix_power(L.ones(2, 3), 2),
    lambda L: L.linalg.matrix_power(L.zeros(2, 2), -1),
    lambda L: L.linalg.matrix_norm(L.ones(3)),
    lambda L: L.linalg.matrix_norm(L.ones(3, 3), 3),
    lambda L: L.linalg.norm(L.ones(2, 3, 4), "fro"),
    lambda L: L.linalg.norm(L.ones(2, 3), "fro", dim=1),
    lambda L: L.linalg.vector_norm(L.ones(2, 3), "fro"),
]


def _error(L, f):
    try:
        f(L)
    except Exception as e:      # noqa: BLE001  (the error itself is compared)
        return type(e).__name__.replace("_LinAlgError", "LinAlgError"), isinstance(e, RuntimeError), str(e)
    return None


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_equal_pytorchs(i):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _error(torch, ERRORS[i]), _error(tj, ERRORS[i])
    assert want is not None and got == want


def test_linalg_error_is_a_runtime_error():
    assert issubclass(tj.linalg.LinAlgError, RuntimeError)
    with pytest.raises(tj.linalg.LinAlgError, match="singular"):
        tj.linalg.solve(tj.zeros(2, 2), tj.ones(2))


# ----------------------------------------------------------------------------- numerical gradient checks (float64)

def _T(a):
    return tj.tensor(np.array(a, np.float64), requires_grad=True)


def _sym(x):
    return x + x.mT


GRADCHECKS = {
    "inv": (lambda x: tj.linalg.inv(x), [_rng.standard_normal((2, 3, 3)) + 2 * np.eye(3)]),
    "solve": (lambda x, y: tj.linalg.solve(x, y), [_rng.standard_normal((2, 3, 3)) + 2 * np.eye(3),
                                                    _rng.standard_normal((3, 2))]),
    "det": (lambda x: tj.linalg.det(x), [_rng.standard_normal((2, 3, 3))]),
    "slogdet": (lambda x: tj.linalg.slogdet(x).logabsdet, [_rng.standard_normal((2, 3, 3))]),
    "cholesky": (lambda x: tj.linalg.cholesky(_sym(x) + 4 * tj.eye(3, dtype=tj.float64)), [_rng.random((3, 3))]),
    "cholesky_upper": (lambda x: tj.linalg.cholesky(_sym(x) + 4 * tj.eye(3, dtype=tj.float64), upper=True),
                       [_rng.random((2, 3, 3))]),
    "qr_tall": (lambda x: tj.linalg.qr(x), [_rng.standard_normal((4, 3))]),
    "qr_wide": (lambda x: tj.linalg.qr(x), [_rng.standard_normal((2, 3))]),
    "qr_complete_square": (lambda x: tj.linalg.qr(x, mode="complete"), [_rng.standard_normal((3, 3))]),
    "eigh": (lambda x: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(tj.linalg.eigh(_sym(x))),
             [_rng.standard_normal((3, 3))]),
    "svd_tall": (lambda x: (lambda r: (r.U ** 2, r.S, r.Vh ** 2))(tj.linalg.svd(x, full_matrices=False)),
                 [_rng.standard_normal((4, 3))]),
    "svd_wide_full": (lambda x: (lambda r: (r.U ** 2, r.S, r.Vh[:2] ** 2))(tj.linalg.svd(x)),
                      [_rng.standard_normal((2, 4))]),
    "pinv": (lambda x: tj.linalg.pinv(x), [_rng.standard_normal((3, 2))]),
    "matrix_norm_nuc": (lambda x: tj.linalg.matrix_norm(x, "nuc"), [_rng.standard_normal((3, 4))]),
    "matrix_norm_2": (lambda x: tj.linalg.matrix_norm(x, -2), [_rng.standard_normal((3, 4))]),
    "cholesky_solve": (lambda b, f: tj.cholesky_solve(b, tj.tril(f) + 3 * tj.eye(3, dtype=tj.float64)),
                       [_rng.standard_normal((3, 2)), _rng.random((3, 3))]),
    "lstsq": (lambda a, b: tj.linalg.lstsq(a, b).solution, [_rng.standard_normal((4, 2)),
                                                              _rng.standard_normal((4, 2))]),
}


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck(name):
    fn, arrays = GRADCHECKS[name]
    assert gradcheck(fn, [_T(a) for a in arrays])


@pytest.mark.parametrize("name", ["inv", "solve", "det", "slogdet", "cholesky", "qr_tall", "eigh", "pinv"])
def test_gradgradcheck(name):
    fn, arrays = GRADCHECKS[name]

    def scalar(*xs):        # one output: gradgradcheck's random cotangents stay gauge invariant
        out = fn(*xs)
        out = out if isinstance(out, tuple) else (out,)
        return sum((o * o).sum() for o in out)
    assert gradgradcheck(scalar, [_T(a) for a in arrays])


def test_a_wrong_vjp_is_caught(monkeypatch):
    # the checks bite: inv's gradient with the wrong sign fails gradcheck
    from tracejit.ops.registry import OPS
    op = OPS["linalg_inv"]
    right = op.vjp
    monkeypatch.setattr(op, "vjp", lambda c, g: tuple(-x for x in right(c, g)))
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        gradcheck(lambda x: tj.linalg.inv(x), [_T(np.eye(2) * 2 + 0.1)])


# ----------------------------------------------------------------------------- traced == eager

def _gauss_nll(x, mean, a):
    """A batch's Gaussian negative log-likelihood with covariance A A^T + I: cholesky, solve and logdet."""
    cov = a @ a.mT + tj.eye(a.shape[-1], dtype=a.dtype)
    low = tj.linalg.cholesky(cov)
    z = tj.linalg.solve_triangular(low, (x - mean).mT, upper=False)
    maha = (z * z).sum(0)
    logdet = 2 * tj.log(tj.linalg.diagonal(low)).sum(-1)
    return 0.5 * (maha + logdet + x.shape[-1] * math.log(2 * math.pi)).mean() + 1e-3 * tj.logdet(cov) \
        + 1e-3 * tj.linalg.solve(cov, mean).sum()


def test_traced_gaussian_log_likelihood_equals_eager_and_scipy_formula():
    x = _rng.standard_normal((8, 3))
    mean, a = _rng.standard_normal(3), _rng.standard_normal((3, 3))
    eager = [_T(v) for v in (x, mean, a)]
    traced = [_T(v) for v in (x, mean, a)]
    ye = _gauss_nll(*eager)
    f = tj.trace(_gauss_nll)
    yt = f(*traced)
    np.testing.assert_allclose(yt.item(), ye.item(), rtol=1e-12)
    ye.backward()
    yt.backward()
    for e, t in zip(eager, traced):
        np.testing.assert_allclose(t.grad.numpy(), e.grad.numpy(), rtol=1e-10, atol=1e-12)
    cov = a @ a.T + np.eye(3)       # the same number by its definition
    d = x - mean
    want = 0.5 * np.mean(np.einsum("bi,ij,bj->b", d, np.linalg.inv(cov), d) + np.linalg.slogdet(cov)[1]
                         + 3 * math.log(2 * math.pi)) + 1e-3 * np.linalg.slogdet(cov)[1] \
        + 1e-3 * np.linalg.solve(cov, mean).sum()
    np.testing.assert_allclose(ye.item(), want, rtol=1e-12)
    # against PyTorch's autograd as well
    pt = [torch.tensor(v, requires_grad=True) for v in (x, mean, a)]
    pcov = pt[2] @ pt[2].mT + torch.eye(3, dtype=torch.float64)
    pl = torch.linalg.cholesky(pcov)
    pz = torch.linalg.solve_triangular(pl, (pt[0] - pt[1]).mT, upper=False)
    py = 0.5 * ((pz * pz).sum(0) + 2 * torch.log(torch.linalg.diagonal(pl)).sum(-1)
                + 3 * math.log(2 * math.pi)).mean() + 1e-3 * torch.logdet(pcov) \
        + 1e-3 * torch.linalg.solve(pcov, pt[1]).sum()
    py.backward()
    for e, p in zip(eager, pt):
        np.testing.assert_allclose(e.grad.numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_traced_factorizations_equal_eager():
    def f(a, b):
        u, s, vh = tj.linalg.svd(a, full_matrices=False)
        q, r = tj.linalg.qr(a)
        w, v = tj.linalg.eigh(a.mT @ a)
        return ((u * u).sum() + s.sum() + (vh ** 2).sum() + (q @ r).sum() + w.sum() + (v ** 2).sum()
                + tj.linalg.pinv(a).sum() + tj.linalg.det(a[..., :3, :]).sum() + tj.linalg.inv(b).sum()
                + tj.linalg.matrix_norm(a, "nuc").sum() + tj.linalg.slogdet(b).logabsdet.sum())
    a, b = _rng.standard_normal((2, 4, 3)), _rng.standard_normal((2, 3, 3)) + 2 * np.eye(3)
    ea, eb, ta, tb = _T(a), _T(b), _T(a), _T(b)
    ye, yt = f(ea, eb), tj.trace(f)(ta, tb)
    np.testing.assert_allclose(yt.item(), ye.item(), rtol=1e-12)
    ye.backward()
    yt.backward()
    np.testing.assert_allclose(ta.grad.numpy(), ea.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), eb.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_traced_singular_matrix_raises_linalg_error():
    f = tj.trace(lambda a: tj.linalg.inv(a) * 2)
    f(tj.eye(2))
    with pytest.raises(tj.linalg.LinAlgError, match="singular"):
        f(tj.zeros(2, 2))
