"""Higher-order gradients (grad of grad), eagerly and through a traced function.

Eager: `autograd.grad(..., create_graph=True)` records the backward itself as a graph, so it can be
differentiated again. Traced: the output of a `@trace` function carries `CompiledFunctionBackward`; with
`create_graph=True` it replays the function's joint graph eagerly, so its gradient is differentiable too
(torch.compile refuses this). And a traced function may itself take a gradient inside: its first
derivative is then part of the static graph.

    python examples/higher_order_grads.py
"""
import tracejit as torch


def f(x):
    return torch.sin(x) * x ** 3


def derivatives_exact(x):
    """f', f'' written out by hand, to check both faces."""
    s, c = torch.sin(x), torch.cos(x)
    d1 = c * x ** 3 + 3 * s * x ** 2
    d2 = -s * x ** 3 + 6 * c * x ** 2 + 6 * s * x
    return d1, d2


def grads(fn, x):
    y = fn(x).sum()
    (d1,) = torch.autograd.grad(y, x, create_graph=True)      # d1 is differentiable
    (d2,) = torch.autograd.grad(d1.sum(), x)                 # elementwise f'' (f is elementwise)
    return d1.detach(), d2


@torch.trace
def first_derivative(x):
    """A traced function that differentiates inside: f' is part of the static graph."""
    (d1,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    return d1


def main():
    x = torch.linspace(-2, 2, 5, requires_grad=True)
    e1, e2 = derivatives_exact(x.detach())
    print("x                ", [round(v, 4) for v in x.tolist()])
    print("f''(x) exact     ", [round(v, 4) for v in e2.tolist()])

    d1, d2 = grads(f, x)
    print("f''(x) eager     ", [round(v, 4) for v in d2.tolist()])

    traced_f = torch.trace(f)
    t1, t2 = grads(traced_f, x)
    print("f''(x) traced    ", [round(v, 4) for v in t2.tolist()])

    d1_static = first_derivative(x)
    (s2,) = torch.autograd.grad(d1_static.sum(), x)
    print("f''(x) grad of a traced f'", [round(v, 4) for v in s2.tolist()])
    print("\nthe traced f' graph (forward: f' itself; backward: the derivative of f', i.e. f''):")
    print(first_derivative.graph(x).text())

    ok = all(torch.allclose(a, e1, rtol=1e-4, atol=1e-5) for a in (d1, t1, d1_static.detach())) and \
        all(torch.allclose(b, e2, rtol=1e-4, atol=1e-4) for b in (d2, t2, s2))
    print("\nall faces agree with the exact derivatives:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
