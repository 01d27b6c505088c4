"""Learning-rate schedulers (PyTorch's recursive forms, closed forms for step(epoch)).

A scheduler changes `group['lr']`, a Python number: a traced training step that reads it is retraced
when it changes (the learning rate is part of the trace's signature), so schedulers work with traced
steps, at the cost of one trace per distinct learning rate.
"""
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from contextlib import contextmanager
from functools import wraps
from weakref import ref

from .optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. Please use "
    "`scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from None, the closed "
    "form is used instead of the new chainable form, where available. Please open an issue if you are unable to "
    "replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.")


@contextmanager
def _initial_mode(sched):
    sched._is_initial = True
    try:
        yield
    finally:
        sched._is_initial = False


def _lrs(optimizer):
    return [g["lr"] for g in optimizer.param_groups]


class LRScheduler:
    _is_initial = False
    _get_lr_called_within_step = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an "
                                   "optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._patch_optimizer_step()
        self._initial_step()

    def _patch_optimizer_step(self):
        # to warn when scheduler.step() runs before optimizer.step() (PyTorch's check)
        opt = self.optimizer
        if hasattr(opt.step, "_wrapped_by_lr_sched"):
            return
        opt_ref = ref(opt)
        func = opt.step.__func__

        @wraps(func)
        def wrapper(*args, **kwargs):
            o = opt_ref()
            o._opt_called = True
            return func.__get__(o, o.__class__)(*args, **kwargs)

        wrapper._wrapped_by_lr_sched = True
        opt.step = wrapper

    def _initial_step(self):
        self._step_count = 0
        with _initial_mode(self):
            self.step()

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        return self._last_lr

    def get_lr(self):
        raise NotImplementedError

    def step(self, epoch=None):
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn("Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                              "initialization. Please, make sure to call `optimizer.step()` before "
                              "`lr_scheduler.step()`.", UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 "
                              "and later, you should call them in the opposite order: `optimizer.step()` before "
                              "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                              "value of the learning rate schedule.", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        """The next learning rates (the recursive form), or those of `epoch` (the closed form where there is one),
        written into the optimizer's groups."""
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)


_LRScheduler = LRScheduler


class LambdaLR(LRScheduler):
    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        for idx, fn in enumerate(self.lr_lambdas):
            if not isinstance(fn, types.FunctionType):
                state["lr_lambdas"][idx] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for idx, fn in enumerate(lr_lambdas):
            if fn is not None:
                self.lr_lambdas[idx].__dict__.update(fn)

    def get_lr(self):
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _lrs(self.optimizer)
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (PyTorch's OneCycleLR): the learning rate from max_lr/div_factor up to max_lr over
    pct_start of the steps, then down to initial_lr/final_div_factor (three_phase: back to the initial rate first),
    cosine or linear; with cycle_momentum, momentum (or Adam's beta1) moves the opposite way."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        T = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * T) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * T) - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=T - 1, start_lr="initial_lr", end_lr="min_lr", start_momentum="max_momentum",
                     end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * T) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=T - 1, start_lr="max_lr", end_lr="min_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum")]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        groups = optimizer.param_groups
        per_group = lambda v: list(v) if isinstance(v, (list, tuple)) else [v] * len(groups)  # noqa: E731
        if last_epoch == -1:
            for g, m in zip(groups, per_group(max_lr)):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for g, lo, hi in zip(groups, per_group(base_momentum), per_group(max_momentum)):
                    if self.use_beta1:
                        g["betas"] = (hi, *g["betas"][1:])
                    else:
                        g["momentum"] = hi
                    g["max_momentum"], g["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(g[phase["start_lr"]], g[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        m = self._anneal(g[phase["start_momentum"]], g[phase["end_momentum"]], pct)
                    break
                start = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    g["betas"] = (m, *g["betas"][1:])
                else:
                    g["momentum"] = m
        return lrs


class MultiplicativeLR(LRScheduler):
    """Each step multiplies every group's learning rate by lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)) and len(lr_lambda) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch <= 0:
            return _lrs(self.optimizer)
        return [g["lr"] * f(self.last_epoch) for f, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


class ConstantLR(LRScheduler):
    """The learning rate times `factor` for the first total_iters steps, then the base rate."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        scale = (self.factor if self.last_epoch == 0 else
                 1.0 / self.factor if self.last_epoch == self.total_iters else 1.0)
        return [g["lr"] * scale for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)) for b in self.base_lrs]


class LinearLR(LRScheduler):
    """The learning rate times a factor going linearly from start_factor to end_factor over total_iters steps
    (the usual warm-up), then the base rate times end_factor."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if not 0 <= end_factor <= 1:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, a, b, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [g["lr"] * a for g in self.optimizer.param_groups]
        if e > n:
            return _lrs(self.optimizer)
        # the ratio of this step's factor to the last one's
        ratio = 1.0 + (b - a) / (n * a + (e - 1) * (b - a))
        return [g["lr"] * ratio for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        a, b, n = self.start_factor, self.end_factor, self.total_iters
        return [base * (a + (b - a) * min(n, self.last_epoch) / n) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """The learning rate times (1 - t / total_iters) ** power at step t <= total_iters, then 0."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, n = self.last_epoch, self.total_iters
        if e == 0 or e > n:
            return _lrs(self.optimizer)
        ratio = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [g["lr"] * ratio for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for b in self.base_lrs]


def _same_optimizer(owner, schedulers, optimizer):
    for i, sch in enumerate(schedulers):
        if not hasattr(sch, "optimizer"):
            raise TypeError(f"{owner} at index {i} should have `optimizer` as its attribute.")
        if isinstance(sch, ReduceLROnPlateau):
            raise ValueError(f"{owner} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                             f"kwargs to be specified when calling `step`, but got one at index {i} in the given "
                             f"schedulers sequence.")
        if sch.optimizer is not optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, but got scheduler "
                             f"{type(sch).__name__} at index {i} with another optimizer.")


def _undo_steps(sch):
    """Take back the step each (nested) scheduler took when it was made."""
    for s in getattr(sch, "_schedulers", ()):
        _undo_steps(s)
    if not hasattr(sch, "_schedulers") and hasattr(sch, "last_epoch"):
        sch.last_epoch -= 1


class _Composite(LRScheduler):
    """State of a scheduler made of others: its own fields and each inner scheduler's state."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        inner = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, st in zip(self._schedulers, inner):
            s.load_state_dict(st)


class SequentialLR(_Composite):
    """schedulers[i] runs from milestones[i - 1] on (a scheduler starts at its epoch 0 at its milestone), e.g. a
    LinearLR warm-up followed by CosineAnnealingLR."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        _same_optimizer("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.optimizer, self.last_epoch = optimizer, last_epoch + 1
        for group in optimizer.param_groups:         # the schedulers' construction steps undone
            group["lr"] = group["initial_lr"]
        _undo_steps(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self):
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        sch = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            sch._update_lr(0)
        else:
            sch.step()
        self._last_lr = sch.get_last_lr()


class ChainedScheduler(_Composite):
    """Every scheduler steps at each step, one after the other (their factors multiply)."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _same_optimizer("ChainedScheduler", schedulers, optimizer)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = _lrs(self._schedulers[-1].optimizer)

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = _lrs(self._schedulers[-1].optimizer)


class ReduceLROnPlateau(LRScheduler):
    """Cut the learning rates by `factor` when a metric (step(metric)) has not improved for `patience` steps, then
    wait `cooldown` steps; never below min_lr, and not by a change smaller than eps."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * n
        self.optimizer, self.factor, self.patience, self.cooldown, self.eps = optimizer, factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = self.last_epoch = 0
        self._last_lr = _lrs(optimizer)

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        t = self.threshold
        if self.threshold_mode == "rel":
            return a < best * (1 - t) if self.mode == "min" else a > best * (1 + t)
        return a < best - t if self.mode == "min" else a > best + t

    def step(self, metrics, epoch=None):
        current = float(metrics)
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0                 # bad epochs in the cooldown do not count
        if self.num_bad_epochs > self.patience:
            if len(self.min_lrs) != len(self.optimizer.param_groups):
                if self.default_min_lr is None:
                    raise RuntimeError("The number of param groups in the optimizer differs from when "
                                       "ReduceLROnPlateau was made: set its `min_lrs` to one per group.")
                self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(group["lr"] * self.factor, floor)
                if group["lr"] - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = _lrs(self.optimizer)


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the base rate to eta_min over T_i steps, restarting at the base rate; T_i starts at
    T_0 and is multiplied by T_mult at each restart. step(epoch) takes fractional epochs (a step per batch)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for b in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur - self.T_i, self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:           # the restart epoch falls in: T_0 (T_mult**n - 1) / (T_mult - 1) <= epoch
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy: each cycle goes linearly from base_lr up to max_lr over step_size_up
    steps and back over step_size_down, the amplitude scaled per cycle ('triangular2': halved) or per step
    ('exp_range': gamma ** step) or by scale_fn; with cycle_momentum, momentum (or Adam's beta1) the other way."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        n = len(optimizer.param_groups)

        def per_group(name, v):
            if isinstance(v, (list, tuple)):
                if len(v) != n:
                    raise ValueError(f"expected {n} values for {name}, got {len(v)}")
                return list(v)
            return [v] * n
        base_lrs = per_group("base_lr", base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = per_group("max_lr", max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma, self._scale_fn_custom = mode, gamma, scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else "iterations" if mode == "exp_range" else "cycle"
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:        # (kept in the groups, as PyTorch does: the optimizer's state_dict has them)
                for m, b, group in zip(per_group("max_momentum", max_momentum),
                                       per_group("base_momentum", base_momentum), optimizer.param_groups):
                    group["max_momentum"], group["base_momentum"] = m, b
                    self._set_momentum(group, m)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, m):
        if self.use_beta1:
            group["betas"] = (m, *group["betas"][1:])
        else:
            group["momentum"] = m

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return {"triangular": 1.0, "triangular2": 1 / 2.0 ** (x - 1), "exp_range": self.gamma ** x}[self.mode]

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        frac = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        amp = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [b + (m - b) * frac * amp for b, m in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group in self.optimizer.param_groups:
                m, b = group["max_momentum"], group["base_momentum"]
                self._set_momentum(group, m - (m - b) * frac * amp)
        return lrs

    def state_dict(self):
        state = super().state_dict()
        state.pop("_scale_fn_custom", None)         # (a function: not saved, as in PyTorch)
        return state
