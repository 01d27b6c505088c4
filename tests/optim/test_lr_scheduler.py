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
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.9 if e % 2 else 0.95)),
    ("ConstantLR", dict(factor=0.25, total_iters=4)),
    ("LinearLR", dict(start_factor=0.1, end_factor=0.8, total_iters=6)),
    ("PolynomialLR", dict(total_iters=8, power=2.0)),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", dict(T_0=4)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=2, mode="triangular2")),
    ("CyclicLR", dict(base_lr=[0.01, 0.02], max_lr=0.2, step_size_up=2, mode="exp_range", gamma=0.9,
                      base_momentum=0.7, max_momentum=0.95)),
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
        assert [g["momentum"] for g in oa.param_groups] == pytest.approx([g["momentum"] for g in ob.param_groups])
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


def _lr_trace(lib, build, steps, metric=None):
    p, q = lib.nn.Parameter(lib.ones(1)), lib.nn.Parameter(lib.ones(1))
    opt = lib.optim.Adam([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1)
    sch = build(lib, opt)
    out = []
    for i in range(steps):
        opt.step()
        sch.step(*(() if metric is None else (metric(i),)))
        out.append(([g["lr"] for g in opt.param_groups], [g["betas"][0] for g in opt.param_groups],
                    list(sch.get_last_lr())))
    return out, sch


COMPOSITES = {
    "warmup_then_cosine": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(o, [
        lib.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=3),
        lib.optim.lr_scheduler.CosineAnnealingLR(o, T_max=6, eta_min=0.001)], milestones=[3]),
    "three_phases": lambda lib, o: lib.optim.lr_scheduler.SequentialLR(o, [
        lib.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2),
        lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
        lib.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)], milestones=[2, 6]),
    "chained": lambda lib, o: lib.optim.lr_scheduler.ChainedScheduler([
        lib.optim.lr_scheduler.ConstantLR(o, factor=0.1, total_iters=2),
        lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)]),
    "cyclic_adam_beta1": lambda lib, o: lib.optim.lr_scheduler.CyclicLR(o, 0.001, 0.01, step_size_up=3),
}


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_composite_and_cyclic_schedules_match_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, _ = _lr_trace(tj, COMPOSITES[name], 14)
        want, _ = _lr_trace(torch, COMPOSITES[name], 14)
    for i, (a, b) in enumerate(zip(got, want)):
        for x, y in zip(a, b):
            assert x == pytest.approx(y, rel=1e-12), (name, i)


@pytest.mark.parametrize("kw", [dict(mode="min", patience=1, factor=0.5, cooldown=1, min_lr=[0.02, 0.1]),
                                dict(mode="max", patience=0, threshold=0.1, threshold_mode="abs", eps=0.2),
                                dict(mode="min", patience=2, threshold=0.05)])
def test_reduce_lr_on_plateau_matches_torch(kw):
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.5, 0.5, 0.51, 0.49, 0.6, 0.6, 0.6, 0.6, 0.2, 0.3, 0.3]

    def build(lib, o):
        return lib.optim.lr_scheduler.ReduceLROnPlateau(o, **kw)
    got, sa = _lr_trace(tj, build, len(metrics), metrics.__getitem__)
    want, sb = _lr_trace(torch, build, len(metrics), lambda i: torch.tensor(metrics[i], dtype=torch.float64))
    assert got == want
    assert (sa.best, sa.num_bad_epochs, sa.cooldown_counter) == (sb.best, sb.num_bad_epochs, sb.cooldown_counter)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        tj.optim.lr_scheduler.ReduceLROnPlateau(tj.optim.SGD([tj.nn.Parameter(tj.ones(1))], lr=0.1), factor=1.0)


def test_warm_restarts_take_fractional_epochs_and_state_dicts_resume():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(1))
        opt = lib.optim.SGD([p], lr=0.1)
        s = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=3, eta_min=0.01)
        lrs = []
        for e in [0.25, 0.5, 1.75, 2.0, 3.5, 7.9, 8.0, 8.1, 20.0, 26.5]:      # a step per batch: epoch + i / n
            opt.step()
            s.step(e)
            lrs.append(s.get_last_lr()[0])
        return lrs
    assert run(tj) == pytest.approx(run(torch), rel=1e-12)
    # a SequentialLR resumed from its state_dict continues the same schedule
    _, sa = _lr_trace(tj, COMPOSITES["warmup_then_cosine"], 4)
    rest, sb = _lr_trace(tj, COMPOSITES["warmup_then_cosine"], 9)
    o = sa.optimizer
    st = sa.state_dict()
    fresh = COMPOSITES["warmup_then_cosine"](tj, o)
    fresh.load_state_dict(st)
    for g, lr in zip(o.param_groups, sa.get_last_lr()):
        g["lr"] = lr
    for i in range(5):
        o.step()
        fresh.step()
        assert fresh.get_last_lr() == pytest.approx(rest[4 + i][2], rel=1e-12), i
