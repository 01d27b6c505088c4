"""Paths of tracejit/ops/linalg.py that the reference-value and gradcheck tests do not reach: matmul's 1-D and batched
forms, the batched Linear's weight gradient, addmm/addmv/baddbmm's alpha and beta, einsum's parsing (implicit
output, ellipses, size-1 broadcasting, diagonals), node names and the error messages. Each was a surviving mutant of
a mutation-testing run (issue 23). References are float64 sums written out (`_mm`), not torch."""
import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F

_rng = np.random.default_rng(23)


def _mm(a, b):
    """Batched matrix product by its definition: out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]."""
    return (np.asarray(a)[..., :, :, None] * np.asarray(b)[..., None, :, :]).sum(-2)


def _t(a, requires_grad=False):
    return tj.tensor(np.asarray(a, np.float64), requires_grad=requires_grad)


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got.detach().numpy() if hasattr(got, "detach") else got), want,
                               rtol=1e-12, atol=1e-12)


def test_matmul_of_vectors_and_batches_has_pytorchs_shapes_and_values():
    v, m, b3 = _rng.standard_normal(3), _rng.standard_normal((3, 4)), _rng.standard_normal((2, 3, 4))
    _close(tj.matmul(_t(v), _t(m)), _mm(v[None], m)[0])                  # [3] @ [3, 4] -> [4]
    _close(tj.matmul(_t(m.T), _t(v)), _mm(m.T, v[:, None])[:, 0])        # [4, 3] @ [3] -> [4]
    assert tj.matmul(_t(v), _t(v)).shape == () and abs(tj.matmul(_t(v), _t(v)).item() - (v * v).sum()) < 1e-12
    out = tj.matmul(_t(v), _t(b3))                                       # [3] @ [2, 3, 4] -> [2, 4]
    assert tuple(out.shape) == (2, 4)
    _close(out, _mm(v[None], b3)[:, 0])
    out = tj.matmul(_t(np.swapaxes(b3, 1, 2)), _t(v))                     # [2, 4, 3] @ [3] -> [2, 4]
    assert tuple(out.shape) == (2, 4)
    _close(out, _mm(np.swapaxes(b3, 1, 2), v[:, None])[..., 0])


def test_matmul_of_a_batch_by_a_matrix_and_of_broadcast_batches():
    a, w = _rng.standard_normal((2, 5, 3)), _rng.standard_normal((3, 4))
    _close(tj.matmul(_t(a), _t(w)), _mm(a, w))
    at = _t(np.swapaxes(a, 0, 1)).transpose(0, 1)                       # batch dims that do not merge in memory
    _close(tj.matmul(at, _t(w)), _mm(a, w))
    x, y = _rng.standard_normal((2, 1, 3, 4)), _rng.standard_normal((5, 4, 2))
    out = tj.matmul(_t(x), _t(y))
    assert tuple(out.shape) == (2, 5, 3, 2)
    _close(out, _mm(x, y))


def test_batched_linear_weight_gradient_sums_over_every_row():
    a, w, g = _rng.standard_normal((2, 5, 3)), _rng.standard_normal((4, 3)), _rng.standard_normal((2, 5, 4))
    at, wt = _t(a, True), _t(w, True)
    (tj.matmul(at, wt.t()) * _t(g)).sum().backward()
    _close(wt.grad, _mm(g.reshape(-1, 4).T, a.reshape(-1, 3)))           # d/dw of sum(g * a @ w^T) = g^T a
    _close(at.grad, _mm(g, w))
    assert wt.grad.numpy().flags.c_contiguous                             # in the weight's layout, as PyTorch
    w2 = _t(w.T.copy(), True)                                             # a plain [3, 4] matrix
    (tj.matmul(_t(a), w2) * _t(g)).sum().backward()
    _close(w2.grad, _mm(a.reshape(-1, 3).T, g.reshape(-1, 4)))


def test_linear_weight_gradient_is_row_major_like_the_weight():
    x, w, g = _rng.standard_normal((5, 3)), _rng.standard_normal((4, 3)), _rng.standard_normal((5, 4))
    wt = _t(w, True)
    (F.linear(_t(x), wt) * _t(g)).sum().backward()
    _close(wt.grad, _mm(g.T, x))
    assert wt.grad.numpy().flags.c_contiguous


def test_addmm_addmv_baddbmm_scale_by_alpha_and_beta_and_beta_zero_ignores_input():
    i, m1, m2 = _rng.standard_normal((2, 4)), _rng.standard_normal((2, 3)), _rng.standard_normal((3, 4))
    _close(tj.addmm(_t(i), _t(m1), _t(m2), beta=0.5, alpha=2.0), 0.5 * i + 2.0 * _mm(m1, m2))
    _close(tj.addmm(_t(i[0]), _t(m1), _t(m2)), i[0] + _mm(m1, m2))       # a broadcast bias row
    nan_in = np.full((2, 4), np.nan)
    _close(tj.addmm(_t(nan_in), _t(m1), _t(m2), beta=0, alpha=3.0), 3.0 * _mm(m1, m2))
    v = _rng.standard_normal(3)
    _close(tj.addmv(_t(i[:, 0]), _t(m1), _t(v), beta=2.0, alpha=0.5), 2.0 * i[:, 0] + 0.5 * _mm(m1, v[:, None])[:, 0])
    _close(tj.addmv(_t([np.nan, np.inf]), _t(m1), _t(v), beta=0), _mm(m1, v[:, None])[:, 0])
    b1, b2, bi = _rng.standard_normal((2, 2, 3)), _rng.standard_normal((2, 3, 4)), _rng.standard_normal((2, 4))
    _close(tj.baddbmm(_t(bi), _t(b1), _t(b2), beta=-1.0, alpha=2.0), -bi + 2.0 * _mm(b1, b2))


def test_addmm_gradients_carry_alpha_and_beta():
    i, m1, m2, g = (_rng.standard_normal(s) for s in ((4,), (2, 3), (3, 4), (2, 4)))
    it, at, bt = _t(i, True), _t(m1, True), _t(m2, True)
    (tj.addmm(it, at, bt, beta=0.5, alpha=3.0) * _t(g)).sum().backward()
    _close(it.grad, 0.5 * g.sum(0))
    _close(at.grad, 3.0 * _mm(g, m2.T))
    _close(bt.grad, 3.0 * _mm(m1.T, g))
    it, at, bt = _t(i, True), _t(m1, True), _t(m2, True)
    (tj.addmm(it, at, bt) * _t(g)).sum().backward()
    _close(it.grad, g.sum(0))
    _close(bt.grad, _mm(m1.T, g))


def test_mv_and_dot_gradients_of_each_operand():
    m, v, g = _rng.standard_normal((2, 3)), _rng.standard_normal(3), _rng.standard_normal(2)
    mt, vt = _t(m, True), _t(v, True)
    (tj.mv(mt, vt) * _t(g)).sum().backward()
    _close(mt.grad, g[:, None] * v[None, :])
    _close(vt.grad, _mm(m.T, g[:, None])[:, 0])
    a, b = _t(v, True), _t(v[::-1].copy(), True)
    tj.dot(a, b).backward()
    _close(a.grad, v[::-1])
    _close(b.grad, v)


def test_node_names_are_pytorchs():
    a, b = _t(_rng.standard_normal((2, 3)), True), _t(_rng.standard_normal((3, 2)), True)
    v = _t(_rng.standard_normal(3), True)
    assert tj.matmul(a, b).grad_fn.name() == "MmBackward0"
    assert tj.bmm(a[None], b[None]).grad_fn.name() == "BmmBackward0"
    assert tj.mv(a, v).grad_fn.name() == "MvBackward0"
    assert tj.dot(v, v).grad_fn.name() == "DotBackward0" and tj.vdot(v, v).grad_fn.name() == "VdotBackward0"
    assert tj.addmm(_t(np.zeros(2)), a, b).grad_fn.name() == "AddmmBackward0"


def test_inner_and_outer():
    x, y = _rng.standard_normal((2, 3)), _rng.standard_normal((4, 5, 3))
    out = tj.inner(_t(x), _t(y))
    assert tuple(out.shape) == (2, 4, 5)
    _close(out, (x[:, None, None, :] * y[None]).sum(-1))
    _close(tj.inner(_t(x), _t(y[0])), (x[:, None, :] * y[0][None]).sum(-1))
    _close(tj.inner(_t(x), _t(y[0, 0])), (x * y[0, 0]).sum(-1))
    _close(tj.inner(_t(x), _t(2.5)), 2.5 * x)
    _close(tj.outer(_t([1.0, 2.0]), _t([3.0, 4.0, 5.0])), [[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]])


def test_einsum_implicit_output_ellipses_and_size_one_broadcasting():
    a, b = _rng.standard_normal((2, 3)), _rng.standard_normal((4, 3))
    out = tj.einsum("ij,kj", _t(a), _t(b))                              # implicit: the letters seen once, sorted
    _close(out, (a[:, None, :] * b[None]).sum(-1))
    _close(tj.einsum("kj,ij", _t(b), _t(a)), (a[:, None, :] * b[None]).sum(-1))
    _close(tj.einsum(" i j , k j -> k i ", [_t(a), _t(b)]), (a[:, None, :] * b[None]).sum(-1).T)
    x, w = _rng.standard_normal((5, 2, 3)), _rng.standard_normal((3, 4))
    out = tj.einsum("...ij,jk", _t(x), _t(w))
    assert tuple(out.shape) == (5, 2, 4)
    _close(out, _mm(x, w))
    y = _rng.standard_normal((2, 1, 3))                                 # ellipses of 1 and 2 dims, right-aligned
    out = tj.einsum("...j,...j->...", _t(y), _t(x[0]))
    assert tuple(out.shape) == (2, 2)
    _close(out, (y * x[0]).sum(-1))
    out = tj.einsum("ij,ij->ij", _t(a[:1]), _t(a))                       # size 1 broadcasts, as in PyTorch
    _close(out, a[:1] * a)


def test_einsum_of_three_operands_matches_two_products():
    a, b, c = _rng.standard_normal((2, 3)), _rng.standard_normal((3, 4)), _rng.standard_normal((4, 5))
    _close(tj.einsum("ij,jk,kl->il", _t(a), _t(b), _t(c)), _mm(_mm(a, b), c))


def test_einsum_diagonal_trace_and_their_gradients():
    m = _rng.standard_normal((3, 3))
    _close(tj.einsum("ii->i", _t(m)), np.diag(m))
    _close(tj.einsum("ii", _t(m)), np.trace(m))
    mt = _t(m, True)
    (tj.einsum("ii->i", mt) * _t([1.0, 2.0, 3.0])).sum().backward()
    _close(mt.grad, np.diag([1.0, 2.0, 3.0]))
    t3 = _t(_rng.standard_normal((2, 3, 2)), True)                      # a repeated subscript beside another
    tj.einsum("iji->j", t3).sum().backward()
    want = np.zeros((2, 3, 2))
    want[0, :, 0] = want[1, :, 1] = 1.0
    _close(t3.grad, want)


def test_einsum_gradients_of_a_summed_away_and_a_broadcast_subscript():
    a, b = _rng.standard_normal((2, 3)), _rng.standard_normal((1, 4))
    at, bt = _t(a, True), _t(b, True)
    tj.einsum("ij,kl->ik", at, bt).sum().backward()                     # j summed in a only, l in b only
    _close(at.grad, np.full((2, 3), b.sum()))
    _close(bt.grad, np.full((1, 4), a.sum()))
    x, y = _rng.standard_normal((1, 3)), _rng.standard_normal((2, 3))
    xt, yt = _t(x, True), _t(y, True)
    tj.einsum("ij,ij->i", xt, yt).sum().backward()                      # x's i of size 1 broadcast against 2
    _close(xt.grad, y.sum(0, keepdims=True))
    _close(yt.grad, np.broadcast_to(x, (2, 3)))


@pytest.mark.parametrize("fn, message", [
    (lambda t: tj.matmul(t(2, 3), t(4, 5)), r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda t: tj.matmul(t(2, 2, 3), t(4, 5)), r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda t: tj.matmul(t(3), t(4)), r"inconsistent tensor size, expected tensor \[3\] and src \[4\] to have the "
                                      r"same number of elements, but got 3 and 4 elements respectively"),
    (lambda t: tj.matmul(t(), t(3)), r"both arguments to matmul need to be at least 1D, but they are 0D and 1D"),
    (lambda t: tj.matmul(t(2, 3), t(3, 4, dtype=tj.float64)),
     r"expected m1 and m2 to have the same dtype, but got: \S+ != \S+"),
    (lambda t: tj.matmul(t(2, 2, 3), t(3, 3, 4)),
     r"The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton dimension 0"),
    (lambda t: tj.mm(t(2, 3, 1), t(3, 4)), r"mm: expected 2D tensors, got 3D and 2D"),
    (lambda t: tj.mm(t(2, 3), t(3)), r"mm: expected 2D tensors, got 2D and 1D"),
    (lambda t: tj.bmm(t(2, 3), t(2, 3, 4)), r"bmm: expected 3D tensors, got 2D and 3D"),
    (lambda t: tj.bmm(t(2, 2, 3), t(2, 3)), r"bmm: expected 3D tensors, got 3D and 2D"),
    (lambda t: tj.bmm(t(2, 2, 3), t(3, 3, 4)), r"bmm: batch sizes differ: 2 and 3"),
    (lambda t: tj.mv(t(2, 3), t(4)), r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda t: tj.mv(t(2, 3), t(3, 1)), r"vector \+ matrix @ vector expected, got 1, 2, 2"),
    (lambda t: tj.mv(t(2, 3), t(3, dtype=tj.float64)),
     r"addmv input tensors must have the same dtype, but got Double, Float, and Double"),
    (lambda t: tj.dot(t(3), t(4)), r"inconsistent tensor size, expected tensor \[3\] and src \[4\] to have the same "
                                   r"number of elements, but got 3 and 4 elements respectively"),
    (lambda t: tj.dot(t(3, 1), t(3)), r"1D tensors expected, but got 2D and 1D tensors"),
    (lambda t: tj.dot(t(3), t(3, dtype=tj.float64)),
     r"dot : expected both vectors to have same dtype, but found Float and Double"),
    (lambda t: tj.inner(t(2, 3), t(4)), r"inner\(\) the last dimension must match on both input tensors but got "
                                        r"shapes \[2, 3\] and \[4\]"),
    (lambda t: tj.addmm(t(2, 4), t(2, 3, 1), t(3, 4)), r"mat1 must be a matrix, got 3-D tensor"),
    (lambda t: tj.addmm(t(2, 4), t(2, 3), t(4)), r"mat2 must be a matrix, got 1-D tensor"),
    (lambda t: tj.addmm(t(2, 4), t(2, 3), t(4, 4)), r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x4\)"),
    (lambda t: tj.addmm(t(2, 4, dtype=tj.float64), t(2, 3), t(3, 4)),
     r"self and mat2 must have the same dtype, but got Double and Float"),
    (lambda t: tj.addmm(t(2, 4), t(2, 3, dtype=tj.float64), t(3, 4)),
     r"mat1 and mat2 must have the same dtype, but got Double and Float"),
    (lambda t: tj.addmm(t(3, 4), t(2, 3), t(3, 4)),
     r"The expanded size of the tensor \(2\) must match the existing size \(3\) at non-singleton dimension 0\."),
    (lambda t: tj.einsum("ij,jk", t(2, 3)), r"einsum\(\): 2 operands in the equation but 1 given"),
    (lambda t: tj.einsum("ijk,jk", t(2, 3), t(3, 4)), r"einsum\(\): the number of subscripts in the equation \(3\) "
                                                       r"does not match the number of dimensions \(2\) for operand 0 "
                                                       r"and no ellipsis was given"),
    (lambda t: tj.einsum("i...jk,jk", t(2, 3), t(3, 4)), r"einsum\(\): the number of subscripts in the equation "
                                                          r"\(3\) does not match the number of dimensions \(2\) for "
                                                          r"operand 0$"),
    (lambda t: tj.einsum("ij,jk->iz", t(2, 3), t(3, 4)), r"einsum\(\): output subscript z does not appear in the "
                                                          r"equation for any input operand"),
    (lambda t: tj.einsum("ij,jk", t(2, 3), t(3, 4, dtype=tj.float64)),
     r"einsum\(\): operands must have the same dtype, got float32 and float64"),
])
def test_error_messages(fn, message):
    with pytest.raises(RuntimeError, match=message):
        fn(lambda *s, dtype=tj.float32: tj.ones(*s, dtype=dtype) if s else tj.tensor(1.0))


def test_tensor_arguments_are_checked_by_name():
    with pytest.raises(TypeError, match=r"^dot\(\): argument 'tensor' \(position 2\) must be Tensor, not list$"):
        tj.dot(tj.ones(3), [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"^mv\(\): argument 'input' \(position 1\) must be Tensor, not float$"):
        tj.mv(1.0, tj.ones(3))
    with pytest.raises(TypeError, match=r"^addmm\(\): argument 'mat2' \(position 3\) must be Tensor, not int$"):
        tj.addmm(tj.ones(2, 2), tj.ones(2, 2), 3)


def test_einsum_shape_rule_broadcasts_size_one_and_refuses_other_sizes():
    from tracejit.ops.linalg import _einsum_meta
    from tracejit.ops.registry import AVal
    f = tj.float32
    out = _einsum_meta(AVal((1, 3), f), AVal((2, 1), f), terms=("ij", "ij"), out="ij")
    assert tuple(out.shape) == (2, 3) and out.dtype is f
    out = _einsum_meta(AVal((2, 3), f), AVal((3, 4), f), terms=("ij", "jk"), out="ki")
    assert tuple(out.shape) == (4, 2)
    with pytest.raises(RuntimeError, match=r"^einsum\(\): operands do not broadcast for subscript j: 3 vs 4$"):
        _einsum_meta(AVal((2, 3), f), AVal((4, 4), f), terms=("ij", "jk"), out="ik")


def test_decompositions_compute_what_the_ops_compute():
    # the parts a backend lowers mv, dot and addmm to (a matmul between views, then the scaled add)
    from tracejit.ops.registry import OPS, call
    m, v, w = _rng.standard_normal((2, 3)), _rng.standard_normal(3), _rng.standard_normal(3)
    cases = [("mv", (_t(m), _t(v)), {}), ("dot", (_t(v), _t(w)), {})]
    i, m2 = _rng.standard_normal((2, 4)), _rng.standard_normal((3, 4))
    for inp in (i, i[0], np.full((2, 4), np.nan)):
        for beta, alpha in ((1, 1), (0.5, 2.0), (0, 3.0), (2.0, 1)):
            if not (np.isnan(inp).any() and beta != 0):
                cases.append(("addmm", (_t(inp), _t(m), _t(m2)), dict(beta=beta, alpha=alpha)))
    for name, args, attrs in cases:
        got, want = OPS[name].decompose(*args, **attrs), call(name, *args, **attrs)
        assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape), (name, attrs)
        _close(got, want.numpy())

