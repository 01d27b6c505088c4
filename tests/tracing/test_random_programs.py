"""A seeded generator of random programs (pointwise ops with broadcasting, reductions, reshapes/transposes,
matmuls), each run eagerly and traced; values and gradients must agree. On failure the program is printed
as Python source. Every backend plugs in through the `backend` fixture."""
import numpy as np
import pytest

import tracejit as torch
import tracejit.nn.functional  # noqa: F401

UNARY = ["torch.tanh({})", "torch.sigmoid({})", "torch.relu({})", "torch.exp(-({}).abs())", "({}).sin()",
         "torch.nn.functional.gelu({})", "({}) * ({})", "torch.log1p(({}).abs())", "({}).clamp(-0.5, 0.5)",
         "torch.nn.functional.softplus({})", "torch.where(({}) > 0, {}, 0.1 * ({}))"]
BINARY = ["{} + {}", "{} * {}", "{} - {}", "torch.maximum({}, {})", "{} / (1.5 + ({}).abs())"]


class Program:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.lines = []
        self.vals = {}      # name -> shape
        self.inputs = []

    def new(self, shape):
        name = f"v{len(self.vals)}"
        self.vals[name] = tuple(shape)
        return name

    def pick(self):
        return self.rng.choice(list(self.vals))

    def emit(self, expr, shape):
        name = self.new(shape)
        self.lines.append(f"    {name} = {expr}")
        return name

    def build(self, n_ops=8, weights=(0.35, 0.3, 0.12, 0.13, 0.1)):
        r = self.rng
        base = tuple(int(s) for s in r.integers(2, 5, size=int(r.integers(1, 4))))
        for i in range(3):
            shape = tuple(s if r.random() < 0.7 else 1 for s in base)[int(r.integers(0, len(base))):]
            name = self.new(shape)
            self.inputs.append(name)
        for _ in range(n_ops):
            kind = r.choice(["unary", "binary", "reduce", "reshape", "matmul"], p=list(weights))
            a = self.pick()
            sa = self.vals[a]
            if kind == "unary":
                t = r.choice(UNARY)
                self.emit(t.format(*([a] * t.count("{}"))), sa)
            elif kind == "binary":
                b = self.pick()
                try:
                    shape = np.broadcast_shapes(sa, self.vals[b])
                except ValueError:
                    continue
                self.emit(r.choice(BINARY).format(a, b), shape)
            elif kind == "reduce" and len(sa) >= 1:
                d = int(r.integers(0, len(sa))) if r.random() < 0.5 else len(sa) - 1   # the last dim: row kernels
                keep = bool(r.random() < 0.5)
                fn = r.choice(["sum", "mean", "amax", "amin", "logsumexp", "var", "softmax", "log_softmax"])
                shape = tuple(1 if i == d else s for i, s in enumerate(sa)) if keep else sa[:d] + sa[d + 1:]
                if fn in ("softmax", "log_softmax"):
                    self.emit(f"torch.{fn}({a}, {d})", sa)
                else:
                    self.emit(f"torch.{fn}({a}, {d}, keepdim={keep})", shape)
            elif kind == "reshape" and len(sa) >= 2:
                if r.random() < 0.5:
                    self.emit(f"({a}).transpose(0, -1)", (sa[-1],) + sa[1:-1] + (sa[0],))
                else:
                    self.emit(f"({a}).reshape(-1)", (int(np.prod(sa)),))
            elif kind == "matmul" and len(sa) >= 1:
                k = sa[-1]
                m = int(r.integers(2, 4))
                w = self.emit(f"torch.ones({k}, {m}, dtype=torch.float64) * 0.3", (k, m))
                self.emit(f"{a} @ {w}", sa[:-1] + (m,))
        outs = [n for n in list(self.vals)[-2:]]
        self.lines.append(f"    return ({outs[0]}).sum() + ({outs[1]}).mean()")
        self.src = f"def program({', '.join(self.inputs)}):\n" + "\n".join(self.lines)
        ns = {"torch": torch}
        exec(self.src, ns)
        return ns["program"]


@pytest.mark.parametrize("seed", range(40))
def test_random_program_traced_equals_eager(seed, backend):
    _check(Program(seed), backend, seed)


@pytest.mark.parametrize("seed", range(100, 125))
def test_random_reduction_heavy_program_traced_equals_eager(seed, backend):
    _check(Program(seed), backend, seed, weights=(0.3, 0.25, 0.35, 0.05, 0.05))


def _check(prog, backend, seed, **kw):
    fn = prog.build(**kw)
    rng = np.random.default_rng(seed + 1000)
    arrays = [rng.standard_normal(prog.vals[n]) for n in prog.inputs]
    xe = [torch.tensor(a, requires_grad=True) for a in arrays]
    xt = [torch.tensor(a, requires_grad=True) for a in arrays]
    try:
        le = fn(*xe)
        tf = torch.trace(fn, backend=backend)
        lt = tf(*xt)
        assert lt.dtype == le.dtype and lt.requires_grad == le.requires_grad
        np.testing.assert_allclose(lt.item(), le.item(), rtol=1e-6, atol=1e-6)
        if not le.requires_grad:     # the program's result does not depend on its inputs
            return
        ge = torch.autograd.grad(le, xe, allow_unused=True)
        gt = torch.autograd.grad(lt, xt, allow_unused=True)
        for a, b in zip(ge, gt):
            if a is None:
                assert b is None or np.allclose(b.numpy(), 0)
            else:
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-6)
    except Exception:
        print(f"# failing program (seed {seed}, backend {backend}):\n{prog.src}")
        raise
