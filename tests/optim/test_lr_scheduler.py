"""Learning-rate schedulers against PyTorch: the same lr at every epoch."""
import warnings

import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")

SCHEDULERS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.8)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.01)),
    ("CosineAnnealingLR", dict(T_max=7)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1.0 / (e + 1))),
]


def _make(lib, name, kw, groups=True):
    p, q = lib.nn.Parameter(lib.ones(1)), lib.nn.Parameter(lib.ones(1))
    opt = lib.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.5}] if groups else [p, q], lr=0.1, momentum=0.9)
    return opt, getattr(lib.optim.lr_scheduler, name)(opt, **kw)


@pytest.mark.parametrize("name,kw", SCHEDULERS)
def test_lr_sequence_matches_torch(name, kw):
    oa, sa = _make(tj, name, kw)
    ob, sb = _make(torch, name, kw)
    for epoch in range(15):
        assert sa.get_last_lr() == pytest.approx(sb.get_last_lr(), rel=1e-12), epoch
        assert [g["lr"] for g in oa.param_groups] == pytest.approx([g["lr"] for g in ob.param_groups], rel=1e-12)
        oa.step()
        ob.step()
        sa.step()
        sb.step()
    assert sa.last_epoch == sb.last_epoch == 15
    assert list(oa.state_dict()["param_groups"][0]) == list(ob.state_dict()["param_groups"][0])


@pytest.mark.parametrize("name,kw", SCHEDULERS[:4])
def test_state_dict_resume(name, kw):
    oa, sa = _make(tj, name, kw)
    for _ in range(4):
        oa.step()
        sa.step()
    state = sa.state_dict()
    assert "optimizer" not in state
    ob, sb = _make(tj, name, kw)
    sb.load_state_dict(state)
    ob.load_state_dict(oa.state_dict())
    for _ in range(5):
        oa.step()
        ob.step()
        sa.step()
        sb.step()
        assert sa.get_last_lr() == pytest.approx(sb.get_last_lr())
    keys_t = set(getattr(torch.optim.lr_scheduler, name)(
        torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1), **kw).state_dict())
    assert set(state) == keys_t


def test_closed_form_with_epoch_and_warnings():
    oa, sa = _make(tj, "StepLR", dict(step_size=2, gamma=0.1), groups=False)
    oa.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        sa.step(5)
    assert sa.get_last_lr() == pytest.approx([0.1 * 0.01])
    oa, sa = _make(tj, "ExponentialLR", dict(gamma=0.5), groups=False)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sa.step()
    oa, sa = _make(tj, "ExponentialLR", dict(gamma=0.5), groups=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        oa.step()
        sa.step()
    with pytest.raises(KeyError, match="initial_lr"):
        tj.optim.lr_scheduler.StepLR(tj.optim.SGD([tj.nn.Parameter(tj.ones(1))], lr=0.1), 2, last_epoch=3)


@pytest.mark.parametrize("opt_name, opt_kw", [("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 0.1})])
@pytest.mark.parametrize("sched_kw", [{"total_steps": 20}, {"epochs": 4, "steps_per_epoch": 5, "three_phase": True},
                                      {"total_steps": 15, "anneal_strategy": "linear", "pct_start": 0.4},
                                      {"total_steps": 12, "cycle_momentum": False, "max_lr": [0.5, 0.2]}],
                         ids=["cos", "three_phase", "linear", "per_group_no_momentum"])
def test_one_cycle_lr_matches_torch(opt_name, opt_kw, sched_kw):
    torch = pytest.importorskip("torch")
    kw = dict(sched_kw)
    max_lr = kw.pop("max_lr", 1.0)
    opts = [getattr(lib.optim, opt_name)([{"params": [lib.nn.Parameter(lib.ones(2))]} for _ in range(2)], **opt_kw)
            for lib in (torch, tj)]
    scheds = [lib.optim.lr_scheduler.OneCycleLR(o, max_lr, **kw) for lib, o in zip((torch, tj), opts)]
    steps = kw.get("total_steps") or kw["epochs"] * kw["steps_per_epoch"]
    for _ in range(steps):
        for a, b in zip(*(o.param_groups for o in opts)):
            assert b["lr"] == pytest.approx(a["lr"], rel=1e-12, abs=1e-15)
            for key in ("momentum", "betas"):
                if key in a:
                    assert np.ravel(b[key])[0] == pytest.approx(np.ravel(a[key])[0], rel=1e-12)
        for o, s in zip(opts, scheds):
            o.step()
            s.step()
    with pytest.raises(ValueError, match="Tried to step"):
        for _ in range(3):
            opts[1].step()
            scheds[1].step()


def test_one_cycle_lr_errors():
    opt = tj.optim.SGD([tj.nn.Parameter(tj.ones(2))], lr=0.1)
    with pytest.raises(ValueError, match="either total_steps OR"):
        tj.optim.lr_scheduler.OneCycleLR(opt, 1.0)
    plain = tj.optim.SGD([tj.nn.Parameter(tj.ones(2))], lr=0.1)
    del plain.defaults["momentum"]          # (an optimizer with neither momentum nor betas)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        tj.optim.lr_scheduler.OneCycleLR(plain, 1.0, total_steps=5)
    with pytest.raises(ValueError, match="anneal_strategy"):
        tj.optim.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=5, cycle_momentum=False, anneal_strategy="x")
