"""F.ctc_loss / nn.CTCLoss against PyTorch: values and log_probs gradients (raw leaves, whose gradient PyTorch defines
as the logits' one, and through log_softmax) for padded and concatenated targets, repeated labels, varying and zero
lengths, impossible alignments (inf, zero_infinity), another blank, unbatched input, float32; PyTorch's errors;
traced = eager."""
import numpy as np
import pytest

import tracejit as tj
from torch_compare import close as _close, same_error as _same_error, torch_or_skip as _torch

RNG = np.random.default_rng(0)

CASES = [  # (T, N, C, targets, input_lengths, target_lengths, blank)
    (6, 3, 5, [[1, 2, 2], [3, 3, 0], [4, 1, 1]], [6, 5, 4], [3, 2, 1], 0),            # repeats, varying lengths
    (8, 2, 4, [[1, 1, 1, 1], [2, 3, 2, 3]], [8, 8], [4, 4], 0),                       # 1 1 1 1 needs 7 frames
    (5, 2, 4, [[1, 1, 1], [2, 2, 2]], [5, 4], [3, 3], 0),                             # 4 frames: impossible
    (4, 2, 3, [[1, 2], [1, 1]], [1, 3], [2, 2], 0),                                   # 1 frame for 2 labels
    (5, 3, 4, [[1, 2], [0, 0], [3, 3]], [5, 3, 5], [2, 0, 2], 0),                     # an empty target
    (6, 2, 5, [[0, 1, 0], [2, 2, 3]], [6, 6], [3, 3], 4),                             # blank = 4
    (7, 4, 6, RNG.integers(1, 6, (4, 5)).tolist(), [7, 6, 7, 3], [5, 3, 2, 1], 0),
    (1, 2, 3, [[1], [2]], [1, 1], [1, 0], 0),
]


def _run(lib, x, targets, il, tl, blank, softmax, concat=False, tensors=False, **kw):
    lp = lib.tensor(x, requires_grad=True)
    inp = lp.log_softmax(2) if softmax else lp
    tg = np.array(targets)
    if concat:
        tg = np.concatenate([row[:n] for row, n in zip(tg, tl)]) if sum(tl) else np.zeros(0, np.int64)
    il_, tl_ = (lib.tensor(il), lib.tensor(tl)) if tensors else (il, tl)
    loss = lib.nn.functional.ctc_loss(inp, lib.tensor(tg), il_, tl_, blank=blank, **kw)
    w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(loss.shape)))
    finite = np.isfinite(loss.detach().numpy())
    (lib.where(lib.tensor(finite), loss, lib.zeros_like(loss)) * w).sum().backward()
    return loss.detach().numpy(), lp.grad.numpy()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("softmax", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_same_as_torch(case, softmax, zero_infinity, reduction):
    torch = _torch()
    T, N, C, targets, il, tl, blank = case
    x = RNG.standard_normal((T, N, C))
    if not softmax:
        x = x - 1.5                                     # raw log-probabilities, not normalized
    kw = dict(reduction=reduction, zero_infinity=zero_infinity)
    want = _run(torch, x, targets, il, tl, blank, softmax, **kw)
    got = _run(tj, x, targets, il, tl, blank, softmax, **kw)
    np.testing.assert_array_equal(np.isinf(got[0]), np.isinf(want[0]))
    _close(np.where(np.isinf(got[0]), 0, got[0]), np.where(np.isinf(want[0]), 0, want[0]), 1e-10)
    if not zero_infinity and np.isinf(want[0]).any():
        return                                          # PyTorch's gradient of an infinite loss is NaN
    _close(got[1], want[1], 1e-10)


@pytest.mark.parametrize("case", CASES)
def test_concatenated_targets_and_tensor_lengths(case):
    torch = _torch()
    T, N, C, targets, il, tl, blank = case
    x = RNG.standard_normal((T, N, C))
    for concat, tensors in [(True, False), (True, True), (False, True)]:
        want = _run(torch, x, targets, il, tl, blank, True, concat, tensors, reduction="none", zero_infinity=True)
        got = _run(tj, x, targets, il, tl, blank, True, concat, tensors, reduction="none", zero_infinity=True)
        _close(got[0], want[0], 1e-10)
        _close(got[1], want[1], 1e-10)


def test_impossible_alignment_is_inf():
    x = RNG.standard_normal((3, 1, 3))
    loss = tj.nn.functional.ctc_loss(tj.tensor(x).log_softmax(2), tj.tensor([[1, 1]]), [3], [2], reduction="none")
    assert np.isfinite(loss.numpy()).all()       # 1 _ 1 needs three frames: possible
    loss = tj.nn.functional.ctc_loss(tj.tensor(x).log_softmax(2), tj.tensor([[1, 1]]), [2], [2], reduction="none")
    assert np.isposinf(loss.numpy()).all()


def test_unbatched_and_float32_and_module():
    torch = _torch()
    x = RNG.standard_normal((6, 4)).astype("float32")
    res = []
    for lib in (torch, tj):
        lp = lib.tensor(x, requires_grad=True)
        loss = lib.nn.CTCLoss(blank=1, reduction="none")(lp.log_softmax(1), lib.tensor([2, 2, 3]), lib.tensor(6),
                                                          lib.tensor(3))
        loss.backward()
        res.append((loss.detach().numpy(), lp.grad.numpy(), tuple(loss.shape), repr(lib.nn.CTCLoss())))
    (a, ga, sa, ra), (b, gb, sb, rb) = res
    assert sa == sb == () and ra == rb and b.dtype == np.float32
    _close(b, a, 1e-5)
    _close(gb, ga, 1e-5)


def test_a_hand_computed_value():
    """T = 2, target (1,): alignments 1 1, _ 1, 1 _; p = 0.5 everywhere: -log(3 / 4)."""
    lp = tj.full((2, 1, 2), float(np.log(0.5)), dtype=tj.float64)
    loss = tj.nn.functional.ctc_loss(lp, tj.tensor([[1]]), [2], [1], reduction="sum")
    _close(float(loss), -np.log(0.75), 1e-12)


def test_errors():
    lp = RNG.standard_normal((5, 2, 4))

    def call(lib, targets=((1, 2), (3, 3)), il=(5, 4), tl=(2, 2), **kw):
        return lib.nn.functional.ctc_loss(lib.tensor(lp), lib.tensor(np.array(targets)), list(il), list(tl), **kw)
    assert "at most 5" in _same_error(call, il=(5, 6))
    assert "batch_size" in _same_error(call, il=(5, 4, 3))
    assert "batch_size" in _same_error(call, tl=(2,))
    assert "size at least 3" in _same_error(call, tl=(2, 3))
    assert "blank" in _same_error(call, blank=4)
    assert "reduction" in _same_error(call, reduction="avg")
    assert "at least 0" in _same_error(call, tl=(2, -1))
    assert "at least 0" in _same_error(call, il=(-1, 4))
    _same_error(call, targets=(1, 2, 3))                       # concatenated, one label short
    _same_error(lambda lib: lib.nn.functional.ctc_loss(lib.tensor(lp), lib.tensor([[1, 2], [3, 3]]),
                                                       lib.tensor([5.0, 4.0]), lib.tensor([2, 2])))
    _same_error(lambda lib: lib.nn.functional.ctc_loss(lib.tensor(lp[:, 0]), lib.tensor([1, 2]), 5, 2))
    with pytest.raises(RuntimeError, match="labels"):         # PyTorch reads outside log_probs here
        call(tj, targets=((1, 2), (3, 4)))


def test_traced_equals_eager():
    x = tj.tensor(RNG.standard_normal((6, 3, 5)), requires_grad=True)
    targets = tj.tensor([[1, 2, 2], [3, 3, 0], [4, 1, 1]])

    def f(t):
        return tj.nn.functional.ctc_loss(t.log_softmax(2), targets, tj.tensor([6, 5, 4]), tj.tensor([3, 2, 1]))
    loss = f(x)
    loss.backward()
    want, wgrad = float(loss), x.grad.numpy().copy()
    step = tj.trace(lambda t: (lambda v: (v.backward(), v.detach())[1])(f(t)))
    for _ in range(2):
        x.grad = None
        _close(float(step(x)), want, 1e-10)
        _close(x.grad.numpy(), wgrad, 1e-10)
