"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (PyTorch's update rule)."""
from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, required


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure(closure)
        if self._fused_eager():
            return loss
        with no_grad():
            for group in self.param_groups:
                lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
                weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad if not maximize else -p.grad
                    if weight_decay != 0:
                        grad = grad.add(p, alpha=weight_decay)
                    if momentum != 0:
                        state = self.state[p]
                        buf = state.get("momentum_buffer")
                        if buf is None:
                            buf = grad.detach().clone()
                            state["momentum_buffer"] = buf
                        else:
                            buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                        grad = grad.add(buf, alpha=momentum) if nesterov else buf
                    p.add_(grad, alpha=-lr)
        return loss

    def _fused_eager(self):
        """Eagerly, on CPU arrays: each parameter's update in one kernel (kernels/cpu/optim.py: ~4 numpy passes
        with temporaries before). Traced, the ops of `step` are fused by the compiler instead; differentiable
        steps take them too."""
        from .._state import STATE
        from ..creation import zeros_like
        from .adam import _plain
        if STATE.tracer is not None:
            return False
        todo = []
        for group in self.param_groups:
            if group["differentiable"]:
                return False
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                buf = self.state[p].get("momentum_buffer") if group["momentum"] != 0 else None
                if g._requires_grad or not all(_plain(t._data) and t._data.dtype == p._data.dtype
                                               for t in (p, g) + ((buf,) if buf is not None else ())):
                    return False
                todo.append((group, p, g, buf))
        from tracejit.kernels.cpu.optim import sgd_update
        for group, p, g, buf in todo:
            momentum = group["momentum"]
            first = momentum != 0 and buf is None
            if first:
                buf = self.state[p]["momentum_buffer"] = zeros_like(p)
            sgd_update(p._data.reshape(-1), g._data.reshape(-1), (buf if buf is not None else p)._data.reshape(-1),
                       float(group["lr"]), float(momentum), float(group["dampening"]), float(group["weight_decay"]),
                       bool(group["nesterov"]), bool(group["maximize"]), first)
            for t in (p, buf) if buf is not None else (p,):
                t._version.v += 1
        return True
