"""tracejit.func (torch.func) against PyTorch's on the same inputs: grad, grad_and_value, vjp, jvp, jacrev,
jacfwd, hessian, vmap, functional_call, stack_module_state; PyTorch's per-sample-gradients and model-ensembling
recipes; gradients through the transforms; their errors; and the transforms inside tracejit.trace."""
import copy

import numpy as np
import pytest

import tracejit as tj
import tracejit.nn.functional as F

torch = pytest.importorskip("torch")
tfunc = torch.func
jfunc = tj.func


def both(*arrays, requires_grad=False):
    """Each array as a (tracejit, torch) pair of float64 tensors."""
    out = []
    for a in arrays:
        a = np.asarray(a, dtype=np.float64)
        out.append((tj.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)))
    return out


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def assert_close(ours, theirs, atol=1e-6):
    """Two pytrees of the same structure with the same numbers (tensors) and the same other leaves."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tj.Tensor), type(ours)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.requires_grad == theirs.requires_grad
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6, atol=atol)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs)
        for k in theirs:
            assert_close(ours[k], theirs[k], atol)
    elif isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_close(a, b, atol)
    else:
        assert ours == theirs


def same_error(ours, theirs, upto=None):
    """Both calls raise the same exception type with the same message (up to the word `upto` if given: PyTorch
    spells pytree structures as its TreeSpec objects)."""
    with pytest.raises(Exception) as theirs_info:
        theirs()
    with pytest.raises(type(theirs_info.value)) as ours_info:
        ours()
    message = str(theirs_info.value).replace("torch.Size", "tracejit.Size")
    end = message.find(upto) if upto and upto in message else None
    assert str(ours_info.value)[:end] == message[:end]


def run_both(make):
    """make(lib, func_module) for tracejit and for torch."""
    return make(tj, jfunc), make(torch, tfunc)


# ------------------------------------------------------------------------------------------------ grad
def test_grad_values_argnums_pytrees_and_aux():
    (x, tx), (y, ty) = both(rand(3), rand(3, seed=1))

    def f(lib, a, b):
        return (lib.sin(a) * b ** 2).sum()

    for argnums in (0, 1, (0, 1), (1, 0), -1):
        assert_close(jfunc.grad(lambda a, b: f(tj, a, b), argnums)(x, y),
                     tfunc.grad(lambda a, b: f(torch, a, b), argnums)(tx, ty))
    assert_close(jfunc.grad(lambda d: f(tj, d["a"], d["b"][0]))({"a": x, "b": [y]}),
                 tfunc.grad(lambda d: f(torch, d["a"], d["b"][0]))({"a": tx, "b": [ty]}))
    ours = jfunc.grad_and_value(lambda a: (f(tj, a, y), {"aux": [a * 2]}), has_aux=True)(x)
    theirs = tfunc.grad_and_value(lambda a: (f(torch, a, ty), {"aux": [a * 2]}), has_aux=True)(tx)
    assert_close(ours, theirs)
    assert_close(jfunc.grad(lambda a: (f(tj, a, y), a.cos()), has_aux=True)(x),
                 tfunc.grad(lambda a: (f(torch, a, ty), a.cos()), has_aux=True)(tx))
    # unused argument and a constant output: zeros, as in PyTorch
    assert_close(jfunc.grad(lambda a, b: b.sum())(x, y), tfunc.grad(lambda a, b: b.sum())(tx, ty))
    assert_close(jfunc.grad(lambda a: tj.tensor(1.0))(x), tfunc.grad(lambda a: torch.tensor(1.0))(tx))


def test_grad_composes_and_is_differentiable_outside():
    (x, tx), = both(rand(4), requires_grad=True)
    # grad of grad of a scalar function of a scalar, and of a closure over the same tensor (no confusion)
    s, ts = both(0.7)[0]
    assert_close(jfunc.grad(jfunc.grad(lambda a: a ** 3 * a.sin()))(s),
                 tfunc.grad(tfunc.grad(lambda a: a ** 3 * a.sin()))(ts))
    assert_close(jfunc.grad(lambda a: jfunc.grad(lambda b: (a * b).sum())(a).sum() * a.sum())(x.detach()),
                 tfunc.grad(lambda a: tfunc.grad(lambda b: (a * b).sum())(a).sum() * a.sum())(tx.detach()))
    # gradients through the result: backward outside reaches the argument
    g, tg = jfunc.grad(lambda a: (a ** 3 * a.sin()).sum())(x), tfunc.grad(lambda a: (a ** 3 * a.sin()).sum())(tx)
    assert_close(g, tg)
    (g * g).sum().backward()
    (tg * tg).sum().backward()
    assert_close(x.grad, tx.grad)


@pytest.mark.parametrize("case", ["nonscalar", "nontensor", "aux", "aux_type", "argnum", "argtype", "empty", "dup",
                                  "float_arg", "int_tensor"])
def test_grad_errors_as_torch(case):
    calls = {
        "nonscalar": lambda fm, lib: fm.grad(lambda a: a * 2)(lib.ones(3)),
        "nontensor": lambda fm, lib: fm.grad(lambda a: 1.0)(lib.ones(3)),
        "aux": lambda fm, lib: fm.grad(lambda a: a.sum(), has_aux=True)(lib.ones(3)),
        "aux_type": lambda fm, lib: fm.grad(lambda a: (a.sum(), {"n": 3}), has_aux=True)(lib.ones(3)),
        "argnum": lambda fm, lib: fm.grad(lambda a: a.sum(), argnums=2)(lib.ones(3)),
        "argtype": lambda fm, lib: fm.grad(lambda a: a.sum(), argnums=1.0)(lib.ones(3)),
        "empty": lambda fm, lib: fm.grad(lambda a: a.sum(), argnums=())(lib.ones(3)),
        "dup": lambda fm, lib: fm.grad(lambda a, b: a.sum(), argnums=(0, 0))(lib.ones(3), lib.ones(3)),
        "float_arg": lambda fm, lib: fm.grad(lambda a: a * 2.0)(2.0),
        "int_tensor": lambda fm, lib: fm.grad(lambda a: (a * 2).sum())(lib.arange(3)),
    }
    same_error(lambda: calls[case](jfunc, tj), lambda: calls[case](tfunc, torch))


# ------------------------------------------------------------------------------------------------ vjp / jvp
def test_vjp_pytrees_aux_and_repeated_calls():
    (x, tx), (y, ty), (c, tc) = both(rand(2, 3), rand(3), rand(2, 3, seed=2))

    def f(lib, a, d):
        return {"p": lib.tanh(a) * d["y"], "q": (a @ d["y"]).exp()}, a.sum()

    ours_out, ours_fn, ours_aux = jfunc.vjp(lambda a, d: f(tj, a, d), x, {"y": y}, has_aux=True)
    th_out, th_fn, th_aux = tfunc.vjp(lambda a, d: f(torch, a, d), tx, {"y": ty}, has_aux=True)
    assert_close((ours_out, ours_aux), (th_out, th_aux))
    for scale in (1.0, 2.0):        # vjp_fn can be called again
        ct = {"p": c * scale, "q": tj.ones(2)}
        assert_close(ours_fn(ct), th_fn({"p": tc * scale, "q": torch.ones(2)}))
    same_error(lambda: ours_fn(c), lambda: th_fn(tc))
    _, ours_fn = jfunc.vjp(lambda a: a * 2, x)
    _, th_fn = tfunc.vjp(lambda a: a * 2, tx)
    same_error(lambda: ours_fn(tj.ones(3)), lambda: th_fn(torch.ones(3)))
    same_error(lambda: jfunc.vjp(lambda a: 1.0, x), lambda: tfunc.vjp(lambda a: 1.0, tx))
    same_error(lambda: jfunc.vjp(lambda a: a, x, has_aux=True), lambda: tfunc.vjp(lambda a: a, tx, has_aux=True))


def test_jvp_values_and_gradients_through():
    (x, tx), (y, ty), (u, tu), (v, tv) = both(rand(3), rand(3, seed=1), rand(3, seed=2), rand(3, seed=3))

    def f(lib, a, b):
        return lib.sin(a) * b, (a * b).sum() ** 2

    assert_close(jfunc.jvp(lambda a, b: f(tj, a, b), (x, y), (u, v)),
                 tfunc.jvp(lambda a, b: f(torch, a, b), (tx, ty), (tu, tv)))
    assert_close(jfunc.jvp(lambda a: (a.exp(), a.sum()), (x,), (u,), has_aux=True),
                 tfunc.jvp(lambda a: (a.exp(), a.sum()), (tx,), (tu,), has_aux=True))
    assert_close(jfunc.jvp(lambda a: a * 2, (x,), (u,)), tfunc.jvp(lambda a: a * 2, (tx,), (tu,)))
    assert_close(jfunc.jvp(lambda a: y.sin(), (x,), (u,)), tfunc.jvp(lambda a: ty.sin(), (tx,), (tu,)))
    # differentiable in the primal and the tangent from outside
    (xr, txr), (ur, tur) = both(rand(3), rand(3, seed=2), requires_grad=True)
    out = jfunc.jvp(lambda a: (a.sin() * a).sum(), (xr,), (ur,))[1]
    tout = tfunc.jvp(lambda a: (a.sin() * a).sum(), (txr,), (tur,))[1]
    out.backward()
    tout.backward()
    assert_close((xr.grad, ur.grad), (txr.grad, tur.grad))
    same_error(lambda: jfunc.jvp(lambda a: a, x, u), lambda: tfunc.jvp(lambda a: a, tx, tu))
    same_error(lambda: jfunc.jvp(lambda a: a, (x,), (tj.ones(2),)),
               lambda: tfunc.jvp(lambda a: a, (tx,), (torch.ones(2),)))
    same_error(lambda: jfunc.jvp(lambda a: a, (1.0,), (1.0,)), lambda: tfunc.jvp(lambda a: a, (1.0,), (1.0,)))
    same_error(lambda: jfunc.jvp(lambda a: 1.0, (x,), (u,)), lambda: tfunc.jvp(lambda a: 1.0, (tx,), (tu,)))


# ------------------------------------------------------------------------------------------------ jacobians
@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians_pytrees_and_argnums(jac):
    (x, tx), (y, ty) = both(rand(3), rand(2, 3, seed=1))

    def f(lib, d, b):
        return {"a": lib.sin(d["x"]) * b, "b": (d["x"] ** 2).sum()}

    for argnums in (0, 1, (0, 1)):
        assert_close(getattr(jfunc, jac)(lambda d, b: f(tj, d, b), argnums)({"x": x}, y),
                     getattr(tfunc, jac)(lambda d, b: f(torch, d, b), argnums)({"x": tx}, ty))
    assert_close(getattr(jfunc, jac)(lambda a: (a.exp(), a.sum()), has_aux=True)(x),
                 getattr(tfunc, jac)(lambda a: (a.exp(), a.sum()), has_aux=True)(tx))
    assert_close(getattr(jfunc, jac)(lambda a: a[:0])(x), getattr(tfunc, jac)(lambda a: a[:0])(tx))


def test_hessian_and_jacobian_gradients():
    (x, tx), (y, ty) = both(rand(3), rand(3, seed=1))

    def f(lib, a, b):
        return (lib.sin(a) * b * b * a).sum()

    assert_close(jfunc.hessian(lambda a: f(tj, a, y))(x), tfunc.hessian(lambda a: f(torch, a, ty))(tx))
    assert_close(jfunc.hessian(lambda a, b: f(tj, a, b), argnums=(0, 1))(x, y),
                 tfunc.hessian(lambda a, b: f(torch, a, b), argnums=(0, 1))(tx, ty))
    (xr, txr), = both(rand(3), requires_grad=True)
    jfunc.jacrev(lambda a: a.sin() * a.sum())(xr).pow(2).sum().backward()
    tfunc.jacrev(lambda a: a.sin() * a.sum())(txr).pow(2).sum().backward()
    assert_close(xr.grad, txr.grad)


# ------------------------------------------------------------------------------------------------ vmap
def test_vmap_in_dims_out_dims_nested_and_kwargs():
    (a, ta), (b, tb), (m, tm) = both(rand(4, 3), rand(3, 5), rand(2, 3, 4))

    def cases(lib, fm):
        return [
            fm.vmap(lib.mul)(a if lib is tj else ta, a if lib is tj else ta),
            fm.vmap(lambda r, w: r @ w, in_dims=(0, None))(*((a, b) if lib is tj else (ta, tb))),
            fm.vmap(lambda r, w: r * w, in_dims=(1, 0))(*((b[:, :4], a) if lib is tj else (tb[:, :4], ta))),
            fm.vmap(lambda t: (t.sum(0), t * 2), in_dims=-1, out_dims=(0, -1))(m if lib is tj else tm),
            fm.vmap(lambda d: d["p"] * d["q"][0], in_dims=({"p": 0, "q": [None]},))(
                {"p": a, "q": [b[:, 0]]} if lib is tj else {"p": ta, "q": [tb[:, 0]]}),
            fm.vmap(fm.vmap(lambda s, t: s * t, in_dims=(0, None)), in_dims=(None, 0))(
                *((a[0], b[0]) if lib is tj else (ta[0], tb[0]))),
            fm.vmap(lambda r, w=None: r.sum() * w)(*((a,) if lib is tj else (ta,)), w=b[0] if lib is tj else tb[0]),
            fm.vmap(lambda r, k: (r * k, k), in_dims=(0, None), out_dims=(0, None))(a if lib is tj else ta, 3),
            fm.vmap(lib.sin)(lib.zeros(0, 3)),
            fm.vmap(lambda r: r.sum(), out_dims=0)(lib.zeros(2, 0)),
        ]

    ours, theirs = run_both(cases)
    for o, t in zip(ours, theirs):
        assert_close(o, t)


@pytest.mark.parametrize("case", ["sizes", "none", "noinputs", "range", "scalar", "float", "list", "structure",
                                  "strdim", "out", "outdims", "outtype", "randomness", "chunk", "random"])
def test_vmap_errors_as_torch(case):
    def call(lib, fm):
        def sin(t):         # (named: the messages name the function)
            return lib.sin(t)

        def add(a, b):
            return a + b
        mul = add
        calls = {
            "sizes": lambda: fm.vmap(add)(lib.ones(2), lib.ones(3)),
            "none": lambda: fm.vmap(add, in_dims=(None, None))(lib.ones(2), lib.ones(3)),
            "noinputs": lambda: fm.vmap(sin)(),
            "range": lambda: fm.vmap(sin, in_dims=2)(lib.ones(2)),
            "scalar": lambda: fm.vmap(sin)(lib.tensor(1.0)),
            "float": lambda: fm.vmap(mul, in_dims=(0, 0))(lib.ones(2), 2.0),
            "list": lambda: fm.vmap(add, in_dims=[0, 0])(lib.ones(2), lib.ones(2)),
            "structure": lambda: fm.vmap(add, in_dims=(0,))(lib.ones(2), lib.ones(2)),
            "strdim": lambda: fm.vmap(sin, in_dims=("a",))(lib.ones(2)),
            "out": lambda: fm.vmap(lambda t: 1.0)(lib.ones(2)),
            "outdims": lambda: fm.vmap(lambda t: (t, t), out_dims=(0,))(lib.ones(2)),
            "outtype": lambda: fm.vmap(lambda t: t, out_dims="a")(lib.ones(2)),
            "randomness": lambda: fm.vmap(sin, randomness="foo")(lib.ones(2)),
            "chunk": lambda: fm.vmap(sin, chunk_size=0)(lib.ones(2)),
            "random": lambda: fm.vmap(lambda t: t + lib.rand(()))(lib.ones(2)),
        }
        return calls[case]()
    same_error(lambda: call(tj, jfunc), lambda: call(torch, tfunc), upto="structure")


def test_vmap_randomness():
    assert tj.vmap is jfunc.vmap
    same = jfunc.vmap(lambda t: t + tj.rand(()), randomness="same")(tj.zeros(4))
    assert np.unique(same.numpy()).size == 1
    different = jfunc.vmap(lambda t: t + tj.rand(()), randomness="different")(tj.zeros(4))
    assert np.unique(different.numpy()).size == 4


def test_vmap_of_grad_and_grad_of_vmap():
    (x, tx), (w, tw) = both(rand(5, 3), rand(3, seed=1), requires_grad=True)

    def loss(lib, a, b):
        return (lib.tanh(a * b) ** 2).sum()

    ours = jfunc.vmap(jfunc.grad(lambda a, b: loss(tj, a, b), argnums=1), in_dims=(0, None))(x, w)
    theirs = tfunc.vmap(tfunc.grad(lambda a, b: loss(torch, a, b), argnums=1), in_dims=(0, None))(tx, tw)
    assert_close(ours, theirs)
    ours.sum().backward()
    theirs.sum().backward()
    assert_close((x.grad, w.grad), (tx.grad, tw.grad))
    assert_close(jfunc.grad(lambda b: jfunc.vmap(lambda a: loss(tj, a, b))(x).sum())(w),
                 tfunc.grad(lambda b: tfunc.vmap(lambda a: loss(torch, a, b))(tx).sum())(tw))
    assert_close(jfunc.vmap(jfunc.jacrev(tj.sin))(x.detach()), tfunc.vmap(tfunc.jacrev(torch.sin))(tx.detach()))


# ------------------------------------------------------------------------------------------------ modules
def mlp(lib, seed=0):
    """A small MLP with the same weights in both libraries."""
    torch.manual_seed(seed)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)).double()
    if lib is torch:
        return tm
    m = tj.nn.Sequential(tj.nn.Linear(4, 6), tj.nn.Tanh(), tj.nn.Linear(6, 3)).double()
    m.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return m


def test_functional_call_values_restores_and_gradients():
    m, tm = mlp(tj), mlp(torch)
    (x, tx), (w, tw) = both(rand(2, 4), rand(3, 6, seed=5), requires_grad=True)
    before = {k: v for k, v in m.named_parameters()}
    out = jfunc.functional_call(m, {"2.weight": w}, (x,))
    tout = tfunc.functional_call(tm, {"2.weight": tw}, (tx,))
    assert_close(out, tout)
    out.pow(2).sum().backward()
    tout.pow(2).sum().backward()
    assert_close((x.grad, w.grad), (tx.grad, tw.grad))
    assert m[2].weight.grad is None and {k: v for k, v in m.named_parameters()} == before
    assert_close(jfunc.functional_call(m, ({"0.bias": w[0]}, {"2.bias": w[1, :3]}), x, {}),
                 tfunc.functional_call(tm, ({"0.bias": tw[0]}, {"2.bias": tw[1, :3]}), tx, {}))
    with pytest.raises(ValueError, match="boom"):           # restored when the module raises
        jfunc.functional_call(tj.nn.Sequential(m, Boom()), {"0.0.weight": tj.zeros(6, 4, dtype=tj.float64)}, (x,))
    assert {k: v for k, v in m.named_parameters()} == before
    same_error(lambda: jfunc.functional_call(m, {"0.weight": w}, (x,), strict=True),
               lambda: tfunc.functional_call(tm, {"0.weight": tw}, (tx,), strict=True))
    same_error(lambda: jfunc.functional_call(m, ({"0.bias": w[0]}, {"0.bias": w[0]}), (x,)),
               lambda: tfunc.functional_call(tm, ({"0.bias": tw[0]}, {"0.bias": tw[0]}), (tx,)))


class Boom(tj.nn.Module):
    def forward(self, x):
        raise ValueError("boom")


def test_functional_call_buffers_and_tied_weights():
    class Tied:
        def __init__(self, lib):
            class M(lib.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a, self.b = lib.nn.Linear(2, 2), lib.nn.Linear(2, 2)
                    self.b.weight = self.a.weight
                    self.bn = lib.nn.BatchNorm1d(2)

                def forward(self, x):
                    return self.bn(self.a(x) + self.b(x))
            self.m = M().double()
    tm = Tied(torch).m
    m = Tied(tj).m
    m.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    (x, tx), (w, tw) = both(rand(3, 2), rand(2, 2, seed=1))
    (rm, trm), = both(np.ones(2))
    for tie in (True, False):
        assert_close(jfunc.functional_call(m, {"a.weight": w, "bn.running_mean": rm}, (x,), tie_weights=tie),
                     tfunc.functional_call(tm, {"a.weight": tw, "bn.running_mean": trm}, (tx,), tie_weights=tie))
    assert_close(rm, trm)                   # the running stats update went to the given buffer
    assert_close(m.bn.running_mean, tm.bn.running_mean)
    assert_close(jfunc.functional_call(m, {"a.weight": w, "b.weight": w}, (x,)),      # the same tensor twice
                 tfunc.functional_call(tm, {"a.weight": tw, "b.weight": tw}, (tx,)))
    same_error(lambda: jfunc.functional_call(m, {"a.weight": w, "b.weight": w * 1}, (x,)),
               lambda: tfunc.functional_call(tm, {"a.weight": tw, "b.weight": tw * 1}, (tx,)))


def test_per_sample_gradients_recipe():
    """PyTorch's tutorial: functional_call + grad + vmap over the batch, against PyTorch's and a loop."""
    def per_sample(lib, fm):
        model = mlp(lib)
        params = {k: v.detach() for k, v in model.named_parameters()}
        buffers = {k: v.detach() for k, v in model.named_buffers()}
        data, targets = both(rand(5, 4))[0], (tj.tensor([0, 2, 1, 1, 0]), torch.tensor([0, 2, 1, 1, 0]))
        data, targets = (data[0], targets[0]) if lib is tj else (data[1], targets[1])
        fn = F.cross_entropy if lib is tj else torch.nn.functional.cross_entropy

        def compute_loss(params, buffers, sample, target):
            predictions = fm.functional_call(model, (params, buffers), (sample.unsqueeze(0),))
            return fn(predictions, target.unsqueeze(0))
        return fm.vmap(fm.grad(compute_loss), in_dims=(None, None, 0, 0))(params, buffers, data, targets), \
            [fm.grad(compute_loss)(params, buffers, data[i], targets[i]) for i in range(5)]

    (ours, ours_loop), (theirs, _) = run_both(per_sample)
    assert_close(ours, theirs)
    for k in ours:
        np.testing.assert_allclose(ours[k].numpy(), np.stack([g[k].numpy() for g in ours_loop]), rtol=1e-12)


def test_model_ensembling_recipe():
    """PyTorch's tutorial: stack_module_state + functional_call + vmap, each model on its own or the same batch."""
    def ensemble(lib, fm):
        models = [mlp(lib, seed) for seed in range(3)]
        params, buffers = fm.stack_module_state(models)
        base = copy.deepcopy(models[0])
        x = both(rand(3, 2, 4))[0][0 if lib is tj else 1]

        def fmodel(params, buffers, x):
            return fm.functional_call(base, (params, buffers), (x,))
        out_each = fm.vmap(fmodel)(params, buffers, x)
        out_same = fm.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x[0])
        (out_each.pow(2).sum() + out_same.sum()).backward()
        return out_each, out_same, {k: v.grad for k, v in params.items()}, \
            {k: (v.requires_grad, v.is_leaf) for k, v in params.items()}

    assert_close(*run_both(ensemble))
    same_error(lambda: jfunc.stack_module_state([]), lambda: tfunc.stack_module_state([]))
    same_error(lambda: jfunc.stack_module_state([tj.nn.Linear(2, 2), tj.nn.Linear(2, 2).eval()]),
               lambda: tfunc.stack_module_state([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).eval()]))
    same_error(lambda: jfunc.stack_module_state([tj.nn.Linear(2, 2), tj.nn.Linear(2, 2).requires_grad_(False)]),
               lambda: tfunc.stack_module_state([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).requires_grad_(False)]))


# ------------------------------------------------------------------------------------------------ under trace
def test_transforms_under_trace():
    """Per-sample gradients and a batched Jacobian inside tracejit.trace give the eager numbers."""
    model = mlp(tj)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = tj.tensor(rand(5, 4)), tj.tensor([0, 2, 1, 1, 0])

    def per_sample(params, x, y):
        def loss(p, s, t):
            return F.cross_entropy(jfunc.functional_call(model, p, (s.unsqueeze(0),)), t.unsqueeze(0))
        return jfunc.vmap(jfunc.grad(loss), in_dims=(None, 0, 0))(params, x, y)

    eager, traced = per_sample(params, x, y), tj.trace(per_sample)(params, x, y)
    for k in eager:
        np.testing.assert_allclose(traced[k].numpy(), eager[k].numpy(), rtol=1e-10, atol=1e-12)

    def batched_jac(a):
        return tj.vmap(jfunc.jacrev(lambda r: r.sin() * r.sum()))(a)
    np.testing.assert_allclose(tj.trace(batched_jac)(x).numpy(), batched_jac(x).numpy(), rtol=1e-10)


def test_functional_call_parametrized_and_unknown_names():
    def run(lib, fm):
        class Double(lib.nn.Module):
            def forward(self, w):
                return 2 * w

            def right_inverse(self, w):
                return w / 2
        (x, tx), (w, tw) = both(rand(1, 2), rand(2, 2, seed=1))
        x, w = (x, w) if lib is tj else (tx, tw)
        m = lib.nn.Linear(2, 2).double()
        m.load_state_dict({"weight": w * 3, "bias": w[0]})
        (lib.nn.utils.parametrize if lib is tj else torch.nn.utils.parametrize).register_parametrization(
            m, "weight", Double())
        outs = [fm.functional_call(m, {"weight": w}, (x,)),
                fm.functional_call(m, {"parametrizations.weight.original": w}, (x,)),
                fm.functional_call(m, {"foo": w}, (x,))]
        return outs, m.weight, hasattr(m, "foo")
    assert_close(*run_both(run))
