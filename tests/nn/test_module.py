"""nn.Module: registration, traversal, state_dict (PyTorch's key order and errors), modes, hooks, repr."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import tracejit as tj
from tracejit import nn

torch = pytest.importorskip("torch")


def _build(lib):
    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.nn.Parameter(lib.ones(3))
            self.conv = lib.nn.Conv2d(2, 3, 3, padding=1)
            self.bn = lib.nn.BatchNorm2d(3)
            self.register_buffer("tmp", lib.zeros(2), persistent=False)
            self.register_buffer("count", lib.zeros(1))

        def forward(self, x):
            return self.bn(self.conv(x)) * self.scale.reshape(1, 3, 1, 1)

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.head = lib.nn.Sequential(OrderedDict(flat=lib.nn.Flatten(), fc=lib.nn.Linear(48, 5)))
            self.extra = lib.nn.ModuleList([lib.nn.Linear(5, 5), lib.nn.ReLU()])
            self.bias = lib.nn.Parameter(lib.zeros(5))
            self.emb = lib.nn.Embedding(4, 2)
            self.ln = lib.nn.LayerNorm(5)

        def forward(self, x):
            h = self.head(self.block(x))
            for m in self.extra:
                h = m(h)
            return self.ln(h + self.bias)
    return Net()


def _copy_weights(src, dst):
    with tj.no_grad():
        for k, v in src.state_dict().items():
            dst.state_dict()[k].copy_(tj.tensor(v.numpy()))


def test_names_and_order_match_torch():
    a, b = _build(tj), _build(torch)
    assert [k for k, _ in a.named_parameters()] == [k for k, _ in b.named_parameters()]
    assert [k for k, _ in a.named_buffers()] == [k for k, _ in b.named_buffers()]
    assert [k for k, _ in a.named_modules()] == [k for k, _ in b.named_modules()]
    assert [k for k, _ in a.named_children()] == [k for k, _ in b.named_children()]
    assert list(a.state_dict().keys()) == list(b.state_dict().keys())
    assert "block.tmp" not in a.state_dict()
    assert [k for k, _ in a.block.named_parameters(prefix="p", recurse=False)] == ["p.scale"]
    assert [k for k, _ in a.named_parameters(recurse=False)] == ["bias"]
    assert len(list(a.parameters())) == len(list(b.parameters()))
    assert list(a.state_dict()._metadata.keys()) == list(b.state_dict()._metadata.keys())


def test_repr_matches_torch():
    a, b = _build(tj), _build(torch)
    assert repr(a) == repr(b)
    ml_a = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()])
    ml_b = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU()])
    assert repr(ml_a) == repr(ml_b)
    for mk in [lambda L: L.nn.Conv1d(2, 4, 3, stride=2, groups=2, bias=False), lambda L: L.nn.MaxPool2d(3, 2, 1),
               lambda L: L.nn.AvgPool2d(2), lambda L: L.nn.Dropout(0.3), lambda L: L.nn.LeakyReLU(0.2),
               lambda L: L.nn.GELU("tanh"), lambda L: L.nn.Softmax(dim=1), lambda L: L.nn.Embedding(5, 3, padding_idx=0),
               lambda L: L.nn.BatchNorm1d(4, momentum=None), lambda L: L.nn.Bilinear(2, 3, 4),
               lambda L: L.nn.AdaptiveAvgPool2d((1, 1)), lambda L: L.nn.Unflatten(1, (2, 3)),
               lambda L: L.nn.Conv2d(2, 4, 3, padding="same", dilation=2), lambda L: L.nn.Identity()]:
        assert repr(mk(tj)) == repr(mk(torch))


def test_state_dict_round_trip_and_forward_matches_torch():
    a, b = _build(tj), _build(torch)
    a.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in b.state_dict().items()})
    x = np.random.standard_normal((2, 2, 4, 4)).astype(np.float32)
    ya, yb = a(tj.tensor(x)), b(torch.tensor(x))
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-4, atol=1e-5)
    ya.sum().backward()
    yb.sum().backward()
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        if pb.grad is None:
            assert pa.grad is None, na
        else:
            np.testing.assert_allclose(pa.grad.numpy(), pb.grad.numpy(), rtol=1e-3, atol=1e-4, err_msg=na)
    np.testing.assert_allclose(a.block.bn.running_var.numpy(), b.block.bn.running_var.numpy(), rtol=1e-5)


def _err(fn):
    with pytest.raises(RuntimeError) as e:
        fn()
    return str(e.value).replace("torch.Size", "Size").replace("tracejit.Size", "Size")


def test_load_state_dict_errors_match_torch():
    a, b = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    sa = {"weight": tj.zeros(2, 3), "foo": tj.zeros(1)}
    sb = {"weight": torch.zeros(2, 3), "foo": torch.zeros(1)}
    assert _err(lambda: a.load_state_dict(sa)) == _err(lambda: b.load_state_dict(sb))
    sa, sb = {"weight": tj.zeros(4, 3), "bias": tj.zeros(2)}, {"weight": torch.zeros(4, 3), "bias": torch.zeros(2)}
    assert _err(lambda: a.load_state_dict(sa)) == _err(lambda: b.load_state_dict(sb))
    r = a.load_state_dict({"weight": tj.ones(2, 3), "x.y": tj.ones(1)}, strict=False)
    rb = b.load_state_dict({"weight": torch.ones(2, 3), "x.y": torch.ones(1)}, strict=False)
    assert (r.missing_keys, r.unexpected_keys) == (rb.missing_keys, rb.unexpected_keys) == (["bias"], ["x.y"])
    assert float(a.weight.sum()) == 6.0
    assert repr(a.load_state_dict(a.state_dict())) == "<All keys matched successfully>"
    m1, m2 = _build(tj), _build(torch)
    sa = {k: v for k, v in m1.state_dict().items() if not k.startswith("block.bn")}
    sb = {k: v for k, v in m2.state_dict().items() if not k.startswith("block.bn")}
    sa["head.fc.extra"] = tj.zeros(1)
    sb["head.fc.extra"] = torch.zeros(1)
    assert _err(lambda: m1.load_state_dict(sa)) == _err(lambda: m2.load_state_dict(sb))


def test_state_dict_shares_data_and_keep_vars():
    m = nn.Linear(2, 2)
    sd = m.state_dict()
    assert not sd["weight"].requires_grad
    with tj.no_grad():
        sd["weight"].fill_(3.0)
    assert float(m.weight[0, 0]) == 3.0
    assert m.state_dict(keep_vars=True)["weight"] is m.weight


def test_setattr_rules():
    m = nn.Module()
    m.p = nn.Parameter(tj.zeros(2))
    m.sub = nn.Linear(1, 1)
    m.register_buffer("b", tj.zeros(1))
    m.b = tj.ones(1)  # assigning a tensor over a buffer keeps it a buffer
    assert "b" in dict(m.named_buffers())
    m.nb = nn.Buffer(tj.zeros(3), persistent=False)
    assert "nb" in dict(m.named_buffers()) and "nb" not in m.state_dict()
    with pytest.raises(TypeError, match="cannot assign"):
        m.p = tj.zeros(2)
    with pytest.raises(TypeError):
        m.sub = 3
    m.p = None
    assert m.p is None and list(dict(m.named_parameters())) == ["sub.weight", "sub.bias"]
    del m.sub
    assert not hasattr(m, "sub")
    with pytest.raises(KeyError):
        m.register_parameter("a.b", None)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        m.nothing
    nonleaf = tj.ones(2, requires_grad=True) * 2
    with pytest.raises(TypeError):
        m.register_parameter("q", nonleaf)


def test_modes_apply_zero_grad_requires_grad():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Sequential(nn.BatchNorm1d(2)))
    assert all(x.training for x in m.modules())
    m.eval()
    assert not any(x.training for x in m.modules())
    m.train()
    with pytest.raises(ValueError):
        m.train("no")
    seen = []
    m.apply(lambda x: seen.append(type(x).__name__))
    assert seen == ["Linear", "Dropout", "BatchNorm1d", "Sequential", "Sequential"]
    m(tj.randn(3, 2)).sum().backward()
    assert m[0].weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert float(m[0].weight.grad.abs().sum()) == 0.0
    m.zero_grad()
    assert m[0].weight.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_to_dtype_keeps_parameter_identity():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    w = m[0].weight
    m.to(tj.float64)
    assert m[0].weight is w and w.dtype is tj.float64 and isinstance(w, nn.Parameter)
    assert m[1].running_mean.dtype is tj.float64 and m[1].num_batches_tracked.dtype is tj.int64
    assert m(tj.randn(4, 2, dtype=tj.float64)).dtype is tj.float64
    m.float()
    assert w.dtype is tj.float32


def test_hooks():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    y = m(tj.ones(1, 2))
    np.testing.assert_allclose(y.detach().numpy(), (m.bias + 1).detach().numpy()[None])
    assert calls == [(1, 2)]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(m(tj.ones(1, 2)).detach().numpy(), (m.weight.sum(1) + m.bias).detach().numpy()[None],
                               rtol=1e-6)
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)
    np.testing.assert_allclose(m(tj.ones(1, 2)).detach().numpy(),
                               (2 * m.weight.sum(1) + m.bias).detach().numpy()[None], rtol=1e-6)


def test_containers():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[-1], nn.Linear) and isinstance(s[:2], nn.Sequential) and len(s[:2]) == 2
    s.append(nn.Sigmoid())
    assert list(dict(s.named_children())) == ["0", "1", "2", "3"]
    del s[1]
    assert list(dict(s.named_children())) == ["0", "1", "2"]
    assert s(tj.randn(4, 2)).shape == (4, 1)
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.extend([nn.ReLU(), nn.Tanh()])
    ml.insert(1, nn.Sigmoid())
    assert [type(x).__name__ for x in ml] == ["Linear", "Sigmoid", "ReLU", "Tanh"]
    md = nn.ModuleDict({"a": nn.Linear(1, 2), "b": nn.ReLU()})
    assert list(md.keys()) == ["a", "b"] and "a" in md
    assert [k for k, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    pl = nn.ParameterList([nn.Parameter(tj.ones(2)), tj.zeros(3)])
    assert [k for k, _ in pl.named_parameters()] == ["0", "1"] and isinstance(pl[1], nn.Parameter)
    pd = nn.ParameterDict({"x": nn.Parameter(tj.ones(1))})
    assert list(dict(pd.named_parameters())) == ["x"]


def test_shared_modules_and_parameters_counted_once():
    lin = nn.Linear(2, 2)
    s = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(s.parameters())) == 2
    assert [k for k, _ in s.named_modules()] == ["", "0", "1"]
    assert list(s.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_deepcopy_and_get_submodule():
    m = _build(tj)
    c = copy.deepcopy(m)
    assert c.block.conv.weight is not m.block.conv.weight
    assert isinstance(c.block.conv.weight, nn.Parameter)
    np.testing.assert_array_equal(c.block.conv.weight.detach().numpy(), m.block.conv.weight.detach().numpy())
    assert m.get_submodule("head.fc") is m.head.fc
    assert m.get_parameter("head.fc.bias") is m.head.fc.bias
    assert m.get_buffer("block.bn.running_mean") is m.block.bn.running_mean
    with pytest.raises(AttributeError):
        m.get_submodule("head.nothing")


def test_parameter():
    p = nn.Parameter(tj.ones(2))
    assert p.requires_grad and p.is_leaf and isinstance(p, tj.Tensor)
    assert repr(p).startswith("Parameter containing:\ntensor([1., 1.]")
    assert not nn.Parameter(tj.ones(1), requires_grad=False).requires_grad
    assert type(p.detach()) is tj.Tensor
    assert (p * 2).grad_fn is not None


def test_load_state_dict_assign():
    m = nn.Linear(2, 2)
    w = tj.ones(2, 2)
    m.load_state_dict({"weight": w, "bias": tj.zeros(2)}, assign=True)
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    with tj.no_grad():
        w.add_(1)
    assert float(m.weight[0, 0]) == 2.0  # shares the loaded tensor's data


def _hooked_pair(lib, rec):
    """A two-input module (x needs a gradient, y not; a second output without one) under a Linear, with full
    backward hooks recording what they get; the two-input module's hook triples its grad_input."""
    class Two(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(3, 4)

        def forward(self, x, y, scale=2.0):
            return self.a(x) * scale + y, y.sum()
    m, lin = Two(), lib.nn.Linear(4, 1)
    rng = np.random.default_rng(0)
    for mod in (m, lin):
        mod.load_state_dict({k: lib.tensor(rng.standard_normal(tuple(v.shape)).astype(np.float32))
                             for k, v in mod.state_dict().items()})

    def arrays(gs):
        return [None if g is None else g.detach().numpy().copy() for g in gs]

    def full(mod, gi, go):
        rec.append(("full", arrays(gi), arrays(go)))
        return tuple(None if g is None else g * 3 for g in gi)
    m.register_full_backward_pre_hook(lambda mod, go: rec.append(("pre", arrays(go))))
    m.register_full_backward_hook(full)
    lin.register_full_backward_hook(lambda mod, gi, go: rec.append(("lin", arrays(gi), arrays(go))))
    return m, lin


def test_full_backward_hooks_match_pytorch():
    torch = pytest.importorskip("torch")
    got = {}
    for lib in (tj, torch):
        rec = []
        m, lin = _hooked_pair(lib, rec)
        x = lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
        o, s = m(x, lib.tensor(np.ones((2, 4), np.float32)))
        (lin(o).sum() + s).backward()
        got[lib] = rec, x.grad.numpy()
    (rec_a, ga), (rec_b, gb) = got[tj], got[torch]
    assert [r[0] for r in rec_a] == [r[0] for r in rec_b] == ["lin", "pre", "full"]
    for ra, rb in zip(rec_a, rec_b):
        for xa, xb in zip(ra[1:], rb[1:]):
            assert [u is None for u in xa] == [v is None for v in xb], ra[0]     # (None for the no-grad output)
            for u, v in zip(xa, xb):
                if u is not None:
                    np.testing.assert_allclose(u, v, rtol=1e-6)
    np.testing.assert_allclose(ga, gb, rtol=1e-6)          # the hook's tripled grad_input reached x


def test_full_backward_hook_on_data_input_traced_and_removed():
    # the first layer's input needs no gradient: the hook gets grad_input (None,) when grad_output is known;
    # a hook that scales gradients traces; removing the handle removes it
    lin = tj.nn.Linear(3, 2)
    seen = []

    def hook(mod, gi, go):
        seen.append((gi, go[0].shape))
    h = lin.register_full_backward_hook(hook)
    x = tj.randn(4, 3)
    lin(x).sum().backward()
    assert seen == [((None,), (4, 2))]
    h.remove()
    scaled = tj.nn.Linear(3, 2)
    scaled.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0.5,))

    def step(x):
        scaled.zero_grad()
        scaled(x).sum().backward()
        return scaled.weight.grad.clone()
    eager = step(x).numpy()
    np.testing.assert_allclose(eager, 0.5 * x.numpy().sum(0)[None, :].repeat(2, 0), rtol=1e-6)
    np.testing.assert_allclose(tj.trace(step)(x).numpy(), eager, rtol=1e-6)
    lin(x).sum().backward()
    assert len(seen) == 1
