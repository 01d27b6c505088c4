"""Margin, embedding and likelihood losses (margin_ranking, hinge_embedding, soft_margin, multilabel_soft_margin,
cosine_embedding, triplet_margin (+ with_distance), multi_margin, multilabel_margin, poisson_nll, gaussian_nll) and
their modules against PyTorch: values and every input gradient from the same arrays for each reduction, PyTorch's
errors for bad shapes, dtypes and targets, and traced = eager."""
import numpy as np
import pytest

import tracejit as tj

F = tj.nn.functional
RNG = np.random.default_rng(0)


def _torch():
    return pytest.importorskip("torch")


def _close(a, b, tol):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _signs(*shape):
    return np.where(RNG.random(shape) < 0.5, -1.0, 1.0)


def _both(fn, arrays, tol=1e-10, grad=None):
    """fn(lib, *tensors) in torch and tracejit on the same arrays (float ones in `grad`, or all float ones, require
    grad): the outputs and the gradients of sum(out * w) (w fixed random) are compared. Returns tracejit's output."""
    torch = _torch()
    res = []
    for lib in (torch, tj):
        xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f" and (grad is None or i in grad))
              for i, a in enumerate(arrays)]
        out = fn(lib, *xs)
        w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(np.asarray(
            out.detach().numpy()).dtype))
        (out * w).sum().backward()
        res.append((out, [x.grad.numpy() for x in xs if x.requires_grad]))
    (tout, tgrads), (jout, jgrads) = res
    assert tuple(jout.shape) == tuple(tout.shape)
    assert str(jout.dtype).split(".")[-1] == str(tout.dtype).split(".")[-1]
    _close(jout.detach().numpy(), tout.detach().numpy(), tol)
    assert len(jgrads) == len(tgrads)
    for a, b in zip(jgrads, tgrads):
        _close(a, b, tol)
    return jout


def _same_error(fn):
    """fn(lib) raises the same exception class in both libraries, with the same message."""
    torch = _torch()
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(type(want.value)) as got:
        fn(tj)
    assert str(got.value).split(" (shapes")[0].replace("tracejit.Size", "torch.Size") == str(want.value)
    return str(got.value)


REDUCTIONS = ["none", "mean", "sum"]


# ----------------------------------------------------------------------------- values and gradients

def _mr_cases():
    x1, x2 = _rand(6), _rand(6)
    x2[2] = x1[2]                                            # a tie: the hinge's kink at margin 0
    return [
        (dict(), [x1, x2, _signs(6)]),
        (dict(margin=0.5), [_rand(4, 3), _rand(4, 3), _signs(4, 3)]),
        (dict(margin=-0.2), [_rand(5), _rand(5), _signs(1)]),         # target broadcast, negative margin
        (dict(margin=0.3), [_rand(), _rand(), np.array(-1.0)]),
    ]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", range(4))
def test_margin_ranking_loss(case, reduction):
    kw, arrays = _mr_cases()[case]
    _both(lambda lib, a, b, y: lib.nn.functional.margin_ranking_loss(a, b, y, reduction=reduction, **kw), arrays,
          grad=(0, 1))
    _both(lambda lib, a, b, y: lib.nn.MarginRankingLoss(reduction=reduction, **kw)(a, b, y), arrays, grad=(0, 1))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [1.0, 0.4, -0.5])
def test_hinge_embedding_loss(margin, reduction):
    x = _rand(5, 4) * 2
    y = _signs(5, 4)
    y[0, :2] = [0.0, 2.0]                                   # neither 1 nor -1: both terms count
    _both(lambda lib, a, t: lib.nn.functional.hinge_embedding_loss(a, t, margin, reduction=reduction), [x, y],
          grad=(0,))
    _both(lambda lib, a, t: lib.nn.HingeEmbeddingLoss(margin, reduction=reduction)(a, t), [_rand(3, 1), _signs(4)],
          grad=(0,))                                        # broadcast (3, 1) with (4,)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss(reduction):
    x = _rand(4, 5) * 3
    x[0, 0], x[0, 1] = 40.0, -40.0                          # exp(-yx) far beyond the threshold of softplus
    _both(lambda lib, a, t: lib.nn.functional.soft_margin_loss(a, t, reduction=reduction), [x, _signs(4, 5)],
          grad=(0,))
    _both(lambda lib, a, t: lib.nn.SoftMarginLoss(reduction=reduction)(a, t), [_rand(6), _signs(1)], grad=(0,))
    _both(lambda lib, a, t: lib.nn.SoftMarginLoss(reduction=reduction)(a, t), [_rand(6), _rand(6)], grad=(0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin_loss(weighted, reduction):
    x, t = _rand(4, 5) * 3, (RNG.random((4, 5)) < 0.4).astype(np.float64)
    arrays = [x, t, RNG.random(5) + 0.5] if weighted else [x, t]
    _both(lambda lib, a, y, *w: lib.nn.functional.multilabel_soft_margin_loss(a, y, *w, reduction=reduction), arrays)
    _both(lambda lib, a, y, *w: lib.nn.MultiLabelSoftMarginLoss(*w, reduction=reduction)(a, y), arrays, grad=(0,))
    _both(lambda lib, a, y: lib.nn.functional.multilabel_soft_margin_loss(a, y, reduction=reduction),
          [_rand(2, 3, 4), RNG.random((2, 3, 4))])                # soft labels, two batch dims


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3, -0.4])
def test_cosine_embedding_loss(margin, reduction):
    a, b = _rand(6, 4), _rand(6, 4)
    b[1] = -2 * a[1]                                        # cos -1
    a[2] = 0.0                                              # a zero vector: the 1e-12 keeps it finite
    y = _signs(6)
    y[3] = 0.0                                              # neither 1 nor -1: no loss
    _both(lambda lib, u, v, t: lib.nn.functional.cosine_embedding_loss(u, v, t, margin, reduction=reduction),
          [a, b, y], grad=(0, 1), tol=1e-8)       # (gradients near 1e5 at the zero vector)
    _both(lambda lib, u, v, t: lib.nn.CosineEmbeddingLoss(margin, reduction=reduction)(u, v, t),
          [_rand(4), _rand(4), np.array(-1.0)], grad=(0, 1))
    _both(lambda lib, u, v, t: lib.nn.CosineEmbeddingLoss(margin, reduction=reduction)(u, v, t),
          [_rand(3, 4), _rand(1, 4), _signs(3)], grad=(0, 1))      # input2 broadcast


TRIPLET = [
    dict(), dict(margin=0.5, p=1), dict(p=3, eps=1e-3, swap=True), dict(p=float("inf")), dict(swap=True, margin=2.0),
    dict(p=0.5, eps=0.1),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kw", TRIPLET, ids=[str(k) for k in TRIPLET])
def test_triplet_margin_loss(kw, reduction):
    a = _rand(5, 4)
    arrays = [a, a + 0.3 * _rand(5, 4), a + 0.6 * _rand(5, 4)]
    _both(lambda lib, x, p, n: lib.nn.functional.triplet_margin_loss(x, p, n, reduction=reduction, **kw), arrays)
    _both(lambda lib, x, p, n: lib.nn.TripletMarginLoss(reduction=reduction, **kw)(x, p, n), arrays)
    _both(lambda lib, x, p, n: lib.nn.TripletMarginLoss(reduction=reduction, **kw)(x, p, n),
          [_rand(4), _rand(4), _rand(4)])                    # one unbatched triplet
    _both(lambda lib, x, p, n: lib.nn.functional.triplet_margin_loss(x, p, n, reduction=reduction, **kw),
          [_rand(2, 3, 4), _rand(1, 3, 4), _rand(2, 3, 4)])   # leading dims, broadcast positive


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss(swap, reduction):
    arrays = [_rand(5, 4), _rand(5, 4), _rand(5, 4)]

    def cos_dist(lib):
        return lambda x, y: 1.0 - lib.nn.functional.cosine_similarity(x, y)

    _both(lambda lib, x, p, n: lib.nn.functional.triplet_margin_with_distance_loss(
        x, p, n, distance_function=cos_dist(lib), margin=0.7, swap=swap, reduction=reduction), arrays)
    _both(lambda lib, x, p, n: lib.nn.TripletMarginWithDistanceLoss(swap=swap, reduction=reduction)(x, p, n), arrays)
    _both(lambda lib, x, p, n: lib.nn.TripletMarginWithDistanceLoss(
        distance_function=lib.nn.PairwiseDistance(p=1), swap=swap, reduction=reduction)(x, p, n), arrays)


MULTI_MARGIN = [
    (dict(), (5, 4)), (dict(p=2), (5, 4)), (dict(margin=0.3), (6, 3)), (dict(p=2, margin=2.5), (4, 5)),
    (dict(weight=True), (6, 4)), (dict(p=2, weight=True, margin=0.5), (6, 4)), (dict(), (4,)), (dict(), (1, 1)),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", range(len(MULTI_MARGIN)))
def test_multi_margin_loss(case, reduction):
    kw, shape = dict(MULTI_MARGIN[case][0]), MULTI_MARGIN[case][1]
    n, c = (shape[0] if len(shape) == 2 else 1), shape[-1]
    x = _rand(*shape)
    target = RNG.integers(0, c, n if len(shape) == 2 else 1)
    if len(shape) == 2 and c > 1:
        x[0, (target[0] + 1) % c] = x[0, target[0]] - kw.get("margin", 1.0)    # exactly at the margin's kink
        x[0, (target[0] + 1) % c] += 1e-3
    arrays = [x, target] + ([RNG.random(c) + 0.5] if kw.pop("weight", False) else [])

    def fn(lib, inp, tgt, *w):
        return lib.nn.functional.multi_margin_loss(inp, tgt, weight=w[0] if w else None, reduction=reduction, **kw)

    _both(fn, arrays, grad=(0,))              # (PyTorch gives no gradient for the weight)
    _both(lambda lib, inp, tgt, *w: lib.nn.MultiMarginLoss(weight=w[0] if w else None, reduction=reduction, **kw)(
        inp, tgt), arrays, grad=(0,))


def test_multi_margin_loss_scalar_and_float32():
    _both(lambda lib, x, t: lib.nn.functional.multi_margin_loss(x, t, reduction="none"), [_rand(), np.array(0)])
    _both(lambda lib, x, t: lib.nn.functional.multi_margin_loss(x, t), [_rand(5), np.array(3)])
    _both(lambda lib, x, t, w: lib.nn.functional.multi_margin_loss(x, t, p=2, weight=w),
          [_rand(7, 5, dtype=np.float32), RNG.integers(0, 5, 7), RNG.random(5).astype(np.float32)], tol=1e-5,
          grad=(0,))


MULTILABEL = [
    np.array([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 2, 2], [1, 1, -1, -1], [2, -1, 0, 3]]),   # stops at the first -1
    np.array([[0, 0, 0, 0], [3, 3, 1, -1], [2, 3, -1, 0], [1, -1, -1, -1], [3, 1, 2, 0]]),   # duplicates
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", range(len(MULTILABEL)))
def test_multilabel_margin_loss(case, reduction):
    x = _rand(5, 4)
    x[0, 1] = x[0, 3] + 1.0                                  # a pair exactly at the margin
    arrays = [x, MULTILABEL[case]]
    _both(lambda lib, a, t: lib.nn.functional.multilabel_margin_loss(a, t, reduction=reduction), arrays)
    _both(lambda lib, a, t: lib.nn.MultiLabelMarginLoss(reduction=reduction)(a, t), arrays)
    _both(lambda lib, a, t: lib.nn.functional.multilabel_margin_loss(a, t, reduction=reduction),
          [_rand(6), np.array([4, 1, -1, 5, 0, 0])])         # one sample
    _both(lambda lib, a, t: lib.nn.functional.multilabel_margin_loss(a, t, reduction=reduction),
          [_rand(), np.array(0)])                             # a scalar: one class, no other


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input, full", [(True, False), (True, True), (False, False), (False, True)])
def test_poisson_nll_loss(log_input, full, reduction):
    x = _rand(4, 5) if log_input else RNG.random((4, 5)) * 3
    if not log_input:
        x[0, 0] = 0.0                                        # log(0 + eps)
    t = RNG.poisson(2.0, (4, 5)).astype(np.float64)
    t[0, :3] = [0.0, 1.0, 1.5]                               # Stirling's term only where the target is above 1
    _both(lambda lib, a, y: lib.nn.functional.poisson_nll_loss(a, y, log_input, full, reduction=reduction),
          [x, t], grad=(0,))
    _both(lambda lib, a, y: lib.nn.PoissonNLLLoss(log_input, full, eps=1e-3, reduction=reduction)(a, y), [x, t],
          grad=(0,))


GAUSS = [((4, 3), (4, 3)), ((4, 3), (4,)), ((4, 3), (4, 1)), ((2, 3, 5), (2, 1, 5)), ((2, 3, 5), (2, 3)), ((5,), (1,))]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shapes", GAUSS, ids=[str(s) for s in GAUSS])
def test_gaussian_nll_loss(shapes, full, reduction):
    xs, vs = shapes
    var = RNG.random(vs) + 0.1
    var.flat[0] = 0.0                                       # clamped to eps, its gradient still flows
    if var.size > 1:
        var.flat[1] = 1e-9
    arrays = [_rand(*xs), _rand(*xs), var]
    _both(lambda lib, a, y, v: lib.nn.functional.gaussian_nll_loss(a, y, v, full, eps=1e-4, reduction=reduction),
          arrays, tol=1e-9)
    _both(lambda lib, a, y, v: lib.nn.GaussianNLLLoss(full=full, reduction=reduction)(a, y, v), arrays, tol=1e-9)
    _both(lambda lib, a, y: lib.nn.functional.gaussian_nll_loss(a, y, 0.7, full, reduction=reduction),
          arrays[:2])                                        # a float variance


# ----------------------------------------------------------------------------- errors

ERRORS = [
    lambda F, t: F.margin_ranking_loss(t.randn(3), t.randn(3), t.randn(3, 1)),
    lambda F, t: F.margin_ranking_loss(t.randn(3), t.randn(4), t.randn(3)),
    lambda F, t: F.margin_ranking_loss(t.randn(3), t.randn(3), t.randn(3), reduction="bad"),
    lambda F, t: F.hinge_embedding_loss(t.randn(3), t.randn(4)),
    lambda F, t: F.hinge_embedding_loss(t.randn(3), t.randn(3), reduction="batchmean"),
    lambda F, t: F.soft_margin_loss(t.randn(3), t.randn(4)),
    lambda F, t: F.soft_margin_loss(t.randn(3, 1), t.randn(3)),
    lambda F, t: F.soft_margin_loss(t.randn(3), t.randn(3), reduction="x"),
    lambda F, t: F.multilabel_soft_margin_loss(t.randn(3, 4), t.randn(3, 5)),
    lambda F, t: F.multilabel_soft_margin_loss(t.randn(3, 4), t.randn(3, 4), reduction="x"),
    lambda F, t: F.multilabel_soft_margin_loss(t.randn(()), t.randn(())),
    lambda F, t: F.cosine_embedding_loss(t.randn(3, 4), t.randn(3, 4), t.randn(3, 1)),
    lambda F, t: F.cosine_embedding_loss(t.randn(3, 4), t.randn(3, 4), t.randn(())),
    lambda F, t: F.cosine_embedding_loss(t.randn(4), t.randn(4), t.randn(1)),
    lambda F, t: F.cosine_embedding_loss(t.randn(3, 4), t.randn(3, 5), t.randn(3)),
    lambda F, t: F.cosine_embedding_loss(t.randn(3, 4), t.randn(3, 4), t.randn(2)),
    lambda F, t: F.triplet_margin_loss(t.randn(3, 4), t.randn(3, 4), t.randn(4)),
    lambda F, t: F.triplet_margin_loss(t.randn(3, 4), t.randn(3, 4), t.randn(3, 4), margin=0),
    lambda F, t: F.triplet_margin_loss(t.randn(3, 4), t.randn(3, 5), t.randn(3, 4)),
    lambda F, t: F.triplet_margin_with_distance_loss(t.randn(3, 4), t.randn(3, 4), t.randn(4)),
    lambda F, t: F.triplet_margin_with_distance_loss(t.randn(3, 4), t.randn(3, 4), t.randn(3, 4), margin=-1.0),
    lambda F, t: F.triplet_margin_with_distance_loss(t.randn(3, 4), t.randn(3, 4), t.randn(3, 4), reduction="x"),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, 2, 3])),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([[0], [1], [2]])),
    lambda F, t: F.multi_margin_loss(t.randn(4), t.tensor([1, 2])),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, 4])),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, -1])),
    lambda F, t: F.multi_margin_loss(t.randn(()), t.tensor(1)),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0.0, 1.0, 2.0])),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, 2]), weight=t.randn(3)),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, 2]), weight=t.randn(4).double()),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, 2]), weight=t.randn(2, 2)),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, 2]), p=3),
    lambda F, t: F.multi_margin_loss(t.randn(2, 3, 4), t.zeros(2, 3).long()),
    lambda F, t: F.multi_margin_loss(t.randn(3, 0), t.tensor([0, 1, 2])),
    lambda F, t: F.multi_margin_loss(t.randn(3, 4), t.tensor([0, 1, 2]), reduction="x"),
    lambda F, t: F.multilabel_margin_loss(t.randn(3, 4), t.zeros(3, 3).long()),
    lambda F, t: F.multilabel_margin_loss(t.randn(3, 4), t.zeros(4).long()),
    lambda F, t: F.multilabel_margin_loss(t.randn(3, 4), t.zeros(3, 4)),
    lambda F, t: F.multilabel_margin_loss(t.randn(3, 4), t.tensor([[1, -1, 5, 0]] * 3)),
    lambda F, t: F.multilabel_margin_loss(t.randn(3, 4), t.tensor([[-2, 0, 0, 0]] * 3)),
    lambda F, t: F.multilabel_margin_loss(t.randn(2, 3, 4), t.zeros(2, 3, 4).long()),
    lambda F, t: F.poisson_nll_loss(t.randn(3), t.randn(4)),
    lambda F, t: F.poisson_nll_loss(t.randn(3), t.randn(3), reduction="batchmean"),
    lambda F, t: F.gaussian_nll_loss(t.randn(3, 4), t.randn(3, 4), t.rand(3, 2)),
    lambda F, t: F.gaussian_nll_loss(t.randn(3, 4), t.randn(3, 4), t.rand(1, 1)),
    lambda F, t: F.gaussian_nll_loss(t.randn(3, 4), t.randn(3, 4), -1.0),
    lambda F, t: F.gaussian_nll_loss(t.randn(3, 4), t.randn(3, 4), t.rand(3, 4) - 2),
    lambda F, t: F.gaussian_nll_loss(t.randn(3, 4), t.randn(3, 4), t.rand(3, 4), reduction="x"),
    lambda F, t: F.gaussian_nll_loss(t.randn(3, 4), t.randn(2, 4), t.rand(3, 4)),
    lambda F, t: t.nn.TripletMarginLoss(margin=-0.5),
    lambda F, t: t.nn.TripletMarginWithDistanceLoss(margin=0),
    lambda F, t: t.nn.MultiMarginLoss(p=0),
    lambda F, t: t.nn.MultiMarginLoss(weight=t.ones(2, 2)),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_as_pytorch(case):
    _same_error(lambda lib: ERRORS[case](lib.nn.functional, lib))


def test_legacy_size_average_and_reduce():
    x, y = _rand(4, 3), _signs(4, 3)
    for sa, red in [(False, None), (None, False), (True, True), (False, True)]:
        _both(lambda lib, a, t: lib.nn.functional.soft_margin_loss(a, t, size_average=sa, reduce=red), [x, y],
              grad=(0,))
        _both(lambda lib, a, t: lib.nn.HingeEmbeddingLoss(size_average=sa, reduce=red)(a, t), [x, y], grad=(0,))


# ----------------------------------------------------------------------------- traced = eager

def test_losses_traced_equal_eager():
    x = tj.tensor(_rand(6, 4), requires_grad=True)
    v = tj.tensor(RNG.random(6) + 0.1, requires_grad=True)
    pos, neg = tj.tensor(_rand(6, 4)), tj.tensor(_rand(6, 4))
    cls, labels = tj.tensor(RNG.integers(0, 4, 6)), tj.tensor(MULTILABEL[0][[0, 1, 2, 3, 4, 0]])
    y, counts = tj.tensor(_signs(6)), tj.tensor(RNG.poisson(2.0, (6, 4)).astype(np.float64))

    def f(x, v):
        return (F.triplet_margin_loss(x, pos, neg, p=1, swap=True) + F.multi_margin_loss(x, cls, p=2)
                + F.multilabel_margin_loss(x, labels) + F.cosine_embedding_loss(x, pos, y, 0.2)
                + F.poisson_nll_loss(x, counts, full=True) + F.gaussian_nll_loss(x, pos, v)
                + F.margin_ranking_loss(x[:, 0], x[:, 1], y) + F.soft_margin_loss(x[:, 2], y)
                + F.hinge_embedding_loss(x, neg.sign(), reduction="sum") + F.multilabel_soft_margin_loss(x, pos.abs()))

    f(x, v).backward()
    want = [float(f(x, v)), x.grad.numpy().copy(), v.grad.numpy().copy()]
    step = tj.trace(f)
    for _ in range(2):
        x.grad = v.grad = None
        out = step(x, v)
        out.backward()
        _close(float(out), want[0], 1e-10)
        _close(x.grad.numpy(), want[1], 1e-10)
        _close(v.grad.numpy(), want[2], 1e-10)


def test_traced_index_targets_are_checked():
    x = tj.randn(3, 4)
    step = tj.trace(lambda x, t: F.multi_margin_loss(x, t))
    _close(float(step(x, tj.tensor([0, 3, 1]))), float(F.multi_margin_loss(x, tj.tensor([0, 3, 1]))), 1e-6)
    with pytest.raises(IndexError):             # a compiled program cannot raise eager's RuntimeError, but raises
        step(x, tj.tensor([0, 4, 1]))
    step = tj.trace(lambda x, t: F.multilabel_margin_loss(x, t))
    t = tj.tensor(MULTILABEL[0][:3])
    _close(float(step(x, t)), float(F.multilabel_margin_loss(x, t)), 1e-6)
    with pytest.raises(IndexError):
        step(x, tj.tensor([[0, 1, 4, -1]] * 3))
