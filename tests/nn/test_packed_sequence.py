"""Packed sequences against PyTorch: pack_padded_sequence / pad_packed_sequence / pack_sequence / unpack_sequence
(values, indices, gradients, errors) and RNN/LSTM/GRU on a PackedSequence (packed output, each sequence's last
state, every gradient, from the same weights), and traced = eager."""
import numpy as np
import pytest

import tracejit as tj

R = tj.nn.utils.rnn
RNG = np.random.default_rng(0)


def _torch():
    return pytest.importorskip("torch")


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _ints(t):
    return None if t is None else t.numpy().tolist()


def _same_packed(a, b, tol=1e-5):
    """a tracejit, b torch PackedSequence: the same data, batch sizes and permutations."""
    _close(a.data.detach().numpy(), b.data.detach().numpy(), tol)
    assert _ints(a.batch_sizes) == _ints(b.batch_sizes) and a.batch_sizes.dtype == tj.int64
    assert _ints(a.sorted_indices) == _ints(b.sorted_indices)
    assert _ints(a.unsorted_indices) == _ints(b.unsorted_indices)


CASES = [([5, 3, 3, 1], True), ([2, 5, 3, 5], False), ([4], True), ([1, 1, 1], False), ([3, 1, 4, 2, 4], False)]


@pytest.mark.parametrize("lengths, enforce_sorted", CASES)
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_pad_same_as_torch(lengths, enforce_sorted, batch_first):
    torch = _torch()
    T, B = max(lengths) + 1, len(lengths)                     # one step more than the longest: never packed
    x = RNG.standard_normal((B, T, 3) if batch_first else (T, B, 3)).astype(np.float32)
    res = []
    for lib, pack, pad in ((torch, torch.nn.utils.rnn.pack_padded_sequence, torch.nn.utils.rnn.pad_packed_sequence),
                           (tj, R.pack_padded_sequence, R.pad_packed_sequence)):
        xt = lib.tensor(x, requires_grad=True)
        packed = pack(xt, lib.tensor(lengths) if lib is tj else lengths, batch_first, enforce_sorted)
        padded, lens = pad(packed, batch_first, padding_value=-2.5, total_length=T + 1)
        w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(padded.shape)).astype(np.float32))
        ((padded * w).sum() + packed.data.square().sum()).backward()
        res.append((packed, padded, lens, xt.grad))
    (tp, tpad, tl, tg), (jp, jpad, jl, jg) = res
    _same_packed(jp, tp)
    _close(jpad.detach().numpy(), tpad.detach().numpy())
    assert jl.numpy().tolist() == tl.numpy().tolist() == lengths and jl.dtype == tj.int64
    _close(jg.numpy(), tg.numpy())


def test_pack_sequence_and_unpack():
    torch = _torch()
    seqs = [RNG.standard_normal((n, 2)).astype(np.float32) for n in (3, 5, 1, 5)]
    want = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    got = R.pack_sequence([tj.tensor(s) for s in seqs], enforce_sorted=False)
    _same_packed(got, want)
    for a, s in zip(R.unpack_sequence(got), seqs):
        _close(a.numpy(), s)
    srt = sorted(seqs, key=len, reverse=True)
    _same_packed(R.pack_sequence([tj.tensor(s) for s in srt]),
                 torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in srt]))
    padded = R.pad_sequence([tj.tensor(s) for s in seqs], batch_first=True)
    for a, s in zip(R.unpad_sequence(padded, tj.tensor([3, 5, 1, 5]), batch_first=True), seqs):
        _close(a.numpy(), s)
    p = R.PackedSequence(tj.ones(4, 2), tj.tensor([2, 2]), tj.tensor([1, 0]))
    assert p.unsorted_indices.numpy().tolist() == [1, 0] and p.double().data.dtype == tj.float64
    assert R.invert_permutation(tj.tensor([2, 0, 1])).numpy().tolist() == [1, 2, 0]


def _same_error(fn):
    torch = _torch()
    with pytest.raises(Exception) as want:
        fn(torch, torch.nn.utils.rnn)
    with pytest.raises(type(want.value)) as got:
        fn(tj, R)
    return str(got.value)


def test_pack_errors_as_torch():
    x = np.zeros((4, 3, 2), np.float32)
    assert "must be sorted in decreasing order" in _same_error(
        lambda lib, r: r.pack_padded_sequence(lib.tensor(x), [4, 2, 3]))
    assert "has to be greater than 0" in _same_error(
        lambda lib, r: r.pack_padded_sequence(lib.tensor(x), [4, 0, 3], enforce_sorted=False))
    assert "equal to batch_size, but got 2 (batch_size=3)" in _same_error(
        lambda lib, r: r.pack_padded_sequence(lib.tensor(x), [4, 3]))
    assert "total_length to be at least" in _same_error(
        lambda lib, r: r.pad_packed_sequence(r.pack_padded_sequence(lib.tensor(x), [4, 3, 1]), total_length=3))
    # (PyTorch reads past the input here)
    with pytest.raises(RuntimeError, match="longer than the input's 4 time steps"):
        R.pack_padded_sequence(tj.tensor(x), [5, 3, 1])
    assert "Expected hidden size (1, 3, 4)" in _same_error(
        lambda lib, r: lib.nn.GRU(2, 4)(r.pack_padded_sequence(lib.tensor(x), [4, 3, 1]), lib.zeros(1, 2, 4)))
    assert "must be equal to input_size" in _same_error(
        lambda lib, r: lib.nn.GRU(5, 4)(r.pack_padded_sequence(lib.tensor(x), [4, 3, 1])))


def _rnn_run(lib, r, mode, kw, x, lengths, enforce_sorted, sd, with_state):
    """Packed run: (module, packed output, h_n (and c_n), padded output, grads of x, h0 and every parameter)."""
    lib.manual_seed(0)
    m = getattr(lib.nn, mode)(3, 4, **kw)
    if sd is not None:
        m.load_state_dict({k: lib.tensor(v) for k, v in sd.items()})
    xt = lib.tensor(x, requires_grad=True)
    packed = r.pack_padded_sequence(xt, lengths, kw.get("batch_first", False), enforce_sorted)
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h0 = [lib.tensor(RNG_STATE[i][:layers], requires_grad=True) for i in range(2 if mode == "LSTM" else 1)]
    hx = None if not with_state else (tuple(h0) if mode == "LSTM" else h0[0])
    out, h = m(packed, hx)
    hs = list(h) if mode == "LSTM" else [h]
    padded, _ = r.pad_packed_sequence(out, kw.get("batch_first", False))
    loss = sum((t * lib.tensor(np.random.default_rng(i).standard_normal(tuple(t.shape)).astype(np.float32))).sum()
               for i, t in enumerate([out.data, padded] + hs))
    loss.backward()
    grads = [xt.grad] + ([g.grad for g in h0] if with_state else []) + [p.grad for p in m.parameters()]
    return m, out, hs, padded, [g.numpy() for g in grads]


RNG_STATE = [RNG.standard_normal((4, 5, 4)).astype(np.float32) for _ in range(2)]


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True}, {"batch_first": True, "bias": False},
                                {"bidirectional": True, "relu": True}])
@pytest.mark.parametrize("lengths, enforce_sorted", [([6, 4, 4, 2, 1], True), ([2, 6, 1, 4, 4], False)])
@pytest.mark.parametrize("with_state", [False, True])
def test_rnn_on_packed_sequences_same_as_torch(mode, kw, lengths, enforce_sorted, with_state):
    if kw.get("relu"):          # (RNN's nonlinearity; the others without it)
        kw = {"bidirectional": True, **({"nonlinearity": "relu"} if mode == "RNN" else {})}
    torch = _torch()
    x = RNG.standard_normal((5, 7, 3) if kw.get("batch_first") else (7, 5, 3)).astype(np.float32)
    args = (mode, kw, x, lengths, enforce_sorted)
    tm, tout, ths, tpad, tgrads = _rnn_run(torch, torch.nn.utils.rnn, *args, None, with_state)
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    jm, jout, jhs, jpad, jgrads = _rnn_run(tj, R, *args, sd, with_state)
    assert isinstance(jout, R.PackedSequence)
    _same_packed(jout, tout)
    _close(jpad.detach().numpy(), tpad.detach().numpy())
    for a, b in zip(jhs, ths):
        _close(a.detach().numpy(), b.detach().numpy())
    assert len(jgrads) == len(tgrads)
    for a, b in zip(jgrads, tgrads):
        _close(a, b, 1e-4)


def test_last_state_is_at_each_sequence_length():
    """h_n of a packed batch = h_n of each sequence run alone (forward and reverse directions)."""
    m = tj.nn.GRU(3, 4, bidirectional=True)
    seqs = [tj.tensor(RNG.standard_normal((n, 3)).astype(np.float32)) for n in (2, 5, 3)]
    _, hn = m(R.pack_sequence(seqs, enforce_sorted=False))
    for b, s in enumerate(seqs):
        _, alone = m(s)
        _close(hn[:, b].detach().numpy(), alone.detach().numpy())


def test_packed_lstm_traced_equals_eager():
    lstm = tj.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    head = tj.nn.Linear(8, 1)

    def f(x):
        out, (h, c) = lstm(R.pack_padded_sequence(x, [2, 6, 1, 4], enforce_sorted=False))
        padded, _ = R.pad_packed_sequence(out, batch_first=True, total_length=7)
        return head(padded).square().sum() + h.square().sum() + c.sum()

    x = tj.tensor(RNG.standard_normal((7, 4, 3)).astype(np.float32), requires_grad=True)
    f(x).backward()
    want = [float(f(x))] + [t.grad.numpy().copy() for t in [x, *lstm.parameters(), *head.parameters()]]
    step = tj.trace(f)
    for _ in range(2):
        for t in [x, *lstm.parameters(), *head.parameters()]:
            t.grad = None
        got = step(x)
        got.backward()
        _close(float(got), want[0])
        for a, b in zip([t.grad.numpy() for t in [x, *lstm.parameters(), *head.parameters()]], want[1:]):
            _close(a, b, 1e-4)
    assert step.cache_info()["traces"] == 1
