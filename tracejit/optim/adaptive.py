"""Adagrad, Adadelta, Adamax, NAdam, RAdam and Rprop: PyTorch's update rules (its single-tensor forms).

Written with tensor ops, so a traced training step compiles them like any other code: what depends on the step
count is computed from the float32 step tensor in the state (as Adam does), and RAdam's choice between its
rectified and its plain step is a `where` on that tensor rather than a Python branch.
"""
from .. import _dtype as D
from ..autograd.grad_mode import no_grad
from ..creation import full_like, tensor, zeros_like
from ..ops import elementwise as E
from .adam import _check_betas
from .optimizer import Optimizer


def _check(**values):
    for name, v in values.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {name}: {v}")


class _Adaptive(Optimizer):
    """The loop every one of them shares: for each parameter with a gradient, its (maximized) gradient with L2
    weight decay added (or, `decoupled_weight_decay`, the parameter shrunk), its state made on first use by
    `_new_state`, and `_update(p, grad, state, group)`."""

    def _new_state(self, p, group):
        raise NotImplementedError

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if group.get("maximize") else p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = tensor(0.0, dtype=D.float32)
                        state.update(self._new_state(p, group))
                    state["step"].add_(1)
                    wd = group.get("weight_decay", 0)
                    if wd != 0:
                        if group.get("decoupled_weight_decay"):
                            p.mul_(1 - group["lr"] * wd)
                        else:
                            grad = grad.add(p, alpha=wd)
                    self._update(p, grad, state, group, state["step"].to(D.float64))
        return loss


class Adagrad(_Adaptive):
    """sum += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps). Its state exists from construction
    on (as PyTorch's: a state_dict saved before the first step has it)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check(**{"learning rate": lr, "lr_decay value": lr_decay, "weight_decay value": weight_decay,
                  "initial_accumulator_value value": initial_accumulator_value, "epsilon value": eps})
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["step"] = tensor(0.0, dtype=D.float32)
                self.state[p].update(self._new_state(p, group))

    def _new_state(self, p, group):
        return {"sum": full_like(p, group["initial_accumulator_value"])}

    def _update(self, p, grad, state, group, step):
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].addcmul_(grad, grad, value=1)
        p.add_((-clr).to(p.dtype) * grad / state["sum"].sqrt().add_(group["eps"]))


class Adadelta(_Adaptive):
    """E[g^2] and E[dx^2] running averages (rho); dx = sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g; p -= lr dx."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _check(**{"learning rate": lr, "epsilon value": eps, "weight_decay value": weight_decay})
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    def _new_state(self, p, group):
        return {"square_avg": zeros_like(p), "acc_delta": zeros_like(p)}

    def _update(self, p, grad, state, group, step):
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        delta = acc_delta.add(eps).sqrt_().div_(square_avg.add(eps).sqrt_()).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-group["lr"])


class Adamax(_Adaptive):
    """Adam with the infinity norm: u = max(beta2 u, |g| + eps); p -= lr / (1 - beta1^t) * m / u."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_betas(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _new_state(self, p, group):
        return {"exp_avg": zeros_like(p), "exp_inf": zeros_like(p)}

    def _update(self, p, grad, state, group, step):
        beta1, beta2 = group["betas"]
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_inf"].copy_(E.maximum(state["exp_inf"].mul_(beta2), grad.abs().add_(group["eps"])))
        clr = group["lr"] / (1 - beta1 ** step)
        p.add_((-clr).to(p.dtype) * state["exp_avg"] / state["exp_inf"])


class NAdam(_Adaptive):
    """Adam with Nesterov momentum and Dozat's momentum schedule mu_t = beta1 (1 - 0.96^(t psi) / 2), psi the
    momentum_decay; the running product of the mu_t is a float32 tensor in the state, as in PyTorch."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_betas(lr, eps, betas, weight_decay)
        _check(**{"momentum_decay value": momentum_decay})
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _new_state(self, p, group):
        return {"mu_product": tensor(1.0, dtype=D.float32), "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    def _update(self, p, grad, state, group, step):
        (beta1, beta2), lr, psi = group["betas"], group["lr"], group["momentum_decay"]
        mu = beta1 * (1 - 0.5 * 0.96 ** (step * psi))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((step + 1) * psi))
        state["mu_product"].mul_(mu.to(D.float32))
        prod = state["mu_product"].to(D.float64)
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (state["exp_avg_sq"] / (1 - beta2 ** step).to(p.dtype)).sqrt().add_(group["eps"])
        p.add_((-lr * (1 - mu) / (1 - prod)).to(p.dtype) * grad / denom)
        p.add_((-lr * mu_next / (1 - prod * mu_next)).to(p.dtype) * state["exp_avg"] / denom)


class RAdam(_Adaptive):
    """Adam with the variance of its adaptive rate rectified: while the approximated SMA length rho_t <= 5 the
    step is plain momentum SGD (lr / (1 - beta1^t) * m), after it Adam's step times the rectification term."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_betas(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def _new_state(self, p, group):
        return {"exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    def _update(self, p, grad, state, group, step):
        (beta1, beta2), lr = group["betas"], group["lr"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bc2 = 1 - beta2 ** step
        m_hat = exp_avg / (1 - beta1 ** step).to(p.dtype)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2 ** step / bc2
        rectify = rho_t > 5
        rho_r = E.where(rectify, rho_t, tensor(rho_inf, dtype=D.float64))      # (no sqrt of a negative)
        rect = ((rho_r - 4) * (rho_r - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_r)).sqrt()
        adaptive = bc2.sqrt().to(p.dtype) / exp_avg_sq.sqrt().add_(group["eps"])
        rectified = m_hat * lr * adaptive * rect.to(p.dtype)
        p.sub_(E.where(rectify, rectified, m_hat * lr))


class Rprop(_Adaptive):
    """Resilient backpropagation: each element's step size grows by etas[1] while its gradient keeps its sign and
    shrinks by etas[0] when it flips (within step_sizes), and the parameter moves by the step size against the
    gradient's sign; after a flip that element's gradient counts as zero (no move, no sign next time)."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        _check(**{"learning rate": lr})
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _new_state(self, p, group):
        return {"prev": zeros_like(p), "step_size": full_like(p, group["lr"])}

    def _update(self, p, grad, state, group, step):
        (etaminus, etaplus), (lo, hi) = group["etas"], group["step_sizes"]
        s = (grad * state["prev"]).sign()
        factor = E.where(s > 0, etaplus, E.where(s < 0, etaminus, 1.0)).to(p.dtype)
        state["step_size"].mul_(factor).clamp_(lo, hi)
        grad = E.where(s < 0, 0.0, grad).to(p.dtype)
        p.addcmul_(grad.sign(), state["step_size"], value=-1)
        state["prev"].copy_(grad)
