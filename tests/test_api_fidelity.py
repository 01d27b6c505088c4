"""PyTorch API that tutorials use: inference tensors, anomaly mode, conj/is_complex, out=, flip(0, 1).

Each snippet runs with both libraries; what it returns (values, dtype, shape, flags) or the error it raises
(kind and message) must be the same.
"""
import warnings

import numpy as np
import pytest

import tracejit


def _run(torch, code):
    """exec `code` with `torch` bound; returns the value of `r` as plain data, or (error kind, message)."""
    env = {"torch": torch, "x": torch.arange(6.0).reshape(2, 3), "w": torch.ones(3, requires_grad=True)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(code, env)
        except Exception as e:          # noqa: BLE001  (the error itself is compared)
            return ("error", type(e).__name__, str(e).split("See https")[0].split("(Triggered internally")[0].strip())
    r = env.get("r")
    msgs = [str(w.message).split("(Triggered internally")[0].strip() for w in caught
            if "Triggered" in str(w.message) or "resized" in str(w.message) or "Anomaly" in str(w.message)]
    return _plain(r), msgs


def _plain(r):
    if isinstance(r, (tuple, list)):
        return [_plain(v) for v in r]
    if type(r).__name__ == "dtype":
        return str(r).split(".")[-1]
    if hasattr(r, "detach") and hasattr(r, "dtype"):
        return ("tensor", str(r.dtype).split(".")[-1], list(r.shape), r.detach().numpy().tolist())
    return r


SNIPPETS = [
    # inference tensors
    "with torch.inference_mode():\n    y = x * 2\n    z = torch.ones(2)\nr = (y.is_inference(), z.is_inference(), "
    "y[0].is_inference(), y.detach().is_inference(), (y * 1).is_inference(), x.is_inference(), "
    "torch.is_inference(y), y.requires_grad)",
    "with torch.no_grad():\n    y = x * 2\nr = y.is_inference()",
    "with torch.inference_mode():\n    y = x * 2\ny.add_(1)",
    "with torch.inference_mode():\n    y = x * 2\ny[0] = 1",
    "with torch.inference_mode():\n    y = x * 2\ny.fill_(1)",
    "with torch.inference_mode():\n    y = x * 2\ny.zero_()",
    "with torch.inference_mode():\n    y = x * 2\ny.copy_(x)",
    "with torch.inference_mode():\n    y = x * 2\ny.requires_grad_()",
    "with torch.inference_mode():\n    y = x * 2\n(w * y).sum().backward()",
    "with torch.inference_mode():\n    y = x * 2\n(w + y).sum().backward()\nr = w.grad",
    "with torch.inference_mode():\n    y = x * 2\nr = y.clone().add_(1)",
    "with torch.inference_mode():\n    y = x * 2\nwith torch.inference_mode():\n    y.add_(1)\nr = y",
    "with torch.inference_mode(False):\n    y = x * 2\nr = (y.is_inference(), torch.is_inference_mode_enabled())",
    # anomaly mode
    "r = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())",
    "with torch.autograd.detect_anomaly():\n    r = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())",
    "torch.autograd.set_detect_anomaly(True, check_nan=False)\n"
    "r = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())\n"
    "torch.autograd.set_detect_anomaly(False)",
    "with torch.autograd.set_detect_anomaly(True):\n    a = torch.is_anomaly_enabled()\n"
    "r = (a, torch.is_anomaly_enabled())",
    # complex and conjugation of real tensors
    "r = (torch.is_complex(x), x.is_complex(), x.is_conj(), torch.conj(x) is x, x.conj() is x, "
    "torch.resolve_conj(x) is x, x.resolve_conj() is x, torch.is_conj(x))",
    "r = torch.conj_physical(x)",
    # flip: dims as varargs, a list or a keyword
    "r = x.flip(0, 1)", "r = x.flip([0, 1])", "r = x.flip(dims=(1,))", "r = torch.flip(x, (0,))", "r = x.flip(0)",
    "r = x.flip(0, 0)", "r = x.flip(1, 0, 1, 0)", "x.sum((0, -2))", "x.amax((1, 0, 1))",
    # reductions PyTorch tutorials call, with keepdim
    "r = (x.median(), list(x.median(1)), list(x.median(0, keepdim=True)), torch.median(x[0]))",
    "r = (list(x.kthvalue(2, 1, True)), list(torch.kthvalue(x, 1, 0)))",
    "r = (list(x.aminmax()), list(torch.aminmax(x, dim=1, keepdim=True)))",
    "x.kthvalue(4, 1)",
    "r = (x.sum(1, keepdim=True, dtype=torch.float64), x.prod(0, True, dtype=torch.float64), x.cumsum(1, dtype=torch.float64), "
    "x.amax((0, 1), True), x.std(1, keepdim=True, correction=0) ** 2)",
    # (transcendental results may differ in the last bit between numpy and torch: compare dtype and shape only)
    "y = (x.log_softmax(1, dtype=torch.float64), x.logsumexp(1, True))\nr = [(str(t.dtype).split('.')[-1], list(t.shape)) for t in y]",
    # out=
    "o = torch.empty(2, dtype=torch.int64)\nr = (torch.zeros(2, out=o), o)",
    "o = torch.empty(3)\nr = (torch.arange(3, out=o) is o, o)",
    "o = torch.empty(2, 2)\nr = (torch.ones(2, 2, out=o) is o, o)",
    "o = torch.empty(3)\nr = torch.full((3,), 7.0, out=o) is o, o",
    "o = torch.empty(3)\nr = (torch.linspace(0, 1, 3, out=o) is o, o)",
    "o = torch.empty(2, 3)\nr = (torch.add(x, 1, out=o) is o, o)",
    "o = torch.empty(2, 3)\nr = (torch.mul(x, x, out=o) is o, o)",
    "o = torch.empty(2, 3)\nr = (torch.neg(x, out=o) is o, o)",
    "o = torch.empty(2, 2)\nr = (torch.matmul(x, x.T, out=o) is o, o)",
    "o = torch.empty(2, 2)\nr = (torch.mm(x, x.T, out=o) is o, o)",
    "o = torch.empty(4, 3)\nr = (torch.cat([x, x], out=o) is o, o)",
    "o = torch.empty(2, 2, 3)\nr = (torch.stack([x, x], out=o) is o, o)",
    "o = torch.empty(3)\nr = (torch.sum(x, 0, out=o) is o, o)",
    "o = torch.empty(2, 1)\nr = (torch.mean(x, 1, keepdim=True, out=o) is o, o)",
    "o = torch.empty(2, 3)\nr = (torch.where(x > 2, x, torch.zeros(2, 3), out=o) is o, o)",
    "o = torch.empty(2, 3)\nr = (torch.clamp(x, 1, 4, out=o) is o, o)",
    "o = torch.empty(2, 3, dtype=torch.float64)\nr = (torch.add(x, 1, out=o), o.dtype)",
    "o = torch.empty(2, 3)\nr = torch.add(x.long(), 1, out=o)",
    "torch.add(x, 1, out=torch.empty(2, 3, dtype=torch.int64))",
    "torch.gt(x, 1, out=torch.empty(2, 3, dtype=torch.float32)); r = 1",
    "torch.mul(w, 2, out=torch.empty(3))",
    "o = torch.empty(2)\nr = (torch.add(torch.ones(3), 1, out=o) is o, o)",
    "o = torch.empty(0)\nr = (torch.add(torch.ones(3), 1, out=o) is o, o)",
    "with torch.no_grad():\n    o = torch.empty(3)\n    r = torch.mul(w, 2, out=o) is o, o",
    # out= of (values, indices) results: a tuple of tensors
    "o = torch.empty(2)\nr = (torch.max(x, 1, out=(o, torch.empty(2, dtype=torch.long))), o)",
    "o = torch.empty(())\nr = (torch.max(x, out=o) is o, torch.min(x, out=torch.empty(3)), o)",
    "o = (torch.empty(3), torch.empty(3, dtype=torch.long))\nr = (list(torch.min(x, 0, out=o)), o)",
    "o = (torch.empty(2), torch.empty(2, dtype=torch.long))\nr = (list(torch.median(x, 1, out=o)), o)",
    "o = (torch.empty(2), torch.empty(2, dtype=torch.long))\nr = (list(torch.kthvalue(x, 2, 1, out=o)), o)",
    "o = (torch.empty(3), torch.empty(3))\nr = (list(torch.aminmax(x, dim=0, out=o)), o)",
]


@pytest.mark.parametrize("code", SNIPPETS)
def test_as_torch(code):
    torch = pytest.importorskip("torch")
    try:
        assert _run(tracejit, code) == _run(torch, code)
    finally:
        tracejit.autograd.set_detect_anomaly(False)
        torch.autograd.set_detect_anomaly(False)


def test_inference_tensors_without_torch():
    x = tracejit.ones(3)
    w = tracejit.ones(3, requires_grad=True)
    with tracejit.inference_mode():
        y = x * 2
        assert not (w * 2).requires_grad         # no recording in inference mode
    assert y.is_inference() and y[1:].is_inference() and not (y + 1).is_inference()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        y.mul_(2)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        w * y
    (w + y).sum().backward()                     # add saves nothing: allowed, as in PyTorch
    assert w.grad.tolist() == [1.0] * 3
    z = y.clone()
    z.add_(1)
    assert not z.is_inference() and z.tolist() == [3.0] * 3


def test_anomaly_mode_check_nan_without_torch():
    w = tracejit.tensor([0.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = tracejit.autograd.detect_anomaly()
    with mode:
        y = (w * 0).sqrt()            # backward: 0 * inf = nan
        with pytest.raises(RuntimeError, match="returned nan values"):
            y.sum().backward(retain_graph=True)
    with tracejit.autograd.set_detect_anomaly(True, check_nan=False):
        y.sum().backward()            # anomaly on, NaN checks off: no error
        assert tracejit.is_anomaly_enabled() and not tracejit.is_anomaly_check_nan_enabled()
    assert not tracejit.is_anomaly_enabled() and tracejit.is_anomaly_check_nan_enabled()


def test_out_without_torch():
    x = tracejit.arange(6.0).reshape(2, 3)
    o = tracejit.empty(2, 3)
    v = o._version.v
    assert tracejit.add(x, x, out=o) is o and o.tolist() == (x * 2).tolist() and o._version.v == v + 1
    o64 = tracejit.zeros(3, dtype=tracejit.int64)
    assert tracejit.zeros(3, out=o64).dtype is tracejit.int64
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        tracejit.exp(x, out=tracejit.empty(2, 3, dtype=tracejit.int64))
    with pytest.warns(UserWarning, match="was resized"):
        r = tracejit.sum(x, 1, out=tracejit.empty(5))
    np.testing.assert_array_equal(r.numpy(), [3.0, 12.0])

    @tracejit.trace
    def f(a, b):
        tracejit.mul(a, 3, out=b)
        return b + 0

    b = tracejit.zeros(2, 3)
    assert f(x, b).tolist() == (x * 3).tolist() and b.tolist() == (x * 3).tolist()
