"""ConvTranspose3d / F.conv_transpose3d, nn.utils.parametrizations.spectral_norm and orthogonal, and
torch.utils._pytree against PyTorch: values, gradients, state_dict names, traced = eager."""
import warnings

import numpy as np
import pytest

import tracejit as tj
from torch_compare import both as _both, close as _close, same_error as _same_error

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)


CT3_CASES = [  # (input shape, weight shape, bias, stride, padding, output_padding, groups, dilation)
    ((2, 3, 3, 4, 5), (3, 2, 2, 3, 2), True, 1, 0, 0, 1, 1),
    ((1, 4, 3, 3, 4), (4, 3, 3, 2, 3), True, (2, 1, 2), (1, 0, 1), (1, 0, 1), 2, 1),
    ((2, 2, 4, 3, 3), (2, 1, 2, 2, 2), False, 3, (2, 1, 0), (2, 0, 1), 2, (2, 1, 1)),  # depthwise, dilated
    ((3, 2, 3, 3), (3, 2, 3, 1, 2), True, 2, (2, 0, 0), (1, 1, 0), 1, (1, 1, 2)),      # unbatched, taps cropped
    ((1, 2, 1, 2, 2), (2, 2, 2, 1, 1), True, 1, (1, 0, 0), 0, 1, (3, 1, 1)),                # only the bias left
]


@pytest.mark.parametrize("xs, ws, bias, s, p, op, g, d", CT3_CASES)
def test_conv_transpose3d_same_as_torch(xs, ws, bias, s, p, op, g, d):
    arrays = [RNG.standard_normal(xs), RNG.standard_normal(ws)]
    arrays += [RNG.standard_normal(ws[1] * g)] if bias else []

    def f(lib, x, w, *b):
        return lib.nn.functional.conv_transpose3d(x, w, b[0] if b else None, s, p, op, g, d)
    _both(f, arrays, 1e-10)
    _both(f, [a.astype(np.float32) for a in arrays], 1e-4)


def test_conv_transpose3d_module_output_size_errors_and_trace():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose3d(4, 6, (3, 2, 2), stride=2, padding=1, groups=2, dilation=(1, 2, 1))
    jm = tj.nn.ConvTranspose3d(4, 6, (3, 2, 2), stride=2, padding=1, groups=2, dilation=(1, 2, 1))
    jm.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert repr(jm) == repr(tm)
    x = RNG.standard_normal((2, 4, 3, 4, 3)).astype(np.float32)
    want = tm(torch.tensor(x), output_size=(6, 8, 5))
    _close(jm(tj.tensor(x), output_size=(6, 8, 5)).detach().numpy(), want.detach().numpy(), 1e-5)
    assert "output padding must be smaller" in _same_error(
        lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 3, 3, 3), lib.ones(2, 2, 2, 2, 2), stride=2,
                                                       output_padding=(2, 0, 0)))
    _same_error(lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 3, 3, 3, 3), lib.ones(2, 2, 2, 2, 2)))

    def loss(t):
        return jm(t).square().sum()
    xt = tj.tensor(x)
    loss(xt).backward()
    eager = [float(loss(xt))] + [p.grad.numpy().copy() for p in jm.parameters()]
    step = tj.trace(lambda t: (lambda v: (v.backward(), v.detach())[1])(loss(t)))
    for _ in range(2):
        jm.zero_grad()
        got = [float(step(xt))] + [p.grad.numpy() for p in jm.parameters()]
        for a, b in zip(got, eager):
            _close(a, b, 1e-4)


def _pair(make, register):
    """The same module in both libraries, registered, then torch's state_dict loaded into tracejit's (its keys
    the same): (torch module, tracejit module)."""
    torch.manual_seed(0)
    tm, jm = make(torch), make(tj)
    register(torch, tm)
    register(tj, jm)
    sd = tm.state_dict()
    assert list(jm.state_dict().keys()) == list(sd.keys())
    jm.load_state_dict({k: tj.tensor(v.detach().numpy()) for k, v in sd.items()})
    return tm, jm


def _steps_agree(tm, jm, x, tol=1e-10, steps=2):
    """Forward, gradients of every parameter and an SGD step agree, `steps` times; then the state_dicts."""
    topt, jopt = torch.optim.SGD(tm.parameters(), lr=0.1), tj.optim.SGD(jm.parameters(), lr=0.1)
    for _ in range(steps):
        outs = []
        for lib, m, opt in ((torch, tm, topt), (tj, jm, jopt)):
            opt.zero_grad()
            out = m(lib.tensor(x))
            (out * out).sum().backward()
            outs.append((out.detach().numpy(), [p.grad.numpy().copy() for p in m.parameters()]))
            opt.step()
        _close(outs[1][0], outs[0][0], tol)
        for a, b in zip(outs[1][1], outs[0][1]):
            _close(a, b, tol)
    for k, v in tm.state_dict().items():
        _close(jm.state_dict()[k].numpy(), v.numpy(), tol)


@pytest.mark.parametrize("make, dim, xshape", [
    (lambda lib: lib.nn.Linear(5, 4, dtype=lib.float64), None, (3, 5)),
    (lambda lib: lib.nn.Conv2d(2, 3, 3, dtype=lib.float64), None, (2, 2, 5, 5)),
    (lambda lib: lib.nn.ConvTranspose2d(3, 2, 2, dtype=lib.float64), None, (1, 3, 3, 3)),   # dim 1
    (lambda lib: lib.nn.Linear(5, 4, dtype=lib.float64), -1, (3, 5)),
])
def test_spectral_norm_parametrization_same_as_torch(make, dim, xshape):
    tm, jm = _pair(make, lambda lib, m: lib.nn.utils.parametrizations.spectral_norm(m, n_power_iterations=2,
                                                                                      dim=dim))
    assert type(jm).__name__ == type(tm).__name__
    x = RNG.standard_normal(xshape)
    _steps_agree(tm, jm, x)
    tm.eval(), jm.eval()
    _steps_agree(tm, jm, x, steps=1)
    _same_error(lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2), "nope"))
    _same_error(lambda lib: lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2),
                                                                          n_power_iterations=0))


@pytest.mark.parametrize("shape, omap, triv", [
    ((4, 4), None, True), ((5, 3), None, True), ((3, 5), None, True),
    ((4, 4), "cayley", True), ((5, 3), "cayley", True), ((3, 5), "matrix_exp", True),
    ((4, 4), "householder", True), ((5, 3), "householder", False), ((3, 5), "householder", False),
    ((4, 4), "matrix_exp", False), ((3, 5), "cayley", False),
])
def test_orthogonal_parametrization_same_as_torch(shape, omap, triv):
    def make(lib):
        m = lib.nn.Linear(shape[1], shape[0], dtype=lib.float64)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(RNG.standard_normal(shape) * 0.3))
        return m
    w = RNG.standard_normal(shape)

    def register(lib, m):
        m.weight.data = lib.tensor(w)
        lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap, use_trivialization=triv)
    tm, jm = _pair(make, register)
    _close(jm.weight.detach().numpy(), tm.weight.detach().numpy(), 1e-10)
    q = jm.weight.detach().numpy()
    small = q @ q.T if shape[0] <= shape[1] else q.T @ q
    _close(small, np.eye(min(shape)), 1e-10)
    _steps_agree(tm, jm, RNG.standard_normal((2, shape[1])), steps=3)


def test_orthogonal_assignment_and_errors():
    tm, jm = _pair(lambda lib: lib.nn.Linear(3, 5, dtype=lib.float64),
                   lambda lib, m: lib.nn.utils.parametrizations.orthogonal(m))
    q = np.linalg.qr(RNG.standard_normal((5, 3)))[0]
    for m, lib in ((tm, torch), (jm, tj)):
        m.weight = lib.tensor(q)
    _close(jm.weight.detach().numpy(), q, 1e-12)
    _close(jm.parametrizations.weight.original.detach().numpy(),
           tm.parametrizations.weight.original.detach().numpy(), 0)
    _same_error(lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), orthogonal_map="qr"))
    _same_error(lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.BatchNorm1d(3)))


Point = __import__("collections").namedtuple("Point", "x y")
TREES = [
    (1, [2, None, {"b": 3, "a": 4}], None),
    None, 5, [], {}, ((), [], {}),
    {"k": Point(1, (2, 3)), "o": __import__("collections").OrderedDict(z=[1], y=2)},
    [tj.Size([2, 3]), (4,)],
]


@pytest.mark.parametrize("tree", TREES)
def test_pytree_same_as_torch(tree):
    jp, tp = tj.utils._pytree, torch.utils._pytree
    (jl, js), (tl, ts) = jp.tree_flatten(tree), tp.tree_flatten(tree)
    assert jl == tl
    assert repr(js) == repr(ts).replace("torch.Size", "tracejit.Size")
    assert (js.num_leaves, js.num_nodes, js.num_children) == (ts.num_leaves, ts.num_nodes, ts.num_children)
    assert jp.treespec_pprint(js) == tp.treespec_pprint(ts)
    new = list(range(100, 100 + len(jl)))
    assert jp.tree_unflatten(new, js) == tp.tree_unflatten(new, ts)
    assert jp.tree_leaves(tree) == tp.tree_leaves(tree)
    assert jp.tree_map(lambda x, y: (x, y), tree, jp.tree_unflatten(new, js)) == \
        tp.tree_map(lambda x, y: (x, y), tree, tp.tree_unflatten(new, ts))
    assert js == jp.tree_structure(jp.tree_unflatten(new, js)) and isinstance(js, jp.TreeSpec)


def test_pytree_prefixes_is_leaf_and_errors():
    jp, tp = tj.utils._pytree, torch.utils._pytree
    tree = [1, (2, 3), {"a": 4}]
    for lib in (jp, tp):
        assert lib.tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple)) == [1, (2, 3), 4]
        assert lib.tree_map(lambda x, y: x + sum(y), (1, [2]), ((10, 20), [[30]])) == (31, [32])
        assert lib.tree_structure((1, {"a": 2, "b": 3})) != lib.tree_structure((1, {"b": 2, "a": 3}))
        with warnings.catch_warnings():     # (torch 2.13 deprecates LeafSpec with a FutureWarning, which a warnings
            warnings.simplefilter("ignore", FutureWarning)      # filter of "error" left by another test raised)
            assert lib.tree_structure(7) == lib.LeafSpec() and lib.LeafSpec().is_leaf()
    for call in (lambda lib: lib.tree_map(lambda a, b: a, (1, [2]), (10, 20)),
                 lambda lib: lib.tree_map(lambda a, b: a, (1, [2]), (10, [20], 3)),
                 lambda lib: lib.tree_map(lambda a, b: a, {"a": 1}, {"b": 1}),
                 lambda lib: lib.tree_map(lambda a, b: a, [1], (1,)),
                 lambda lib: lib.tree_unflatten([1], lib.tree_structure((1, 2)))):
        msgs = []
        for lib in (tp, jp):
            with pytest.raises(ValueError) as e:
                call(lib)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


def test_func_uses_the_pytree_messages_of_torch():
    def add(x, y):
        return x + y
    msgs = []
    for lib in (torch, tj):
        with pytest.raises(ValueError) as e:
            lib.func.vmap(add, in_dims=(0, [0]))(lib.ones(2), lib.ones(2))
        msgs.append(str(e.value).split(": ", 1)[1])
    assert msgs[0] == msgs[1]


def test_linalg_matrix_exp_and_householder_product_equal_torch():
    """tracejit.linalg.matrix_exp (scaling and squaring of a Taylor series) and householder_product (orgqr): values
    and gradients as PyTorch's, a batch with a large norm (squarings) and a small matrix (none)."""
    for A in (RNG.standard_normal((3, 4, 4)) * 2, RNG.standard_normal((5, 5)) * 0.1):
        _both(lambda lib, a: lib.linalg.matrix_exp(a), [A], tol=1e-11)
    _both(lambda lib, a, t: lib.linalg.householder_product(a, t),
          [RNG.standard_normal((2, 5, 3)), RNG.standard_normal((2, 3))], tol=1e-12)


@pytest.mark.parametrize("omap, triv", [("matrix_exp", True), ("matrix_exp", False), ("cayley", False),
                                        ("householder", True)])
def test_orthogonal_traced_step_equals_eager_and_torch(omap, triv):
    """A traced forward and backward of an orthogonal Linear equals eager tracejit's and torch's, on every call: the
    unconstrained matrix changes between calls (its norm from 0.05 to 6, so matrix_exp's number of squarings
    changes too) and the compiled program must read it, never keep the first call's."""
    tm, jm = _pair(lambda lib: lib.nn.Linear(4, 4, dtype=lib.float64),
                   lambda lib, m: lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap,
                                                                         use_trivialization=triv))
    x = RNG.standard_normal((3, 4))
    w = RNG.standard_normal((3, 4))
    params = [p for _, p in sorted(jm.named_parameters())]

    def loss(lib, m, t):
        return (m(t) * lib.tensor(w)).square().sum()

    step = tj.trace(lambda t: (lambda r: (r.backward(), r.detach())[1])(loss(tj, jm, t)))
    for scale in (0.05, 6.0, 1.5):
        a = RNG.standard_normal((4, 4)) * scale
        with torch.no_grad():
            tm.parametrizations.weight.original.copy_(torch.tensor(a))
        with tj.no_grad():
            jm.parametrizations.weight.original.copy_(tj.tensor(a))
        tm.zero_grad()
        want = loss(torch, tm, torch.tensor(x))
        want.backward()
        wgrads = [p.grad.numpy() for _, p in sorted(tm.named_parameters())]
        jm.zero_grad()
        eager = loss(tj, jm, tj.tensor(x))
        eager.backward()
        egrads = [p.grad.numpy().copy() for p in params]
        jm.zero_grad()
        got = step(tj.tensor(x))
        _close(float(got), float(eager), 1e-12)
        _close(float(got), want.item(), 1e-9)
        for g, e, t in zip([p.grad.numpy() for p in params], egrads, wgrads):
            _close(g, e, 1e-12)
            _close(g, t, 1e-8)
    assert step.cache_info()["traces"] == 1
