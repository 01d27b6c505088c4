"""The same function, two graphs: eager mode's dynamic grad_fn chain (built while the code runs) beside
the static IR that @trace captures (forward and the backward derived from it)."""
import tracejit as torch


def f(x, w, b):
    return torch.tanh(x @ w + b).pow(2).mean()


def grad_fn_chain(t):
    """Walk the dynamic graph PyTorch-style, from the loss back to the leaves."""
    lines, seen = [], set()

    def walk(node, depth):
        if node is None or id(node) in seen:
            return
        seen.add(id(node))
        extra = f" (leaf {list(node.variable.shape)})" if node.name() == "AccumulateGrad" else ""
        lines.append("  " * depth + node.name() + extra)
        for fn, _ in node.next_functions:
            walk(fn, depth + 1)
    walk(t.grad_fn, 0)
    return "\n".join(lines)


def main():
    torch.manual_seed(0)
    x = torch.randn(8, 4)
    w = torch.randn(4, 3, requires_grad=True)
    b = torch.zeros(3, requires_grad=True)

    loss = f(x, w, b)
    print("== eager: the dynamic graph (grad_fn chain), rebuilt on every call ==")
    print(grad_fn_chain(loss))

    traced = torch.trace(f)
    loss_t = traced(x, w, b)
    print("\n== traced: the static graph, captured once per input signature ==")
    print(traced.graph(x, w, b).text())
    print(f"\nsame loss: eager {loss.item():.6f}  traced {loss_t.item():.6f}")
    ge = torch.autograd.grad(loss, (w, b))
    gt = torch.autograd.grad(loss_t, (w, b))
    print("same grads:", all(torch.allclose(a, c, atol=1e-6) for a, c in zip(ge, gt)))

    print("\n== what tracing cannot do: branch on a value ==")

    @torch.trace
    def relu_or_neg(x):
        return x if x.sum() > 0 else -x
    try:
        relu_or_neg(x)
    except torch.TraceError as e:
        print(str(e).splitlines()[0][:160])
    print("eagerly the same code just runs:", float((x if x.sum() > 0 else -x).sum()))


if __name__ == "__main__":
    main()
