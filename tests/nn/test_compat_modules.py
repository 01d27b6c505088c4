"""AlphaDropout/FeatureAlphaDropout, Fold, EmbeddingBag, weight_norm (hook and parametrization APIs),
affine_grid/grid_sample against PyTorch: values and every gradient from the same weights, PyTorch's errors for bad
input, and traced = eager."""
import math

import numpy as np
import pytest

import tracejit as tj
from torch_compare import both as _both, close as _close, same_error as _same_error, torch_or_skip as _torch

F = tj.nn.functional
RNG = np.random.default_rng(0)


# ----------------------------------------------------------------------------- AlphaDropout

_S = 1.7580993408473766


def _alpha_a(p):
    return 1.0 / math.sqrt((_S * _S * p + 1) * (1 - p))


@pytest.mark.parametrize("cls", ["AlphaDropout", "FeatureAlphaDropout"])
def test_alpha_dropout_is_identity_in_eval(cls):
    m = getattr(tj.nn, cls)(0.4)
    m.eval()
    x = tj.randn(3, 4, 5)
    assert m(x) is x
    assert F.alpha_dropout(x, 0.4) is x and F.feature_alpha_dropout(x, 0.4) is x     # training=False by default
    assert repr(m) == repr(getattr(_torch().nn, cls)(0.4))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_alpha_dropout_keeps_mean_and_variance(p):
    tj.manual_seed(0)
    x = tj.randn(400_000)
    y = F.alpha_dropout(x, p, training=True).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.var() - 1) < 0.02
    y = F.feature_alpha_dropout(tj.randn(4000, 100, 1), p, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.var() - 1) < 0.04


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_alpha_dropout_values_and_gradient(p):
    torch = _torch()
    x = np.full((50, 40), 3.0, np.float32)                 # kept: 3a + b, dropped: one constant
    want = np.unique(torch.nn.functional.alpha_dropout(torch.tensor(x), p, True).numpy())
    xt = tj.tensor(x, requires_grad=True)
    y = F.alpha_dropout(xt, p, True)
    got = np.unique(y.detach().numpy())
    _close(got, want, 1e-6)
    a = _alpha_a(p)
    dropped = y.detach().numpy() == np.float32(a * _S * (p - 1))
    assert 0.5 * p < dropped.mean() < 1.5 * p
    y.backward(tj.ones_like(y))
    _close(xt.grad.numpy(), a * ~dropped, 1e-6)


def test_feature_alpha_dropout_drops_whole_channels():
    tj.manual_seed(1)
    x = tj.randn(8, 6, 3, 4, requires_grad=True)
    p = 0.5
    y = F.feature_alpha_dropout(x, p, True)
    dropped = y.detach().numpy() == np.float32(_alpha_a(p) * _S * (p - 1))
    per_channel = dropped.reshape(8, 6, -1)
    assert (per_channel.all(2) | ~per_channel.any(2)).all() and per_channel.all(2).any()
    y.sum().backward()
    _close(x.grad.numpy(), _alpha_a(p) * ~dropped, 1e-6)
    # a 2-D input draws per element (dims 0 and 1), as PyTorch's
    y2 = tj.nn.FeatureAlphaDropout(p)(tj.randn(200, 30)).numpy()
    assert 0 < (y2 == np.float32(_alpha_a(p) * _S * (p - 1))).mean() < 1


def test_alpha_dropout_edges_and_errors():
    torch = _torch()
    x = np.ones((3, 4), np.float32)
    _close(F.alpha_dropout(tj.tensor(x), 1.0, True).numpy(), torch.nn.functional.alpha_dropout(
        torch.tensor(x), 1.0, True).numpy())
    assert "between 0 and 1" in _same_error(lambda lib: lib.nn.functional.alpha_dropout(lib.ones(2), 1.5, True))
    assert "between 0 and 1" in _same_error(lambda lib: lib.nn.AlphaDropout(-0.1))
    assert "at least 2 dimensions" in _same_error(
        lambda lib: lib.nn.functional.feature_alpha_dropout(lib.ones(5), 0.5, True))


def test_alpha_dropout_traced_equals_eager():
    m = tj.nn.Sequential(tj.nn.Linear(4, 6), tj.nn.SELU(), tj.nn.AlphaDropout(0.3), tj.nn.Linear(6, 2))

    def f(x):
        return m(x).square().sum()

    step = tj.trace(f)
    x = tj.randn(5, 4)
    for train in (True, False):
        m.train(train)
        tj.manual_seed(7)
        want = float(f(x))
        tj.manual_seed(7)
        _close(float(step(x)), want, 1e-5)


# ----------------------------------------------------------------------------- Fold

FOLD_CASES = [  # (input shape, output_size, kernel_size, dilation, padding, stride)
    ((2, 3 * 4, 9), (4, 4), 2, 1, 0, 1),                      # overlapping blocks
    ((1, 2 * 6, 8), (5, 6), (2, 3), 1, 0, (2, 1)),            # rectangular kernel, mixed stride
    ((2, 2 * 4, 15), (5, 5), 2, (2, 1), 1, (1, 2)),            # dilation and padding
    ((3 * 9, 4), (4, 4), 3, 1, 1, 2),                          # unbatched, padding, stride
    ((1, 4, 4), (4, 4), 2, 1, 0, 2),                           # no overlap
    ((2, 9, 3), (3, 4), 3, 1, (1, 0), (1, 2)),                  # kernel larger than the image once padded
    ((0, 4, 9), (4, 4), 2, 1, 0, 1),                           # empty batch
]


@pytest.mark.parametrize("shape, out, k, d, p, s", FOLD_CASES)
def test_fold_same_as_torch(shape, out, k, d, p, s):
    x = RNG.standard_normal(shape).astype(np.float32)
    _both(lambda lib, t: lib.nn.functional.fold(t, out, k, d, p, s), [x])
    _both(lambda lib, t: lib.nn.Fold(out, k, d, p, s)(t), [x.astype(np.float64)], tol=1e-12)


@pytest.mark.parametrize("k, d, p, s", [(2, 1, 0, 1), (3, 2, 1, 1), ((2, 3), 1, (1, 2), (2, 1)), (3, 1, 2, 3)])
def test_fold_of_unfold_is_the_image_times_the_counts(k, d, p, s):
    x = tj.tensor(RNG.standard_normal((2, 3, 7, 8)).astype(np.float32))
    back = F.fold(F.unfold(x, k, d, p, s), (7, 8), k, d, p, s)
    counts = F.fold(F.unfold(tj.ones(1, 1, 7, 8), k, d, p, s), (7, 8), k, d, p, s)
    assert counts.numpy().max() > 1 or s != 1            # overlaps where blocks overlap
    _close(back.numpy(), x.numpy() * counts.numpy())


def test_fold_errors_as_torch():
    fold = lambda lib, shape, *a, **kw: lib.nn.functional.fold(lib.ones(shape), *a, **kw)  # noqa: E731
    assert "divisible by the product of kernel_size" in _same_error(fold, (1, 7, 9), (4, 4), 2)
    assert "calculated number of sliding blocks 3 * 3 = 9" in _same_error(fold, (1, 8, 5), (4, 4), 2)
    assert "sliding blocks 0 * 0 = 0" in _same_error(fold, (1, 4, 1), (1, 1), 2, stride=2)
    assert "Expected 2D or 3D" in _same_error(fold, (2, 1, 8, 9), (4, 4), 2)
    assert "Expected 2D or 3D" in _same_error(fold, (1, 4, 0), (1, 1), 2)
    assert "stride should be greater than zero" in _same_error(fold, (1, 4, 9), (4, 4), 2, stride=0)
    assert "kernel size should be greater than zero" in _same_error(fold, (1, 4, 9), (4, 4), 0)
    assert "padding should be non-negative" in _same_error(fold, (1, 4, 9), (4, 4), 2, padding=-1)
    assert "output_size equals to 2, but got size 1" in _same_error(fold, (1, 4, 9), (4,), 2)
    assert repr(tj.nn.Fold((4, 5), 2)) == repr(_torch().nn.Fold((4, 5), 2))
    assert repr(tj.nn.Unfold(3, padding=1)) == repr(_torch().nn.Unfold(3, padding=1))


def test_fold_traced_equals_eager():
    conv = tj.nn.Conv2d(2 * 9, 2 * 9, 1)

    def f(x):
        return F.fold(conv(F.unfold(x, 3, padding=1).reshape(1, 18, 6, 7)).reshape(1, 18, 42), (6, 7), 3,
                      padding=1).square().sum()

    x = tj.randn(1, 2, 6, 7, requires_grad=True)
    f(x).backward()
    want = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in conv.parameters()]
    x.grad = None
    conv.zero_grad()
    step = tj.trace(lambda t: (f(t).backward(), 0)[1])
    for _ in range(2):
        x.grad = None
        conv.zero_grad()
        step(x)
        for a, b in zip([x.grad.numpy()] + [p.grad.numpy() for p in conv.parameters()], want):
            _close(a, b, 1e-4)


# ----------------------------------------------------------------------------- EmbeddingBag

W = RNG.standard_normal((10, 4)).astype(np.float32)
IDX = np.array([3, 1, 3, 0, 9, 4, 4, 7, 2, 5, 1, 8], np.int64)


def _bag(mode, padding_idx=None, include_last_offset=False):
    def fn(lib, w, idx, *rest):
        kw = dict(mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset)
        if idx.ndim == 1:
            kw["offsets"] = rest[0]
            rest = rest[1:]
        if rest:
            kw["per_sample_weights"] = rest[0]
        return lib.nn.functional.embedding_bag(idx, w, **kw)
    return fn


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4, -7])
def test_embedding_bag_fixed_bags(mode, padding_idx):
    _both(_bag(mode, padding_idx), [W, IDX.reshape(3, 4)])
    _both(_bag(mode, padding_idx), [W, np.array([[4, 4], [4, 1]])])          # a bag of padding only: zeros
    _both(_bag(mode, padding_idx), [W.astype(np.float64), IDX.reshape(4, 3)], tol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets, last", [([0, 2, 2, 7], False), ([0, 5, 5, 5, 11], False), ([0, 3, 3, 12], True),
                                           ([0, 12], True), ([0], False)])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_bag_offsets(mode, offsets, last, padding_idx):
    _both(_bag(mode, padding_idx, last), [W, IDX, np.array(offsets, np.int64)])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_bag_last_offset_ends_the_last_bag(mode, padding_idx):
    """include_last_offset with offsets[-1] < len(input): the input after it is in no bag, in every mode (PyTorch
    ends the bag there in sum and max mode without padding_idx, and otherwise not always): as PyTorch's answer for
    the input cut at offsets[-1]."""
    offsets = np.array([0, 3, 3, 9])
    want = _both(_bag(mode, padding_idx, True), [W, IDX[:9], offsets])
    w = tj.tensor(W, requires_grad=True)
    got = _bag(mode, padding_idx, True)(tj, w, tj.tensor(IDX), tj.tensor(offsets))
    _close(got.detach().numpy(), want.detach().numpy())
    got.sum().backward()
    assert not w.grad.numpy()[[5, 8]].any()                     # rows only IDX[9:] holds


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets, last", [([], False), ([0], True)])
def test_embedding_bag_no_bags(mode, offsets, last):
    torch = _torch()          # (whose backward of zero bags, and max mode's forward, crash: its forward only)
    if mode != "max":
        want = torch.nn.functional.embedding_bag(torch.tensor(IDX), torch.tensor(W), torch.tensor(
            offsets, dtype=torch.long), mode=mode, include_last_offset=last)
        assert tuple(want.shape) == (0, 4)
    w = tj.tensor(W, requires_grad=True)
    got = F.embedding_bag(tj.tensor(IDX), w, tj.tensor(offsets, dtype=tj.long), mode=mode, include_last_offset=last)
    assert tuple(got.shape) == (0, 4)
    got.sum().backward()
    assert not w.grad.numpy().any()


@pytest.mark.parametrize("offsets, last", [([0, 2, 2, 7], False), ([0, 3, 3, 12], True)])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag_per_sample_weights(offsets, last, padding_idx):
    psw = RNG.standard_normal(12).astype(np.float32)
    _both(_bag("sum", padding_idx, last), [W, IDX, np.array(offsets), psw])
    _both(_bag("sum", padding_idx), [W, IDX.reshape(2, 6), psw.reshape(2, 6)])


def test_embedding_bag_module_and_from_pretrained():
    torch = _torch()
    idx = IDX[:9]
    for kw in (dict(mode="sum"), dict(mode="mean", padding_idx=2), dict(mode="max", include_last_offset=True)):
        offs = np.array([0, 4, 4, 9] if kw.get("include_last_offset") else [0, 4, 4, 6])
        tm = torch.nn.EmbeddingBag(10, 4, **kw)
        jm = tj.nn.EmbeddingBag(10, 4, **kw)
        jm.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
        assert repr(jm) == repr(tm) and list(jm.state_dict()) == ["weight"]
        outs = [m(lib.tensor(idx), lib.tensor(offs)) for m, lib in ((tm, torch), (jm, tj))]
        for o in outs:
            o.square().sum().backward()
        _close(outs[1].detach().numpy(), outs[0].detach().numpy())
        _close(jm.weight.grad.numpy(), tm.weight.grad.numpy())
    pre = [lib.nn.EmbeddingBag.from_pretrained(lib.tensor(W), mode="max") for lib in (torch, tj)]
    assert not pre[1].weight.requires_grad
    _close(pre[1](tj.tensor(IDX.reshape(4, 3))).numpy(), pre[0](torch.tensor(IDX.reshape(4, 3))).numpy())
    assert tj.nn.EmbeddingBag.from_pretrained(tj.tensor(W), freeze=False).weight.requires_grad
    e = tj.nn.EmbeddingBag(10, 4, padding_idx=-1)
    assert e.padding_idx == 9 and not e.weight[9].detach().numpy().any()


def test_embedding_bag_errors_as_torch():
    w = np.ones((6, 2), np.float32)

    def bag(lib, idx, offsets=None, dtype=None, **kw):
        idx = lib.tensor(idx, dtype=dtype)
        offsets = None if offsets is None else lib.tensor(offsets)
        if "per_sample_weights" in kw:
            kw["per_sample_weights"] = lib.tensor(kw["per_sample_weights"])
        return lib.nn.functional.embedding_bag(idx, lib.tensor(w), offsets, **kw)

    assert "offsets[0] has to be 0" in _same_error(bag, [1, 2, 3], [1, 2])
    assert "offsets[-1] can not be greater" in _same_error(bag, [1, 2, 3], [0, 4])
    assert "not in the valid range [0, 6)" in _same_error(bag, [1, 7, 3], [0, 1])
    assert "not in the valid range [0, 6)" in _same_error(bag, [[1, -1]])
    assert "offsets has to be None" in _same_error(bag, [[1, 2]], [0])
    assert "offsets has to be a 1D Tensor" in _same_error(bag, [1, 2])
    assert "input has to be 1D or 2D" in _same_error(bag, [[[1]]])
    assert "mode has to be one of" in _same_error(bag, [[1]], mode="avg")
    assert "only supported for mode='sum'" in _same_error(bag, [[1]], per_sample_weights=np.ones((1, 1)),
                                                          mode="mean")
    assert "must have the same shape" in _same_error(bag, [[1, 2]], per_sample_weights=np.ones(2), mode="sum")
    assert "padding_idx must be within" in _same_error(bag, [[1]], padding_idx=6)
    assert "Long, Int" in _same_error(bag, [[1.0]])
    assert "padding_idx must be within num_embeddings" in _same_error(lambda lib: lib.nn.EmbeddingBag(3, 2,
                                                                                                     padding_idx=3))
    with pytest.raises(RuntimeError, match="non-decreasing"):
        bag(tj, [1, 2, 3], [0, 2, 1])


def test_embedding_index_out_of_range_as_torch():
    w = np.ones((4, 2), np.float32)
    for idx in ([-1], [[0, 4]]):
        assert "index out of range in self" in _same_error(
            lambda lib: lib.nn.functional.embedding(lib.tensor(idx), lib.tensor(w)))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_traced_equals_eager(mode):
    """Offsets as an argument of the traced function: the masked bags; as a constant: the padded ones."""
    bag = tj.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=3)
    fixed = tj.tensor([0, 4, 4, 9])

    def f(idx, offsets):
        return (bag(idx, offsets).square().sum() + bag(idx, fixed).sum() + bag(idx.reshape(4, 3)).sum())

    step = tj.trace(f)
    for offs in ([0, 2, 2, 7], [0, 0, 5, 12]):
        idx, offsets = tj.tensor(IDX), tj.tensor(offs)
        bag.zero_grad()
        f(idx, offsets).backward()
        want = bag.weight.grad.numpy().copy(), float(f(idx, offsets))
        bag.zero_grad()
        got = step(idx, offsets)
        got.backward()
        _close(float(got), want[1], 1e-5)
        _close(bag.weight.grad.numpy(), want[0], 1e-5)
    assert step.cache_info()["traces"] == 1


# ----------------------------------------------------------------------------- weight_norm and parametrize

def _layer(lib, kind):
    lib.manual_seed(0)
    return lib.nn.Linear(5, 4) if kind == "linear" else lib.nn.Conv2d(3, 4, 3)


def _input(kind):
    return RNG.standard_normal((2, 5) if kind == "linear" else (2, 3, 6, 6)).astype(np.float32)


def _same_module(tm, jm, x, load=True):
    """Load tm's state into jm (same names and order), run both on x: outputs and every gradient equal."""
    torch = _torch()
    sd = tm.state_dict()
    assert list(jm.state_dict()) == list(sd)
    if load:
        jm.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in sd.items()})
    outs = [tm(torch.tensor(x)), jm(tj.tensor(x))]
    for o in outs:
        o.square().sum().backward()
    _close(outs[1].detach().numpy(), outs[0].detach().numpy(), 1e-5)
    tp, jp = dict(tm.named_parameters()), dict(jm.named_parameters())
    assert list(tp) == list(jp)
    for k in tp:                # (to the gradients' scale: a conv's sums of tens cancel)
        want = tp[k].grad.numpy()
        np.testing.assert_allclose(jp[k].grad.numpy(), want, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None, -1, -2])
def test_weight_norm_hook_form(kind, dim):
    torch = _torch()
    with pytest.warns(FutureWarning):
        tm = torch.nn.utils.weight_norm(_layer(torch, kind), dim=dim)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        jm = tj.nn.utils.weight_norm(_layer(tj, kind), dim=dim)
    assert tuple(jm.weight_g.shape) == tuple(tm.weight_g.shape)
    _same_module(tm, jm, _input(kind))
    for lib, m in ((torch, tm), (tj, jm)):
        with torch.no_grad() if lib is torch else tj.no_grad():
            m.weight_g.mul_(2.0)                 # the hook recomputes the weight before the next forward
    _same_module(tm, jm, _input(kind), load=False)
    torch.nn.utils.remove_weight_norm(tm)
    tj.nn.utils.remove_weight_norm(jm)
    assert isinstance(jm.weight, tj.nn.Parameter) and not jm._forward_pre_hooks
    _close(jm.weight.detach().numpy(), tm.weight.detach().numpy())
    _same_module(tm, jm, _input(kind))


def test_weight_norm_hook_form_errors():
    import warnings
    warnings.simplefilter("ignore", FutureWarning)
    assert "Cannot register two weight_norm hooks" in _same_error(
        lambda lib: lib.nn.utils.weight_norm(lib.nn.utils.weight_norm(lib.nn.Linear(2, 2))))
    assert "weight_norm of 'weight' not found" in _same_error(
        lambda lib: lib.nn.utils.remove_weight_norm(lib.nn.Linear(2, 2)))
    m = tj.nn.utils.weight_norm(tj.nn.Linear(2, 3), name="bias", dim=None)
    assert list(m.state_dict()) == ["weight", "bias_g", "bias_v"]


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization(kind, dim):
    torch = _torch()
    tm = torch.nn.utils.parametrizations.weight_norm(_layer(torch, kind), dim=dim)
    jm = tj.nn.utils.parametrizations.weight_norm(_layer(tj, kind), dim=dim)
    assert list(jm.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    assert type(jm).__name__ == type(tm).__name__ and repr(jm) == repr(tm)
    _same_module(tm, jm, _input(kind))
    P = tj.nn.utils.parametrize
    assert P.is_parametrized(jm) and P.is_parametrized(jm, "weight") and not P.is_parametrized(jm, "bias")
    assert P.type_before_parametrizations(jm) is type(_layer(tj, kind))
    torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    P.remove_parametrizations(jm, "weight")
    assert type(jm) is type(_layer(tj, kind)) and not P.is_parametrized(jm)
    _close(jm.weight.detach().numpy(), tm.weight.detach().numpy())
    _same_module(tm, jm, _input(kind))


def test_weight_norm_parametrization_loads_a_hook_form_checkpoint():
    torch = _torch()
    with pytest.warns(FutureWarning):
        old = torch.nn.utils.weight_norm(_layer(torch, "linear"))
    sd = {k: tj.tensor(v.detach().numpy()) for k, v in old.state_dict().items()}
    jm = tj.nn.utils.parametrizations.weight_norm(tj.nn.Linear(5, 4))
    jm.load_state_dict(sd)
    _close(jm.parametrizations.weight.original0.detach().numpy(), old.weight_g.detach().numpy())
    x = _input("linear")
    _close(jm(tj.tensor(x)).detach().numpy(), old(torch.tensor(x)).detach().numpy())


class _Symmetric:
    """X -> triu(X) + triu(X, 1)^T, with a right inverse (PyTorch's tutorial parametrization), for both libs."""

    @staticmethod
    def make(lib):
        class Symmetric(lib.nn.Module):
            def forward(self, X):
                return X.triu() + X.triu(1).transpose(-1, -2)

            def right_inverse(self, A):
                return A.triu()

        class Scale(lib.nn.Module):
            def forward(self, X):
                return 2 * X

        class RowSum(lib.nn.Module):
            def forward(self, X):
                return X.sum(0)
        return Symmetric, Scale, RowSum


def test_register_parametrization_chain_set_and_remove():
    torch = _torch()
    mods = []
    for lib in (torch, tj):
        Symmetric, Scale, _ = _Symmetric.make(lib)
        lib.manual_seed(0)
        m = lib.nn.Linear(4, 4)
        m.load_state_dict({"weight": lib.tensor(W[:4]), "bias": lib.tensor(W[4, :4])})
        lib.nn.utils.parametrize.register_parametrization(m, "weight", Symmetric())
        lib.nn.utils.parametrize.register_parametrization(m, "weight", Scale(), unsafe=True)
        mods.append(m)
    tm, jm = mods
    assert list(jm.state_dict()) == list(tm.state_dict()) == ["bias", "parametrizations.weight.original"]
    _close(jm.weight.detach().numpy(), tm.weight.detach().numpy())
    _same_module(tm, jm, RNG.standard_normal((3, 4)).astype(np.float32))
    with tj.no_grad():
        jm.weight = tj.tensor(W[:4] + W[:4].T)               # through Symmetric's right inverse
    _close(jm.parametrizations.weight.original.detach().numpy(), np.triu(W[:4] + W[:4].T))
    p = jm.parametrizations.weight.original
    with tj.nn.utils.parametrize.cached():
        assert jm.weight is jm.weight
    tj.nn.utils.parametrize.remove_parametrizations(jm, "weight", leave_parametrized=False)
    assert jm.weight is p and list(jm.state_dict()) == ["bias", "weight"]
    assert "does not have a parametrization on weight" in _same_error(
        lambda lib: lib.nn.utils.parametrize.remove_parametrizations(lib.nn.Linear(2, 2), "weight"))
    assert "does not have a parameter, a buffer, or a parametrized element" in _same_error(
        lambda lib: lib.nn.utils.parametrize.register_parametrization(lib.nn.Linear(2, 2), "w",
                                                                      _Symmetric.make(lib)[0]()))
    assert "must not change the dtype or shape" in _same_error(
        lambda lib: lib.nn.utils.parametrize.register_parametrization(lib.nn.Linear(2, 3), "weight",
                                                                      _Symmetric.make(lib)[2]()))
    assert "Cannot leave unparametrized" in _same_error(
        lambda lib: lib.nn.utils.parametrize.remove_parametrizations(
            lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(2, 2)), "weight", leave_parametrized=False))


@pytest.mark.parametrize("form", ["hook", "parametrization"])
def test_weight_norm_traced_step_equals_eager(form):
    import warnings

    def make():
        tj.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            wn = tj.nn.utils.weight_norm if form == "hook" else tj.nn.utils.parametrizations.weight_norm
            m = tj.nn.Sequential(wn(tj.nn.Linear(5, 8)), tj.nn.Tanh(), wn(tj.nn.Linear(8, 2), dim=None))
        return m, tj.optim.SGD(m.parameters(), lr=0.1)

    x = tj.tensor(_input("linear"))

    def step(m, opt):
        def f(x):
            opt.zero_grad()
            loss = m(x).square().sum()
            loss.backward()
            opt.step()
            return loss
        return f

    (me, oe), (mt, ot) = make(), make()
    eager, traced = step(me, oe), tj.trace(step(mt, ot))
    for _ in range(3):
        _close(float(traced(x)), float(eager(x)), 1e-5)
    for (k, a), b in zip(me.state_dict().items(), mt.state_dict().values()):
        _close(b.numpy(), a.numpy(), 1e-5)
    _close(mt(x).detach().numpy(), me(x).detach().numpy(), 1e-5)        # eager again after the traced calls


# ----------------------------------------------------------------------------- affine_grid and grid_sample

@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (1, 2, 5, 1), (2, 1, 3, 4, 5)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(size, align_corners):
    import warnings
    k = len(size) - 2
    theta = RNG.standard_normal((size[0], k, k + 1)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)             # (unit-size grids with align_corners)
        _both(lambda lib, t: lib.nn.functional.affine_grid(t, size, align_corners), [theta])
        _both(lambda lib, t: lib.nn.functional.affine_grid(t, size, align_corners), [theta.astype(np.float64)],
              tol=1e-12)


def _grid(shape, spread=1.3):
    return (RNG.uniform(-spread, spread, shape)).astype(np.float32)   # some points outside [-1, 1]


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_same_as_torch(mode, padding_mode, align_corners):
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    fn = lambda lib, a, g: lib.nn.functional.grid_sample(a, g, mode, padding_mode, align_corners)  # noqa: E731
    for grid in (_grid((2, 4, 6, 2)), _grid((2, 9, 3, 2), 3.5)):           # 3.5: reflected more than once
        # (float32: a point reflected at 3.5 carries its coordinate's rounding, ~1e-6 of a pixel span, times the
        # image's slope there: 1.8e-5 relative seen once; float64 below is exact to 1e-10)
        _both(fn, [x, grid], tol=1e-4)
        _both(fn, [x.astype(np.float64), grid.astype(np.float64)], tol=1e-10)
    _both(fn, [x[:, :, :1, :1], _grid((2, 2, 3, 2))])                       # a 1x1 image


def test_grid_sample_identity_and_errors():
    x = tj.tensor(RNG.standard_normal((1, 2, 4, 6)).astype(np.float32))
    for ac in (False, True):
        grid = F.affine_grid(tj.tensor([[[1.0, 0, 0], [0, 1, 0]]]), (1, 2, 4, 6), align_corners=ac)
        _close(F.grid_sample(x, grid, align_corners=ac).numpy(), x.numpy())
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(x, grid)
    def gs(lib, a, g, **kw):
        return lib.nn.functional.grid_sample(lib.ones(*a), lib.ones(*g), align_corners=False, **kw)

    assert "expected mode to be" in _same_error(gs, (1, 1, 2, 2), (1, 2, 2, 2), mode="linear")
    assert "expected padding_mode to be" in _same_error(gs, (1, 1, 2, 2), (1, 2, 2, 2), padding_mode="wrap")
    assert "same batch size" in _same_error(gs, (2, 1, 2, 2), (1, 2, 2, 2))
    assert "size 2 in last dimension" in _same_error(gs, (1, 1, 2, 2), (1, 2, 2, 3))
    assert "expected 4D input" in _same_error(gs, (1, 1, 2, 2), (1, 2, 2))
    assert "non-empty spatial dimensions" in _same_error(gs, (1, 1, 0, 2), (1, 2, 2, 2))
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.grid_sample(tj.ones(1, 1, 2, 2), tj.zeros(1, 2, 2, 2), mode="bicubic", align_corners=False)
    with pytest.raises(NotImplementedError, match="5-D"):
        F.grid_sample(tj.ones(1, 1, 2, 2, 2), tj.zeros(1, 2, 2, 2, 3), align_corners=False)
    def ag(lib, t, size):
        return lib.nn.functional.affine_grid(lib.ones(*t), size, align_corners=False)

    assert "shape Nx2x3" in _same_error(ag, (2, 3, 3), (2, 3, 4, 5))
    assert "only supports 4D and 5D sizes" in _same_error(ag, (2, 2, 3), (2, 3, 4))
    assert "non-zero, positive output size" in _same_error(ag, (2, 2, 3), (2, 3, 0, 5))
    _same_error(ag, (3, 2, 3), (2, 3, 4, 5))
    assert "floating point type" in _same_error(lambda lib: lib.nn.functional.affine_grid(
        lib.ones(2, 2, 3, dtype=lib.int64), (2, 3, 4, 5), align_corners=False))


def test_spatial_transformer_traced_equals_eager():
    loc = tj.nn.Linear(2 * 5 * 7, 6)

    def f(x, mode, padding_mode):
        theta = loc(x.flatten(1)).reshape(-1, 2, 3) * 0.1 + tj.tensor([[1.0, 0, 0], [0, 1, 0]])
        grid = F.affine_grid(theta, tuple(x.shape), align_corners=False)
        return F.grid_sample(x, grid, mode, padding_mode, align_corners=False).square().sum()

    x = tj.tensor(RNG.standard_normal((3, 2, 5, 7)).astype(np.float32), requires_grad=True)
    for mode, padding_mode in (("bilinear", "zeros"), ("bilinear", "reflection"), ("nearest", "border")):
        x.grad = None
        loc.zero_grad()
        want = float(f(x, mode, padding_mode))
        f(x, mode, padding_mode).backward()
        grads = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in loc.parameters()]
        step = tj.trace(lambda t: f(t, mode, padding_mode))
        x.grad = None
        loc.zero_grad()
        got = step(x)
        got.backward()
        _close(float(got), want, 1e-5)
        for a, b in zip([x.grad.numpy()] + [p.grad.numpy() for p in loc.parameters()], grads):
            _close(a, b, 1e-4)
