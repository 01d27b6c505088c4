"""RNNCell/LSTMCell/GRUCell, PixelShuffle/PixelUnshuffle, InstanceNorm1d/2d/3d, CosineSimilarity,
PairwiseDistance, AdaptiveMaxPool1d/2d, Unfold, nn.utils.rnn.pad_sequence and utils.checkpoint against PyTorch
(values and gradients, from the same weights), and traced = eager."""
import numpy as np
import pytest

import tracejit as tj


def _run(lib, make, args, sd=None):
    """(module, outputs as numpy, grads of the inputs and parameters) for lib (torch or tracejit)."""
    m = make(lib)
    if sd is not None:
        m.load_state_dict({k: lib.tensor(v) for k, v in sd.items()})
    xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in args]
    out = m(*xs)
    outs = list(out) if isinstance(out, tuple) else [out]
    sum(o.square().sum() for o in outs).backward()
    grads = [x.grad.numpy() for x in xs if x.requires_grad] + [p.grad.numpy() for p in m.parameters()]
    return m, [o.detach().numpy() for o in outs], grads


def _same_as_torch(make, args, tol=1e-5):
    torch = pytest.importorskip("torch")
    tm, tout, tgrads = _run(torch, make, args)
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    jm, jout, jgrads = _run(tj, make, args, sd)
    assert list(jm.state_dict()) == list(sd)
    for a, b in zip(jout + jgrads, tout + tgrads):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_rnn_cells(name, bias):
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    h = RNG.standard_normal((5, 4)).astype(np.float32)

    def make(lib):
        return getattr(lib.nn, name)(3, 4, bias=bias, **({"nonlinearity": "relu"} if name == "RNNCell" else {}))

    _same_as_torch(make, [x])
    if name == "LSTMCell":
        _same_as_torch(lambda lib: _WithState(make(lib), 2), [x, h, h * 0.5])
    else:
        _same_as_torch(lambda lib: _WithState(make(lib), 1), [x, h])
    _same_as_torch(make, [x[0]])          # unbatched


class _WithState:
    """A cell called with a given state, as a module-like callable for _run."""

    def __init__(self, cell, n):
        self.cell, self.n = cell, n

    def __call__(self, x, *state):
        return self.cell(x, tuple(state) if self.n == 2 else state[0])

    def load_state_dict(self, sd):
        return self.cell.load_state_dict(sd)

    def state_dict(self):
        return self.cell.state_dict()

    def parameters(self):
        return self.cell.parameters()


def test_pixel_shuffle_and_unshuffle():
    x = RNG.standard_normal((2, 8, 3, 5)).astype(np.float32)
    _same_as_torch(lambda lib: lib.nn.PixelShuffle(2), [x])
    _same_as_torch(lambda lib: lib.nn.PixelUnshuffle(2), [RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)])
    _same_as_torch(lambda lib: lib.nn.PixelShuffle(2), [x[0]])      # no batch dim
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        tj.nn.PixelShuffle(3)(tj.tensor(x))


@pytest.mark.parametrize("cls, shape, features", [("InstanceNorm1d", (2, 3, 7), 3),
                                                  ("InstanceNorm2d", (2, 3, 4, 5), 3),
                                                  ("InstanceNorm2d", (3, 4, 5), 3),      # no batch dim
                                                  ("InstanceNorm3d", (1, 2, 3, 4, 2), 2)])
@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm(cls, shape, features, affine):
    x = RNG.standard_normal(shape).astype(np.float32)
    _same_as_torch(lambda lib: getattr(lib.nn, cls)(features, affine=affine), [x], tol=1e-4)


def test_distances():
    a, b = (RNG.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    _same_as_torch(lambda lib: lib.nn.CosineSimilarity(dim=1), [a, b])
    for p, keepdim in ((2.0, False), (1.0, True), (3.0, False)):
        _same_as_torch(lambda lib: lib.nn.PairwiseDistance(p=p, keepdim=keepdim), [a, b])


def test_pad_sequence():
    torch = pytest.importorskip("torch")
    seqs = [RNG.standard_normal((n, 3)).astype(np.float32) for n in (2, 5, 1)]
    for batch_first in (False, True):
        for side in ("right", "left"):
            want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=batch_first,
                                                   padding_value=-1.0, padding_side=side)
            got = tj.nn.utils.rnn.pad_sequence([tj.tensor(s) for s in seqs], batch_first=batch_first,
                                               padding_value=-1.0, padding_side=side)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_checkpoint_gives_the_same_numbers_and_gradients():
    m = tj.nn.Sequential(tj.nn.Linear(4, 8), tj.nn.Tanh(), tj.nn.Linear(8, 2))
    x = tj.randn(3, 4, requires_grad=True)
    tj.utils.checkpoint.checkpoint(m, x, use_reentrant=False).sum().backward()
    g = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in m.parameters()]
    x.grad = None
    m.zero_grad()
    m(x).sum().backward()
    for a, b in zip(g, [x.grad.numpy()] + [p.grad.numpy() for p in m.parameters()]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(tj.utils.checkpoint.checkpoint_sequential(m, 2, x).detach().numpy(),
                                  m(x).detach().numpy())


def test_cells_and_pixel_shuffle_traced_equal_eager():
    cell, ps = tj.nn.GRUCell(3, 8), tj.nn.PixelShuffle(2)

    def f(x, h):
        h = cell(x, h)
        h = cell(x, h)
        return ps(h.reshape(2, 8, 1, 1)).square().sum()

    x, h = tj.randn(2, 3), tj.randn(2, 8)
    want = float(f(x, h))
    step = tj.trace(f)
    for _ in range(2):
        np.testing.assert_allclose(float(step(x, h)), want, rtol=1e-6)


@pytest.mark.parametrize("shape, out", [((2, 3, 7, 5), (3, 2)), ((2, 3, 8, 8), 1), ((3, 9, 4), (4, None)),
                                        ((2, 3, 5, 5), (7, 6))])
def test_adaptive_max_pool2d(shape, out):
    _same_as_torch(lambda lib: lib.nn.AdaptiveMaxPool2d(out), [RNG.standard_normal(shape).astype(np.float32)])


@pytest.mark.parametrize("out", [1, 4, 11, 13])
def test_adaptive_max_pool1d_and_traced(out):
    x = RNG.standard_normal((2, 3, 11)).astype(np.float32)
    _same_as_torch(lambda lib: lib.nn.AdaptiveMaxPool1d(out), [x])
    m = tj.nn.AdaptiveMaxPool1d(out)
    step = tj.trace(lambda t: m(t).square().sum())
    for _ in range(2):
        np.testing.assert_allclose(float(step(tj.tensor(x))), float(m(tj.tensor(x)).square().sum()), rtol=1e-6)
    y, idx = tj.nn.AdaptiveMaxPool1d(out, return_indices=True)(tj.tensor(x))
    np.testing.assert_array_equal(np.take_along_axis(x, idx.numpy(), 2), y.numpy())


@pytest.mark.parametrize("shape, kw", [((2, 3, 6, 7), {"kernel_size": 3}),
                                       ((2, 3, 6, 7), {"kernel_size": (2, 3), "stride": 2, "padding": 1,
                                                       "dilation": (1, 2)}),
                                       ((3, 8, 8), {"kernel_size": 4, "stride": 4}),           # no batch dim
                                       ((1, 2, 5, 5), {"kernel_size": 2, "dilation": 2, "padding": (0, 1)})])
def test_unfold(shape, kw):
    _same_as_torch(lambda lib: lib.nn.Unfold(**kw), [RNG.standard_normal(shape).astype(np.float32)])
    x = tj.tensor(RNG.standard_normal(shape).astype(np.float32))
    step = tj.trace(lambda t: tj.nn.functional.unfold(t, **kw).square().sum())
    for _ in range(2):
        np.testing.assert_allclose(float(step(x)), float(tj.nn.functional.unfold(x, **kw).square().sum()), rtol=1e-6)


def test_unfold_errors():
    with pytest.raises(RuntimeError, match="components must be at least one"):
        tj.nn.functional.unfold(tj.randn(1, 1, 2, 2), 3)
    with pytest.raises(RuntimeError, match="Only 3D or 4D input"):
        tj.nn.functional.unfold(tj.randn(2, 2), 1)
