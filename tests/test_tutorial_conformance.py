"""PyTorch-tutorial-style snippets run with `torch` bound to tracejit and to PyTorch: they must print the same.

(Object addresses are masked and the library's name is read as `torch`; nothing else is normalized.)
"""
import contextlib
import io
import re
import textwrap

import pytest

import tracejit

SNIPPETS = {
    "autograd_basics": """
        x = torch.ones(2, 2, requires_grad=True)
        print(x)
        y = x + 2
        print(y)
        print(y.grad_fn)
        z = y * y * 3
        out = z.mean()
        print(z, out)
        out.backward()
        print(x.grad)
        print(x.requires_grad, (x ** 2).requires_grad, y.is_leaf, x.is_leaf)
        with torch.no_grad():
            print((x ** 2).requires_grad)
        print(x.detach().requires_grad, x.detach().is_leaf)
    """,
    "computational_graph": """
        a = torch.tensor([2., 3.], requires_grad=True)
        b = torch.tensor([6., 4.], requires_grad=True)
        Q = 3 * a ** 3 - b ** 2
        print(type(Q.grad_fn).__name__)
        fn, depth = Q.grad_fn, 0
        def walk(fn, depth):
            print("  " * depth + (type(fn).__name__ if fn is not None else "None"))
            for nxt, nr in (fn.next_functions if fn is not None else ()):
                walk(nxt, depth + 1)
        walk(Q.grad_fn, 0)
        Q.backward(gradient=torch.tensor([1., 1.]))
        print(9 * a ** 2 == a.grad)
        print(-2 * b == b.grad)
        print(a.grad, b.grad)
    """,
    "custom_function": """
        class LegendrePolynomial3(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input):
                ctx.save_for_backward(input)
                return 0.5 * (5 * input ** 3 - 3 * input)

            @staticmethod
            def backward(ctx, grad_output):
                input, = ctx.saved_tensors
                return grad_output * 1.5 * (5 * input ** 2 - 1)

        x = torch.linspace(-1, 1, 5)
        a = torch.tensor(0.5, requires_grad=True)
        y = LegendrePolynomial3.apply(a * x)
        print(type(y.grad_fn).__name__, y.grad_fn.name())
        print([type(f).__name__ for f, _ in y.grad_fn.next_functions])
        loss = (y - x).pow(2).sum()
        loss.backward()
        print(round(loss.item(), 4), round(a.grad.item(), 4))
    """,
    "hooks": """
        x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        h = y.register_hook(lambda g: print("tensor hook", g) or g * 2)
        y.grad_fn.register_prehook(lambda go: print("prehook", type(go).__name__, len(go)))
        y.grad_fn.register_hook(lambda gi, go: print("node hook", len(gi), gi[1], len(go)))
        y.grad_fn.metadata["note"] = "scaled"
        z = y.sum()
        z.backward()
        print(x.grad, y.grad, y.grad_fn.metadata)
        h.remove()
    """,
    "grad_modes": """
        x = torch.ones(3, requires_grad=True)
        with torch.no_grad():
            y = x * 2
        print(y.requires_grad, torch.is_grad_enabled())
        with torch.inference_mode():
            z = x * 2
            print(torch.is_inference_mode_enabled(), z.requires_grad, z.is_inference())
        print(z.is_inference(), y.is_inference())
        try:
            z.add_(1)
        except RuntimeError as e:
            print("RuntimeError:", str(e).split(".")[0])
        torch.set_grad_enabled(False)
        print((x * 2).requires_grad)
        torch.set_grad_enabled(True)
        @torch.no_grad()
        def f(t):
            return t * 2
        print(f(x).requires_grad, (x * 2).requires_grad)
        print(torch.is_anomaly_enabled())
    """,
    "module_save_load": """
        import io
        from collections import OrderedDict
        model = torch.nn.Sequential(OrderedDict([("fc1", torch.nn.Linear(3, 4)), ("act", torch.nn.ReLU()),
                                                 ("fc2", torch.nn.Linear(4, 2))]))
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.linspace(-1, 1, p.numel()).reshape(p.shape))
        print(model)
        print(list(model.state_dict().keys()))
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        buf.seek(0)
        fresh = torch.nn.Sequential(OrderedDict([("fc1", torch.nn.Linear(3, 4)), ("act", torch.nn.ReLU()),
                                                 ("fc2", torch.nn.Linear(4, 2))]))
        print(fresh.load_state_dict(torch.load(buf)))
        x = torch.linspace(0, 1, 6).reshape(2, 3)
        with torch.no_grad():       # (a linear layer's node is AddBackward0 here, AddmmBackward0 in PyTorch)
            print(fresh(x))
        print(torch.equal(fresh(x), model(x)))
        buf = io.BytesIO()
        torch.save(model, buf)
        buf.seek(0)
        try:
            torch.load(buf)
        except Exception as e:
            print(type(e).__name__, "Weights only load failed" in str(e))
        buf.seek(0)
        whole = torch.load(buf, weights_only=False)
        print(type(whole).__name__, torch.equal(whole(x), model(x)))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model(x).sum().backward()
        opt.step()
        buf = io.BytesIO()
        torch.save({"epoch": 3, "model": model.state_dict(), "opt": opt.state_dict()}, buf)
        buf.seek(0)
        ck = torch.load(buf)
        print(ck["epoch"], sorted(ck["opt"]), ck["opt"]["param_groups"][0]["lr"])
        print(ck["model"]["fc2.bias"])
    """,
}


def _run(lib, code):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(textwrap.dedent(code), {"torch": lib, "__name__": "snippet"})
    text = out.getvalue().replace(lib.__name__, "torch")
    return re.sub(r"0x[0-9a-f]+", "0xADDR", text)


@pytest.mark.parametrize("name", list(SNIPPETS))
def test_prints_as_torch(name):
    torch = pytest.importorskip("torch")
    assert _run(tracejit, SNIPPETS[name]) == _run(torch, SNIPPETS[name])
