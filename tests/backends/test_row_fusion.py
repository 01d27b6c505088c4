"""Row kernels: reductions over the trailing dims fused with the elementwise work around them (numba backend),
checked against the reference interpreter and eager mode, forward and backward, with NaN/inf rows."""
import re

import numpy as np
import pytest

import tracejit
import tracejit.nn.functional as F
from tracejit.passes.fusion import fused_nodes, row_class, row_domain
from stepcheck import traced_equals_eager


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    d = str(tmp_path_factory.getbasetemp() / "tjcache_rows")
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", d)


W = tracejit.randn(7)
B = tracejit.randn(7)
W2 = tracejit.randn(3, 7)

CASES = {
    "softmax": lambda x: F.softmax(x * 2.0, -1) + 1.0,
    "log_softmax": lambda x: F.log_softmax(x, -1),
    "logsumexp": lambda x: x.logsumexp(-1) * 2,
    "logsumexp_keepdim": lambda x: x - x.logsumexp(-1, keepdim=True),
    "layer_norm": lambda x: F.layer_norm(x, (7,), W, B),
    "layer_norm_2d": lambda x: F.layer_norm(x, (3, 7), W2),
    "var_max_min": lambda x: x.var(-1, keepdim=True) + x.amax(-1, keepdim=True) - x.amin(-1, keepdim=True),
    "std_unbiased": lambda x: x.var(-1, correction=1) * 0.5,
    "mean_rows": lambda x: tracejit.tanh(x).mean(-1) + x.sum(-1),
    "full_mean": lambda x: (x * x).mean(),
    "two_level": lambda x: ((x - x.mean(-1, keepdim=True)).exp() / (x.exp().sum(-1, keepdim=True))).amax(-1),
    "mse": lambda x: F.mse_loss(x, x * 0.5 + 1.0),
    "cross_entropy": lambda x: F.cross_entropy(x.reshape(-1, 7), tracejit.arange(x.numel() // 7) % 7),
    # reductions around the kept dim (batch norm's pattern): rows of 4 segments of 7
    "batch_stats": lambda x: (x - x.mean((0, 2), keepdim=True)) * (x.var((0, 2), keepdim=True) + 1e-5).rsqrt(),
    "lead_sum_max_lse": lambda x: x.sum((0, 2)) + x.amax((0, 2)) - x.logsumexp((0, 2)) * x.amin((0, 2)),
    "batch_norm": lambda x: F.batch_norm(x, None, None, W2[:, 0], B[:3], training=True),
}


def _grad_fn(f):
    def g(x):
        y = f(x)
        (y * y).sum().backward()
        return y, x.grad
    return g


def _x(shape, dtype, special):
    x = tracejit.randn(*shape, dtype=getattr(tracejit, dtype))
    if special:
        a = x.numpy()
        a[0, 0, 1] = np.nan
        a[1, 0, :] = -np.inf
        a[1, 1, 2] = np.inf
    return x


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_kernel_matches_interpreter_and_eager(name, dtype):
    f = CASES[name]
    tol = 1e-5 if dtype == "float32" else 1e-10
    for special in (False, True):
        x = _x((4, 3, 7), dtype, special)
        expect = f(x).numpy()
        got = tracejit.trace(f, backend="numba")(x).numpy()
        ref = tracejit.trace(f, backend="interpreter")(x).numpy()
        assert got.dtype == expect.dtype and got.shape == expect.shape
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, equal_nan=True)
        np.testing.assert_allclose(got, expect, rtol=tol, atol=tol, equal_nan=True)
    # forward and backward traced together
    x = _x((4, 3, 7), dtype, False).requires_grad_()
    y, gx = tracejit.trace(_grad_fn(f), backend="numba")(x)
    x2 = x.detach().clone().requires_grad_()
    y2, gx2 = _grad_fn(f)(x2)
    np.testing.assert_allclose(y.numpy(), y2.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(gx.numpy(), gx2.numpy(), rtol=10 * tol, atol=10 * tol)


def test_softmax_layernorm_are_one_kernel_each_way():
    x = tracejit.randn(16, 7, requires_grad=True)

    def step(x):
        y = F.layer_norm(F.softmax(x, -1), (7,), W, B)
        y.sum().backward()
        return y, x.grad

    tf = tracejit.trace(step)
    tf(x)
    g = tf.graph(x).entry.fwd_fn.graph
    rows = [n for n in fused_nodes(g) if "rows" in n.attrs]
    assert rows and all(n.attrs["rows"] == ((), (16,), (7,)) for n in rows)
    # no reduction of the trailing dim is left outside a row kernel
    loose = [n for n in g.nodes if n.op.kind == "reduction" and row_domain(n)]
    assert loose == [], [n.op.name for n in loose]
    src = tf.graph(x).entry.fwd_fn.source()
    assert "row kernel" in src and "prange" in src


def test_row_class_follows_broadcasting():
    dom = ((), (4, 3), (7,))
    assert row_class((4, 3, 7), dom) == "full"
    assert row_class((4, 3, 1), dom) == "row"
    assert row_class((7,), dom) == "inner"
    assert row_class((1, 1, 7), dom) == "inner"
    assert row_class((1,), dom) == "scalar"
    assert row_class((3, 7), dom) == "bcast"       # whole rows, broadcast over the first kept dim
    assert row_class((4, 1, 7), dom) == "bcast"
    assert row_class((3, 1), dom) is None          # broadcasts over the first outer dim only: not a row kernel
    assert row_class((4, 3), dom) is None          # a keepdim=False row value lines up with the wrong dims
    assert row_class((2, 7), dom) is None
    dom = ((4,), (3,), (7,))                       # reduced over dims 0 and 2, as batch norm's statistics
    assert row_class((4, 3, 7), dom) == "full"
    assert row_class((3, 1), dom) == "row" and row_class((1, 3, 1), dom) == "row"
    assert row_class((4, 1, 7), dom) == "inner"
    assert row_class((7,), dom) is None and row_class((3,), dom) is None
    assert row_class((1, 3, 7), dom) is None       # ("bcast" only where the reduced dims trail)


@pytest.mark.parametrize("mask_shape", [(1, 1, 5, 6), (2, 1, 5, 6), (3, 1, 6), (1, 3, 5, 6), (5, 6)])
def test_scale_mask_softmax_and_its_backward_are_one_row_kernel_each(mask_shape):
    # attention's scores [B, H, T, S] with a mask broadcast over batch and/or heads (a causal tril buffer)
    rng = np.random.default_rng(0)
    mask = tracejit.tensor(rng.random(mask_shape) < 0.3)
    x = tracejit.randn(2, 3, 5, 6, requires_grad=True)
    w = tracejit.randn(2, 3, 5, 6)

    def step(x):
        p = F.softmax((x * 0.3).masked_fill(mask, float("-inf")), -1)
        (p * w).sum().backward()
        return p, x.grad

    g = traced_equals_eager(step, x, [(1e-6, 1e-6), (1e-5, 1e-6)])
    # (forward and backward in one program here: one row kernel does both)
    assert [n.attrs.get("rows") for n in fused_nodes(g)] == [((), (2, 3, 5), (6,))]
    body = [m.op.name for m in fused_nodes(g)[0].attrs["body"].nodes]
    assert body.count("where") == 2 and "softmax" in body
    assert not [n for n in g.nodes if n.op.kind in ("elementwise", "reduction")]


def test_large_rows_use_the_parallel_variant_and_agree():
    x = tracejit.randn(1 << 11, 1 << 10)
    f = lambda x: F.softmax(x, -1)  # noqa: E731
    np.testing.assert_allclose(tracejit.trace(f)(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-7)


def _bn_step(channels, relu=False):
    """A batch norm training step returning its output and x's gradient (a cube loss: the sum of squares of a
    normalized batch is constant, its gradient zero); relu: a ReLU and a convolution after it (the ReLU's mask
    is then saved for the backward)."""
    bn = tracejit.nn.BatchNorm2d(channels)
    w = tracejit.randn(2, channels, 3, 3)

    def step(x):
        y = bn(x)
        z = F.conv2d(F.relu(y), w, padding=1) if relu else y
        (z * z * z).sum().backward()
        return y, x.grad
    return step


def test_batch_norm_statistics_and_their_backward_are_row_kernels():
    x = tracejit.randn(8, 4, 5, 6, requires_grad=True)
    g = traced_equals_eager(_bn_step(4), x, [(1e-5, 1e-5), (1e-4, 1e-4)])
    assert sum(n.attrs.get("rows") == ((8,), (4,), (5, 6)) for n in fused_nodes(g)) >= 2
    assert not [n for n in g.nodes if n.op.name in ("mean", "var", "sum")], [n.op.name for n in g.nodes]
    # the batch's mean and variance of x (siblings: neither reads the other) are one row kernel, one pass over x
    stats = [n for n in fused_nodes(g) if {"mean", "var"} & {b.op.name for b in n.attrs["body"].nodes}]
    assert len(stats) == 1 and {"mean", "var"} <= {b.op.name for b in stats[0].attrs["body"].nodes}


def test_batch_norm_backward_sums_each_segment_into_a_float64_row_of_one_segment():
    """Rows of L segments (batch norm's: the batch before the channel): a scratch row only summed is a float64 row
    of one segment's T elements that each segment adds into, summed once after the last (it stays in L1); the
    variance's stays whole (its second pass needs the mean first). Both agree with eager."""
    x = tracejit.randn(5, 3, 4, 6, requires_grad=True)
    traced_equals_eager(_bn_step(3), x, [(1e-5, 1e-5), (1e-4, 1e-4)])
    tf = tracejit.trace(_bn_step(3), backend="numba")
    tf(x)
    kernels = [ks for _, ks, _ in tf.graph(x).entry.fwd_fn.kernels if ks.mode == "rows"]
    sums = [ks for ks in kernels if "rsumsq(" not in ks.code]
    assert sums and all((dt, n) == (np.float64, 24) for ks in sums for dt, n in ks.scratch)
    assert all(re.search(r"t(\d+)\[c\] \+= v\d+\n", ks.code) and "+= rsum(" not in ks.code for ks in sums)
    (stats,) = [ks for ks in kernels if "rsumsq(" in ks.code]
    assert sorted(n for _, n in stats.scratch) == [24, 5 * 24]
    # no array a row kernel writes shares memory with another it reads: numba puts noalias on their pointers
    assert all("pipeline_class=NoAliasCompiler" in ks.code for ks in kernels)


def test_a_relu_mask_of_short_segments_is_read_through_a_float_copy():
    """A batch norm + ReLU backward over 4x4 images (segments of 16): the saved bool mask is copied to a float32
    row per segment before the loop that reads it (a loop over bytes is vectorized too wide for 16 elements);
    the numbers equal eager's."""
    x = tracejit.randn(6, 3, 4, 4, requires_grad=True)
    traced_equals_eager(_bn_step(3, relu=True), x, [(1e-5, 1e-5), (1e-4, 1e-4)])
    tf = tracejit.trace(_bn_step(3, relu=True), backend="numba")
    tf(x)
    codes = [ks.code for _, ks, _ in tf.graph(x).entry.fwd_fn.kernels if ks.mode == "rows"]
    widened = [c for c in codes if re.search(r"w(\d+)\[c\] = in\1\[", c)]
    assert widened and all(re.search(r"x(\d+) = w\1\[c\] != 0", c) for c in widened)


def test_segmented_rows_prefetch_each_input_once():
    """A batch norm + ReLU backward over segments (one per image): the first pass to read each full input
    prefetches its segment two on (one line at a time), no later pass does, in the serial kernel and in its
    prange variant alike; the numbers equal eager's."""
    x = tracejit.randn(6, 3, 8, 8, requires_grad=True)
    traced_equals_eager(_bn_step(3, relu=True), x, [(1e-5, 1e-5), (1e-4, 1e-4)])
    tf = tracejit.trace(_bn_step(3, relu=True), backend="numba")
    tf(x)
    codes = [ks.code for _, ks, _ in tf.graph(x).entry.fwd_fn.kernels if ks.mode == "rows"]
    assert codes and all("pfb = ((l + 2) * R + r) * T" in c for c in codes)
    for c in codes:
        for fn in (c[:c.index("def kernel_par")], c[c.index("def kernel_par"):]):
            fetched = re.findall(r"prefetch_l2\((in\d+), pfb \+ c\)", fn)
            assert fetched and len(fetched) == len(set(fetched))
            assert set(fetched) <= set(re.findall(r"(in\d+)\[np\.uint64\(b \+ c\)\]", fn))


def test_rows_longer_than_the_scratch_limit_are_not_row_kernels():
    from tracejit.passes import fusion
    x = tracejit.randn(2, fusion.ROW_MAX + 5)
    f = lambda x: (x * x).sum(-1) + F.softmax(x, -1)[:, 0]  # noqa: E731
    tf = tracejit.trace(f)
    np.testing.assert_allclose(tf(x).numpy(), f(x).numpy(), rtol=1e-4)
    assert not any("rows" in n.attrs for n in fused_nodes(tf.graph(x).entry.fwd_fn.graph))


def test_layer_norm_reads_each_row_once_for_its_mean_and_variance():
    # the mean and the variance's mean are one row sum (they were two passes over the row)
    x = tracejit.randn(16, 300)
    w, b = tracejit.randn(300), tracejit.randn(300)
    tf = tracejit.trace(lambda x: F.layer_norm(x, (300,), w, b), backend="numba")
    np.testing.assert_allclose(tf(x).numpy(), F.layer_norm(x, (300,), w, b).numpy(), rtol=1e-5, atol=1e-5)
    (code,) = [ks.code for _, ks, _ in tf.graph(x).entry.fwd_fn.kernels]
    kernel = code.split("def kernel(")[1].split("def kernel_par(")[0]
    assert kernel.count("rsum(") == 1 and kernel.count("rsumsq(") == 1


def test_cross_entropy_is_one_row_kernel_around_nll_loss():
    """cross_entropy forward and backward: nll_loss and its backward are ops of their own (numpy, as PyTorch's
    nll_loss is), the backward computed from the targets alone, so that log_softmax, its backward and the
    logits' producer stay one row kernel: no kernel for the masks, counts and scalars of the loss (each a
    compilation and a call)."""
    y = tracejit.arange(32) % 10

    def step(z):
        loss = F.cross_entropy(z * 2, y)
        loss.backward()
        return loss, z.grad

    z = tracejit.randn(32, 10, requires_grad=True)
    tf = tracejit.trace(step)
    loss, gz = tf(z)
    z2 = z.detach().clone().requires_grad_()
    loss2, gz2 = step(z2)
    np.testing.assert_allclose(loss.numpy(), loss2.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(gz.numpy(), gz2.numpy(), rtol=1e-5, atol=1e-7)
    g = tf.graph(z).entry.fwd_fn.graph
    (k,) = fused_nodes(g)
    assert "rows" in k.attrs and {"mul", "log_softmax", "sum", "sub"} <= {b.op.name for b in k.attrs["body"].nodes}
    assert sorted(n.op.name for n in g.nodes if n.op.name.startswith("nll")) == ["nll_loss", "nll_loss_coef"]


@pytest.mark.parametrize("par_min", [1 << 62, 1], ids=["serial", "parallel"])
def test_softmax_of_an_input_finds_the_next_rows_max_in_its_exp_loop(par_min, monkeypatch):
    """softmax/log_softmax/logsumexp of an input's rows: each row's max comes from the previous row's exp loop
    (the first row of each block of ROWS_PER_BLOCK finds its own), and softmax writes its exp into the output
    row and scales it there. Special rows at the blocks' edges (first, last, first of the next, the last row),
    a softmax output that a later loop of the same kernel reads again, serial and parallel variants."""
    from tracejit.backends.numba_cpu import codegen, rowgen
    monkeypatch.setattr(codegen, "PAR_MIN", par_min)
    rb = rowgen.ROWS_PER_BLOCK
    a = np.random.default_rng(3).standard_normal((2 * rb + 3, 9)).astype(np.float32) * 4
    a[0, 2] = np.inf
    a[rb - 1, :] = -np.inf
    a[rb, 4] = np.nan
    a[rb + 1, 3] = 60.0              # a large max right after a NaN row: the shift must not leak between rows
    a[-1, 0] = -np.inf
    x = tracejit.tensor(a)
    fns = {"softmax": lambda x: F.softmax(x, -1),
           "log_softmax": lambda x: F.log_softmax(x, -1),
           "logsumexp": lambda x: x.logsumexp(-1),
           "softmax_read_again": lambda x: (lambda y: (y, (y * y).sum(-1), y.amax(-1)))(F.softmax(x, -1)),
           # row sums beside it (their variables r1, r2, ... once clobbered the block's row bounds)
           "log_softmax_and_sums": lambda x: (F.log_softmax(x, -1), x.sum(-1), (x * x).sum(-1), x.mean(-1))}
    for name, f in fns.items():
        tf = tracejit.trace(f, backend="numba")
        got, want = tf(x), f(x)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)
        k = next(ks for _, ks, _ in tf.graph(x).entry.fwd_fn.kernels if "rmax" in ks.code)
        assert "rmaximum(" in k.code, name
        if name.startswith("softmax"):
            assert "o0 = out0[b:b + T]" in k.code, name


def test_segmented_rows_take_their_prange_variant_from_a_share_of_par_min(monkeypatch):
    """Batch norm's rows (a channel's elements in every image: L segments) run kernel_par from PAR_MIN /
    SEGMENTED_PAR_WEIGHT elements with two threads; layer norm's rows of the same size keep PAR_MIN."""
    import numba
    from tracejit.backends.numba_cpu import codegen, rowgen
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba runs one thread here")
    monkeypatch.setattr(codegen, "PAR_MIN", 960 * rowgen.SEGMENTED_PAR_WEIGHT)     # 960: both programs' rows
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        variants = {}
        for name, f, x in (("batch", lambda x: F.batch_norm(x, None, None, training=True) * 2,
                            tracejit.randn(8, 4, 5, 6)),
                           ("layer", lambda x: F.layer_norm(x, (240,)) * 2, tracejit.randn(4, 240))):
            tf = tracejit.trace(f, backend="numba")
            np.testing.assert_allclose(tf(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-5)
            variants[name] = {disp.py_func.__name__ for _, ks, disp in tf.graph(x).entry.fwd_fn.kernels
                              if ks.mode == "rows"}
    finally:
        numba.set_num_threads(before)
    assert variants == {"batch": {"kernel_par"}, "layer": {"kernel"}}


def test_no_alias_compiler_marks_array_pointers_noalias():
    # what the row kernels compile with: numba's noalias flag on (LLVM then assumes the arrays do not overlap)
    import numba
    from tracejit.backends.numba_cpu.rt import NoAliasCompiler

    def f(x, y):
        for i in range(x.size):
            y[i] = x[i] * 2.0

    sig = (numba.float32[::1], numba.float32[::1])
    plain, marked = numba.njit(f), numba.njit(pipeline_class=NoAliasCompiler)(f)
    plain.compile(sig)
    marked.compile(sig)
    header = lambda d: re.search(r"define [^\n]*", d.inspect_llvm(d.signatures[0])).group(0)  # noqa: E731
    # the two arrays' pointers (meminfo, parent, data each): noalias too, where the plain compilation has none
    assert header(marked).count("noalias") >= header(plain).count("noalias") + 6
