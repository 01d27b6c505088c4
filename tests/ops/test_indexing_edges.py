"""Paths of tracejit/ops/indexing.py that the reference-value and gradcheck tests do not reach: masks, ellipses and
None in an index, the out-of-range messages, the row-adding backward of x[i] and its fallbacks, index_put's and
scatter's gradients, gather/scatter of 0-d tensors, eager setitem, node names. Each was a surviving mutant of a
mutation-testing run (issue 23). Expected values are PyTorch's, worked out by hand or with numpy's own indexing of
float64 arrays; no torch needed."""
import numpy as np
import pytest

import tracejit as tj

X = np.arange(12.0).reshape(3, 4)


def _x(requires_grad=False):
    return tj.tensor(X.copy(), requires_grad=requires_grad)


def _eq(got, want):
    got = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("index, want", [
    ((slice(1, 3), Ellipsis, None), X[1:3, ..., None]),
    ((Ellipsis, None, 1), X[..., None, 1]),
    ((None, Ellipsis, -1), X[None, ..., -1]),
    ((1, None, 2), X[1, None, 2]),
    ((slice(0, 3, 2), slice(1, None, 2)), X[0:3:2, 1::2]),
    ((slice(-2, None),), X[-2:]),
    ((True,), X[None]),
    ((False,), X[None][:0]),
    (([0, 2],), X[[0, 2]]),
    ((np.array([2, 0]), slice(None)), X[[2, 0]]),
])
def test_basic_and_mixed_indices(index, want):
    _eq(_x()[index], want)


def test_index_tensors_and_masks():
    x = _x()
    _eq(x[tj.tensor([[0, 1]])], X[np.array([[0, 1]])])
    _eq(x[tj.tensor(1)], X[1])
    _eq(x[:, tj.tensor([True, False, True, True])], X[:, [0, 2, 3]])
    rows = tj.tensor([[True] * 4, [False] * 4, [True] * 4])
    _eq(x[rows], X[[0, 0, 0, 0, 2, 2, 2, 2], [0, 1, 2, 3] * 2])
    _eq(x[tj.tensor([1, 0, 1], dtype=tj.uint8)], X[[0, 2]])          # uint8: a mask, as in PyTorch
    _eq(x[..., tj.tensor([False, True, False, True])], X[:, [1, 3]])  # with an ellipsis the mask is not checked here
    _eq(tj.masked_select(x, tj.tensor([True, False, True, False])), X[:, [0, 2]].reshape(-1))


@pytest.mark.parametrize("index, error, message", [
    (lambda: tj.tensor([True, False]), IndexError,
     r"^The shape of the mask \[2\] at index 0 does not match the shape of the indexed tensor \[3, 4\] at index 0$"),
    (lambda: tj.tensor([[True, False, True, False]] * 2), IndexError,
     r"^The shape of the mask \[2, 4\] at index 0 does not match the shape of the indexed tensor \[3, 4\] at "
     r"index 0$"),
    (lambda: (slice(None), tj.tensor([True, False, True])), IndexError,
     r"^The shape of the mask \[3\] at index 0 does not match the shape of the indexed tensor \[3, 4\] at index 1$"),
    (lambda: tj.tensor([0.5]), IndexError, r"^tensors used as indices must be long, int, byte or bool tensors$"),
    (lambda: (0, 0, 0), IndexError, r"^too many indices for tensor of dimension 2$"),
    (lambda: 5, IndexError, r"^index 5 is out of bounds for dimension 0 with size 3$"),
    (lambda: -4, IndexError, r"^index -4 is out of bounds for dimension 0 with size 3$"),
    (lambda: (slice(None), -5), IndexError, r"^index -5 is out of bounds for dimension 1 with size 4$"),
    (lambda: (Ellipsis, 4), IndexError, r"^index 4 is out of bounds for dimension 1 with size 4$"),
    (lambda: (None, Ellipsis, 2, 4), IndexError, r"^index 4 is out of bounds for dimension 1 with size 4$"),
    (lambda: (3, Ellipsis), IndexError, r"^index 3 is out of bounds for dimension 0 with size 3$"),
    (lambda: slice(None, None, -1), ValueError, r"^step must be greater than zero$"),
    (lambda: slice(None, None, 0), ValueError, r"^step must be greater than zero$"),
    (lambda: 1.5j, IndexError, r"^only integers, slices \(`:`\), ellipsis \(`\.\.\.`\), None and long or byte "
                               r"Variables are valid indices \(got complex\)$"),
])
def test_index_errors(index, error, message):
    with pytest.raises(error, match=message):
        _x()[index()]


def test_in_range_edges_index_fine():
    x = _x()
    _eq(x[-3], X[0])
    _eq(x[2, -4], X[2, 0])
    _eq(x[..., 3], X[:, 3])
    _eq(x[None, 2], X[None, 2])


def test_an_integer_index_gives_a_zero_d_view():
    x = _x()
    v = x[0, 1]
    assert v.shape == ()
    v.add_(100.0)
    assert x[0].tolist() == [0.0, 101.0, 2.0, 3.0]


@pytest.mark.parametrize("index, name", [
    (lambda t: t[0], "SelectBackward0"), (lambda t: t[:, 1], "SelectBackward0"), (lambda t: t[None], "UnsqueezeBackward0"),
    (lambda t: t[1:], "SliceBackward0"), (lambda t: t[...], "AliasBackward0"), (lambda t: t[0, None], "UnsqueezeBackward0"),
    (lambda t: t[None, 0], "SelectBackward0"), (lambda t: t[1:, 0], "SelectBackward0"),
    (lambda t: t[tj.tensor([0, 0])], "IndexBackward0"),
])
def test_index_node_names_are_pytorchs(index, name):
    assert index(_x(True)).grad_fn.name() == name


def _index_grad(index, weights):
    a = tj.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    (a[index] * tj.tensor(weights)).sum().backward()
    return a.grad.numpy()


def test_gradient_of_indexing_adds_repeated_rows_and_columns():
    w = np.arange(8.0).reshape(4, 2)
    want = np.zeros((3, 2))
    np.add.at(want, [0, 2, 0, 0], w)                 # the rows of the cotangent, added where they were read
    _eq(_index_grad(tj.tensor([0, 2, 0, 0]), w), want)
    w = np.arange(6.0).reshape(3, 2)
    _eq(_index_grad((slice(None), tj.tensor([1, 1])), w), np.stack([np.zeros(3), w.sum(1)], 1))
    want = np.zeros((3, 2))
    np.add.at(want, ([0, 2, 0, 0], 1), np.arange(4.0))
    _eq(_index_grad((tj.tensor([0, 2, 0, 0]), 1), np.arange(4.0)), want)
    _eq(_index_grad(tj.tensor([], dtype=tj.int64), np.zeros((0, 2))), np.zeros((3, 2)))
    _eq(_index_grad(tj.tensor([[2, 1], [2, 2]]), np.ones((2, 2, 2))), [[0.0, 0.0], [1.0, 1.0], [3.0, 3.0]])
    _eq(_index_grad(tj.tensor([True, False, True]), np.ones((2, 2))), [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])


def test_gradient_of_basic_indexing_places_the_cotangent():
    _eq(_index_grad((slice(1, None), 0), np.array([5.0, 7.0])), [[0.0, 0.0], [5.0, 0.0], [7.0, 0.0]])
    _eq(_index_grad((None, 2), np.array([[5.0, 7.0]])), [[0.0, 0.0], [0.0, 0.0], [5.0, 7.0]])


def test_index_put_values_and_gradients_with_and_without_accumulate():
    weights = tj.tensor(np.arange(6.0).reshape(3, 2))
    b, v = tj.zeros(3, 2, requires_grad=True), tj.tensor([1.0, 2.0], requires_grad=True)
    out = tj.index_put(b, (tj.tensor([0, 0]), tj.tensor([1, 1])), v, accumulate=True)
    _eq(out, [[0.0, 3.0], [0.0, 0.0], [0.0, 0.0]])
    (out * weights).sum().backward()
    _eq(b.grad, np.arange(6.0).reshape(3, 2))          # accumulate: every element of b reaches the output
    _eq(v.grad, [1.0, 1.0])
    b, v = tj.zeros(3, 2, requires_grad=True), tj.tensor([1.0, 2.0], requires_grad=True)
    out = tj.index_put(b, (tj.tensor([0, 2]),), v)
    _eq(out, [[1.0, 2.0], [0.0, 0.0], [1.0, 2.0]])
    (out * weights).sum().backward()
    _eq(b.grad, [[0.0, 0.0], [2.0, 3.0], [0.0, 0.0]])  # overwritten rows pass no gradient to b
    _eq(v.grad, [4.0, 6.0])
    x = tj.tensor([1, 2, 3])
    _eq(tj.index_put(x, (tj.tensor([1]),), tj.tensor([9.7])), [1, 9, 3])   # values cast to x's dtype


def test_setitem_writes_eagerly_and_through_autograd():
    y = tj.zeros(3, 4)
    y[tj.tensor([0, 2]), 1:3] = tj.tensor([1.0, 2.0])
    _eq(y, [[0.0, 1.0, 2.0, 0.0], [0.0] * 4, [0.0, 1.0, 2.0, 0.0]])
    y[tj.tensor([True, False, True])] = 5.0
    _eq(y, [[5.0] * 4, [0.0] * 4, [5.0] * 4])
    z = tj.zeros(2, 2, dtype=tj.int64)
    z[0, 1] = 7
    z[..., 0] = tj.tensor([3, 4])
    _eq(z, [[3, 7], [4, 0]])
    w = tj.zeros(3, requires_grad=True)
    ww = w * 1
    ww[1] = 4.0
    ww.sum().backward()
    _eq(ww, [0.0, 4.0, 0.0])
    _eq(w.grad, [1.0, 0.0, 1.0])


def test_setitem_shape_mismatch_names_both_shapes():
    y = tj.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"^The expanded size of the tensor \(4\) must match the existing size "
                                           r"\(3\) at non-singleton dimension 0\.  Target sizes: \[4\]\.  Tensor "
                                           r"sizes: \[3\]$"):
        y[0] = tj.ones(3)
    with pytest.raises(RuntimeError, match=r"^setitem: "):
        y[0] = np.ones(3)


def test_index_select_and_its_range_check():
    x = _x()
    _eq(tj.index_select(x, 1, tj.tensor([3, 0, 3])), X[:, [3, 0, 3]])
    _eq(tj.index_select(x, -2, tj.tensor(2)), X[[2]])
    with pytest.raises(IndexError, match=r"^index_select\(\): Index is supposed to be a vector$"):
        tj.index_select(x, 0, tj.tensor([[0]]))
    for bad in ([4], [-1]):
        with pytest.raises(IndexError, match=r"^index out of range in self$"):
            tj.index_select(x, 1, tj.tensor(bad))
    _eq(tj.index_select(x, 1, tj.tensor([], dtype=tj.int64)), X[:, :0])


def test_index_add_fill_copy_and_select():
    x = _x()
    want = X.copy()
    want[:, 0] += 2 * 2.0
    _eq(tj.index_add(x, 1, tj.tensor([0, 0]), tj.ones(3, 2), alpha=2), want)
    want = X.copy()
    want[:, 0] += 2.0
    _eq(tj.index_add(x, -1, tj.tensor([0, 0]), tj.ones(3, 2)), want)
    want = X.copy()
    want[:, [0, 2]] = -1.0
    _eq(tj.index_fill(x, 1, tj.tensor([0, 2]), -1.0), want)
    want = X.copy()
    want[[2, 0]] = 1.0
    _eq(tj.index_copy(x, 0, tj.tensor([2, 0]), tj.ones(2, 4)), want)
    _eq(tj.select(x, -1, 1), X[:, 1])
    _eq(tj.select(x, 0, -1), X[2])


def test_masked_fill_casts_the_value_and_refuses_other_masks():
    _eq(tj.masked_fill(tj.tensor([1, 2]), tj.tensor([True, False]), 2.7), [2, 2])
    _eq(tj.masked_fill(tj.tensor([1.0, 2.0]), tj.tensor([True, False]), tj.tensor(9.0)), [9.0, 2.0])
    with pytest.raises(RuntimeError, match=r"^masked_fill_ only supports boolean masks, but got mask with dtype "):
        tj.masked_fill(_x(), tj.tensor([1, 0, 1, 0]), 1.0)


def test_nonzero_argwhere_and_where_of_one_argument():
    _eq(tj.nonzero(tj.tensor([[0, 1], [2, 0]])), [[0, 1], [1, 0]])
    assert tj.nonzero(tj.tensor([[0, 1], [2, 0]])).dtype is tj.int64
    _eq(tj.nonzero(tj.tensor(3)), np.zeros((1, 0), np.int64))
    _eq(tj.nonzero(tj.tensor(0)), np.zeros((0, 0), np.int64))
    (only,) = tj.nonzero(tj.tensor(3), as_tuple=True)
    _eq(only, [0])
    _eq(tj.nonzero(tj.zeros(0, 2)), np.zeros((0, 2), np.int64))
    _eq(tj.argwhere(tj.tensor([0, 3, 0, 4])), [[1], [3]])
    rows, cols = tj.where(tj.tensor([[0, 3], [4, 0]]))
    _eq(rows, [0, 1])
    _eq(cols, [1, 0])
    assert rows.dtype is tj.int64


def test_take_and_take_along_dim():
    x = _x()
    _eq(tj.take(x, tj.tensor([[0, 11], [-1, 5]])), [[0.0, 11.0], [11.0, 5.0]])
    _eq(tj.take_along_dim(x, tj.tensor([[0], [3], [1]]), 1), [[0.0], [7.0], [9.0]])
    _eq(tj.take_along_dim(x, tj.tensor([[2, 0, 1, 2]]), 0), [[8.0, 1.0, 6.0, 11.0]])
    _eq(tj.take_along_dim(x, tj.tensor([[1]]), -1), [[1.0], [5.0], [9.0]])     # the index broadcast over rows
    _eq(tj.take_along_dim(x, tj.tensor([11, 0])), [11.0, 0.0])


def test_gather_values_gradient_and_zero_d():
    g = tj.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    out = tj.gather(g, 1, tj.tensor([[2, 2], [0, 1]]))
    _eq(out, [[2.0, 2.0], [3.0, 4.0]])
    (out * tj.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    _eq(g.grad, [[0.0, 0.0, 3.0], [3.0, 4.0, 0.0]])
    _eq(tj.gather(_x(), -1, tj.tensor([[3, 0], [1, 1], [2, 3]])), [[3.0, 0.0], [5.0, 5.0], [10.0, 11.0]])
    _eq(tj.gather(tj.tensor(5.0), 0, tj.tensor([0, 0])), [5.0, 5.0])
    _eq(tj.gather(tj.tensor(5.0), 0, tj.tensor(0)), 5.0)


@pytest.mark.parametrize("fn, message", [
    (lambda x: tj.gather(x, 1, tj.tensor([[0, 4]])), r"^index 4 is out of bounds for dimension 1 with size 4$"),
    (lambda x: tj.gather(x, 1, tj.tensor([[-1, 0]])), r"^index -1 is out of bounds for dimension 1 with size 4$"),
    (lambda x: tj.gather(x, 1, tj.tensor([0, 1])),
     r"^Index tensor must have the same number of dimensions as input tensor$"),
    (lambda x: tj.gather(x, 1, tj.tensor([[0], [1], [2], [0]])),
     r"^Size does not match at dimension 0 expected index \[4, 1\] to be no larger than self \[3, 4\] apart from "
     r"dimension 1$"),
    (lambda x: tj.gather(x, 0, tj.tensor([[0, 1, 2, 0, 1]])),
     r"^Size does not match at dimension 1 expected index \[1, 5\] to be no larger than self \[3, 4\] apart from "
     r"dimension 0$"),
    (lambda x: tj.scatter(x, 1, tj.tensor([[0, 5]]), 1.0), r"^index 5 is out of bounds for dimension 1 with size 4$"),
    (lambda x: tj.scatter(x, 1, tj.tensor([[0, 1]]), tj.ones(1, 1)),
     r"^Expected index \[1, 2\] to be no larger than self \[3, 4\] apart from dimension 1 and to be no larger size "
     r"than src \[1, 1\]$"),
    (lambda x: tj.scatter(x, 1, tj.tensor([[0, 1]] * 4), 1.0),
     r"^Expected index \[4, 2\] to be no larger than self \[3, 4\] apart from dimension 1$"),
    (lambda x: tj.scatter(x, 1, tj.tensor([[0, 1]]), tj.ones(1, 2), reduce="max"),
     r"^reduce argument must be either add or multiply"),
    (lambda x: tj.scatter_add(x, 1, tj.tensor([[0, 1]]), tj.ones(2)),
     r"^Index tensor must have the same number of dimensions as self tensor$"),
])
def test_gather_scatter_errors(fn, message):
    with pytest.raises(RuntimeError, match=message):
        fn(_x())


def test_scatter_values_reductions_and_zero_d():
    x = _x()
    want = X.copy()
    want[0, 0] = want[0, 1] = 1.0
    _eq(tj.scatter(x, 1, tj.tensor([[0, 1]]), 1.0), want)
    want = X.copy()
    want[0, 0] = 3.0
    _eq(tj.scatter(x, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]])), want)   # the last write wins
    ones = tj.ones(2, 2)
    _eq(tj.scatter(ones, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]]), reduce="multiply"), [[6.0, 1.0], [1.0, 1.0]])
    _eq(tj.scatter(ones, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]]), reduce="add"), [[6.0, 1.0], [1.0, 1.0]])
    _eq(tj.scatter_reduce(ones, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]]), "prod"), [[6.0, 1.0], [1.0, 1.0]])
    _eq(tj.scatter_reduce(ones, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]]), "sum"), [[6.0, 1.0], [1.0, 1.0]])
    _eq(tj.scatter_add(tj.zeros(3, 2), 0, tj.tensor([[0, 0], [0, 2]]), tj.ones(2, 2)), [[2.0, 1.0], [0.0, 0.0],
                                                                                         [0.0, 1.0]])
    _eq(tj.scatter(tj.tensor(5.0), 0, tj.tensor(0), 7.0), 7.0)
    _eq(tj.scatter(tj.zeros(2), 0, tj.tensor([1]), value=4.0), [0.0, 4.0])
    # the other reductions (tests/ops/test_more_torch_functions.py checks them against PyTorch)
    _eq(tj.scatter_reduce(ones, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]]), "amax"), [[3.0, 1.0], [1.0, 1.0]])
    _eq(tj.scatter_reduce(ones, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]]), "sum", include_self=False),
        [[5.0, 1.0], [1.0, 1.0]])
    _eq(tj.scatter_reduce(ones, 1, tj.tensor([[0, 0]]), tj.tensor([[2.0, 3.0]]), "mean"), [[2.0, 1.0], [1.0, 1.0]])


def test_scatter_gradients_of_input_and_a_bigger_source():
    w = tj.tensor(np.arange(9.0).reshape(3, 3))
    s = tj.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    base = tj.zeros(3, 3, requires_grad=True)
    out = tj.scatter(base, 0, tj.tensor([[1, 0]]), s)                  # reads s[0, :2] only
    _eq(out, [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    (out * w).sum().backward()
    _eq(base.grad, [[0.0, 0.0, 2.0], [0.0, 4.0, 5.0], [6.0, 7.0, 8.0]])  # written places pass nothing to base
    _eq(s.grad, [[3.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    s.grad = None
    base = tj.zeros(3, 3, requires_grad=True)
    out = tj.scatter_add(base, 1, tj.tensor([[2, 2], [0, 1]]), s)
    _eq(out, [[0.0, 0.0, 1.0], [3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    (out * w).sum().backward()
    _eq(base.grad, np.arange(9.0).reshape(3, 3))
    _eq(s.grad, [[2.0, 2.0, 0.0], [3.0, 4.0, 0.0]])
    with pytest.raises(RuntimeError, match=r"reduce='multiply' has no derivative"):
        tj.scatter(tj.ones(2, 2, requires_grad=True), 1, tj.tensor([[0]]), 2.0, reduce="multiply").sum().backward()


def test_indices_after_a_mask_and_slices_with_tensor_bounds():
    x = _x()
    _eq(x[tj.tensor([True, False, True]), 1], X[[0, 2], 1])
    _eq(x[::1], X)
    _eq(x[tj.tensor(1):], X[1:])
    _eq(x[:], X)
    assert x[:].grad_fn is None and _x(True)[:].grad_fn.name() == "SliceBackward0"
    assert _x(True)[0, :].grad_fn.name() == "SelectBackward0"


@pytest.mark.parametrize("index, message", [
    (lambda: (0, tj.tensor([True, False, True, False]), 0), r"^too many indices for tensor of dimension 2$"),
    (lambda: (0, tj.tensor([1]), 0), r"^too many indices for tensor of dimension 2$"),
    (lambda: (0, slice(None), 0), r"^too many indices for tensor of dimension 2$"),
])
def test_every_kind_of_index_counts_toward_the_dimensions(index, message):
    with pytest.raises(IndexError, match=message):
        _x()[index()]


def test_out_of_range_messages_count_dimensions_across_ellipses_and_masks():
    x3 = tj.zeros(2, 3, 4)
    with pytest.raises(IndexError, match=r"^index 9 is out of bounds for dimension 2 with size 4$"):
        x3[0, 1, 9]
    with pytest.raises(IndexError, match=r"^index 5 is out of bounds for dimension 2 with size 4$"):
        x3[0, ..., 5]
    with pytest.raises(IndexError, match=r"^The shape of the mask \[3, 5\] at index 1 does not match the shape of the "
                                         r"indexed tensor \[2, 3, 4\] at index 2$"):
        x3[:, tj.ones(3, 5, dtype=tj.bool)]
    with pytest.raises(RuntimeError, match=r"^index 1 is out of bounds for dimension 0 with size 1$"):
        tj.gather(tj.tensor(5.0), 0, tj.tensor([1]))


def test_setitem_bumps_the_version_counter_once():
    x = tj.zeros(3)
    v = x._version.v
    x[0] = 1.0
    assert x._version.v == v + 1


def test_nonzero_of_a_zero_d_tensor_is_int64_and_take_along_dim_broadcasts_the_indices():
    assert tj.nonzero(tj.tensor(3)).dtype is tj.int64
    idx = np.array([[0, 1], [2, 0], [1, 1]])
    _eq(tj.take_along_dim(_x()[:, :1], tj.tensor(idx), 0), X[idx, 0])


def test_float32_indexing_gradient_stays_float32():
    a = tj.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2), requires_grad=True)
    a[tj.tensor([0, 2, 0])].sum().backward()
    assert a.grad.dtype is tj.float32
    _eq(a.grad, np.array([[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]], np.float32))


def test_scatter_reduce_prod_has_no_gradient():
    x = tj.ones(2, 2, requires_grad=True)
    out = tj.scatter_reduce(x, 1, tj.tensor([[0]]), tj.tensor([[2.0]]), "prod")
    with pytest.raises(RuntimeError, match=r"^scatter with reduce='multiply' has no derivative in tracejit \(nor in "
                                           r"PyTorch\)$"):
        out.sum().backward()
