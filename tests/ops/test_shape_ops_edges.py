"""Shape ops without PyTorch: the composites of tracejit/ops/shape_ops.py (split family, stacks, repeat/tile,
diagonals, movedim, ...) against numpy written from their definitions, the edge cases of each, which results are
views, the autograd node names, and PyTorch's error messages matched whole. Each assertion was a surviving
mutant of a mutation-testing run (issue 23). Shape ops move values without arithmetic: every comparison is exact."""
import numpy as np
import pytest

import tracejit as torch


def _a(*shape):
    """Distinct float64 values, so that any element moved to a wrong place shows."""
    return np.arange(float(np.prod(shape, dtype=np.int64))).reshape(shape) + 1.0


def _t(*shape, **kw):
    return torch.tensor(_a(*shape), **kw)


def _s(v):
    return torch.tensor(v, dtype=torch.float64)


def _z(*shape):
    return torch.tensor(np.zeros(shape))


def _same(got, want):
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype, (got.shape, np.shape(want))
    np.testing.assert_array_equal(got, want)


def _pieces(got, want):
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        _same(g.detach(), w)


def _raises(exc, msg, fn):
    with pytest.raises(exc) as e:
        fn()
    assert str(e.value) == msg


# ----------------------------------------------------------------------------- reshape, view, flatten


def test_reshape_infers_one_dim_and_gives_pytorchs_errors():
    x = _t(2, 3, 4)
    _same(x.reshape(4, -1), _a(2, 3, 4).reshape(4, 6))
    _same(x.reshape(-1), _a(24))
    _same(_z(0, 3).reshape(3, 0, 5), np.zeros((3, 0, 5)))
    _raises(RuntimeError, "only one dimension can be inferred", lambda: x.reshape(-1, 2, -1))
    _raises(RuntimeError, "invalid shape dimension -2 at index 1 of shape [4, -2, 3]", lambda: x.reshape(4, -2, 3))
    _raises(RuntimeError, "shape '[5, -1]' is invalid for input of size 24", lambda: x.reshape(5, -1))
    _raises(RuntimeError, "shape '[0, -1]' is invalid for input of size 24", lambda: x.reshape(0, -1))
    _raises(RuntimeError, "shape '[5, 5]' is invalid for input of size 24", lambda: x.reshape(5, 5))
    _raises(RuntimeError, "cannot reshape tensor of 0 elements into shape [-1, 0] because the unspecified dimension "
                          "size -1 can be any value and is ambiguous", lambda: _z(0, 3).reshape(-1, 0))


def test_reshape_is_a_view_where_strides_allow_and_a_copy_otherwise():
    x = _t(2, 3)
    same = x.reshape(2, 3)
    assert same is not x and same._base is x          # the same shape: still a new view
    v = x.reshape(3, 2)
    v[0, 0] = -1.0
    assert x[0, 0].item() == -1.0                     # a view of x
    xt = _t(2, 3).t()                                 # not contiguous: reshape copies
    r = xt.reshape(6)
    r[0] = -5.0
    assert xt[0, 0].item() == 1.0
    _same(r[1:], _a(2, 3).T.reshape(6)[1:])
    w = torch.ones(2, 3, requires_grad=True)
    assert w.reshape(3, 2).grad_fn.name() == "ViewBackward0"
    assert w.t().reshape(6).grad_fn.name() == "UnsafeViewBackward0"


def test_view_refuses_a_dtype_and_an_incompatible_layout():
    _raises(NotImplementedError, "view(dtype) reinterpretation is not supported by tracejit",
            lambda: _t(3).view(torch.int32))
    _raises(RuntimeError, "view size is not compatible with input tensor's size and stride (at least one dimension "
                          "spans across two contiguous subspaces). Use .reshape(...) instead.",
            lambda: _t(2, 3).t().view(6))
    _same(_t(2, 3).t().view(3, 2), _a(2, 3).T)        # the same shape is always viewable
    _same(_t(2, 3).view((3, 2)), _a(3, 2))


def test_flatten_unflatten_ravel():
    x = _t(2, 3, 4)
    _same(x.flatten(), _a(24))
    _same(x.flatten(1), _a(2, 12))
    _same(torch.flatten(x, 0, 1), _a(6, 4))
    _same(torch.flatten(x, -2, -1), _a(2, 12))
    _same(torch.flatten(x, 1, 1), _a(2, 3, 4))
    _same(_s(7.0).flatten(), np.array([7.0]))
    _raises(RuntimeError, "flatten() has invalid args: start_dim cannot come after end_dim", lambda: x.flatten(2, 1))
    _same(x.unflatten(2, (2, 2)), _a(2, 3, 2, 2))
    _same(x.unflatten(-1, (2, -1)), _a(2, 3, 2, 2))
    _same(x.unflatten(1, (3, 1)), _a(2, 3, 1, 4))
    _raises(RuntimeError, "unflatten: Provided sizes [2, 2] don't multiply up to the size of dim 1 (3) in the "
                          "input tensor", lambda: x.unflatten(1, (2, 2)))
    _raises(RuntimeError, "unflatten: Provided sizes [2, -1] don't multiply up to the size of dim -2 (3) in the "
                          "input tensor", lambda: x.unflatten(-2, (2, -1)))
    _raises(RuntimeError, "unflatten: Provided sizes [0, -1] don't multiply up to the size of dim 1 (3) in the "
                          "input tensor", lambda: x.unflatten(1, (0, -1)))
    _same(x.ravel(), _a(24))
    _same(_t(2, 3).t().ravel(), _a(2, 3).T.ravel())


# ----------------------------------------------------------------------------- permute, transpose, movedim, expand


def test_permute_transpose_t_adjoint_and_their_errors_and_names():
    x = _t(2, 3, 4)
    _same(x.permute(2, 0, 1), _a(2, 3, 4).transpose(2, 0, 1))
    _same(x.permute((1, -1, 0)), _a(2, 3, 4).transpose(1, 2, 0))
    _raises(RuntimeError, "permute(sparse_coo): number of dimensions in the tensor input does not match the length of "
                          "the desired ordering of dimensions i.e. input.dim() = 3 is not equal to len(dims) = 2",
            lambda: x.permute(0, 1))
    _raises(RuntimeError, "permute(): duplicate dims", lambda: x.permute(0, 1, 1))
    _same(x.transpose(0, -1), _a(2, 3, 4).swapaxes(0, 2))
    _same(torch.adjoint(x), _a(2, 3, 4).swapaxes(1, 2))
    s = _s(5.0)
    assert s.transpose(0, -1) is s and s.t() is s
    v = _t(3)
    assert v.t() is v
    _same(_t(2, 3).t(), _a(2, 3).T)
    _raises(RuntimeError, "t() expects a tensor with <= 2 dimensions, but self is 3D", lambda: x.t())
    w = _t(2, 3, requires_grad=True)
    assert w.t().grad_fn.name() == "TBackward0"
    assert w.transpose(0, 1).grad_fn.name() == "TransposeBackward0"
    assert w.permute(1, 0).grad_fn.name() == "PermuteBackward0"
    assert w.transpose(1, 1).grad_fn.name() == "TransposeBackward0"   # a node of its own, named, even when a no-op
    w.t().sum().backward()
    _same(w.grad, np.ones((2, 3)))


def test_movedim_of_ints_and_tuples():
    x = _t(2, 3, 4)
    ref = _a(2, 3, 4)
    _same(x.movedim(0, -1), np.moveaxis(ref, 0, -1))
    _same(torch.movedim(x, (0, 1), (2, 0)), np.moveaxis(ref, (0, 1), (2, 0)))
    _same(torch.moveaxis(x, (2, 0), (0, 2)), np.moveaxis(ref, (2, 0), (0, 2)))
    _same(torch.movedim(x, (1, 2), (2, 1)), np.moveaxis(ref, (1, 2), (2, 1)))
    assert torch.movedim(x, 1, 1) is x


def test_expand_keeps_sizes_infers_minus_one_and_gives_pytorchs_errors():
    x = _t(3, 1)
    _same(x.expand(2, 3, 4), np.broadcast_to(_a(3, 1), (2, 3, 4)))
    _same(x.expand(5, -1, 4), np.broadcast_to(_a(3, 1), (5, 3, 4)))
    _same(x.expand(-1, 1), _a(3, 1))
    assert x.expand(3, 1) is x and x.expand(-1, -1) is x and x.expand((3, 1)) is x
    _same(_s(2.0).expand(2, 3), np.full((2, 3), 2.0))
    _same(_s(2.0).expand(()), np.array(2.0))
    _same(x.expand_as(_z(2, 3, 5)), np.broadcast_to(_a(3, 1), (2, 3, 5)))
    _same(torch.broadcast_to(_t(4), (2, 4)), np.broadcast_to(_a(4), (2, 4)))
    a, b = torch.broadcast_tensors(_t(3, 1), _t(4))
    _same(a, np.broadcast_to(_a(3, 1), (3, 4)))
    _same(b, np.broadcast_to(_a(4), (3, 4)))
    _raises(RuntimeError, "The expanded size of the tensor (3) must match the existing size (2) at non-singleton "
                          "dimension 0.  Target sizes: [3, 4].  Tensor sizes: [2, 4]", lambda: _t(2, 4).expand(3, 4))
    _raises(RuntimeError, "The expanded size of the tensor (5) must match the existing size (4) at non-singleton "
                          "dimension 2.  Target sizes: [7, 2, 5].  Tensor sizes: [2, 4]",
            lambda: _t(2, 4).expand(7, 2, 5))
    with pytest.raises(RuntimeError, match=r"^expand\(\S+\{\[2, 4\]\}, size=\[4\]\): the number of sizes provided "
                                           r"\(1\) must be greater or equal to the number of dimensions in the "
                                           r"tensor \(2\)$"):
        _t(2, 4).expand(4)
    _raises(RuntimeError, "expand: -1 is not allowed in a leading, non-existing dimension",
            lambda: _t(3, 1).expand(-1, 3, 1))
    _raises(RuntimeError, "expand: -1 is not allowed in a leading, non-existing dimension",
            lambda: _s(1.0).expand(-1, 2))


def test_expand_strides_and_the_numpy_path_for_other_layouts():
    _same(_t(3, 1).expand(3, 4), np.broadcast_to(_a(3, 1), (3, 4)))
    e = _t(3, 1).expand(2, 3, 4)
    assert e.stride() == (0, 1, 0)
    _same(_s(1.5).expand(2, 2) + 0, np.full((2, 2), 1.5))
    xt = _t(1, 3).t()                               # [3, 1], not C-contiguous: numpy's broadcast_to
    _same(xt.expand(3, 2), np.broadcast_to(_a(1, 3).T, (3, 2)))
    _same(_z(0, 1).expand(0, 4), np.zeros((0, 4)))
    _same(_t(2, 1).expand(2, 0), np.zeros((2, 0)))


def test_squeeze_unsqueeze_values_names_and_errors():
    x = _t(1, 3, 1, 2)
    _same(x.squeeze(), _a(3, 2))
    _same(x.squeeze(2), _a(1, 3, 2))
    _same(x.squeeze(1), _a(1, 3, 1, 2))
    _same(x.squeeze(-2), _a(1, 3, 2))
    _same(x.squeeze((0, 2)), _a(3, 2))
    _same(x.squeeze((0, 1)), _a(3, 1, 2))
    w = torch.ones(1, 3, 1, requires_grad=True)
    assert w.squeeze().grad_fn.name() == "SqueezeBackward0"
    assert w.squeeze(0).grad_fn.name() == "SqueezeBackward1"
    assert w.squeeze(1).grad_fn.name() == "SqueezeBackward1"       # no size-1 dim there: still a node of its own
    assert w.squeeze((0, 2)).grad_fn.name() == "SqueezeBackward2"
    assert w.unsqueeze(0).grad_fn.name() == "UnsqueezeBackward0"
    _same(_t(2, 3).unsqueeze(0), _a(1, 2, 3))
    _same(_t(2, 3).unsqueeze(1), _a(2, 1, 3))
    _same(_t(2, 3).unsqueeze(-1), _a(2, 3, 1))
    _same(_t(2, 3).unsqueeze(-3), _a(1, 2, 3))
    _same(_s(2.0).unsqueeze(-1), np.array([2.0]))
    _same(_s(2.0).unsqueeze(0), np.array([2.0]))
    _raises(IndexError, "Dimension out of range (expected to be in range of [-3, 2], but got 3)",
            lambda: _t(2, 3).unsqueeze(3))
    _raises(IndexError, "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
            lambda: _s(2.0).unsqueeze(1))


# ----------------------------------------------------------------------------- cat and the stacks


def test_cat_skips_legacy_empty_vectors_and_copies_a_single_tensor():
    x, y = _t(2, 3), _t(4, 3)
    _same(torch.cat([x, y]), np.concatenate([_a(2, 3), _a(4, 3)]))
    _same(torch.cat((x, _t(2, 1)), dim=-1), np.concatenate([_a(2, 3), _a(2, 1)], axis=1))
    _same(torch.cat([x, _z(0)]), _a(2, 3))
    _same(torch.cat([_z(0), x, _z(0)], 1), _a(2, 3))
    _same(torch.cat([_z(0), _z(0)]), np.zeros(0))
    _same(torch.cat([_z(0)]), np.zeros(0))
    b = torch.cat([torch.tensor([True, False])])
    assert b.dtype is torch.bool
    _same(b, np.array([True, False]))
    _same(torch.cat([_z(2, 0), torch.ones(2, 1)], 1), np.ones((2, 1)))
    _same(torch.cat(iter([x, y])), np.concatenate([_a(2, 3), _a(4, 3)]))
    one = torch.cat([x])
    assert one is not x
    one[0, 0] = -1.0
    assert x[0, 0].item() == 1.0                       # a copy, not x itself
    g = _t(2, 3, requires_grad=True)
    out = torch.cat([g])
    assert out.grad_fn is not None and out.requires_grad
    out.sum().backward()
    _same(g.grad, np.ones((2, 3)))
    _same(torch.cat([torch.tensor([1, 2]), torch.tensor([0.5])]), np.array([1.0, 2.0, 0.5], np.float32))
    _raises(RuntimeError, "torch.cat(): expected a non-empty list of Tensors", lambda: torch.cat([]))
    _raises(RuntimeError, "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for "
                          "tensor number 1 in the list.", lambda: torch.cat([x, _t(2, 4)]))
    _raises(RuntimeError, "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 for "
                          "tensor number 2 in the list.", lambda: torch.cat([x, _t(2, 1), _t(3, 3)], -1))
    _raises(RuntimeError, "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for "
                          "tensor number 2 in the list.", lambda: torch.cat([_z(0), x, _t(2, 4)]))
    _raises(RuntimeError, "Tensors must have same number of dimensions: got 2 and 3",
            lambda: torch.cat([x, _t(2, 3, 1)]))
    from tracejit.ops.registry import OPS, AVal
    _raises(RuntimeError, "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 for "
                          "tensor number 1 in the list.",
            lambda: OPS["cat"].meta(AVal((2, 1), torch.float64), AVal((3, 1), torch.float64), dim=1))


def test_cat_gradient_splits_at_each_operands_offset():
    a, b, c = (_t(2, n, requires_grad=True) for n in (1, 3, 2))
    out = torch.cat([a, b, c], 1)
    ct = _a(2, 6) * 10
    (out * torch.tensor(ct)).sum().backward()
    _same(a.grad, ct[:, :1])
    _same(b.grad, ct[:, 1:4])
    _same(c.grad, ct[:, 4:])


def test_stack_and_its_errors():
    x, y = _t(2, 3), _t(2, 3) * 10
    _same(torch.stack([x, y]), np.stack([_a(2, 3), _a(2, 3) * 10]))
    _same(torch.stack([x, y], 1), np.stack([_a(2, 3), _a(2, 3) * 10], 1))
    _same(torch.stack([x, y], -1), np.stack([_a(2, 3), _a(2, 3) * 10], -1))
    _same(torch.stack([x]), _a(1, 2, 3))
    _raises(RuntimeError, "stack expects a non-empty TensorList", lambda: torch.stack([]))
    _raises(RuntimeError, "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [3, 2] at "
                          "entry 2", lambda: torch.stack([x, y, _t(3, 2)]))


def test_atleast_and_the_h_v_d_column_stacks():
    s, v, m, c = _s(2.0), _t(3), _t(2, 3), _t(2, 3, 4)
    _same(torch.atleast_1d(s), np.array([2.0]))
    assert torch.atleast_1d(v) is v
    _same(torch.atleast_2d(s), np.array([[2.0]]))
    _same(torch.atleast_2d(v), _a(1, 3))
    assert torch.atleast_2d(m) is m
    _same(torch.atleast_3d(s), np.array([[[2.0]]]))
    _same(torch.atleast_3d(v), _a(1, 3, 1))
    _same(torch.atleast_3d(m), _a(2, 3, 1))
    assert torch.atleast_3d(c) is c
    _same(torch.hstack([v, _t(2)]), np.hstack([_a(3), _a(2)]))
    _same(torch.hstack([s, s]), np.array([2.0, 2.0]))
    _same(torch.hstack([m, _t(2, 1)]), np.hstack([_a(2, 3), _a(2, 1)]))
    _same(torch.vstack([v, _t(2, 3)]), np.vstack([_a(3), _a(2, 3)]))
    _same(torch.row_stack([v, v]), np.vstack([_a(3), _a(3)]))
    _same(torch.dstack([m, m]), np.dstack([_a(2, 3), _a(2, 3)]))
    _same(torch.dstack([v, v]), np.dstack([_a(3), _a(3)]))
    _same(torch.dstack([s, s]), np.dstack([2.0, 2.0]))
    _same(torch.column_stack([v, _t(3, 2)]), np.column_stack([_a(3), _a(3, 2)]))
    _same(torch.column_stack([s, s]), np.column_stack([2.0, 2.0]))


# ----------------------------------------------------------------------------- narrow and the split family


def test_narrow_and_its_errors():
    x = _t(3, 4)
    _same(x.narrow(1, 1, 2), _a(3, 4)[:, 1:3])
    _same(x.narrow(-1, -3, 2), _a(3, 4)[:, 1:3])
    _same(x.narrow(0, 3, 0), np.zeros((0, 4)))
    _same(x.narrow(0, -3, 3), _a(3, 4))
    _same(x.narrow(1, torch.tensor(2), 2), _a(3, 4)[:, 2:])
    _raises(IndexError, "start out of range (expected to be in range of [-4, 4], but got 5)", lambda: x.narrow(1, 5, 0))
    _raises(IndexError, "start out of range (expected to be in range of [-4, 4], but got -5)",
            lambda: x.narrow(1, -5, 0))
    _raises(RuntimeError, "narrow(): length must be non-negative.", lambda: x.narrow(1, 2, -1))
    _raises(RuntimeError, "start (3) + length (2) exceeds dimension size (4).", lambda: x.narrow(1, 3, 2))
    _raises(RuntimeError, "start (2) + length (3) exceeds dimension size (4).", lambda: x.narrow(1, -2, 3))


def test_split_by_size_and_by_sizes_and_its_errors():
    x, ref = _t(3, 5), _a(3, 5)
    _pieces(x.split(2, 1), [ref[:, :2], ref[:, 2:4], ref[:, 4:]])
    _pieces(x.split(5, 1), [ref])
    _pieces(x.split(7, 1), [ref])
    _pieces(x.split(1), [ref[:1], ref[1:2], ref[2:]])
    _pieces(torch.split(x, [1, 4], dim=1), [ref[:, :1], ref[:, 1:]])
    _pieces(torch.split(x, [0, 5, 0], dim=-1), [ref[:, :0], ref, ref[:, 5:]])
    _pieces(_z(0, 2).split(0), [np.zeros((0, 2))])
    _pieces(_z(0, 2).split(3), [np.zeros((0, 2))])
    _raises(RuntimeError, "split_size can only be 0 if dimension size is 0, but got dimension size of 3",
            lambda: _t(3).split(0))
    _raises(RuntimeError, "split expects split_size be non-negative, but got -1", lambda: _t(3).split(-1))
    _raises(RuntimeError, "split expects split_size be non-negative, but got -1", lambda: _z(0).split(-1))
    _raises(RuntimeError, "split_with_sizes expects split_sizes to sum exactly to 5 (input tensor's size at dimension "
                          "1), but got split_sizes=[1, 1]", lambda: x.split([1, 1], -1))


def test_chunk_gives_ceil_sized_pieces_and_chunks_empty_pieces_of_an_empty_dim():
    x, ref = _t(3, 5), _a(3, 5)
    _pieces(x.chunk(3, 1), [ref[:, :2], ref[:, 2:4], ref[:, 4:]])
    _pieces(x.chunk(2), [ref[:2], ref[2:]])
    _pieces(x.chunk(1, -1), [ref])
    _pieces(_t(6).chunk(4), [_a(6)[:2], _a(6)[2:4], _a(6)[4:]])     # ceil(6 / 4) = 2: three pieces
    _pieces(_t(2).chunk(5), [_a(2)[:1], _a(2)[1:]])
    _pieces(_z(0, 3).chunk(2), [np.zeros((0, 3))] * 2)
    _pieces(_z(3, 0).chunk(3, 1), [np.zeros((3, 0))] * 3)
    _raises(RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0", lambda: x.chunk(0))
    _raises(RuntimeError, "chunk expects `chunks` to be greater than 0, got: -2", lambda: x.chunk(-2))


def test_tensor_split_by_sections_and_by_indices_as_python_slices():
    x, ref = _t(3, 7), _a(3, 7)
    _pieces(x.tensor_split(3, 1), np.array_split(ref, 3, 1))       # sizes 3, 2, 2
    _pieces(x.tensor_split(1, 1), [ref])
    _pieces(torch.tensor_split(_t(8), 3), np.array_split(_a(8), 3))  # sizes 3, 3, 2
    _pieces(torch.tensor_split(_t(2), 5), np.array_split(_a(2), 5))  # 1, 1, 0, 0, 0
    _pieces(x.tensor_split([1, 4], dim=1), [ref[:, :1], ref[:, 1:4], ref[:, 4:]])
    _pieces(x.tensor_split((2, 9), dim=-1), [ref[:, :2], ref[:, 2:9], ref[:, 9:]])
    v = _a(6)
    _pieces(torch.tensor_split(_t(6), [3, 1]), [v[:3], v[3:1], v[1:]])
    _pieces(torch.tensor_split(_t(6), [-2]), [v[:-2], v[-2:]])
    _pieces(torch.tensor_split(_t(6), [-8, 2]), [v[:-8], v[-8:2], v[2:]])
    _pieces(torch.tensor_split(_t(6), []), [v])
    _raises(RuntimeError, "number of sections must be larger than 0, got 0", lambda: torch.tensor_split(_t(6), 0))
    _raises(RuntimeError, "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims",
            lambda: torch.tensor_split(_s(1.0), 1))


def test_hsplit_vsplit_dsplit_need_rank_and_divisible_sections():
    m, ref = _t(3, 4), _a(3, 4)
    _pieces(m.hsplit(2), [ref[:, :2], ref[:, 2:]])
    _pieces(torch.hsplit(_t(5), [1, 2]), [_a(5)[:1], _a(5)[1:2], _a(5)[2:]])
    _pieces(torch.hsplit(_t(4), 2), [_a(4)[:2], _a(4)[2:]])
    _pieces(m.vsplit([1]), [ref[:1], ref[1:]])
    _pieces(m.vsplit(3), [ref[:1], ref[1:2], ref[2:]])
    c = _a(2, 2, 4)
    _pieces(_t(2, 2, 4).dsplit(2), [c[..., :2], c[..., 2:]])
    _pieces(_t(2, 2, 4).dsplit([3]), [c[..., :3], c[..., 3:]])
    _raises(RuntimeError, "torch.hsplit attempted to split along dimension 1, but the size of the dimension 4 is not "
                          "divisible by the split_size 3!", lambda: m.hsplit(3))
    _raises(RuntimeError, "torch.hsplit attempted to split along dimension 0, but the size of the dimension 5 is not "
                          "divisible by the split_size 2!", lambda: _t(5).hsplit(2))
    _raises(RuntimeError, "torch.hsplit attempted to split along dimension 1, but the size of the dimension 4 is not "
                          "divisible by the split_size 0!", lambda: m.hsplit(0))
    _raises(RuntimeError, "torch.vsplit attempted to split along dimension 0, but the size of the dimension 3 is not "
                          "divisible by the split_size 2!", lambda: m.vsplit(2))
    _raises(RuntimeError, "torch.dsplit attempted to split along dimension 2, but the size of the dimension 4 is not "
                          "divisible by the split_size 3!", lambda: _t(2, 2, 4).dsplit(3))
    _raises(RuntimeError, "torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 "
                          "dimensions!", lambda: _s(1.0).hsplit(1))
    _raises(RuntimeError, "torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with 1 "
                          "dimensions!", lambda: _t(4).vsplit(1))
    _raises(RuntimeError, "torch.dsplit requires a tensor with at least 3 dimension, but got a tensor with 2 "
                          "dimensions!", lambda: m.dsplit(1))


def test_unbind_along_each_dim():
    x, ref = _t(3, 4), _a(3, 4)
    _pieces(x.unbind(), list(ref))
    _pieces(x.unbind(1), list(ref.T))
    _pieces(x.unbind(-1), list(ref.T))
    assert _z(0, 2).unbind() == ()


# ----------------------------------------------------------------------------- repeat, tile, flip, roll, tril/triu


def test_repeat_and_tile_against_numpy_tile():
    x, ref = _t(3, 2), _a(3, 2)
    _same(x.repeat(2, 3), np.tile(ref, (2, 3)))
    _same(x.repeat((2, 3)), np.tile(ref, (2, 3)))
    _same(x.repeat(2, 1, 2), np.tile(ref, (2, 1, 2)))
    _same(x.repeat(1, 1), ref)
    _same(x.repeat(0, 2), np.zeros((0, 4)))
    _same(_s(3.0).repeat(2), np.array([3.0, 3.0]))
    _same(_s(3.0).repeat(()), np.array(3.0))
    _same(x.tile((2,)), np.tile(ref, (1, 2)))
    _same(x.tile((2, 1, 3)), np.tile(ref, (2, 1, 3)))
    _same(x.tile(()), ref)
    _same(torch.tile(_t(3), (2, 2)), np.tile(_a(3), (2, 2)))
    _raises(RuntimeError, "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
            lambda: x.repeat(2))


def test_flip_roll_tril_triu():
    x, ref = _t(3, 4), _a(3, 4)
    _same(x.flip(0), ref[::-1])
    _same(x.flip((0, -1)), ref[::-1, ::-1])
    _same(x.flip(-1), ref[:, ::-1])
    _same(torch.fliplr(x), ref[:, ::-1])
    _same(torch.flipud(x), ref[::-1])
    _same(_s(2.0).flip(0), np.array(2.0))
    _same(x.roll(1), np.roll(ref, 1))
    _same(x.roll(-2, 1), np.roll(ref, -2, 1))
    _same(x.roll((1, 5), (0, 1)), np.roll(ref, (1, 5), (0, 1)))
    _same(x.roll(1, -2), np.roll(ref, 1, 0))
    _same(x.tril(), np.tril(ref))
    _same(x.tril(-1), np.tril(ref, -1))
    _same(x.triu(1), np.triu(ref, 1))
    _same(x.triu(), np.triu(ref))
    _same(torch.tril(_t(2, 3, 3), 1), np.tril(_a(2, 3, 3), 1))
    g = _t(3, 4, requires_grad=True)
    ct = _a(3, 4) * 10
    for fn, adj in ((lambda t: t.roll((1, 2), (0, 1)), lambda c: np.roll(c, (-1, -2), (0, 1))),
                    (lambda t: t.flip((0, 1)), lambda c: c[::-1, ::-1]),
                    (lambda t: t.tril(1), lambda c: np.tril(c, 1)),
                    (lambda t: t.triu(-1), lambda c: np.triu(c, -1))):
        g.grad = None
        (fn(g) * torch.tensor(ct)).sum().backward()
        _same(g.grad, adj(ct))


# ----------------------------------------------------------------------------- diagonals


def test_diagonal_diag_and_diag_embed():
    m, ref = _t(3, 4), _a(3, 4)
    for off in (0, 1, 3, 4, -1, -2, -3):
        _same(torch.diagonal(m, off), np.diagonal(ref, off))
        _same(m.diag(off), np.diag(ref, off))
    c = _a(2, 3, 4)
    _same(_t(2, 3, 4).diagonal(), np.diagonal(c))
    _same(_t(2, 3, 4).diagonal(1, 1, 2), np.diagonal(c, 1, 1, 2))
    _same(_t(2, 3, 4).diagonal(-1, 2, 0), np.diagonal(c, -1, 2, 0))
    for off in (0, 1, 2, -1, -2):
        _same(torch.diag(_t(3), off), np.diag(_a(3), off))
    d = torch.diag(torch.tensor([1, 2], dtype=torch.int32))
    assert d.dtype is torch.int32
    _same(d, np.diag(np.array([1, 2], np.int32)))
    _raises(RuntimeError, "diag(): Supports 1D or 2D tensors. Got 3D", lambda: torch.diag(_t(2, 2, 2)))
    _raises(RuntimeError, "diag(): Supports 1D or 2D tensors. Got 0D", lambda: torch.diag(_s(1.0)))
    e = _a(2, 3)
    want = np.zeros((2, 3, 3))
    for b in range(2):
        want[b] = np.diag(e[b])
    _same(torch.diag_embed(_t(2, 3)), want)
    _same(torch.diag_embed(_t(2, 3), 0, -2, -1), want)
    for kw in ({"offset": 1}, {"dim1": 0}, {"dim2": 0}, {"dim1": -1, "dim2": -2}):
        _raises(NotImplementedError, "diag_embed: tracejit supports offset=0, dim1=-2, dim2=-1 only",
                lambda: torch.diag_embed(_t(2, 3), **kw))


# ----------------------------------------------------------------------------- layouts, clone, sum_to


def test_contiguous_clone_and_memory_formats():
    x = _t(1, 2, 3, 4)
    assert x.contiguous() is x
    xt = _t(3, 2).t()
    c = xt.contiguous()
    assert c is not xt and c.is_contiguous()
    _same(c, _a(3, 2).T)
    cl = x.contiguous(memory_format=torch.channels_last)
    assert cl.stride() == (24, 1, 8, 2) and cl is not x
    assert cl.contiguous(memory_format=torch.channels_last) is cl
    _same(cl, _a(1, 2, 3, 4))
    back = cl.contiguous()
    assert back.stride() == (24, 12, 4, 1)
    _same(back, _a(1, 2, 3, 4))
    _raises(RuntimeError, "preserve memory format is unsupported by the contiguous operator",
            lambda: x.contiguous(memory_format=torch.preserve_format))
    _raises(RuntimeError, "required rank 4 tensor to use channels_last format",
            lambda: _t(2, 3).contiguous(memory_format=torch.channels_last))
    _raises(RuntimeError, "required rank 5 tensor to use channels_last_3d format",
            lambda: x.contiguous(memory_format=torch.channels_last_3d))
    k = x.clone()
    assert k.stride() == (24, 12, 4, 1)
    k[0, 0, 0, 0] = -1.0
    assert x[0, 0, 0, 0].item() == 1.0
    assert cl.clone().stride() == (24, 1, 8, 2)                          # preserve_format keeps the layout
    assert x.clone(memory_format=torch.channels_last).stride() == (24, 1, 8, 2)
    assert cl.clone(memory_format=torch.contiguous_format).stride() == (24, 12, 4, 1)
    assert x.to(memory_format=torch.preserve_format) is x
    _same(x.clone(memory_format=torch.channels_last), _a(1, 2, 3, 4))
    c5 = _t(1, 2, 2, 2, 3).contiguous(memory_format=torch.channels_last_3d)
    assert c5.stride() == (24, 1, 12, 6, 2)


def test_sum_to_sums_broadcast_dims_back():
    from tracejit.ops.shape_ops import sum_to
    g = _t(2, 3, 4)
    ref = _a(2, 3, 4)
    _same(sum_to(g, (3, 4)), ref.sum(0))
    _same(sum_to(g, (3, 1)), ref.sum((0, 2))[:, None])
    _same(sum_to(g, (1, 3, 1)), ref.sum((0, 2), keepdims=True))
    _same(sum_to(g, ()), np.array(ref.sum()))
    _same(sum_to(g, [2, 3, 4]), ref)
    _same(sum_to(_t(3, 1), (3, 1)), _a(3, 1))
    _same(sum_to(_t(1, 4), (1, 1)), _a(1, 4).sum(keepdims=True))


def test_the_reshape_op_never_aliases_and_clone_to_the_format_it_has_copies():
    from tracejit.ops.registry import OPS, apply
    x = _t(2, 3)
    r = apply(OPS["reshape"], x, shape=(3, 2))        # (public reshape of a contiguous tensor takes the view op)
    r[0, 0] = -1.0
    assert x[0, 0].item() == 1.0
    _same(r[1:], _a(3, 2)[1:])
    cl = _t(1, 2, 3, 4).contiguous(memory_format=torch.channels_last)
    k = cl.clone(memory_format=torch.channels_last)
    assert k.stride() == (24, 1, 8, 2)
    _same(k, _a(1, 2, 3, 4))
    k[0, 0, 0, 0] = -1.0
    assert cl[0, 0, 0, 0].item() == 1.0
    v = _t(3)
    assert v.transpose(0, 0) is not v and v.transpose(0, -1)._base is v     # a 1-d transpose is a view of its own


def test_traced_view_and_reshape_follow_the_modelled_strides():
    x = _t(2, 3)
    f = torch.trace(lambda a: a.t().reshape(-1) * 1, backend="interpreter")
    _same(f(x), _a(2, 3).T.reshape(-1))
    g = torch.trace(lambda a: a.view(3, 2) * 1, backend="interpreter")
    _same(g(x), _a(3, 2))
    h = torch.trace(lambda a: a.reshape(2, 3) + a.t().t().view(6).view(2, 3), backend="interpreter")
    _same(h(x), 2 * _a(2, 3))
    bad = torch.trace(lambda a: a.t().view(-1) * 1, backend="interpreter")
    with pytest.raises(RuntimeError, match=r"^view size is not compatible with input tensor's size and stride"):
        bad(x)


def test_more_edges_of_flatten_stack_hstack_flip_diag_embed_and_formats():
    _same(_t(3).flatten(), _a(3))
    _same(_t(1).flatten(), _a(1))
    x = _t(2, 3)
    _raises(RuntimeError, "stack expects each tensor to be equal size, but got [3, 2] at entry 0 and [2, 3] at "
                          "entry 1", lambda: torch.stack([_t(3, 2), x, x]))
    _same(torch.hstack([x]), _a(2, 3))
    _same(torch.hstack([_t(3)]), _a(3))
    _same(torch.flip(x, 0), _a(2, 3)[::-1])
    c = _a(2, 2, 3)
    want = np.zeros((2, 2, 3, 3))
    for idx in np.ndindex(2, 2):
        want[idx] = np.diag(c[idx])
    _same(torch.diag_embed(_t(2, 2, 3)), want)
    d = torch.diag_embed(torch.tensor([[1, 2], [3, 4]]))
    assert d.dtype is torch.int64
    _same(d, np.array([np.diag([1, 2]), np.diag([3, 4])]))
    cl = _t(1, 2, 3, 4).contiguous(memory_format=torch.channels_last)
    back = cl.to(memory_format=torch.contiguous_format)
    assert back.stride() == (24, 12, 4, 1)
    _same(back, _a(1, 2, 3, 4))


def test_an_expanded_view_is_read_only():
    e = _t(3, 1).expand(3, 4)
    assert not e.numpy().flags.writeable
    with pytest.raises(RuntimeError, match="^unsupported operation"):
        e.add_(1)
    s = _s(2.0).expand(2, 2)
    assert not s.numpy().flags.writeable
