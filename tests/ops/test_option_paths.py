"""Paths of ops that the reference-value, gradcheck and kink tests do not reach: dtypes kept through float16 and
float32 paths, attention masks and batch broadcasting, pooling options, in-place views, sort ties, batch norm's
running-statistic gradients, and the exact error messages (matched whole: a message is PyTorch's text). Each was
a surviving mutant of a mutation-testing run (issue 23); the references are float64 formulas, not torch."""
import math

import numpy as np
import pytest

import tracejit as torch
import tracejit.nn.functional as F


def _erf(x):
    return np.array([math.erf(v) for v in np.ravel(x)]).reshape(np.shape(x))


def test_gelu_of_float16_and_the_float32_gradient_keeps_its_dtype():
    x = np.linspace(-4.0, 4.0, 41)
    got = F.gelu(torch.tensor(x.astype(np.float16)))
    assert got.dtype is torch.float16
    want = 0.5 * x * (1 + _erf(x / math.sqrt(2.0)))
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=4e-3, atol=4e-3)
    xt = torch.tensor(x.astype(np.float32), requires_grad=True)
    F.gelu(xt).sum().backward()
    assert xt.grad.dtype is torch.float32


def _sdpa_ref(q, k, v, mask=None, scale=None):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_attention_masks_a_query_batch_of_its_own_and_float32_gradients():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)      # the query's batch (2, 3); key/value's (3,)
    k, v = (rng.standard_normal((3, 6, 5)).astype(np.float32) for _ in range(2))
    bool_mask = rng.random((4, 6)) > 0.4
    bool_mask[:, 0] = True
    float_mask = rng.standard_normal((4, 6)).astype(np.float32)
    for mask in (None, bool_mask, float_mask):
        qt = torch.tensor(q, requires_grad=True)
        out = F.scaled_dot_product_attention(qt, torch.tensor(k), torch.tensor(v),
                                             attn_mask=None if mask is None else torch.tensor(mask))
        assert out.dtype is torch.float32 and tuple(out.shape) == (2, 3, 4, 5)
        np.testing.assert_allclose(out.detach().numpy(), _sdpa_ref(q, k, v, mask), rtol=1e-4, atol=1e-5)
        out.sum().backward()
        assert qt.grad.dtype is torch.float32
    # dropout_p > 0 runs the ops it stands for, with the given scale (p this small drops nothing)
    out = F.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v), dropout_p=1e-12,
                                         scale=0.3)
    np.testing.assert_allclose(out.numpy(), _sdpa_ref(q, k, v, scale=0.3), rtol=1e-4, atol=1e-5)


def test_conv2d_checks_its_bias_and_arguments_with_pytorchs_messages():
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    for b in (torch.randn(3, 1), torch.randn(4)):
        with pytest.raises(RuntimeError, match=r"expected bias to be 1-dimensional with 3 elements"):
            F.conv2d(x, w, b)
    with pytest.raises(RuntimeError, match=r"^Input type \(float32\) and bias type \(float64\) should be the same$"):
        F.conv2d(x, w, torch.randn(3, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"^Calculated padded input size per channel: \(7 x 9\)\. "):
        F.conv2d(x, torch.randn(3, 2, 8, 10), padding=(1, 2))
    with pytest.raises(RuntimeError, match="^non-positive groups is not supported$"):
        F.conv2d(x, w, groups=0)
    for conv, weight in ((F.conv2d, w), (F.conv_transpose2d, torch.randn(2, 3, 3, 3))):
        with pytest.raises(RuntimeError, match=r"^expected dilation to be a single integer value or a list of 2"):
            conv(x, weight, dilation=(1, 1, 1))
    with pytest.raises(RuntimeError, match="^adaptive_avg_pool2d: expected a floating point input"):
        F.adaptive_avg_pool2d(torch.ones(1, 1, 4, 4, dtype=torch.int64), 2)


def _pool_ref(x, k, s, p, reduce, fill):
    N, C, H, W = x.shape
    xp = np.full((N, C, H + 2 * p, W + 2 * p), fill)
    xp[:, :, p:p + H, p:p + W] = x
    OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    out = np.empty((N, C, OH, OW))
    for i in range(OH):
        for j in range(OW):
            out[:, :, i, j] = reduce(xp[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return out


def test_pooling_with_an_explicit_stride_padding_and_divisor():
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 7))
    xt = torch.tensor(x)
    np.testing.assert_allclose(F.max_pool2d(xt, 2, stride=(1, 1)).numpy(), _pool_ref(x, 2, 1, 0, np.max, -np.inf))
    np.testing.assert_allclose(F.max_pool2d(xt, 2, 2, padding=1).numpy(), _pool_ref(x, 2, 2, 1, np.max, -np.inf))
    np.testing.assert_allclose(F.avg_pool2d(xt, 2, divisor_override=3).numpy(),
                               _pool_ref(x, 2, 2, 0, np.sum, 0.0) / 3, rtol=1e-12)


def test_rsub_alpha_and_the_integer_division_by_zero_message():
    np.testing.assert_allclose(torch.rsub(torch.tensor([1.0, 2.0]), 2.0, alpha=3).numpy(), [-1.0, -4.0])
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
        torch.tensor([1, 2]) // 0


def test_gather_of_a_scalar_and_the_gradient_of_scatter_into_a_smaller_index():
    np.testing.assert_array_equal(torch.gather(torch.tensor(5.0), 0, torch.tensor([0, 0])).numpy(), [5.0, 5.0])
    src = torch.tensor(np.arange(8.0).reshape(2, 4), requires_grad=True)
    index = torch.tensor([[0, 1, 2]])
    w = np.arange(12.0).reshape(3, 4) + 1
    (torch.zeros(3, 4, dtype=torch.float64).scatter(0, index, src) * torch.tensor(w)).sum().backward()
    want = np.zeros((2, 4))
    want[0, :3] = [w[0, 0], w[1, 1], w[2, 2]]      # src[0, j] lands at (index[0, j], j); the rest of src is unread
    np.testing.assert_array_equal(src.grad.numpy(), want)
    with pytest.raises(RuntimeError, match="^Index tensor must have the same number of dimensions as self tensor$"):
        torch.zeros(3, 4).scatter(0, torch.tensor([0, 1]), torch.ones(2, 4))


def test_in_place_ops_check_the_broadcast_shape_and_views_update_themselves():
    with pytest.raises(RuntimeError, match=r"^output with shape \[3\] doesn't match the broadcast shape \[2, 3\]$"):
        torch.zeros(3).add_(torch.ones(2, 3))
    a = np.arange(6.0).reshape(2, 3)
    for name, args, want in (("t_", (), a.T), ("transpose_", (0, 1), a.T), ("unsqueeze_", (0,), a[None]),
                             ("squeeze_", (), a)):
        x = torch.tensor(a if name != "squeeze_" else a[None])
        y = getattr(x, name)(*args)
        assert y is x
        np.testing.assert_array_equal(x.numpy(), want)
    with pytest.raises(TypeError, match=r"^flip\(\) got multiple values for argument 'dims'$"):
        torch.ones(2, 2).flip(0, dims=[1])


def test_to_reads_the_device_keyword():
    x = torch.ones(2)
    assert x.to(device="cpu").device.type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            x.to(device="cuda")


def test_max_of_two_tensors_and_the_empty_dim_message():
    a, b = np.array([1.0, 5.0, -2.0]), np.array([3.0, 4.0, -1.0])
    np.testing.assert_array_equal(torch.max(torch.tensor(a), torch.tensor(b)).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(torch.min(torch.tensor(a), torch.tensor(b)).numpy(), np.minimum(a, b))
    with pytest.raises(IndexError, match=r"^amax\(\): Expected reduction dim 0 to have non-zero size\.$"):
        torch.zeros(0, 3).amax(0)


def test_descending_sorts_of_integers_are_stable_and_of_unsigned_and_bool_are_by_value():
    v = np.random.default_rng(2).integers(0, 3, 200)
    r = torch.sort(torch.tensor(v), descending=True, stable=True)
    order = sorted(range(len(v)), key=lambda i: (-v[i], i))
    np.testing.assert_array_equal(r.indices.numpy(), order)
    np.testing.assert_array_equal(r.values.numpy(), v[order])
    for arr in (np.array([0, 200, 1, 255, 7], np.uint8), np.array([False, True, False, True])):
        r = torch.sort(torch.tensor(arr), descending=True, stable=True)
        np.testing.assert_array_equal(r.values.numpy(), np.sort(arr)[::-1])
        np.testing.assert_array_equal(r.indices.numpy(), sorted(range(len(arr)), key=lambda i: (-int(arr[i]), i)))


def test_batch_norm_in_eval_differentiates_its_running_statistics_and_checks_them():
    rng = np.random.default_rng(3)
    x, g = rng.standard_normal((4, 3, 2)), rng.standard_normal((4, 3, 2))
    rm, rv, w, b = rng.standard_normal(3), rng.random(3) + 0.5, rng.standard_normal(3), rng.standard_normal(3)
    eps = 1e-5
    ts = [torch.tensor(a, requires_grad=True) for a in (rm, rv, w, b)]
    y = F.batch_norm(torch.tensor(x), ts[0], ts[1], ts[2], ts[3], training=False, eps=eps)
    (y * torch.tensor(g)).sum().backward()
    r = lambda a: a[None, :, None]      # noqa: E731
    inv = 1 / np.sqrt(r(rv) + eps)
    np.testing.assert_allclose(ts[0].grad.numpy(), (-g * r(w) * inv).sum((0, 2)), rtol=1e-10)
    np.testing.assert_allclose(ts[1].grad.numpy(), (-0.5 * g * r(w) * (x - r(rm)) * inv ** 3).sum((0, 2)),
                               rtol=1e-10)
    for what, args in (("bias", (None, None, torch.ones(3), torch.ones(4))),
                       ("running_mean", (torch.zeros(4), torch.ones(3), None, None))):
        with pytest.raises(RuntimeError, match=f"^{what} should contain 3 elements not 4$"):
            F.batch_norm(torch.ones(2, 3), *args, training=True)


def test_a_numpy_array_operand_is_named_in_the_type_error():
    message = r"^exp\(\): argument 'input' \(position 1\) must be Tensor, not numpy\.ndarray$"
    with pytest.raises(TypeError, match=message):
        torch.exp(np.ones(2))


def _conv_transpose_ref(x, w, b, s, p, op, d):
    N, C, H, W = x.shape
    _, O, K, L = w.shape
    full = np.zeros((N, O, (H - 1) * s + d * (K - 1) + 1 + op, (W - 1) * s + d * (L - 1) + 1 + op))
    for i in range(H):
        for j in range(W):
            for k in range(K):
                for m in range(L):
                    full[:, :, i * s + k * d, j * s + m * d] += x[:, :, i, j] @ w[:, :, k, m]
    OH, OW = full.shape[2] - 2 * p, full.shape[3] - 2 * p
    return full[:, :, p:p + OH, p:p + OW] + b[None, :, None, None]


def _conv_transpose_input_grad_ref(c, w, s, p, op, d, hw):
    # the transpose of _conv_transpose_ref's map from x: gx[:, :, i, j] = sum_k,m c_full[.., i*s+k*d, j*s+m*d] @ w^T
    H, W = hw
    _, _, K, L = w.shape
    full = np.zeros(c.shape[:2] + ((H - 1) * s + d * (K - 1) + 1 + op, (W - 1) * s + d * (L - 1) + 1 + op))
    full[:, :, p:p + c.shape[2], p:p + c.shape[3]] = c
    gx = np.zeros((c.shape[0], w.shape[0], H, W))
    for i in range(H):
        for j in range(W):
            for k in range(K):
                for m in range(L):
                    gx[:, :, i, j] += full[:, :, i * s + k * d, j * s + m * d] @ w[:, :, k, m].T
    return gx


def test_conv_transpose2d_with_bias_output_padding_and_dilation():
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((3, 2, 3, 2)), rng.standard_normal(2)
    for s, p, op, d in ((2, 1, 1, 1), (1, 0, 1, 2), (3, 2, 2, 1)):    # (1, 0, 1, 2): output_padding >= stride
        xt = torch.tensor(x, requires_grad=True)
        got = F.conv_transpose2d(xt, torch.tensor(w), torch.tensor(b), stride=s, padding=p, output_padding=op,
                                 dilation=d)
        np.testing.assert_allclose(got.detach().numpy(), _conv_transpose_ref(x, w, b, s, p, op, d), rtol=1e-10,
                                   atol=1e-12)
        c = rng.standard_normal(tuple(got.shape))
        (got * torch.tensor(c)).sum().backward()
        np.testing.assert_allclose(xt.grad.numpy(), _conv_transpose_input_grad_ref(c, w, s, p, op, d, (4, 5)),
                                   rtol=1e-10, atol=1e-12)
    got = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2)        # no bias
    np.testing.assert_allclose(got.numpy(), _conv_transpose_ref(x, w, np.zeros(2), 2, 0, 0, 1), rtol=1e-10,
                               atol=1e-12)


def test_layer_norm_gradient_with_create_graph_reads_the_weight():
    rng = np.random.default_rng(6)
    x, w, b, c = (torch.tensor(a, requires_grad=True) for a in (rng.standard_normal((3, 4)),
                  rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal((3, 4))))
    grads = [torch.autograd.grad((F.layer_norm(x, (4,), w, b) * c).sum(), (x, w, b), create_graph=cg)
             for cg in (False, True)]
    for g0, g1 in zip(*grads):
        np.testing.assert_allclose(g1.detach().numpy(), g0.detach().numpy(), rtol=1e-10, atol=1e-12)


_NANS = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 0.0, 5.0, 1.0], [np.nan, 1.0, 1.0, 7.0]])


def test_nan_reductions_and_var_std_mean_along_a_dim_with_keepdim():
    x = torch.tensor(_NANS)
    for dim in (0, 1):
        for keepdim in (False, True):
            np.testing.assert_array_equal(torch.nansum(x, dim, keepdim).numpy(), np.nansum(_NANS, dim, keepdims=keepdim))
            np.testing.assert_allclose(torch.nanmean(x, dim, keepdim).numpy(),
                                       np.nanmean(_NANS, dim, keepdims=keepdim), rtol=1e-15)
    assert torch.nansum(x, 1, dtype=torch.float32).dtype is torch.float32
    y = torch.tensor(np.nan_to_num(_NANS))
    a = y.numpy()
    for f, g in ((torch.var_mean, np.var), (torch.std_mean, np.std)):
        v, m = f(y, 1, keepdim=True)
        assert tuple(v.shape) == tuple(m.shape) == (3, 1)
        np.testing.assert_allclose(v.numpy(), g(a, 1, ddof=1, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(m.numpy(), a.mean(1, keepdims=True), rtol=1e-12)
        v, m = f(y, 0, unbiased=False)
        np.testing.assert_allclose(v.numpy(), g(a, 0), rtol=1e-12)
        v, m = f(y, 0, correction=0)
        np.testing.assert_allclose(v.numpy(), g(a, 0), rtol=1e-12)


def test_argmax_and_argmin_give_the_first_nan_along_a_dim_and_overall():
    x = torch.tensor(_NANS)
    assert x.argmax(1).tolist() == [1, 2, 0] and x.argmin(1).tolist() == [1, 1, 0]
    assert x.argmax(0).tolist() == [2, 0, 1, 0] and x.argmin(0).tolist() == [2, 0, 2, 0]
    assert x.argmax().item() == 1 and x.argmin().item() == 1
    assert x.argmin(1, keepdim=True).tolist() == [[1], [1], [0]]
    assert tuple(x.argmax(keepdim=True).shape) == (1, 1)
    # the traced face: its shape rule (keepdim without dim keeps every dim as 1)
    got = torch.trace(lambda x: (x.argmax(keepdim=True), x.argmin(), x.argmax(0, keepdim=True)),
                      backend="interpreter")(x)
    assert [tuple(g.shape) for g in got] == [(1, 1), (), (1, 4)] and got[0].item() == 1


def test_amin_amax_of_an_empty_tensor_and_topk_out_of_range_messages():
    """amin/amax/max/min of an empty tensor: PyTorch's messages without a dim and along the empty one."""
    e = torch.tensor(np.zeros((3, 0)))
    for name in ("amin", "amax", "max", "min"):
        with pytest.raises(RuntimeError, match=rf"^{name}\(\): Expected reduction dim to be specified for "
                                               r"input.numel\(\) == 0. Specify the reduction dim with the 'dim' argument.$"):
            getattr(e, name)()
        with pytest.raises(IndexError, match=rf"^{name}\(\): Expected reduction dim 1 to have non-zero size.$"):
            getattr(e, name)(1)
    assert e.amin(0).shape == (0,)
    with pytest.raises(RuntimeError, match=r"^selected index k out of range \(k=5, size 4 at dim 1\)$"):
        torch.ones(3, 4).topk(5, 1)
    v, i = torch.tensor([[3.0, 1.0, 2.0, 5.0]]).topk(2, largest=False)
    assert v.tolist() == [[1.0, 2.0]] and i.tolist() == [[1, 2]]


def test_logsumexp_of_infinite_rows_empty_rows_and_a_0d_tensor():
    a = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [0.5, 1.0]])
    got = torch.tensor(a).logsumexp(1)
    assert got.numpy()[0] == -np.inf and got.numpy()[1] == np.inf
    np.testing.assert_allclose(got.numpy()[2], math.log(math.exp(0.5) + math.e), rtol=1e-15)
    assert tuple(torch.tensor(a).logsumexp(1, keepdim=True).shape) == (3, 1)
    assert torch.tensor(a).logsumexp((0, 1)).item() == np.inf
    assert torch.tensor(np.zeros((2, 0))).logsumexp(1).tolist() == [-np.inf, -np.inf]
    for dims in ((), 0):
        z = torch.tensor(2.0).logsumexp(dims)
        assert z.shape == () and z.item() == 2.0
    # large values (the max is taken out first), a 1-d input, a size-1 dim kept where it is not reduced
    np.testing.assert_allclose(torch.tensor(np.array([1000.0, 1000.0])).logsumexp(0).item(), 1000 + math.log(2),
                               rtol=1e-15)
    z = torch.tensor(np.array([[0.5, 1.0, -1.0]])).logsumexp(1)
    assert tuple(z.shape) == (1,)
    np.testing.assert_allclose(z.numpy(), [math.log(math.exp(0.5) + math.e + math.exp(-1))], rtol=1e-15)


def test_argsort_is_stable_when_asked():
    assert torch.argsort(torch.tensor([3, 1, 2, 1, 1]), stable=True).tolist() == [1, 3, 4, 2, 0]
    assert torch.argsort(torch.tensor([3.0, 1.0, 2.0, 1.0, 1.0]), descending=True, stable=True).tolist() == \
        [0, 2, 1, 3, 4]


def test_descending_sorts_and_topk_of_signed_integers_place_the_dtypes_minimum_last():
    # (a bug found by a surviving mutant: the key -x overflowed at the minimum, which then sorted first)
    for dt in (np.int8, np.int16, np.int32, np.int64):
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        arr = np.array([lo, 5, 0, hi, lo, -1], dt)
        r = torch.sort(torch.tensor(arr), descending=True, stable=True)
        assert r.values.tolist() == [hi, 5, 0, -1, lo, lo] and r.indices.tolist() == [3, 1, 2, 5, 0, 4]
        assert torch.tensor(arr).topk(2).values.tolist() == [hi, 5]
        assert torch.tensor(arr).topk(2, largest=False).values.tolist() == [lo, lo]


def test_sorts_of_floats_nan_0d_and_long_rows_with_ties():
    a = np.array([[1.0, np.nan, 3.0, np.nan, 0.5, 0.7], [2.0, 0.25, 0.25, -1.0, np.nan, 0.25]])
    r = torch.sort(torch.tensor(a), 1, descending=True, stable=True)
    assert r.indices.tolist() == [[1, 3, 2, 0, 5, 4], [4, 0, 1, 2, 5, 3]]
    r = torch.sort(torch.tensor(a), 0, descending=True)
    assert r.indices.tolist() == [[1, 0, 0, 0, 1, 0], [0, 1, 1, 1, 0, 1]]
    r = torch.sort(torch.tensor(a), 0)
    assert r.indices.tolist() == [[0, 1, 1, 1, 0, 1], [1, 0, 0, 0, 1, 0]]
    v, i = torch.sort(torch.tensor(2.5))
    assert v.item() == 2.5 and i.shape == () and i.dtype is torch.int64 and i.item() == 0
    # a row long enough for numpy's unstable sorts to reorder ties: equal keys keep their order
    t = np.random.default_rng(5).integers(0, 3, 300).astype(np.float64)
    for desc in (False, True):
        got = torch.sort(torch.tensor(t), descending=desc, stable=True).indices.tolist()
        assert got == sorted(range(300), key=lambda j: ((-t[j]) if desc else t[j], j))


def test_sort_gradients_keep_float64_and_std_var_take_unbiased_positionally():
    x = torch.tensor(np.array([0.3, -1.7, 2.9, 0.1]), requires_grad=True)
    c = np.array([0.1, 0.2, 0.3, 0.7])
    (torch.sort(x).values * torch.tensor(c)).sum().backward()
    assert x.grad.dtype is torch.float64
    np.testing.assert_array_equal(x.grad.numpy(), c[np.argsort(np.argsort([0.3, -1.7, 2.9, 0.1]))])
    y = torch.tensor(np.array([1.0, 2.0, 4.0]))
    np.testing.assert_allclose(torch.std(y, True).item(), np.std([1.0, 2.0, 4.0], ddof=1), rtol=1e-15)
    np.testing.assert_allclose(torch.var(y, False).item(), np.var([1.0, 2.0, 4.0]), rtol=1e-15)
    with pytest.raises(RuntimeError, match="^std and var only support floating point and complex dtypes$"):
        torch.arange(4).var()
    with pytest.raises(RuntimeError, match="^std and var only support floating point and complex dtypes$"):
        torch.arange(4).std()


def test_vector_norm_gradient_is_zero_at_zero_entries_and_the_nuclear_norm_sums_singular_values():
    x = torch.tensor(np.array([0.0, 3.0, -4.0]), requires_grad=True)
    x.norm(3).backward()
    n = (27 + 64) ** (1 / 3)
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 9 / n ** 2, -16 / n ** 2], rtol=1e-14)
    a = np.array([[2.0, 0.0, 1.0], [0.0, -3.0, 0.0], [1.0, 0.0, 2.0]])
    np.testing.assert_allclose(float(torch.norm(torch.tensor(a), "nuc")), np.linalg.svd(a)[1].sum(), rtol=1e-12)


def test_empty_reductions_over_an_empty_dim_list_or_several_dims():
    e = torch.tensor(np.zeros((3, 0)))
    with pytest.raises(RuntimeError, match=r"^amin\(\): Expected reduction dim to be specified for input.numel"):
        e.amin(())
    for dims in ((0, 1), [1]):
        with pytest.raises(IndexError, match=r"^amax\(\): Expected reduction dim 1 to have non-zero size.$"):
            e.amax(dims)


def test_vector_norms_of_every_order_keep_dims_and_dtype_and_prod_takes_a_dtype():
    a = np.array([[0.0, 3.0, -4.0], [1.0, 0.0, 0.0]], np.float32)
    x = torch.tensor(a)
    want = {float("inf"): np.abs(a).max(1), float("-inf"): np.abs(a).min(1), 0: (a != 0).sum(1),
            1: np.abs(a).sum(1), 2: np.sqrt((a * a).sum(1)), 3: (np.abs(a) ** 3).sum(1) ** (1 / 3)}
    for ord, w in want.items():
        got = torch.vector_norm(x, ord, 1, keepdim=True)
        assert tuple(got.shape) == (2, 1) and got.dtype is torch.float32, ord
        np.testing.assert_allclose(got.numpy()[:, 0], w, rtol=1e-6)
    np.testing.assert_allclose(torch.vector_norm(x).item(), math.sqrt(26.0), rtol=1e-6)     # (ord 2, all dims)
    with pytest.raises(RuntimeError, match="^linalg.vector_norm: Expected a floating point tensor as input. "
                                           "Got int64$"):
        torch.vector_norm(torch.arange(3))
    assert torch.prod(x, dtype=torch.float64).dtype is torch.float64
    assert torch.prod(x, 1, dtype=torch.float64).dtype is torch.float64


def test_var_of_a_0d_tensor_is_nan_unless_uncorrected():
    assert math.isnan(torch.var(torch.tensor(2.0)).item())
    assert torch.var(torch.tensor(2.0), correction=0).item() == 0.0


def test_mean_cumsum_cumprod_take_a_dtype_and_mean_of_integers_is_refused():
    a = np.array([0.1, 0.2, 0.7], np.float32)
    m = torch.tensor(a).mean(dtype=torch.float64)
    assert m.dtype is torch.float64 and m.item() == np.mean(a.astype(np.float64))     # (summed in float64)
    assert torch.tensor(a).mean(0, dtype=torch.float64).dtype is torch.float64
    for f in (torch.cumsum, torch.cumprod):
        r = f(torch.tensor(a), 0, dtype=torch.float64)
        assert r.dtype is torch.float64
        np.testing.assert_array_equal(r.numpy(), getattr(np, f.__name__)(a.astype(np.float64)))
        assert f(torch.tensor(np.float32(2.5)), 0, dtype=torch.float64).dtype is torch.float64
    with pytest.raises(RuntimeError, match=r"^mean\(\): could not infer output dtype. Input dtype must be either a "
                                           r"floating point or complex dtype. Got: Int64$"):
        torch.arange(3).mean()


def test_gradients_of_a_kept_dim_sum_and_of_the_mean_of_a_0d_tensor():
    x = torch.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w = np.array([[2.0], [-3.0]])
    (x.sum(1, keepdim=True) * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(w, (2, 3)))
    s = torch.tensor(2.0, requires_grad=True)
    s.mean().backward()
    assert s.grad.item() == 1.0


def test_cumprod_of_a_0d_tensor_gives_the_dtype_asked_or_int64_for_integers():
    # (a bug found by a surviving mutant: a 0-d cumprod returned its input's dtype, where its shape rule and
    # PyTorch give dtype=, and int64 for an integer input)
    assert torch.cumprod(torch.tensor(np.float32(2.5)), 0, dtype=torch.float64).dtype is torch.float64
    r = torch.cumprod(torch.tensor(np.int32(3)), 0)
    assert r.dtype is torch.int64 and r.item() == 3
    assert torch.cumsum(torch.tensor(np.int32(3)), 0).dtype is torch.int64


def test_reductions_take_a_dtype_other_than_the_default_one():
    # (float32 asked of float64 inputs: a dtype= that were dropped would give float64, the default of a None)
    a = np.array([[0.1, 0.2, 0.7], [1.5, -2.0, 0.25]])
    x = torch.tensor(a)
    assert torch.mean(x, dtype=torch.float32).dtype is torch.float32
    assert torch.prod(x, 1, dtype=torch.float32).dtype is torch.float32
    for f in (torch.cumsum, torch.cumprod):
        r = f(x, 1, dtype=torch.float32)
        assert r.dtype is torch.float32 and tuple(r.shape) == (2, 3)
        np.testing.assert_allclose(r.numpy(), getattr(np, f.__name__)(a, 1), rtol=1e-6)


def test_max_and_min_along_a_dim_give_the_first_nan_and_amax_over_no_dims_is_over_all():
    x = torch.tensor(np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 0.0, 5.0, 1.0]]))
    v, i = x.max(1)
    assert math.isnan(v.tolist()[0]) and v.tolist()[1] == 5.0 and i.tolist() == [1, 2]
    v, i = x.min(1)
    assert math.isnan(v.tolist()[0]) and v.tolist()[1] == 0.0 and i.tolist() == [1, 1]
    assert x.max(0).indices.tolist() == [1, 0, 1, 0] and x.min(0, keepdim=True).indices.tolist() == [[0, 0, 0, 0]]
    y = torch.tensor(np.arange(6.0).reshape(2, 3))
    assert y.amax(()).item() == 5.0 and y.amin(()).item() == 0.0 and y.amax(()).shape == ()
    e = torch.tensor(np.zeros((3, 0)))
    with pytest.raises(RuntimeError, match=r"^amax\(\): Expected reduction dim to be specified for input.numel"):
        e.amax(())


def test_kthvalue_and_median_shapes_of_0d_1d_and_single_row_inputs():
    with pytest.raises(RuntimeError, match=r"^kthvalue\(\): selected number k out of range for dimension 0$"):
        torch.kthvalue(torch.tensor(2.5), 2)
    v, i = torch.kthvalue(torch.tensor([3.0, 1.0, 2.0]), 2, 0, keepdim=True)
    assert tuple(v.shape) == tuple(i.shape) == (1,) and v.tolist() == [2.0] and i.tolist() == [2]
    v, i = torch.kthvalue(torch.tensor([[3.0, 1.0, 2.0, 0.0]]), 2, 1)
    assert tuple(v.shape) == tuple(i.shape) == (1,) and v.tolist() == [1.0] and i.tolist() == [1]
    v, i = torch.median(torch.tensor(2.5), 0)
    assert v.item() == 2.5 and i.item() == 0 and v.shape == ()
    assert torch.median(torch.zeros(0, dtype=torch.float64)).dtype is torch.float64


def test_argmax_and_argmin_of_1d_and_0d_tensors_along_a_dim():
    x = torch.tensor([1.0, 5.0, 2.0, 5.0])
    assert x.argmax(0).item() == 1 and x.argmin(0).item() == 0 and x.argmax(0, keepdim=True).tolist() == [1]
    for f in (torch.argmax, torch.argmin):
        r = f(torch.tensor(2.5), 0)
        assert r.shape == () and r.dtype is torch.int64 and r.item() == 0


def test_max_and_min_of_0d_one_row_and_empty_tensors():
    v, i = torch.tensor(2.5).max(0)
    assert v.item() == 2.5 and v.shape == () and i.shape == () and i.dtype is torch.int64 and i.item() == 0
    v, i = torch.tensor([[3.0, 1.0, 4.0, 1.0]]).max(1)
    assert tuple(v.shape) == tuple(i.shape) == (1,) and v.tolist() == [4.0] and i.tolist() == [2]
    v, i = torch.tensor([[3.0, 1.0, 4.0, 1.0]]).min(1)
    assert tuple(v.shape) == tuple(i.shape) == (1,) and v.tolist() == [1.0] and i.tolist() == [1]
    assert torch.ones(2, 3).max().shape == () and torch.ones(2, 3).min().shape == ()
    # (an empty tensor's max/min messages: test_amin_amax_of_an_empty_tensor_and_topk_out_of_range_messages)
