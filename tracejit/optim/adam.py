"""Adam and AdamW (AdamW is Adam with decoupled weight decay, as in PyTorch 2.x), with amsgrad.

The step count is a float32 tensor in the state (as in PyTorch) and the bias corrections are computed from
it with tensor ops in float64, so a traced step computes the right corrections on every call.
"""
from ..autograd.grad_mode import no_grad
from ..creation import tensor, zeros_like
from .. import _dtype as D
from ..ops import elementwise as E
from .optimizer import Optimizer


def _check_betas(lr, eps, betas, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check_betas(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _init_state(self, p, amsgrad):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = tensor(0.0, dtype=D.float32)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def step(self, closure=None):
        loss = self._closure(closure)
        if self._fused_eager():
            return loss
        with no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                lr, eps, wd, amsgrad = group["lr"], group["eps"], group["weight_decay"], group["amsgrad"]
                decoupled = group.get("decoupled_weight_decay", False)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad if not group["maximize"] else -p.grad
                    state = self._init_state(p, amsgrad)
                    exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
                    step_t.add_(1)
                    if wd != 0:
                        if decoupled:
                            p.mul_(1 - lr * wd)
                        else:
                            grad = grad.add(p, alpha=wd)
                    exp_avg.lerp_(grad, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    step = step_t.to(D.float64)
                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
                    step_size = lr / bias_correction1
                    if amsgrad:
                        state["max_exp_avg_sq"].copy_(E.maximum(state["max_exp_avg_sq"], exp_avg_sq))
                        denom = (state["max_exp_avg_sq"].sqrt() / bias_correction2_sqrt).add_(eps)
                    else:
                        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                    # p += -step_size * exp_avg / denom  (addcdiv's order of operations)
                    p.add_((-step_size).to(p.dtype) * exp_avg / denom)
        return loss


    def _fused_eager(self):
        """Eagerly, on CPU arrays: each parameter's update in one kernel (kernels/cpu/optim.py). Traced, the
        ops below are fused by the compiler instead; amsgrad and differentiable steps take the ops too."""
        from .._state import STATE
        if STATE.tracer is not None:
            return False
        todo = []
        for group in self.param_groups:
            if group["amsgrad"] or group["differentiable"]:
                return False
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                state = self._init_state(p, False)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                # the kernel writes through flat views: every array must be one (loaded state may not be)
                if g._requires_grad or not all(_plain(t._data) and t._data.dtype == p._data.dtype
                                               for t in (p, g, m, v)):
                    return False
                todo.append((group, p, g, m, v, state["step"]))
        from tracejit.kernels.cpu.optim import adam_update
        for group, p, g, m, v, step_t in todo:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            step_t._data += 1
            step_t._version.v += 1
            step = float(step_t._data)
            decoupled = group.get("decoupled_weight_decay", False)
            adam_update(p._data.reshape(-1), g._data.reshape(-1), m._data.reshape(-1), v._data.reshape(-1),
                        -(lr / (1 - beta1 ** step)), (1 - beta2 ** step) ** 0.5, eps, 1 - beta1, beta2, 1 - beta2,
                        1 - lr * wd if decoupled else 1.0, 0.0 if decoupled else float(wd), bool(group["maximize"]))
            for t in (p, m, v):
                t._version.v += 1
        return True


def _plain(a):
    """An array the fused update kernels take: a writeable C-contiguous numpy float32/float64 array (float16 and
    device arrays take the ops)."""
    import numpy as np
    return type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable and a.dtype in (np.float32,
                                                                                                 np.float64)


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
