"""ConvTranspose3d / F.conv_transpose3d, nn.utils.parametrizations.spectral_norm and orthogonal, and
torch.utils._pytree against PyTorch: values, gradients, state_dict names, traced = eager."""
import numpy as np
import pytest

import tracejit as tj
from torch_compare import both as _both, close as _close, same_error as _same_error

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)


CT3_CASES = [  # (input shape, weight shape, bias, stride, padding, output_padding, groups, dilation)
    ((2, 3, 3, 4, 5), (3, 2, 2, 3, 2), True, 1, 0, 0, 1, 1),
    ((1, 4, 3, 3, 4), (4, 3, 3, 2, 3), True, (2, 1, 2), (1, 0, 1), (1, 0, 1), 2, 1),
    ((2, 2, 4, 3, 3), (2, 1, 2, 2, 2), False, 3, (2, 1, 0), (2, 0, 1), 2, (2, 1, 1)),  # depthwise, dilated
    ((3, 2, 3, 3), (3, 2, 3, 1, 2), True, 2, (2, 0, 0), (1, 1, 0), 1, (1, 1, 2)),      # unbatched, taps cropped
    ((1, 2, 1, 2, 2), (2, 2, 2, 1, 1), True, 1, (1, 0, 0), 0, 1, (3, 1, 1)),                # only the bias left
]


@pytest.mark.parametrize("xs, ws, bias, s, p, op, g, d", CT3_CASES)
def test_conv_transpose3d_same_as_torch(xs, ws, bias, s, p, op, g, d):
    arrays = [RNG.standard_normal(xs), RNG.standard_normal(ws)]
    arrays += [RNG.standard_normal(ws[1] * g)] if bias else []

    def f(lib, x, w, *b):
        return lib.nn.functional.conv_transpose3d(x, w, b[0] if b else None, s, p, op, g, d)
    _both(f, arrays, 1e-10)
    _both(f, [a.astype(np.float32) for a in arrays], 1e-4)


def test_conv_transpose3d_module_output_size_errors_and_trace():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose3d(4, 6, (3, 2, 2), stride=2, padding=1, groups=2, dilation=(1, 2, 1))
    jm = tj.nn.ConvTranspose3d(4, 6, (3, 2, 2), stride=2, padding=1, groups=2, dilation=(1, 2, 1))
    jm.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert repr(jm) == repr(tm)
    x = RNG.standard_normal((2, 4, 3, 4, 3)).astype(np.float32)
    want = tm(torch.tensor(x), output_size=(6, 8, 5))
    _close(jm(tj.tensor(x), output_size=(6, 8, 5)).detach().numpy(), want.detach().numpy(), 1e-5)
    assert "output padding must be smaller" in _same_error(
        lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 3, 3, 3), lib.ones(2, 2, 2, 2, 2), stride=2,
                                                       output_padding=(2, 0, 0)))
    _same_error(lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 3, 3, 3, 3), lib.ones(2, 2, 2, 2, 2)))

    def loss(t):
        return jm(t).square().sum()
    xt = tj.tensor(x)
    loss(xt).backward()
    eager = [float(loss(xt))] + [p.grad.numpy().copy() for p in jm.parameters()]
    step = tj.trace(lambda t: (lambda v: (v.backward(), v.detach())[1])(loss(t)))
    for _ in range(2):
        jm.zero_grad()
        got = [float(step(xt))] + [p.grad.numpy() for p in jm.parameters()]
        for a, b in zip(got, eager):
            _close(a, b, 1e-4)
