"""Surviving mutants of tracejit/ops/linalg.py after test_linalg_edges.py (issue 23), killed one by one: a gradient
of one operand when the other needs none, matmul's node for two vectors, its squeezes and messages, the weight
gradient's layout (what a hook on w.t() sees, as in PyTorch), einsum's diagonals when fresh subscripts run short.
Torch-free: the references are float64 sums written out here."""
import numpy as np
import pytest

import tracejit as tj

_rng = np.random.default_rng(2323)


def _mm(a, b):
    return (np.asarray(a)[..., :, :, None] * np.asarray(b)[..., None, :, :]).sum(-2)


def _t(a, requires_grad=False, dtype=np.float64):
    return tj.tensor(np.asarray(a, dtype), requires_grad=requires_grad)


def _close(got, want, tol=1e-12):
    np.testing.assert_allclose(np.asarray(got.detach().numpy() if hasattr(got, "detach") else got), want,
                               rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- matmul


@pytest.mark.parametrize("sa, sb", [((2, 3), (3, 4)), ((2, 5, 3), (3, 4)), ((2, 5, 3), (2, 3, 4)), ((3,), (3, 4))])
def test_matmul_gradient_of_one_operand_when_the_other_needs_none(sa, sb):
    a, b = _rng.standard_normal(sa), _rng.standard_normal(sb)
    g = _rng.standard_normal(np.matmul(a, b).shape)
    at = _t(a, True)
    (tj.matmul(at, _t(b)) * _t(g)).sum().backward()
    a2, g2 = (a[None], g[..., None, :]) if a.ndim == 1 else (a, g)
    ga = _mm(g2, np.swapaxes(b, -1, -2))
    _close(at.grad, ga.sum(tuple(range(ga.ndim - a2.ndim))).reshape(a.shape))
    bt = _t(b, True)
    (tj.matmul(_t(a), bt) * _t(g)).sum().backward()
    gb = _mm(np.swapaxes(a2, -1, -2), g2)
    _close(bt.grad, gb.sum(tuple(range(gb.ndim - b.ndim))))


def test_matmul_of_two_vectors_is_a_dot_node_and_of_a_matrix_and_a_vector_an_mv_node():
    v, w, m = (_t(_rng.standard_normal(s), True) for s in ((3,), (3,), (2, 3)))
    out = tj.matmul(v, w)
    assert out.grad_fn.name() == "DotBackward0" and out.shape == ()
    out.backward()
    _close(v.grad, w.detach().numpy())
    assert tj.matmul(m, v).grad_fn.name() == "MvBackward0"


def test_matmul_squeezes_only_the_vectors_dim():
    v = _rng.standard_normal(3)
    b = _rng.standard_normal((1, 3, 4))
    out = tj.matmul(_t(v), _t(b))                        # [3] @ [1, 3, 4] -> [1, 4], the batch dim kept
    assert tuple(out.shape) == (1, 4)
    _close(out, _mm(v[None], b)[:, 0])
    a = _rng.standard_normal((1, 1, 3))
    out = tj.matmul(_t(a), _t(v))                        # [1, 1, 3] @ [3] -> [1, 1]
    assert tuple(out.shape) == (1, 1)
    _close(out, _mm(a, v[:, None])[..., 0])
    out = tj.matmul(_t(np.ones((1, 1, 3))), _t(np.ones((1, 3, 1))))
    assert tuple(out.shape) == (1, 1, 1)


@pytest.mark.parametrize("sb", [(4, 5), (4, 1)])
def test_matmul_of_a_vector_by_a_mismatched_matrix_names_the_vector_as_one_row(sb):
    # PyTorch 2.13: [3] @ [4, N] is unsqueeze(0).mm: "(1x3 and 4xN)"
    with pytest.raises(RuntimeError, match=rf"^mat1 and mat2 shapes cannot be multiplied \(1x3 and 4x{sb[1]}\)$"):
        tj.matmul(tj.ones(3), tj.ones(*sb))


def test_matmul_dtype_message_for_a_vector_and_a_matrix():
    with pytest.raises(RuntimeError, match=r"^expected m1 and m2 to have the same dtype, but got: "):
        tj.matmul(tj.ones(3), tj.ones(3, 4, dtype=tj.float64))


# ----------------------------------------------------------------------------- the weight gradient's layout


def _grad_strides_seen(make, b):
    seen = []
    b.register_hook(lambda g: seen.append(g.numpy().strides))
    make(b).sum().backward()
    return seen[0]


def test_weight_gradient_arrives_in_the_transposed_weights_layout_as_in_pytorch():
    # PyTorch's mm backward computes mat2's gradient in mat2's layout: for w.t() of a row-major w, column-major (what
    # a hook on w.t() sees), so that w's own gradient is row-major with no copy; for a row-major mat2, row-major
    x, x3 = _t(_rng.standard_normal((5, 3))), _t(_rng.standard_normal((2, 5, 3)))
    bias = _t(np.zeros(4))
    for make in (lambda b: tj.addmm(bias, x, b), lambda b: tj.matmul(x3, b), lambda b: tj.matmul(x, b)):
        w = _t(_rng.standard_normal((4, 3)), True)
        assert _grad_strides_seen(make, w.t()) == (8, 24)               # [3, 4] column-major
        assert w.grad.numpy().strides == (24, 8)
        w2 = _t(_rng.standard_normal((3, 4)), True)                     # a row-major mat2
        assert _grad_strides_seen(make, w2 * 1.0) == (32, 8)
    w = _t(_rng.standard_normal((4, 3)), True)
    g = _rng.standard_normal((2, 5, 4))
    (tj.matmul(x3, w.t()) * _t(g)).sum().backward()
    _close(w.grad, _mm(g.reshape(-1, 4).T, x3.numpy().reshape(-1, 3)))


def test_weight_gradient_of_a_transposed_3d_mat2():
    a, b = _t(_rng.standard_normal((2, 5, 3))), _t(_rng.standard_normal((2, 4, 3)), True)
    bt = b.transpose(1, 2)
    g = _rng.standard_normal((2, 5, 4))
    (tj.matmul(a, bt) * _t(g)).sum().backward()
    _close(b.grad, np.swapaxes(_mm(np.swapaxes(a.numpy(), 1, 2), g), 1, 2))


# ----------------------------------------------------------------------------- einsum


def test_einsum_gradient_of_a_later_operand_when_the_first_needs_none():
    a, b, c = _rng.standard_normal((2, 3)), _rng.standard_normal((3, 4)), _rng.standard_normal((4,))
    bt, ct = _t(b, True), _t(c, True)
    tj.einsum("ij,jk,k->i", _t(a), bt, ct).sum().backward()
    _close(bt.grad, a.sum(0)[:, None] * c[None, :])
    _close(ct.grad, (a.sum(0)[:, None] * b).sum(0))


def test_einsum_gradient_of_two_repeated_subscripts():
    x = _rng.standard_normal((2, 2, 3, 3))
    w = _rng.standard_normal((2, 3))
    xt = _t(x, True)
    out = tj.einsum("iijj->ij", xt)
    _close(out, np.einsum("iijj->ij", x))
    (out * _t(w)).sum().backward()
    want = np.zeros_like(x)
    for i in range(2):
        for j in range(3):
            want[i, i, j, j] = w[i, j]
    _close(xt.grad, want)


def _many_subscripts(free):
    """An equation over one operand that uses every letter but those in `free`, with i and j each repeated once: the
    gradient's diagonals need len(free) fresh letters, exactly the ones left."""
    letters = [ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if ch not in free]
    rest = [ch for ch in letters if ch not in "ij"]
    term = "ii" + "".join(rest[:len(rest) // 2]) + "jj" + "".join(rest[len(rest) // 2:])
    return term


@pytest.mark.parametrize("free", ["zZ", "zX", "AX"])
def test_einsum_diagonal_gradient_when_fresh_subscripts_run_short(free):
    term = _many_subscripts(free)
    shape = [2 if ch == "i" else 3 if ch == "j" else 1 for ch in term]
    x = _rng.standard_normal(shape)
    w = _rng.standard_normal((2, 3))
    xt = _t(x, True)
    out = tj.einsum(term + "->ij", xt)
    assert tuple(out.shape) == (2, 3)
    (out * _t(w)).sum().backward()
    want = np.zeros(shape)
    for i in range(2):
        for j in range(3):
            idx = tuple(i if ch == "i" else j if ch == "j" else 0 for ch in term)
            want[idx] = w[i, j]
    _close(xt.grad, want)


def test_einsum_diagonal_gradient_of_one_repeated_subscript_when_one_letter_is_left():
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY"      # every letter but Z
    term = "a" + letters                                                # a repeated: 52 dims
    shape = [3 if ch == "a" else 1 for ch in term]
    x = _rng.standard_normal(shape)
    xt = _t(x, True)
    out = tj.einsum(term + "->a", xt)
    _close(out, np.diagonal(x.reshape(3, 3)))
    (out * _t([1.0, 2.0, 3.0])).sum().backward()
    _close(xt.grad, np.diag([1.0, 2.0, 3.0]).reshape(shape))


def test_einsum_diagonal_gradient_keeps_a_float32_and_float16_dtype():
    for dt, tol in ((np.float32, 1e-6), (np.float16, 1e-3)):
        x = _t(_rng.standard_normal((3, 3)), True, dtype=dt)
        w = _rng.standard_normal(3).astype(dt)
        (tj.einsum("ii->i", x) * _t(w, dtype=dt)).sum().backward()
        assert x.grad.dtype is x.dtype and x.grad.numpy().dtype == dt
        _close(x.grad.numpy().astype(np.float64), np.diag(w.astype(np.float64)), tol)


@pytest.mark.parametrize("eq, shapes, message", [
    # PyTorch 2.13's texts; tracejit took a size-1 repeat as a broadcast (einsum("ii->i", ones(1, 3)) gave [3])
    ("ii->i", [(1, 3)], r"subscript i is repeated for operand 0 but the sizes don't match, 3 != 1"),
    ("ii->i", [(3, 1)], r"subscript i is repeated for operand 0 but the sizes don't match, 1 != 3"),
    ("ii->i", [(2, 3)], r"subscript i is repeated for operand 0 but the sizes don't match, 3 != 2"),
    ("iji->j", [(2, 3, 3)], r"subscript i is repeated for operand 0 but the sizes don't match, 3 != 2"),
    ("ij,ii->j", [(2, 3), (2, 3)], r"subscript i is repeated for operand 1 but the sizes don't match, 3 != 2"),
])
def test_einsum_repeated_subscript_of_one_operand_needs_equal_sizes(eq, shapes, message):
    with pytest.raises(RuntimeError, match="^einsum\\(\\): " + message + "$"):
        tj.einsum(eq, *[tj.ones(*s) for s in shapes])


@pytest.mark.parametrize("sa, sb, message", [
    # PyTorch 2.13's texts for operands that do not require grad: a batch by a vector is folded into one mv, a
    # product with a batched mat2 is a bmm over the broadcast batch (its size the product of the batch dims)
    ((2, 4, 3), (4,), r"^size mismatch, got input \(8\), mat \(8x3\), vec \(4\)$"),
    ((2, 1, 3), (4,), r"^size mismatch, got input \(2\), mat \(2x3\), vec \(4\)$"),
    ((2, 3), (2, 4, 5), r"^Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[2, 4\]\.$"),
    ((3,), (2, 4, 5), r"^Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[2, 4\]\.$"),
    ((2, 2, 3), (2, 4, 5), r"^Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[2, "
                           r"4\]\.$"),
    ((3, 1, 2, 3), (2, 4, 5), r"^Expected size for first two dimensions of batch2 tensor to be: \[6, 3\] but got: "
                              r"\[6, 4\]\.$"),
    ((2, 2, 3), (3, 4, 5), r"^The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton "
                           r"dimension 0"),  # (tracejit adds the shapes)
])
def test_matmul_shape_messages_of_batches_are_pytorchs(sa, sb, message):
    with pytest.raises(RuntimeError, match=message):
        tj.matmul(tj.ones(*sa), tj.ones(*sb))


# ----------------------------------------------------------------------------- the matmul op's own shape rule


@pytest.mark.parametrize("sa, sb, dtb, message", [
    # the op itself (what decompositions call through registry.call): its shape rule's messages, eagerly
    ((2, 3), (4, 5), tj.float32, r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)$"),
    ((2, 2, 3), (2, 4, 5), tj.float32, r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)$"),
    ((2, 3), (3, 4), tj.float64, r"^expected m1 and m2 to have the same dtype, but got: float32 != float64$"),
    ((2, 2, 3), (2, 3, 4), tj.float64, r"^expected m1 and m2 to have the same dtype, but got: float32 != float64$"),
])
def test_matmul_op_checks_its_operands(sa, sb, dtb, message):
    from tracejit.ops.registry import call
    with pytest.raises(RuntimeError, match=message):
        call("matmul", tj.ones(*sa), tj.ones(*sb, dtype=dtb))


def test_matmul_op_shape_rule_names_the_last_two_dims():
    from tracejit.ops.linalg import _matmul_meta
    from tracejit.ops.registry import AVal
    f = tj.float32
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(5x3 and 4x6\)$"):
        _matmul_meta(AVal((7, 5, 3), f), AVal((7, 4, 6), f))
    out = _matmul_meta(AVal((7, 1, 5, 3), f), AVal((2, 3, 6), f))
    assert tuple(out.shape) == (7, 2, 5, 6) and out.dtype is f


# ----------------------------------------------------------------------------- mm, bmm, mv, dot, inner, outer


def test_mm_and_bmm_values_and_their_messages():
    a, b = _rng.standard_normal((2, 3)), _rng.standard_normal((3, 4))
    _close(tj.mm(_t(a), _t(b)), _mm(a, b))
    with pytest.raises(RuntimeError, match=r"^mm: expected 2D tensors, got 2D and 3D$"):
        tj.mm(tj.ones(2, 3), tj.ones(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"^bmm: batch sizes differ: 2 and 5$"):
        tj.bmm(tj.ones(2, 4, 3), tj.ones(5, 3, 6))


def test_mv_gradient_of_one_operand_when_the_other_needs_none():
    m, v, g = _rng.standard_normal((2, 3)), _rng.standard_normal(3), _rng.standard_normal(2)
    mt = _t(m, True)
    (tj.mv(mt, _t(v)) * _t(g)).sum().backward()
    _close(mt.grad, g[:, None] * v[None, :])
    vt = _t(v, True)
    (tj.mv(_t(m), vt) * _t(g)).sum().backward()
    _close(vt.grad, _mm(m.T, g[:, None])[:, 0])


def test_tensor_argument_messages_name_each_argument_as_pytorch():
    m, v = tj.ones(2, 3), tj.ones(3)
    for fn, message in [
            (lambda: tj.mv(m, [1.0, 2.0, 3.0]), r"^mv\(\): argument 'vec' \(position 2\) must be Tensor, not list$"),
            (lambda: tj.dot([1.0], v), r"^dot\(\): argument 'input' \(position 1\) must be Tensor, not list$"),
            (lambda: tj.addmm([1.0], m, m.t()), r"^addmm\(\): argument 'input' \(position 1\) must be Tensor, not list$"),
            (lambda: tj.addmm(m, 2.0, m), r"^addmm\(\): argument 'mat1' \(position 2\) must be Tensor, not float$")]:
        with pytest.raises(TypeError, match=message):
            fn()


def test_inner_of_a_vector_by_a_matrix_a_scalar_and_batches():
    v, m = _rng.standard_normal(3), _rng.standard_normal((2, 3))
    out = tj.inner(_t(v), _t(m))
    assert tuple(out.shape) == (2,)
    _close(out, (m * v).sum(-1))
    _close(tj.inner(_t(2.5), _t(m)), 2.5 * m)
    x, y = _rng.standard_normal((2, 5, 3)), _rng.standard_normal((4, 6, 3))
    out = tj.inner(_t(x), _t(y))
    assert tuple(out.shape) == (2, 5, 4, 6)
    _close(out, (x[:, :, None, None, :] * y[None, None]).sum(-1))


# ----------------------------------------------------------------------------- addmm, addmv, baddbmm


def test_addmv_and_baddbmm_defaults_are_beta_one_alpha_one():
    i, m, v = _rng.standard_normal(2), _rng.standard_normal((2, 3)), _rng.standard_normal(3)
    _close(tj.addmv(_t(i), _t(m), _t(v)), i + _mm(m, v[:, None])[:, 0])
    bi, b1, b2 = _rng.standard_normal((2, 4)), _rng.standard_normal((2, 2, 3)), _rng.standard_normal((2, 3, 4))
    _close(tj.baddbmm(_t(bi), _t(b1), _t(b2)), bi + _mm(b1, b2))


def test_addmm_of_integers_keeps_the_dtype():
    i, m1, m2 = np.array([[1, 2]]), np.array([[1, 2], [3, 4]]), np.array([[1, 0], [2, 1]])
    out = tj.addmm(tj.tensor(i), tj.tensor(m1), tj.tensor(m2), beta=2, alpha=3)
    assert out.dtype is tj.int64 and out.numpy().dtype == np.int64
    np.testing.assert_array_equal(out.numpy(), 2 * i + 3 * (m1 @ m2))


def test_addmm_mismatched_matrices_raise_the_shape_rules_error():
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)$"):
        tj.addmm(tj.ones(2, 5), tj.ones(2, 3), tj.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x3\)$"):
        tj.addmm(tj.ones(3), tj.ones(2, 3), tj.ones(4, 3))
    with pytest.raises(RuntimeError, match=r"^mat1 must be a matrix, got 3-D tensor$"):
        tj.addmm(tj.ones(3, 4), tj.ones(2, 2, 3), tj.ones(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"^expand\(torch\.FloatTensor\{\[1, 2, 4\]\}, size=\[2, 4\]\): the number "
                                           r"of sizes provided \(2\) must be greater or equal to the number of "
                                           r"dimensions in the tensor \(3\)$"):
        tj.addmm(tj.ones(1, 2, 4), tj.ones(2, 3), tj.ones(3, 4))


@pytest.mark.parametrize("needs", ["i", "a", "b", "ia", "ab", "ib"])
def test_addmm_gradients_of_some_operands_with_beta_and_alpha(needs):
    i, m1, m2, g = (_rng.standard_normal(s) for s in ((2, 4), (2, 3), (3, 4), (2, 4)))
    it, at, bt = _t(i, "i" in needs), _t(m1, "a" in needs), _t(m2, "b" in needs)
    (tj.addmm(it, at, bt, beta=2.0, alpha=-1.5) * _t(g)).sum().backward()
    for t, want, name in ((it, 2.0 * g, "i"), (at, -1.5 * _mm(g, m2.T), "a"), (bt, -1.5 * _mm(m1.T, g), "b")):
        if name in needs:
            _close(t.grad, want)
        else:
            assert t.grad is None


# ----------------------------------------------------------------------------- einsum's parsing and forward


def test_einsum_ellipsis_of_no_dims_beside_one_of_two():
    y, z = _rng.standard_normal((2, 1, 3)), _rng.standard_normal(3)
    out = tj.einsum("...j,...j->...", _t(y), _t(z))
    assert tuple(out.shape) == (2, 1)
    _close(out, (y * z).sum(-1))


def test_einsum_ellipsis_of_26_dims_uses_every_capital():
    shape = (2,) + (1,) * 24 + (3, 4)                                   # 27 dims: 26 under the ellipsis, then i
    x = _rng.standard_normal(shape)
    out = tj.einsum("...i->...", _t(x))
    assert tuple(out.shape) == shape[:-1]
    _close(out, x.sum(-1))


def test_einsum_output_ellipsis_without_one_in_the_inputs_is_empty():
    a = _rng.standard_normal((2, 3))
    out = tj.einsum("ij->...ji", _t(a))
    assert tuple(out.shape) == (3, 2)
    _close(out, a.T)


def test_einsum_output_subscript_missing_from_two_inputs():
    with pytest.raises(RuntimeError, match=r"^einsum\(\): output subscript X does not appear in the equation for any "
                                           r"input operand$"):
        tj.einsum("ij,jk->iX", tj.ones(2, 3), tj.ones(3, 4))


def test_einsum_permutation_is_a_writable_view():
    # PyTorch's einsum("ij->ji", x) is x's permuted view: an in-place op on it writes x
    x = tj.tensor(np.arange(6.0).reshape(2, 3))
    y = tj.einsum("ij->ji", x)
    y.mul_(2)
    np.testing.assert_array_equal(x.numpy(), 2 * np.arange(6.0).reshape(2, 3))


def test_einsum_broadcasts_size_one_beside_a_subscript_of_size_one_everywhere():
    x, y = _rng.standard_normal((1, 3, 1)), _rng.standard_normal((2, 3, 1))
    out = tj.einsum("ijk,ijk->ij", _t(x), _t(y))
    _close(out, (x * y)[..., 0])


@pytest.mark.parametrize("si, sm, sv, message", [
    # PyTorch 2.13's checks and texts; tracejit broadcast input and product both ways (a [2, 3] result here)
    ((2, 3), (2, 3), (3,), r"^vector \+ matrix @ vector expected, got 2, 2, 1$"),
    ((1, 2), (2, 3), (3,), r"^vector \+ matrix @ vector expected, got 2, 2, 1$"),
    ((3,), (2, 3), (3,), r"^size mismatch, got input \(3\), mat \(2x3\), vec \(3\)$"),
    ((2,), (2, 3), (4,), r"^size mismatch, got input \(2\), mat \(2x3\), vec \(4\)$"),
])
def test_addmv_input_is_a_vector_of_the_products_size(si, sm, sv, message):
    with pytest.raises(RuntimeError, match=message):
        tj.addmv(tj.ones(*si), tj.ones(*sm), tj.ones(*sv))
    m, v = _rng.standard_normal((2, 3)), _rng.standard_normal(3)
    for i in (np.array([0.5]), np.array(0.5)):                          # one element broadcasts
        _close(tj.addmv(_t(i), _t(m), _t(v)), i + _mm(m, v[:, None])[:, 0])


@pytest.mark.parametrize("si, message", [
    ((3, 4), r"^The expanded size of the tensor \(2\) must match the existing size \(3\) at non-singleton dimension "
             r"1\.  Target sizes: \[2, 2, 4\]\.  Tensor sizes: \[3, 4\]$"),
    ((1, 2, 2, 4), r"^expand\(torch\.FloatTensor\{\[1, 2, 2, 4\]\}, size=\[2, 2, 4\]\): the number of sizes provided "
                   r"\(3\) must be greater or equal to the number of dimensions in the tensor \(4\)$"),
])
def test_baddbmm_input_expands_to_the_product(si, message):
    with pytest.raises(RuntimeError, match=message):
        tj.baddbmm(tj.ones(*si), tj.ones(2, 2, 3), tj.ones(2, 3, 4))
    with pytest.raises(RuntimeError, match=message):
        tj.baddbmm(tj.ones(*si), tj.ones(2, 2, 3), tj.ones(2, 3, 4), beta=0)
    b1, b2 = _rng.standard_normal((2, 2, 3)), _rng.standard_normal((2, 3, 4))
    for i in (_rng.standard_normal((2, 1, 4)), _rng.standard_normal(4), np.array(0.5)):
        _close(tj.baddbmm(_t(i), _t(b1), _t(b2), beta=0.5), 0.5 * i + _mm(b1, b2))


def test_mm_weight_gradient_values_in_either_layout():
    x, g = _rng.standard_normal((5, 3)), _rng.standard_normal((5, 4))
    w = _t(_rng.standard_normal((4, 3)), True)
    (tj.matmul(_t(x), w.t()) * _t(g)).sum().backward()
    _close(w.grad, _mm(g.T, x))
    assert w.grad.numpy().flags.c_contiguous
    w2 = _t(_rng.standard_normal((3, 4)), True)
    (tj.matmul(_t(x), w2) * _t(g)).sum().backward()
    _close(w2.grad, _mm(x.T, g))
    assert w2.grad.numpy().flags.c_contiguous


def test_the_last_survivors_of_the_after_run():
    from tracejit.ops.registry import call
    # the matmul op on a batch by a matrix of the wrong size: the shape rule's error, not numpy's ValueError
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(4x3 and 4x5\)$"):
        call("matmul", tj.ones(2, 4, 3), tj.ones(4, 5))
    # addmm with only mat2 of another dtype (PyTorch's text)
    with pytest.raises(RuntimeError, match=r"^self and mat2 must have the same dtype, but got Float and Double$"):
        tj.addmm(tj.ones(2, 4), tj.ones(2, 3), tj.ones(3, 4, dtype=tj.float64))
    # addmv names all three dims (PyTorch's text), whichever of mat and vec is wrong
    with pytest.raises(RuntimeError, match=r"^vector \+ matrix @ vector expected, got 0, 2, 2$"):
        tj.addmv(tj.tensor(1.0), tj.ones(2, 3), tj.ones(3, 1))
    with pytest.raises(RuntimeError, match=r"^vector \+ matrix @ vector expected, got 0, 3, 1$"):
        tj.addmv(tj.tensor(1.0), tj.ones(2, 3, 1), tj.ones(3))
    # a permutation of a tensor with a size-1 dim is still a writable view
    x = tj.tensor(np.arange(3.0).reshape(1, 3))
    tj.einsum("ij->ji", x).mul_(2)
    np.testing.assert_array_equal(x.numpy(), [[0.0, 2.0, 4.0]])


def test_einsum_of_two_operands_with_a_26_dim_ellipsis():
    shape = (2,) + (1,) * 24 + (3, 4)
    x, v = _rng.standard_normal(shape), _rng.standard_normal(4)
    out = tj.einsum("...i,i->...", _t(x), _t(v))
    assert tuple(out.shape) == shape[:-1]
    _close(out, (x * v).sum(-1))


def test_einsum_diagonal_gradient_of_one_of_two_operands_when_fresh_subscripts_run_short():
    term = _many_subscripts("zX")                                       # fresh letters: z and X only
    shape = [2 if ch == "i" else 3 if ch == "j" else 1 for ch in term]
    x, y = _rng.standard_normal(shape), _rng.standard_normal(2)
    xt = _t(x, True)
    tj.einsum(term + ",i->ij", xt, _t(y)).sum().backward()
    want = np.zeros(shape)
    for i in range(2):
        for j in range(3):
            want[tuple(i if ch == "i" else j if ch == "j" else 0 for ch in term)] = y[i]
    _close(xt.grad, want)


def test_weight_gradient_of_a_strided_mat2_is_row_major_as_in_pytorch():
    # neither row- nor column-major (a slice with a step): PyTorch's mm backward computes a^T @ g, row-major
    x, x3 = _t(_rng.standard_normal((5, 3))), _t(_rng.standard_normal((2, 5, 3)))
    for make in (lambda b: tj.addmm(_t(np.zeros(4)), x, b), lambda b: tj.matmul(x3, b), lambda b: tj.matmul(x, b)):
        big = _t(_rng.standard_normal((3, 8)), True)
        assert _grad_strides_seen(make, big[:, ::2]) == (32, 8)
