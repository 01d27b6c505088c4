"""A custom autograd.Function in both faces.

`ClampGrad` is the identity in the forward pass and clips the gradient in the backward pass (a common
trick against exploding gradients), and `SoftplusFn` writes its own derivative. Eagerly, `.apply` records a
`<Name>Backward` node that calls your `backward`; under `@trace` the same `backward` runs on tracer tensors
while the backward graph is derived, so it becomes ordinary IR nodes of the compiled backward program.

    python examples/custom_function.py
"""
import tracejit as torch


class ClampGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad.clamp(-ctx.bound, ctx.bound), None


class SoftplusFn(torch.autograd.Function):
    """log(1 + exp(x)) with a hand-written derivative sigmoid(x) (saved from the forward)."""

    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(s)
        return torch.log1p(torch.exp(x))

    @staticmethod
    def backward(ctx, grad):
        (s,) = ctx.saved_tensors
        return grad * s


def f(x, w):
    return (SoftplusFn.apply(ClampGrad.apply(x * w, 0.5)) * 3.0).sum()


def main():
    torch.manual_seed(0)
    x = torch.randn(6) * 4
    w = torch.randn(6, requires_grad=True)

    loss = f(x, w)
    print("eager graph: the custom nodes are in the grad_fn chain")
    node, depth = loss.grad_fn, 0
    while node is not None:
        print("  " * depth + node.name())
        nxt = [fn for fn, _ in node.next_functions if fn is not None]
        node, depth = (nxt[0] if nxt else None), depth + 1
    (g_eager,) = torch.autograd.grad(loss, w)

    traced = torch.trace(f)
    loss_t = traced(x, w)
    (g_traced,) = torch.autograd.grad(loss_t, w)
    print("\ntraced: ClampGrad.backward and SoftplusFn.backward became IR nodes of the backward program")
    print(traced.graph(x, w).backward.text("backward"))

    # the reference: the derivative written out, clip included
    with torch.no_grad():
        z = x * w
        expect = (3.0 * torch.sigmoid(z)).clamp(-0.5, 0.5) * x
    print(f"\nloss        eager {loss.item():.6f}  traced {loss_t.item():.6f}")
    print("grad eager  ", [round(v, 5) for v in g_eager.tolist()])
    print("grad traced ", [round(v, 5) for v in g_traced.tolist()])
    ok = torch.allclose(g_eager, expect, atol=1e-6) and torch.allclose(g_traced, expect, atol=1e-6)
    print("both faces match the hand-derived gradient:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
