"""L-BFGS: PyTorch's torch.optim.LBFGS (limited-memory BFGS with an optional strong-Wolfe line search).

Eager only. Each `step(closure)` runs up to max_iter quasi-Newton iterations, calling the closure (which must
zero the gradients, compute the loss, call backward and return the loss) as often as the iterations and the line
search need, and it branches on the values it gets back (the convergence tests, the line search's bracketing). A
traced step bakes Python control flow in at trace time, so such a value-driven loop cannot be traced: call it in
eager mode (the closure may itself call a traced function).

The algorithm is PyTorch's, step for step, so that the parameters after each step equal PyTorch's: the direction
from the two-loop recursion over the last history_size curvature pairs (s, y) (a pair is kept only when
y.s > 1e-10) with the initial Hessian scaled by y.s / y.y; the very first step scaled to min(1, 1 / |g|_1) * lr;
the stops on |g|_inf <= tolerance_grad, a directional derivative > -tolerance_change, a step or a loss change
below tolerance_change, max_iter iterations and max_eval closure calls. The numbers the decisions depend on are
0-d tensors of the parameters' dtype where PyTorch's are, and Python floats where PyTorch's are.
"""
from .. import creation as C
from ..autograd.grad_mode import enable_grad, no_grad
from .._tensor import Tensor
from ..ops import shape_ops as S
from .optimizer import Optimizer


def _cubic_minimizer(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped into `bounds`
    (default: the interval between x1 and x2); the bounds' midpoint when the cubic has no real minimizer."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    a = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = a ** 2 - g1 * g2
    if not disc >= 0:                         # (NaN too)
        return (lo + hi) / 2.0
    b = disc.sqrt() if isinstance(disc, Tensor) else disc ** 0.5
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + b - a) / (g2 - g1 + 2 * b))
    else:
        x = x1 - (x1 - x2) * ((g1 + b - a) / (g1 - g2 + 2 * b))
    return min(max(x, lo), hi)


class _Point:
    """A trial step length t with the loss f, the flat gradient g and the slope gtd = g.d there."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step length along d satisfying the strong Wolfe conditions (sufficient decrease c1, curvature c2), found as
    PyTorch's: grow the step (cubic extrapolation in [t + 0.01 (t - t_prev), 10 t]) until an interval brackets one,
    then shrink the bracket by safeguarded cubic interpolation. `evaluate(t)` -> (loss, flat gradient) at x + t d.
    Returns (loss, gradient, t, closure calls)."""
    d_size = d.abs().max()
    start = _Point(0, f, g.clone(), gtd)
    f_t, g_t = evaluate(t)
    calls, tries = 1, 0
    cur = _Point(t, f_t, g_t, g_t.dot(d))
    prev = start
    bracket, found = None, False
    # phase 1: bracketing
    while tries < max_ls:
        if cur.f > f + c1 * cur.t * gtd or (tries > 1 and cur.f >= prev.f):
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        if abs(cur.gtd) <= -c2 * gtd:
            bracket, found = [cur], True
            break
        if cur.gtd >= 0:
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        t_next = _cubic_minimizer(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd,
                                  bounds=(cur.t + 0.01 * (cur.t - prev.t), cur.t * 10))
        prev = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
        f_t, g_t = evaluate(t_next)
        calls += 1
        cur = _Point(t_next, f_t, g_t, g_t.dot(d))
        tries += 1
    if tries == max_ls:                        # out of evaluations: choose between the start and the last trial
        bracket = [_Point(0, f, g, None), _Point(cur.t, cur.f, cur.g, None)]
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    # phase 2: zoom into the bracket
    stalled = False
    while not found and tries < max_ls:
        a, b = bracket[0], bracket[1]
        if abs(b.t - a.t) * d_size < tolerance_change:
            break
        t = _cubic_minimizer(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        top, bottom = max(a.t, b.t), min(a.t, b.t)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:  # too near an end: move it inside unless the last one was fine
            if stalled or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_t, g_t = evaluate(t)
        calls += 1
        tries += 1
        new = _Point(t, f_t, g_t.clone(), g_t.dot(d))
        if new.f > f + c1 * t * gtd or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(new.gtd) <= -c2 * gtd:
                found = True
            elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = new
    best = bracket[low]
    return best.f, best.g, best.t, calls


class LBFGS(Optimizer):
    """PyTorch's L-BFGS: `step(closure)` minimizes the closure's loss by up to max_iter quasi-Newton iterations
    (at most max_eval closure calls, default max_iter * 5 // 4), with the step length lr or, for
    line_search_fn='strong_wolfe', found by a strong-Wolfe line search. One parameter group only; the state
    (history, last direction and step, iteration and evaluation counts) is kept under the first parameter, as
    PyTorch's, so state_dict and load_state_dict carry it.

    Eager only: the iterations branch on the loss and gradient values (see the module docstring)."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups): give one list of "
                             "parameters")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        """All the parameters' gradients as one new vector (zeros for a parameter without one)."""
        parts = [C.zeros(p.numel(), dtype=p.dtype, device=p.device) if p.grad is None else S.reshape(p.grad, (-1,))
                 for p in self._params]
        return S.cat(parts, 0)

    def _move(self, t, d):
        """x += t * d, d split over the parameters in their order."""
        at = 0
        for p in self._params:
            n = p.numel()
            p.add_(S.reshape(d[at:at + n], tuple(p.shape)), alpha=t)
            at += n

    def _evaluate_at(self, closure, t, d):
        """(loss, flat gradient) at x + t d; the parameters are put back to x afterwards."""
        saved = [p.clone() for p in self._params]
        self._move(t, d)
        with enable_grad():
            loss = float(closure())
        g = self._flat_grad()
        for p, v in zip(self._params, saved):
            p.copy_(v)
        return loss, g

    def step(self, closure):
        """Runs the iterations; returns the loss of the closure's first call (at the parameters given)."""
        with no_grad():
            return self._step(closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr = float(group["lr"]) if isinstance(group["lr"], Tensor) else group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search, history = group["line_search_fn"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            first_loss = closure()
        loss = float(first_loss)
        evals = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if g.abs().max() <= tol_grad:                         # already optimal
            return first_loss

        d, t = state.get("d"), state.get("t")
        dirs, steps, rho = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h0, g_prev, loss_prev = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")

        it = 0
        while it < max_iter:
            it += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:                          # steepest descent, an empty history
                d = g.neg()
                dirs, steps, rho, h0 = [], [], [], 1
            else:
                y = g.sub(g_prev)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:                                # keep only pairs of positive curvature
                    if len(dirs) == history:
                        dirs.pop(0), steps.pop(0), rho.pop(0)
                    dirs.append(y)
                    steps.append(s)
                    rho.append(1.0 / ys)
                    h0 = ys / y.dot(y)
                d = self._two_loop(state, g, dirs, steps, rho, h0, history)
            if g_prev is None:
                g_prev = g.clone()
            else:
                g_prev.copy_(g)
            loss_prev = loss
            t = min(1.0, 1.0 / g.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = g.dot(d)
            if gtd > -tol_change:                             # not a descent direction (to tolerance)
                break

            used = 0
            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError(f"only 'strong_wolfe' is supported as line_search_fn, got {line_search!r}")
                loss, g, t, used = _strong_wolfe(lambda step: self._evaluate_at(closure, step, d), t, d, loss, g,
                                                 gtd, max_ls=max_eval - evals)
                self._move(t, d)
                optimal = g.abs().max() <= tol_grad
            else:
                self._move(t, d)
                optimal = False
                if it != max_iter:                            # the last iteration's loss is the next step's
                    with enable_grad():
                        loss = float(closure())
                    g = self._flat_grad()
                    optimal = g.abs().max() <= tol_grad
                    used = 1
            evals += used
            state["func_evals"] += used

            if it == max_iter or evals >= max_eval or optimal:
                break
            if d.mul(t).abs().max() <= tol_change or abs(loss - loss_prev) < tol_change:
                break

        state.update(d=d, t=t, old_dirs=dirs, old_stps=steps, ro=rho, H_diag=h0, prev_flat_grad=g_prev,
                     prev_loss=loss_prev)
        return first_loss

    @staticmethod
    def _two_loop(state, g, dirs, steps, rho, h0, history):
        """-H g for the L-BFGS inverse Hessian H of the pairs (steps[i], dirs[i]) over the initial h0 * I."""
        if "al" not in state:
            state["al"] = [None] * history
        alpha = state["al"]
        q = g.neg()
        for i in reversed(range(len(dirs))):
            alpha[i] = steps[i].dot(q) * rho[i]
            q.add_(dirs[i], alpha=-alpha[i])
        r = q.mul(h0)
        for i in range(len(dirs)):
            beta = dirs[i].dot(r) * rho[i]
            r.add_(steps[i], alpha=alpha[i] - beta)
        return r
