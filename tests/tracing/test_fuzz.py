"""A short run of the differential fuzzer (benches/fuzz.py: views, in-place ops on views, layout changes, integer
ops, reductions over every dim, broadcasting, indexing, matmul; eager vs traced, values and gradients), and its
shrinker: a planted bug is reduced to a few-line Python reproducer. The long run: `python benches/fuzz.py --n 5000`."""
import importlib.util
import os

import numpy as np
import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benches",
                     "fuzz.py")
_spec = importlib.util.spec_from_file_location("tracejit_bench_fuzz", _PATH)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


@pytest.mark.parametrize("seed", range(8))
def test_fuzz_programs_traced_equal_eager(seed):
    prog = fuzz.Program(seed)
    why = fuzz.run_one(prog.source(), prog.inputs, prog.arrays())
    if why:
        stmts, out, w = fuzz.shrink(prog, budget=60)
        pytest.fail(f"{why}\n{fuzz.reproducer(prog, stmts, out, w or why)}")


def test_generator_covers_every_kind():
    src = "\n".join(fuzz.Program(s).source() for s in range(60))
    for needle in (".detach().clone()", "_(", ".contiguous().view(-1)", ".reshape(", ".permute(", "::2]",
                   ".narrow(", ".select(", "index_select(", ".gather(", "torch.tensor([", " @ ", "rounding_mode",
                   "torch.remainder(", " & ", "keepdim=True", "keepdim=False", "argmax(", ".long()", ".expand(",
                   ".t()", "unbiased=False"):
        assert needle in src, needle
    assert any(", -" in ln and "keepdim" in ln for ln in src.splitlines())       # negative dims too
    assert any("), keepdim" in ln for ln in src.splitlines())                    # several dims at once


def test_shrinker_reduces_a_planted_bug_to_a_small_reproducer(monkeypatch):
    """A pass that turns every traced sin into cos (eager is untouched): the failing program shrinks to the
    statements that reach a sin, and the printed reproducer runs and shows the difference."""
    from tracejit import passes
    from tracejit.ops.registry import OPS

    def sin_to_cos(g):
        for n in g.nodes:
            if n.op is OPS["sin"]:
                n.op = OPS["cos"]
        return g
    monkeypatch.setattr(passes, "DEFAULT_PASSES", [sin_to_cos] + list(passes.DEFAULT_PASSES))
    for seed in range(300):                     # the first program whose result depends on a sin
        prog = fuzz.Program(seed, n_ops=6)
        if ").sin()" in prog.source() and fuzz.run_one(prog.source(), prog.inputs, prog.arrays(), "interpreter"):
            break
    else:
        pytest.fail("no program reaches the planted bug")
    stmts, out, w = fuzz.shrink(prog, backend="interpreter", budget=80)
    assert w and any(".sin()" in ln for s in stmts for ln in s.lines())
    assert len(stmts) <= 3 and len(stmts) < len(prog.stmts), [s.lines() for s in stmts]
    rep = fuzz.reproducer(prog, stmts, out, w)
    ns = {}
    exec(compile(rep.replace("torch.trace(program)", "torch.trace(program, backend='interpreter')"), "<rep>",
                 "exec"), ns)                                   # it runs as printed
    assert not np.isclose(float(ns["eager"].detach()), float(ns["traced"].detach()))
