"""Conv1d/2d/3d padding_mode ('zeros', 'reflect', 'replicate', 'circular') against PyTorch: the same weights, the
same input; values and the input, weight and bias gradients compared, in float64 and float32; PyTorch's errors and
reprs; the state_dict keys unchanged; a traced training step equal to eager."""
import numpy as np
import pytest

import tracejit as tj
from torch_compare import close as _close, same_error as _same_error, torch_or_skip as _torch

RNG = np.random.default_rng(0)
MODES = ["zeros", "reflect", "replicate", "circular"]


def _pair(torch, n, dtype, *args, **kwargs):
    """The torch and tracejit Conv{n}d built with the same arguments and holding the same weights."""
    ref = getattr(torch.nn, f"Conv{n}d")(*args, **kwargs).to(getattr(torch, dtype))
    mine = getattr(tj.nn, f"Conv{n}d")(*args, **kwargs).to(getattr(tj, dtype))
    mine.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    return ref, mine


def _compare(n, shape, dtype="float64", tol=1e-10, **kwargs):
    torch = _torch()
    ref, mine = _pair(torch, n, dtype, *kwargs.pop("args"), **kwargs)
    x = RNG.standard_normal(shape).astype(dtype)
    res = []
    for lib, m in ((torch, ref), (tj, mine)):
        xt = lib.tensor(x, requires_grad=True)
        out = m(xt)
        w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(dtype))
        (out * out * w).sum().backward()
        grads = [xt.grad.numpy(), m.weight.grad.numpy()] + ([m.bias.grad.numpy()] if m.bias is not None else [])
        res.append((out.detach().numpy(), grads))
    (want, wgrads), (got, ggrads) = res
    assert got.shape == want.shape
    _close(got, want, tol)
    for a, b in zip(ggrads, wgrads):
        _close(a, b, tol)


CASES_1D = [  # (input shape, constructor arguments)
    ((2, 3, 7), dict(args=(3, 4, 3), padding=1)),
    ((2, 3, 7), dict(args=(3, 4, 3), padding=2)),
    ((2, 3, 7), dict(args=(3, 4, 5), padding=4, stride=2)),            # reflect needs padding < 7
    ((3, 9), dict(args=(3, 2, 3), padding=3, dilation=2)),              # unbatched
    ((2, 4, 8), dict(args=(4, 6, 3), padding=2, groups=2, bias=False)),
    ((2, 3, 7), dict(args=(3, 4, 4), padding="same")),                  # an odd total: the extra one at the end
    ((2, 3, 9), dict(args=(3, 4, 4), padding="same", dilation=3)),
    ((2, 3, 7), dict(args=(3, 4, 3), padding="valid")),
    ((2, 3, 7), dict(args=(3, 4, 3), padding=(2,))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, kw", CASES_1D)
def test_conv1d_padding_modes(mode, shape, kw):
    _compare(1, shape, padding_mode=mode, **kw)


CASES_2D = [
    ((2, 3, 6, 7), dict(args=(3, 4, 3), padding=1)),
    ((2, 3, 6, 7), dict(args=(3, 4, (3, 2)), padding=(2, 1))),
    ((2, 3, 6, 7), dict(args=(3, 4, 3), padding=(0, 3), stride=(2, 1))),
    ((3, 6, 7), dict(args=(3, 2, 3), padding=2, dilation=(1, 2))),     # unbatched
    ((2, 4, 5, 5), dict(args=(4, 2, 3), padding=1, groups=2)),
    ((2, 3, 6, 7), dict(args=(3, 4, (2, 3)), padding="same")),
    ((2, 3, 6, 7), dict(args=(3, 4, (4, 2)), padding="same", dilation=(1, 2))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, kw", CASES_2D)
def test_conv2d_padding_modes(mode, shape, kw):
    _compare(2, shape, padding_mode=mode, **kw)


CASES_3D = [
    ((2, 2, 4, 5, 6), dict(args=(2, 3, 3), padding=1)),
    ((2, 2, 4, 5, 6), dict(args=(2, 3, (2, 3, 3)), padding=(1, 0, 2), stride=(1, 2, 1))),
    ((2, 4, 5, 6), dict(args=(2, 3, 3), padding=(4, 1, 2))),           # unbatched; reflect refuses padding 4 of 4
    ((1, 2, 4, 5, 6), dict(args=(2, 2, (3, 2, 2)), padding="same", groups=2)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, kw", CASES_3D)
def test_conv3d_padding_modes(mode, shape, kw):
    if mode == "reflect" and kw.get("padding") == (4, 1, 2):
        def f(lib):
            m = lib.nn.Conv3d(*kw["args"], padding=kw["padding"], padding_mode=mode)
            return m(lib.tensor(RNG.standard_normal(shape)).to(m.weight.dtype))
        assert "Padding size should be less than" in _same_error(f)
        return
    _compare(3, shape, padding_mode=mode, **kw)


@pytest.mark.parametrize("mode", MODES)
def test_float32(mode):
    _compare(2, (2, 3, 8, 8), dtype="float32", tol=1e-4, args=(3, 5, 3), padding=2, padding_mode=mode)


def test_reflect_is_not_zero_padding():
    """The modes must differ from one another (a test that passed with zeros everywhere would prove nothing)."""
    torch = _torch()
    x = RNG.standard_normal((1, 2, 6, 6))
    outs = {}
    for mode in MODES:
        torch.manual_seed(0)
        ref = torch.nn.Conv2d(2, 2, 3, padding=1, padding_mode=mode).double()
        m = tj.nn.Conv2d(2, 2, 3, padding=1, padding_mode=mode).double()
        m.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
        outs[mode] = m(tj.tensor(x)).detach().numpy()
        _close(outs[mode], ref(torch.tensor(x)).detach().numpy(), 1e-12)
    for a in MODES:
        for b in MODES:
            if a < b:
                assert not np.allclose(outs[a][..., 0, :], outs[b][..., 0, :])


def test_repr_and_state_dict():
    torch = _torch()
    for args, kw in [((2, 3, 4), dict(padding="same", padding_mode="reflect")),
                     ((2, 3, 3), dict(padding=2, padding_mode="circular", bias=False)),
                     ((2, 3, (1, 3)), dict(padding=(0, 1), padding_mode="replicate", stride=2))]:
        n = len(args[2]) if isinstance(args[2], tuple) else 1 + (kw.get("stride") == 2)
        ref = getattr(torch.nn, f"Conv{n}d")(*args, **kw)
        mine = getattr(tj.nn, f"Conv{n}d")(*args, **kw)
        assert repr(mine) == repr(ref)
        assert "padding_mode=" in repr(mine)
        assert list(mine.state_dict()) == list(ref.state_dict())
        assert mine._reversed_padding_repeated_twice == list(ref._reversed_padding_repeated_twice)


def test_errors():
    torch = _torch()
    msg = _same_error(lambda lib: lib.nn.Conv2d(2, 3, 3, padding_mode="mirror"))
    assert "padding_mode must be one of" in msg
    msg = _same_error(lambda lib: lib.nn.Conv1d(2, 3, 3, padding="same", stride=2, padding_mode="reflect"))
    assert "strided" in msg
    msg = _same_error(lambda lib: lib.nn.ConvTranspose2d(2, 3, 3, padding_mode="reflect"))
    assert "zeros" in msg
    # reflect padding as large as the input
    x = RNG.standard_normal((1, 2, 3))
    msg = _same_error(lambda lib: lib.nn.Conv1d(2, 3, 3, padding=3, padding_mode="reflect").double()(
        lib.tensor(x)))
    assert "less than" in msg
    # circular padding that would wrap twice
    x2 = RNG.standard_normal((1, 2, 2))
    msg = _same_error(lambda lib: lib.nn.Conv1d(2, 3, 3, padding=3, padding_mode="circular").double()(
        lib.tensor(x2)))
    assert "wrapping" in msg
    # a 4-D input to a reflect Conv1d: F.pad's error
    x4 = RNG.standard_normal((3, 2, 3, 3))
    _same_error(lambda lib: lib.nn.Conv1d(2, 3, 3, padding=1, padding_mode="reflect").double()(lib.tensor(x4)))
    # 'same' with a non-zeros mode builds (PyTorch allows it) and pads d * (k - 1) in total
    m = tj.nn.Conv1d(2, 3, 4, padding="same", padding_mode="replicate")
    assert tuple(m(tj.randn(1, 2, 5)).shape) == (1, 3, 5)
    assert torch.nn.Conv1d(2, 3, 4, padding="same", padding_mode="replicate")(torch.randn(1, 2, 5)).shape[-1] == 5


def test_lazy_conv_keeps_padding_mode():
    m = tj.nn.LazyConv2d(4, 3, padding=1, padding_mode="circular")
    out = m(tj.randn(2, 3, 5, 5))
    assert type(m) is tj.nn.Conv2d and m.padding_mode == "circular" and tuple(out.shape) == (2, 4, 5, 5)
    x = tj.randn(1, 3, 5, 5)
    want = tj.nn.functional.conv2d(tj.nn.functional.pad(x, (1, 1, 1, 1), mode="circular"), m.weight, m.bias)
    _close(m(x).detach().numpy(), want.detach().numpy(), 1e-6)


def test_subclass_calls_conv_forward():
    """PyTorch's _conv_forward(input, weight, bias), which weight-standardized convolutions call."""
    torch = _torch()

    def make(lib):
        class WSConv(lib.nn.Conv2d):
            def forward(self, x):
                w = self.weight
                w = (w - w.mean(dim=(1, 2, 3), keepdim=True)) / (w.std(dim=(1, 2, 3), keepdim=True) + 1e-5)
                return self._conv_forward(x, w, self.bias)
        return WSConv(2, 3, 3, padding=1, padding_mode="reflect").double()
    ref, mine = make(torch), make(tj)
    mine.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x = RNG.standard_normal((2, 2, 5, 5))
    _close(mine(tj.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(), 1e-10)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_traced_step_equals_eager(mode):
    """A training step of a small padded-conv net, traced, gives eager's losses and parameters."""
    def build():
        tj.manual_seed(0)
        return tj.nn.Sequential(tj.nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode), tj.nn.ReLU(),
                                tj.nn.Conv2d(3, 2, (1, 3), padding=(0, 2), padding_mode=mode))
    x = tj.tensor(RNG.standard_normal((2, 2, 6, 6)).astype("float32"))
    results = []
    for traced in (False, True):
        net = build()
        opt = tj.optim.SGD(net.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (net(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        f = tj.trace(step) if traced else step
        losses = [float(f(x)) for _ in range(3)]
        results.append((losses, [p.detach().numpy().copy() for p in net.parameters()]))
    (l0, p0), (l1, p1) = results
    _close(l1, l0, 1e-5)
    for a, b in zip(p1, p0):
        _close(a, b, 1e-5)
