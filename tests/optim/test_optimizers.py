"""Optimizers against PyTorch: N steps from the same parameters and gradients give the same parameters and
state; state_dict format and load_state_dict errors as PyTorch's."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.5, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.9, weight_decay=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3, maximize=True)),
    ("Adadelta", dict(lr=1.0)),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.05)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.02, betas=(0.8, 0.95), weight_decay=0.1, maximize=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01)),                                   # 8 steps: the plain steps and the rectified ones
    ("RAdam", dict(lr=0.01, betas=(0.5, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08), maximize=True)),
]

SHAPES = [(4, 3), (3,), (2, 2, 2)]


def _data(steps=8, seed=0):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    return init, grads


def _run(lib, name, kw, init, grads, groups=False, opt_state=None):
    ps = [lib.nn.Parameter(lib.tensor(a.copy())) for a in init]
    params = [{"params": ps[:2]}, {"params": ps[2:], "lr": kw["lr"] * 0.5}] if groups else ps
    opt = getattr(lib.optim, name)(params, **kw)
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    for step_grads in grads:
        for p, g in zip(ps, step_grads):
            p.grad = lib.tensor(g)
        opt.step()
    return ps, opt


def _close(a, b, tol=2e-5):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kw", CONFIGS)
def test_steps_match_torch(name, kw):
    init, grads = _data()
    for groups in (False, True):
        pa, oa = _run(tj, name, kw, init, grads, groups)
        pb, ob = _run(torch, name, kw, init, grads, groups)
        for a, b in zip(pa, pb):
            _close(a, b)
        sa, sb = oa.state_dict(), ob.state_dict()
        assert list(sa) == list(sb) == ["state", "param_groups"]
        assert [list(g) for g in sa["param_groups"]] == [list(g) for g in sb["param_groups"]]
        assert sa["param_groups"] == [{k: v for k, v in g.items()} for g in sb["param_groups"]]
        assert list(sa["state"]) == list(sb["state"])
        for k in sb["state"]:
            assert list(sa["state"][k]) == list(sb["state"][k])
            for key, vb in sb["state"][k].items():
                va = sa["state"][k][key]
                assert va.dtype.name == str(vb.dtype).split(".")[-1]
                _close(va, vb)


@pytest.mark.parametrize("name,kw", [c for c in CONFIGS if c[1].get("momentum") or c[0] != "SGD"][::2])
def test_resume_from_state_dict(name, kw):
    """Train 4 steps, save state, load into a fresh optimizer over copies, train 4 more: same as 8 straight."""
    init, grads = _data()
    straight, _ = _run(tj, name, kw, init, grads)
    half, opt = _run(tj, name, kw, init, grads[:4])
    sd = opt.state_dict()
    resumed, opt2 = _run(tj, name, kw, [p.detach().numpy() for p in half], grads[4:], opt_state=sd)
    for a, b in zip(straight, resumed):
        _close(a, b, 1e-6)
    # the loaded state is a copy: stepping the new optimizer leaves the old one's buffers alone
    key = next(iter(sd["state"][0]))
    assert sd["state"][0][key] is not opt2.state_dict()["state"][0][key]


def test_state_loads_from_torch_layout():
    init, grads = _data()
    _, ob = _run(torch, "Adam", dict(lr=0.01), init, grads[:3])
    sb = ob.state_dict()
    sd = {"state": {k: {kk: tj.tensor(v.numpy()) for kk, v in s.items()} for k, s in sb["state"].items()},
          "param_groups": sb["param_groups"]}
    pa, _ = _run(tj, "Adam", dict(lr=0.01), [p.detach().numpy() for p in _run(torch, "Adam", dict(lr=0.01), init,
                                                                                  grads[:3])[0]], grads[3:],
                 opt_state=sd)
    pb, _ = _run(torch, "Adam", dict(lr=0.01), init, grads)
    for a, b in zip(pa, pb):
        _close(a, b)


def test_load_state_dict_errors():
    p, q = tj.nn.Parameter(tj.ones(2)), tj.nn.Parameter(tj.ones(3))
    opt = tj.optim.SGD([p, q], lr=0.1)
    other = tj.optim.SGD([{"params": [p]}, {"params": [q]}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(other.state_dict())
    small = tj.optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(small.state_dict())
    opt2 = tj.optim.SGD([p, q], lr=0.5, momentum=0.3)
    opt.load_state_dict(opt2.state_dict())
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["params"][0] is p


def test_constructor_errors_and_groups():
    p = tj.nn.Parameter(tj.ones(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        tj.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        tj.optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        tj.optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        tj.optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        tj.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="can't optimize a non-leaf"):
        tj.optim.SGD([p * 2], lr=0.1)
    opt = tj.optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    q = tj.nn.Parameter(tj.ones(1))
    opt.add_param_group({"params": q, "momentum": 0.5})
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["momentum"] == 0.5


def test_zero_grad_skip_none_and_closure():
    p, q = tj.nn.Parameter(tj.ones(2)), tj.nn.Parameter(tj.ones(2))
    opt = tj.optim.Adam([p, q], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert float(loss) == 2.0 and q.grad is None and float(q.sum()) == 2.0
    assert len(opt.state[q]) == 0 and float(opt.state[p]["step"]) == 1.0
    assert isinstance(opt.state[p]["step"], tj.Tensor) and opt.state[p]["step"].dtype is tj.float32
    opt.zero_grad(set_to_none=False)
    assert float(p.grad.abs().sum()) == 0.0
    opt.zero_grad()
    assert p.grad is None


def test_training_loop_matches_torch():
    """Model forward, loss, backward, optimizer and scheduler step: same weights after 5 iterations."""
    def make(L):
        L.manual_seed(0)
        return L.nn.Sequential(L.nn.Linear(4, 8), L.nn.Tanh(), L.nn.Linear(8, 3))
    ma, mb = make(tj), make(torch)
    ma.load_state_dict({k: tj.tensor(v.numpy()) for k, v in mb.state_dict().items()})
    oa, ob = tj.optim.AdamW(ma.parameters(), lr=0.05), torch.optim.AdamW(mb.parameters(), lr=0.05)
    sa, sb = tj.optim.lr_scheduler.StepLR(oa, 2, 0.5), torch.optim.lr_scheduler.StepLR(ob, 2, 0.5)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.standard_normal((6, 4)).astype(np.float32)
        y = rng.integers(0, 3, 6)
        for m, o, s, L in ((ma, oa, sa, tj), (mb, ob, sb, torch)):
            o.zero_grad()
            L.nn.functional.cross_entropy(m(L.tensor(x)), L.tensor(y)).backward()
            o.step()
            s.step()
    for (k, a), b in zip(ma.state_dict().items(), mb.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("name, kw", [("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
                                      ("AdamW", dict(lr=0.01, weight_decay=0.1))])
def test_fused_eager_adam_equals_ops(name, kw):
    """Eager Adam/AdamW update each parameter in one kernel; differentiable=True takes the ops. Same numbers,
    also after loading moments that are not contiguous (the kernel must not update a flattened copy)."""
    rng = np.random.default_rng(0)
    init = rng.standard_normal((4, 3)).astype(np.float32)
    grads = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3)]
    res = []
    for differentiable in (False, True):
        p = tj.nn.Parameter(tj.tensor(init))
        opt = getattr(tj.optim, name)([p], differentiable=differentiable, **kw)
        for i, g in enumerate(grads):
            p.grad = tj.tensor(g)
            opt.step()
            if i == 0:
                sd = opt.state_dict()
                for k in ("exp_avg", "exp_avg_sq"):
                    sd["state"][0][k] = tj.tensor(np.asfortranarray(sd["state"][0][k].numpy()))
                opt.load_state_dict(sd)
        res.append([p.detach().numpy()] + [opt.state[p][k].numpy() for k in ("exp_avg", "exp_avg_sq")])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kw", [dict(lr=0.1), dict(lr=0.1, momentum=0.9, weight_decay=0.01),
                                dict(lr=0.1, momentum=0.9, dampening=0.3, maximize=True),
                                dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.02)])
def test_fused_eager_sgd_equals_ops(kw, monkeypatch):
    """Eager SGD updates each parameter in one kernel (its momentum buffer created on the first step);
    differentiable=True takes the ops. Same numbers (float64 within rounding, float32 within a few ulp), also
    after loading a momentum buffer that is not contiguous (the ops then)."""
    from tracejit.kernels.cpu import optim as K
    calls = []
    kernel = K.sgd_update
    monkeypatch.setattr(K, "sgd_update", lambda *a: (calls.append(1), kernel(*a))[1])
    rng = np.random.default_rng(1)
    for dtype, tol in ((np.float64, 1e-13), (np.float32, 2e-6)):
        init = rng.standard_normal((4, 3)).astype(dtype)
        grads = [rng.standard_normal((4, 3)).astype(dtype) for _ in range(4)]
        res = []
        for differentiable in (False, True):
            calls.clear()
            p = tj.nn.Parameter(tj.tensor(init))
            opt = tj.optim.SGD([p], differentiable=differentiable, **kw)
            for i, g in enumerate(grads):
                p.grad = tj.tensor(g)
                opt.step()
                if i == 1 and "momentum" in kw:
                    sd = opt.state_dict()
                    sd["state"][0]["momentum_buffer"] = tj.tensor(np.asfortranarray(
                        sd["state"][0]["momentum_buffer"].numpy()))
                    opt.load_state_dict(sd)
            assert len(calls) == (0 if differentiable else 2 if "momentum" in kw else 4)
            res.append([p.detach().numpy()] + ([opt.state[p]["momentum_buffer"].numpy()] if "momentum" in kw else []))
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("name, kw", [("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)), ("Adam", dict(lr=0.1)),
                                      ("AdamW", dict(lr=0.1))])
def test_float16_parameters_step_as_the_ops(name, kw):
    """float16 parameters (no fused kernel: numba has no float16 arithmetic) take the ops: no error, the same
    numbers as differentiable=True."""
    res = []
    for differentiable in (False, True):
        p = tj.nn.Parameter(tj.tensor(np.linspace(-1, 1, 6, dtype=np.float16)))
        opt = getattr(tj.optim, name)([p], differentiable=differentiable, **kw)
        for _ in range(2):
            p.grad = tj.tensor(np.full(6, 0.5, np.float16))
            opt.step()
        res.append(p.detach().numpy())
    assert res[0].dtype == np.float16
    np.testing.assert_array_equal(res[0], res[1])


def test_adagrad_state_exists_before_the_first_step_and_a_traced_step_matches():
    # PyTorch's Adagrad makes its state at construction: a state_dict saved before any step has it
    ps = [tj.nn.Parameter(tj.ones(2, 2))]
    sa = tj.optim.Adagrad(ps, lr=0.1, initial_accumulator_value=0.5).state_dict()
    sb = torch.optim.Adagrad([torch.nn.Parameter(torch.ones(2, 2))], lr=0.1, initial_accumulator_value=0.5
                             ).state_dict()
    assert list(sa["state"][0]) == list(sb["state"][0]) == ["step", "sum"]
    _close(sa["state"][0]["sum"], sb["state"][0]["sum"])
    init, grads = _data()
    eager, _ = _run(tj, "Adagrad", dict(lr=0.1, lr_decay=0.01), init, grads)
    ps = [tj.nn.Parameter(tj.tensor(a.copy())) for a in init]
    opt = tj.optim.Adagrad(ps, lr=0.1, lr_decay=0.01)

    @tj.trace
    def step(*gs):
        for p, g in zip(ps, gs):
            p.grad = g
        opt.step()
    for step_grads in grads:
        step(*[tj.tensor(g) for g in step_grads])
    for a, b in zip(ps, eager):
        _close(a, b, 1e-6)
