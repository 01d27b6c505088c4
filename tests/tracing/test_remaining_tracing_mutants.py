"""Survivors of the mutation-testing runs (notes stop31/stop32) in the tracing paths of the ops: the trace errors'
texts and the shape rule's IndexError (issue 23). Each test was checked by hand to fail under its mutant."""
import pytest

import tracejit as tj


def _trace_error(body, *args):
    with pytest.raises(tj.TraceError) as ei:
        tj.trace(body)(*args)
    return str(ei.value)


def test_nonzero_trace_error_says_why():
    # mutants indexing.nonzero 2-4 (the text given to `_concrete`: "XX...XX" / None)
    for body in (lambda x: x.nonzero(), lambda x: tj.where(x > 0), lambda x: tj.argwhere(x)):
        msg = _trace_error(body, tj.ones(4, 3))
        assert "cannot trace nonzero() (its result's shape depends on the tensor's values), which needs the " \
               "tensor's value" in msg


def test_boolean_mask_trace_error_says_why():
    # mutants indexing._prepare 18-20 (the text given to `_concrete` for a mask)
    msg = _trace_error(lambda x: x[x > 0], tj.ones(4, 3))
    assert "cannot trace boolean-mask indexing (its result's shape depends on the mask's values), which needs the " \
           "tensor's value" in msg


def test_traced_index_tensors_that_do_not_broadcast_raise_an_index_error_with_the_reason():
    # mutants indexing._index_meta 11, 12 (the IndexError re-raised without numpy's text): reached when tracing,
    # where the shape rule is the first to see index tensors whose shapes do not broadcast (eager raises numpy's
    # text from the indexing itself, after the op's name)
    i, j = tj.tensor([0, 1]), tj.tensor([0, 1, 2])
    with pytest.raises(IndexError, match=r"^shape mismatch: indexing arrays could not be broadcast together with "
                                         r"shapes \(2,\) \(3,\) ?$"):
        tj.trace(lambda x, a, b: x[a, b])(tj.ones(4, 3), i, j)
    with pytest.raises(IndexError, match=r"shape mismatch: indexing arrays could not be broadcast together with "
                                         r"shapes \(2,\) \(3,\)"):
        tj.ones(4, 3)[i, j]     # eager: with the op's name in front


def test_index_spec_placeholders_compare_and_hash_by_position():
    # mutants indexing._T.__eq__ 1, 2 and __hash__ 1-3: the placeholders of index tensors in a spec are compared
    # and hashed when traced graphs are (CSE): %i0 equals %i0 only, never %i1 nor a plain int
    from tracejit.ops.indexing import _T
    assert _T(0) == _T(0) and not (_T(0) == _T(1)) and not (_T(0) == 0) and not (_T(1) == 1)
    assert _T(0) != _T(1)
    assert hash(_T(3)) == hash(_T(3))
    assert len({_T(0), _T(1), _T(2)}) == 3 and len({hash(_T(k)) for k in range(3)}) == 3
    assert {(None, _T(0)): "a"}.get((None, _T(0))) == "a" and (None, _T(1)) not in {(None, _T(0)): "a"}


def test_basic_slice_windows_read_by_the_layout():
    # mutants indexing._slice_window 1-16: (offset, strides) in elements of a basic slice of a row-major input;
    # None for an index op (several inputs)
    from tracejit.ops.indexing import _slice_window
    g = tj.make_graph(lambda x, i: x[1:, ::2] + x[1:3, 4:6].sum() + x[i].sum() + x[2].sum() + x[..., None, 1:2].sum(),
                      tj.ones(4, 6), tj.tensor([0, 1]))
    got = [(n.op.name, _slice_window(n)) for n in g.nodes if n.op.name in ("slice", "index")]
    assert got == [("slice", (6, (6, 2))), ("slice", (10, (6, 1))), ("index", None), ("slice", (12, (1,))),
                   ("slice", (1, (6, 0, 1)))]


# ---- passes/fusion.py ----

def test_is_window_only_for_a_strict_part_of_the_input():
    # mutant passes/fusion.is_window 14 (`>=` instead of `>`): x[0] of a [1, 7] x (as many elements as its input)
    # was taken for a window a loop kernel reads in place; the docstring's rule is a strict part
    from tracejit.passes.fusion import is_window

    def slice_node(shape):
        g = tj.trace(lambda x: x[0] * 2, backend="interpreter").graph(tj.ones(*shape)).forward
        (n,) = [n for n in g.nodes if n.op.name == "slice"]
        return n
    assert is_window(slice_node((2, 7)))
    assert not is_window(slice_node((1, 7)))


# ---- ops/control.py (scan) ----

def test_scan_backward_body_gives_unused_float64_inputs_float64_zero_gradients():
    # mutants ops/control._derivative 114, 116 (the zero gradient of an input the step does not read made without
    # the input's dtype): the backward loop's body returned float32 zeros for the float64 x_t (the engine casts the
    # final gradient back, so only the loop's own graph shows it)
    import numpy as np
    from tracejit.ops.control import backward_body

    def loss(h0, xs, z):
        h, ys = tj.scan(lambda h, x: (h * 2.0, h.sum(-1)), h0, (xs, z))
        return ys.sum() + h.sum()
    args = [tj.tensor(np.ones(s), requires_grad=True) for s in ((3,), (5, 3), (5, 3))]
    e = tj.trace(loss, backend="interpreter").graph(*args).entry
    (node,) = [n for n in e.fwd.nodes if n.op.name == "scan"]
    for body in (node.attrs["grad"], backward_body(node.attrs["body"], 1, 2)):
        assert [v.dtype for v in body.outputs] == [tj.float64] * 3


def test_the_backward_loop_of_a_differentiable_scan_backward_saves_residuals():
    # mutant ops/control.run_scan 1 (default checkpoint=True): the backward loop, recorded under create_graph=True
    # for a second derivative, was split with checkpointing (its own backward recomputing each step from the
    # carry, input "carry0") instead of reading the residuals it saved ("saved0"), as the forward loop does
    import numpy as np

    def first_grad(h0, xs):
        h, ys = tj.scan(lambda h, x: ((h * x).tanh(), (h * x).sum(-1)), h0, xs, as_op=True)
        (g,) = tj.autograd.grad(ys.sum() + h.sum(), (xs,), create_graph=True)
        return g
    h0 = tj.tensor(np.full((3,), 0.5), requires_grad=True)
    xs = tj.tensor(np.linspace(0.1, 1.0, 15).reshape(5, 3), requires_grad=True)
    node = first_grad(h0, xs).grad_fn
    assert node.name() == "ScanBackward0" and node.attrs["saved"] == 1
    assert node.attrs["grad"].input_names[:2] == ["carry0.grad", "saved0"]


def test_second_derivative_through_a_nested_scan_equals_the_python_loops():
    # mutants ops/control._vjp 47, 48, 51, 52 (the saved count / backward body of the scan node that is recorded
    # again for a scan inside a body being differentiated): only a derivative of that node reads them, i.e. a
    # second derivative through a nested scan. Reference: the same scans run as Python loops (as_op=False).
    import numpy as np

    def grads(as_op):
        w = tj.tensor(np.array([0.3, -0.2, 0.5]), requires_grad=True)
        xs = tj.tensor(np.linspace(0.1, 0.9, 12).reshape(4, 3))

        def outer(h, x):
            def inner(c, y):
                return (c * y * w).sin(), (c * w).sum()
            c, ys = tj.scan(inner, h, x.reshape(3, 1).expand(3, 3), as_op=as_op)
            return c + x, ys.sum()
        h, ys = tj.scan(outer, tj.tensor(np.full(3, 0.5)), xs, as_op=as_op)
        (g,) = tj.autograd.grad((ys ** 2).sum() + (h * h).sum(), (w,), create_graph=True)
        (gg,) = tj.autograd.grad((g * g).sum(), (w,))
        return g.detach().numpy(), gg.numpy()
    (g0, gg0), (g1, gg1) = grads(False), grads(True)
    np.testing.assert_allclose(g1, g0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gg1, gg0, rtol=1e-12, atol=1e-12)


def _fused_layout(f, *xs):
    """The numba CPU backend's fused program of f (as in test_fusion_groups.py; nothing compiled), checked on the
    interpreter against the program before fusion; each node as (rows or None, body op names) or its op name."""
    import numpy as np
    from tracejit.backends.interpreter import run
    from tracejit.backends.numba_cpu.convcols import shared_columns
    from tracejit.backends.numba_cpu.gemm import gemm_updates, product_sums
    from tracejit.ir.verify import verify
    from tracejit.passes.decompose import decompose
    from tracejit.passes.fusion import can_fuse_windows, fusion
    g = tj.trace(f, backend="interpreter").graph(*xs).forward
    g = shared_columns(product_sums(gemm_updates(decompose(g))))
    fg = verify(fusion(g, can_fuse_windows, rows=True))
    ins = [np.asarray(x.numpy()) for x in xs]
    for a, b in zip(run(fg, ins), run(g, ins)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    return [(n.attrs.get("rows"), [m.op.name for m in n.attrs["body"].nodes]) if n.op.kind == "fused"
            else n.op.name for n in fg.nodes]


def test_a_row_group_grows_past_a_neighbour_in_an_earlier_row_group():
    # mutant passes/fusion.row_groups 41 (`break` instead of `continue` for a neighbour already in an earlier row
    # group): the sum over (1, 2) of a softmax's output seeds a second row group; its neighbours in index order are
    # the softmax (in the first group) and then the mul, which fits and must join (under the mutant it stayed alone)
    import tracejit.nn.functional as F
    x = tj.randn(2, 3, 7)
    assert _fused_layout(lambda x: F.softmax(x, -1).sum((1, 2), keepdim=True) * 2.0, x) == [
        (((), (2, 3), (7,)), ["softmax"]), (((), (2,), (3, 7)), ["sum", "mul"])]
    assert _fused_layout(lambda x: (F.softmax(x, -1) + F.softmax(x, -1).sum((1, 2), keepdim=True)) * 2.0, x) == [
        (((), (2, 3), (7,)), ["softmax"]), (((), (2,), (3, 7)), ["sum", "add", "mul"])]
