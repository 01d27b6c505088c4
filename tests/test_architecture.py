"""The architecture rules that a reader relies on: facts about ops are traits of their registry entry (never sets of
op names kept by passes or backends, never patched onto an entry after `defop`), and a new elementwise op with a
scalar template needs its registry entry and nothing else."""
import ast
import pathlib

import numpy as np
import pytest

import tracejit as torch
from tracejit.ops.elementwise import pointwise
from tracejit.ops.registry import OPS, TRAITS, Op, apply, defop

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tracejit"

# string collections in passes/ and backends/ that hold op names but are no facts about ops
NOT_OP_FACTS = {
    # names of the scalar helpers of the CPU runtime (vmath's table keys), which share names with ops
    ("backends/numba_cpu/rt.py", ("maximum", "minimum")),
    # rt.HEAVY: the runtime functions the generated code calls, by their cost (a fact about the backend's helpers,
    # matched in generated source, some of which share names with ops)
    ("backends/numba_cpu/rt.py", ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfinv", "exp2", "log2",
                                  "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "atan2",
                                  "fmod", "softplus", "lgamma", "digamma", "polygamma")),
    # scatter's `reduce=` argument values
    ("backends/numba_cuda/ops.py", ("prod",)),
    ("backends/numba_cuda/ops.py", ("add", "sum")),
}


def _op_name_collections(path):
    tree = ast.parse(path.read_text())
    skip = set()
    for n in ast.walk(tree):        # `__all__` lists the module's public names
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
            skip.update(id(m) for m in ast.walk(n.value))
    for n in ast.walk(tree):
        if id(n) in skip or not isinstance(n, (ast.Set, ast.List, ast.Tuple, ast.Dict)):
            continue
        elts = n.keys if isinstance(n, ast.Dict) else n.elts
        names = tuple(e.value for e in elts if isinstance(e, ast.Constant) and e.value in OPS)
        if names:
            yield n.lineno, names


def test_passes_and_backends_keep_no_collections_of_op_names():
    found = []
    for sub in ("passes", "backends"):
        for path in sorted((ROOT / sub).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            found += [f"{rel}:{line}: {names}" for line, names in _op_name_collections(path)
                      if (rel, names) not in NOT_OP_FACTS]
    assert not found, "facts about ops belong on the registry entry (a trait), not in a set of names:\n" + \
        "\n".join(found)


def test_the_scan_finds_a_set_of_op_names():
    # the scan itself must bite: a module with the kind of set the test forbids
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "m.py"
        p.write_text('_RAISING = frozenset(("floor_divide", "remainder"))\nx = {"mul": 1}\n__all__ = ["exp"]\n')
        assert sorted(_op_name_collections(p)) == [(1, ("floor_divide", "remainder")), (2, ("mul",))]


def test_no_trait_is_patched_onto_an_entry_after_defop():
    patched = []
    for path in sorted(ROOT.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Subscript) and \
                            isinstance(t.value.value, ast.Name) and t.value.value.id.startswith("OPS"):
                        patched.append(f"{path.relative_to(ROOT)}:{n.lineno}")
    assert not patched, patched


def test_traits_are_declared_at_defop():
    assert OPS["mul"].reads is not None and OPS["add"].reads is None
    assert OPS["pow"].literal_exponent and not OPS["mul"].literal_exponent
    assert {n for n, o in OPS.items() if o.int_div_raises} == {"floor_divide", "remainder", "fmod"}
    assert {n for n, o in OPS.items() if o.row_exp} == {"logsumexp", "softmax", "log_softmax"}
    assert OPS["var"].row_reduce == {"dims", "keepdim", "correction"} and OPS["matmul"].row_reduce is None
    with pytest.raises(TypeError, match="unknown trait 'fusable'"):
        Op("x", None, None, fusable=False)
    assert set(TRAITS) <= set(dir(Op))


@pytest.fixture
def cube():
    """A new elementwise op: one registry entry (numpy impl, shape rule, VJP, scalar template), nothing else."""
    op = pointwise("cube_for_test", lambda x: x * x * x, lambda c, g: (3 * g * c.inputs[0] * c.inputs[0],),
                   "({0} * {0} * {0})", "promote", "i")
    yield lambda x: apply(op, x)
    del OPS["cube_for_test"]


def test_a_new_elementwise_op_needs_one_registry_entry(cube):
    x = torch.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    y = cube(x)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() ** 3, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.detach().numpy() ** 2, rtol=1e-6)

    @torch.trace
    def f(a):
        return torch.exp(cube(a) * 0.5)

    a = torch.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_allclose(f(a).numpy(), np.exp(a.numpy() ** 3 * np.float32(0.5)), rtol=1e-6)
    # it was fused into the generated kernel with exp, not run as a node of its own
    assert "cube_for_test" in f.graph(a).entry.fwd_fn.source()


def test_defop_refuses_a_second_definition():
    with pytest.raises(ValueError, match="defined twice"):
        defop("mul", None, None)


_DECOMPOSED = [
    ("var", [np.float32], dict(dims=(1,), keepdim=True, correction=1)),
    ("var", [np.float64], dict(dims=(0, 1), keepdim=False, correction=0)),
    ("std", [np.float32], dict(dims=(0,), keepdim=False, correction=1)),
    ("logsumexp", [np.float32], dict(dims=(1,), keepdim=False)),
    ("logsumexp", [np.float64], dict(dims=(0, 1), keepdim=True)),
    ("vector_norm", [np.float32], dict(dims=(1,), keepdim=False, ord=2)),
    ("vector_norm", [np.float32], dict(dims=(0, 1), keepdim=True, ord=3.0)),
    ("vector_norm", [np.float64], dict(dims=(1,), keepdim=False, ord=float("inf"))),
    ("vector_norm", [np.float64], dict(dims=(1,), keepdim=True, ord=0)),
    ("vector_norm", [np.float32], dict(dims=(0,), keepdim=False, ord=1)),
]


@pytest.mark.parametrize("name,dtypes,attrs", _DECOMPOSED)
def test_decomposition_gives_the_ops_results(name, dtypes, attrs):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(dtypes[0])
    x[1, 2] = 0
    want = OPS[name].impl(x, **attrs)
    got = OPS[name].decompose(torch.tensor(x), **attrs)
    assert got.dtype.np == want.dtype and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6 if x.dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("name", ["softmax_backward", "log_softmax_backward", "layer_norm_backward"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_op_decompositions_give_the_ops_results(name, dtype):
    # the eager kernels of the row ops' gradients and the registry-op formulas their VJPs record with create_graph
    rng = np.random.default_rng(2)
    g, x = rng.standard_normal((2, 3, 5)).astype(dtype), rng.standard_normal((2, 3, 5)).astype(dtype)
    if name == "layer_norm_backward":
        _, mean, rstd = OPS["layer_norm"].impl(x, None, None, k=2, eps=1e-5)
        w = rng.standard_normal((3, 5)).astype(dtype)
        args, attrs = (g, x, mean, rstd, w), dict(k=2)
    else:
        args, attrs = (g, OPS[name[:-len("_backward")]].impl(x, dim=2)), dict(dim=2)
    want = OPS[name].impl(*args, **attrs)
    got = OPS[name].decompose(*map(torch.tensor, args), **attrs)
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert a.dtype.np == b.dtype and tuple(a.shape) == b.shape
        np.testing.assert_allclose(a.numpy(), b, rtol=2e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_decompositions_give_the_ops_results(reduction, weighted):
    rng = np.random.default_rng(1)
    logp = rng.standard_normal((6, 4)).astype(np.float32)
    target = np.array([0, 3, -100, 1, 2, 3])
    w = rng.random(4).astype(np.float32) if weighted else None
    attrs = dict(ignore_index=-100, reduction=reduction)
    ws = () if w is None else (w,)
    want = OPS["nll_loss"].impl(logp, target, *ws, **attrs)
    got = OPS["nll_loss"].decompose(torch.tensor(logp), torch.tensor(target), *map(torch.tensor, ws), **attrs)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6)
    g = np.float32(0.7) if reduction != "none" else rng.standard_normal(6).astype(np.float32)
    want = OPS["nll_loss_coef"].impl(np.asarray(g), target, *ws, **attrs)
    got = OPS["nll_loss_coef"].decompose(torch.tensor(g), torch.tensor(target), *map(torch.tensor, ws), **attrs)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6)


# ----------------------------------------------------------------------------------------------- small defects

def test_helpers_of_the_op_modules_are_no_tensor_methods():
    from tracejit.ops import methods
    assert not hasattr(torch.Tensor, "cast") and not hasattr(torch.Tensor, "ones_like_")
    assert len(methods._INPLACE) == len(set(methods._INPLACE))


def test_tensor_methods_are_pytorch_methods():
    T = pytest.importorskip("torch").Tensor
    from tracejit.ops import methods
    # tracejit's own extras: activations as methods (x.gelu(), x.gelu_()) and the vector norm
    extras = {"elu", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "mish", "relu6", "rsub", "silu",
              "softplus", "std_mean", "var_mean", "vector_norm"}
    assert sorted(n for n in methods._METHODS if not hasattr(T, n) and n not in extras) == []


@pytest.mark.parametrize("make", [
    lambda d: torch.nn.LayerNorm(3, device=d), lambda d: torch.nn.GroupNorm(1, 2, device=d),
    lambda d: torch.nn.BatchNorm1d(3, device=d), lambda d: torch.nn.Conv2d(1, 2, 3, device=d),
    lambda d: torch.nn.Embedding(4, 2, device=d)])
def test_layers_take_their_device_argument(make):
    m = make("cpu")
    assert all(t.device.type == "cpu" for t in list(m.parameters()) + list(m.buffers()))
    with pytest.raises(RuntimeError):
        make("tpu")             # not a device: an error, not silently ignored


def test_a_freed_graph_is_known_by_its_error_type(monkeypatch):
    from tracejit.autograd.graph import FreedGraphError
    x = torch.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(FreedGraphError, match="second time") as e:
        y.backward()
    assert isinstance(e.value, RuntimeError)
    # another RuntimeError during the trace's derivation of the backward is not taken for a freed graph
    import importlib
    AD = importlib.import_module("tracejit.passes.autodiff")    # (the package's `autodiff` is the pass function)

    def fail(*a, **k):
        raise RuntimeError("a second time, but no freed graph")
    monkeypatch.setattr(AD, "differentiate", fail)
    f = torch.trace(lambda a: (a * 2).sum())
    with pytest.raises(RuntimeError, match="no freed graph"):
        f(torch.ones(3, requires_grad=True))


def test_bench_finds_benches_outside_the_source_tree(tmp_path, monkeypatch):
    import tracejit.bench as B
    d = tmp_path / "mybenches"
    d.mkdir()
    (d / "bench_fake.py").write_text("def run(quick=False):\n    return []\n")
    monkeypatch.setenv("TRACEJIT_BENCHES", str(d))
    assert B.find_benches() == str(d)
    monkeypatch.delenv("TRACEJIT_BENCHES")
    (tmp_path / "benches").mkdir()
    monkeypatch.chdir(tmp_path)
    assert B.find_benches() == str(tmp_path / "benches")       # a benches/ folder in the working directory


# ----------------------------------------------------------------------------------------------- IR def-use

def test_graph_users_and_replace_all_uses_with():
    from tracejit import float32
    from tracejit.backends.interpreter import run
    from tracejit.ir.graph import Graph
    from tracejit.ops.registry import AVal
    g = Graph()
    x = g.add_input((3,), float32)
    (a,) = g.add_node(OPS["exp"], [x], {}, AVal((3,), float32))
    (b,) = g.add_node(OPS["mul"], [a, a], {}, AVal((3,), float32))
    (c,) = g.add_node(OPS["add"], [b, x], {}, AVal((3,), float32))
    g.outputs = [c, a]
    users = g.users()
    assert [n.op.name for n in users[id(x)]] == ["exp", "add"]
    assert [n.op.name for n in users[id(a)]] == ["mul", "mul"] and id(c) not in users
    x0 = np.array([0.0, 1.0, -1.0], np.float32)
    g.replace_all_uses_with(a, x)           # exp(x) -> x everywhere: c = x * x + x, outputs (c, x)
    assert all(i is not a for n in g.nodes for i in n.inputs) and g.outputs[1] is x
    out = run(g, [x0])
    np.testing.assert_allclose(out[0], x0 * x0 + x0)
    np.testing.assert_array_equal(out[1], x0)


def test_pyproject_installs_every_package_and_kernels_inside_tracejit():
    import tomllib
    conf = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"tracejit." + ".".join(p.parent.relative_to(ROOT).parts) if p.parent != ROOT else "tracejit"
               for p in ROOT.rglob("__init__.py")}
    kernels = ROOT.parent / "kernels"
    folders |= {".".join(("tracejit", "kernels") + p.parent.relative_to(kernels).parts)
                for p in kernels.rglob("__init__.py")}
    assert set(conf["packages"]) == folders
    assert conf["package-dir"] == {"tracejit.kernels": "kernels"}
    assert not any(p == "kernels" or p.startswith("kernels.") for p in conf["packages"])    # no top-level name
