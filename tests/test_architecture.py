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
    ("backends/numba_cpu/rt.py", ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "exp2", "log2", "log10",
                                  "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "atan2", "fmod",
                                  "softplus")),
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
