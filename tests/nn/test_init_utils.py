"""nn.init (gains, fans, distributions) and nn.utils (gradient clipping, parameter vectors) against PyTorch."""
import math

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                                        ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain(name, param):
    assert nn.init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_fans_and_errors():
    assert nn.init._calculate_fan_in_and_fan_out(tj.empty(4, 3, 2, 5)) == (30, 40)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(tj.empty(3))
    with pytest.raises(ValueError):
        nn.init.calculate_gain("nope")


def test_distributions():
    w = tj.empty(200, 300)
    assert nn.init.uniform_(w, -2, 3) is w
    assert -2 <= float(w.min()) and float(w.max()) <= 3
    nn.init.normal_(w, 1.0, 0.5)
    assert abs(float(w.mean()) - 1.0) < 0.02 and abs(float(w.std()) - 0.5) < 0.02
    nn.init.constant_(w, 0.3)
    assert np.all(w.numpy() == np.float32(0.3))
    nn.init.zeros_(w)
    assert float(w.abs().sum()) == 0
    nn.init.ones_(w)
    assert float(w.sum()) == w.numel()
    e = nn.init.eye_(tj.empty(3, 4))
    np.testing.assert_array_equal(e.numpy(), np.eye(3, 4))
    nn.init.xavier_uniform_(w, gain=2.0)
    a = 2.0 * math.sqrt(6.0 / 500)
    assert float(w.abs().max()) <= a and float(w.abs().max()) > 0.95 * a
    nn.init.xavier_normal_(w)
    assert abs(float(w.std()) - math.sqrt(2 / 500)) < 0.003
    nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu")
    b = math.sqrt(2) * math.sqrt(3 / 200)
    assert float(w.abs().max()) <= b and float(w.abs().max()) > 0.95 * b
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(float(w.std()) - math.sqrt(2 / 300)) < 0.003
    nn.init.trunc_normal_(w, mean=0.5, std=1.0, a=-0.5, b=1.0)
    assert float(w.min()) >= -0.5 and float(w.max()) <= 1.0
    ref = torch.nn.init.trunc_normal_(torch.empty(200, 300), mean=0.5, std=1.0, a=-0.5, b=1.0)
    assert abs(float(w.mean()) - float(ref.mean())) < 0.02
    assert abs(float(w.std()) - float(ref.std())) < 0.02


def test_orthogonal_and_generator():
    for shape in [(5, 3), (3, 5), (4, 2, 2)]:
        w = nn.init.orthogonal_(tj.empty(*shape), gain=2.0)
        m = w.numpy().reshape(shape[0], -1)
        g = m @ m.T if shape[0] <= m.shape[1] else m.T @ m
        np.testing.assert_allclose(g, 4 * np.eye(g.shape[0]), atol=1e-5)
    g1, g2 = tj.Generator().manual_seed(3), tj.Generator().manual_seed(3)
    a = nn.init.normal_(tj.empty(5), generator=g1)
    b = nn.init.normal_(tj.empty(5), generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_init_runs_under_no_grad():
    p = nn.Parameter(tj.empty(3, 3))
    nn.init.kaiming_uniform_(p)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def _grads(lib, arrs):
    ps = [lib.nn.Parameter(lib.tensor(a)) for a in arrs]
    for p, a in zip(ps, arrs):
        p.grad = lib.tensor(a * 3)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    arrs = [np.random.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), (2, 2, 2)]]
    a, b = _grads(tj, arrs), _grads(torch, arrs)
    na = nn.utils.clip_grad_norm_(a, max_norm, norm_type)
    nb = torch.nn.utils.clip_grad_norm_(b, max_norm, norm_type)
    assert isinstance(na, tj.Tensor)
    np.testing.assert_allclose(float(na), float(nb), rtol=1e-5)
    for pa, pb in zip(a, b):
        np.testing.assert_allclose(pa.grad.numpy(), pb.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_value_and_errors():
    arrs = [np.random.standard_normal((4, 4)).astype(np.float32)]
    a, b = _grads(tj, arrs), _grads(torch, arrs)
    nn.utils.clip_grad_value_(a, 0.5)
    torch.nn.utils.clip_grad_value_(b, 0.5)
    np.testing.assert_array_equal(a[0].grad.numpy(), b[0].grad.numpy())
    p = nn.Parameter(tj.ones(2))
    p.grad = tj.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert float(nn.utils.clip_grad_norm_([nn.Parameter(tj.ones(2))], 1.0)) == 0.0  # no grads


def test_parameters_to_vector_and_back():
    m = nn.Linear(3, 2)
    v = nn.utils.parameters_to_vector(m.parameters())
    assert v.shape == (8,)
    np.testing.assert_array_equal(v.detach().numpy()[:6], m.weight.detach().numpy().reshape(-1))
    nn.utils.vector_to_parameters(tj.arange(8.0), m.parameters())
    np.testing.assert_array_equal(m.bias.detach().numpy(), [6.0, 7.0])
