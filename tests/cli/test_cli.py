"""The command line and the examples run on a fresh install: demo, explain (text and --html), bench --quick
(the table is produced and the correctness check ran; timings are never asserted), and every example."""
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, cwd=ROOT, timeout=900, env=None):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


# ----------------------------------------------------------------------------------------------- demo

def test_demo_prints_the_comparison_table():
    out = _run("-m", "tracejit", "demo", "--steps", "6")
    assert "| speedup |" in out and "max |loss difference|" in out and "| traces | - | 1 |" in out


# ----------------------------------------------------------------------------------------------- explain

MYMOD = "import tracejit as t\ndef f(x, w):\n    return (x @ w).relu().sum()\n"


def test_explain_shows_both_graphs_passes_kernels_and_timing(tmp_path):
    (tmp_path / "mymod.py").write_text(MYMOD)
    html = tmp_path / "out.html"
    out = _run("-m", "tracejit", "explain", "mymod:f", "--inputs", "f32[8,4] f32[4,3]", "--html", str(html),
               cwd=tmp_path)
    assert "SumBackward0" in out and "= matmul %0 %1" in out
    for section in ("after pass simplify", "after partition: backward program", "fusion groups",
                    "generated kernel source", "== cache ==", "time of one run, per kernel",
                    "backward: intermediate buffers"):
        assert section in out, section
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Eager (dynamic)" in page and "Traced (static)" in page
    assert "The IR after each pass" in page and "Time of one run" in page
    assert "<script" not in page and "http" not in page.split("<body>", 1)[1].replace("http://www.w3.org", "")


def test_explain_html_text_fallback_without_graphviz(monkeypatch, tmp_path):
    import tracejit
    from tracejit import explain as _  # noqa: F401
    mod = sys.modules["tracejit.explain"]
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    x, w = tracejit.randn(8, 4), tracejit.randn(4, 3)
    ex = tracejit.explain(lambda x, w: (x @ w).relu().sum(), x, w)
    page = ex.to_html()
    assert "<svg" not in page and "dot</code> is not installed" in page
    assert "MmBackward0" in page and "= matmul %0 %1" in page       # both graphs, as text
    assert "SumBackward0" in str(ex)


def test_explain_in_python_and_interpreter_backend():
    import tracejit
    x, w = tracejit.randn(8, 4), tracejit.randn(4, 3)
    ex = tracejit.explain(lambda x, w: tracejit.tanh(x @ w).sum(), x, w, backend="interpreter")
    text = str(ex)
    assert "TanhBackward0" in text and "backend: interpreter" in text
    assert ex.timings and all(t >= 0 for _, _, t in ex.timings)
    assert not x.requires_grad          # explain works on copies


def test_explain_no_grad_inputs_gives_no_backward(tmp_path):
    (tmp_path / "mymod.py").write_text(MYMOD)
    out = _run("-m", "tracejit", "explain", "mymod:f", "--inputs", "f32[8,4] f32[4,3]", "--no-grad", cwd=tmp_path)
    assert "no backward: nothing requires grad" in out and "[backward]" not in out


def test_explain_bad_target_is_a_clear_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tracejit", "explain", "nocolon", "--inputs", "f32[2]"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert r.returncode == 2 and "MODULE:FUNCTION" in r.stderr


# ----------------------------------------------------------------------------------------------- bench

def test_bench_quick_prints_the_table_after_the_correctness_check(tmp_path):
    js = tmp_path / "bench.json"
    out = _run("-m", "tracejit", "bench", "rows", "--quick", "--compare", "numpy", "--json", str(js), timeout=900)
    assert "threads pinned: OpenBLAS 1" in out and "roofs: bandwidth" in out
    assert "| benchmark | system | size | median | spread | speedup | of roof |" in out
    assert "| rows/softmax | tracejit eager |" in out and "| rows/layernorm | numpy |" in out
    assert "2 correctness check(s) passed before timing" in out
    assert "torch eager" not in out                                   # --compare numpy leaves torch out
    doc = json.loads(js.read_text())
    rows = [r for r in doc["results"] if r["median"] is not None]
    assert rows and all(r["checked"] for r in rows)
    assert {"numpy", "tracejit eager"} <= {r["system"] for r in rows}
    assert doc["benchmarks"]["rows"].startswith("ok")


def test_bench_threads_option_pins_every_system(tmp_path):
    """--threads N pins OpenBLAS and numba (and torch where it is measured) to N threads; 0 is refused."""
    import io

    import numba

    from tracejit.bench import run_suite
    from tracejit.kernels.cpu.blas import blas_threads
    before = numba.get_num_threads(), blas_threads()
    n = min(2, numba.config.NUMBA_NUM_THREADS)
    try:
        out = io.StringIO()
        assert run_suite(["rows"], quick=True, compare=["numpy"], out=out, threads=n) == 0
        assert f"threads pinned: OpenBLAS {n}" in out.getvalue() and f"numba {n}" in out.getvalue()
        out = io.StringIO()
        assert run_suite(["rows"], quick=True, compare=["numpy"], out=out, threads=0) == 2
        assert "--threads 0: give 1 or more" in out.getvalue()
    finally:
        numba.set_num_threads(before[0])
        if before[1] is not None:
            blas_threads(before[1])


def test_bench_quick_checks_and_times_jax_jit(tmp_path):
    pytest.importorskip("jax")
    js = tmp_path / "bench.json"
    _run("-m", "tracejit", "bench", "fused_chain", "small_call", "mlp_step", "--quick", "--compare", "numpy,jax",
         "--json", str(js), timeout=900)
    doc = json.loads(js.read_text())
    assert all(doc["benchmarks"][b].startswith("ok") for b in ("fused_chain", "small_call", "mlp_step")), \
        doc["benchmarks"]
    jax_rows = {(r["bench"], r["name"]) for r in doc["results"] if r["system"] == "jax.jit" and r["median"]}
    assert {(b, n) for b, n in jax_rows if not b.startswith("fused_chain")} == {
        ("small_call", "forward"), ("small_call", "grad inside"), ("mlp_step", "sgd step")}
    assert {b for b, _ in jax_rows} >= {"fused_chain", "fused_chain_grad"}
    assert all(r["checked"] for r in doc["results"] if r["system"] == "jax.jit")
    checked_with_jax = [label for label, systems, _ in doc["checks"] if "jax.jit" in systems]
    assert len(checked_with_jax) == 3 + 2 + 1       # fused_chain: 2 sizes + grad; small_call: 2; mlp_step: 1
    assert not [r for r in doc["results"] if r["system"].startswith("jax") and r["median"] is None]   # no notes


def _fake_benches(tmp_path, monkeypatch, body):
    import tracejit.bench as B
    d = tmp_path / "benches"
    d.mkdir()
    with open(os.path.join(ROOT, "benches", "harness.py")) as f:
        (d / "harness.py").write_text(f.read())
    (d / "bench_fake.py").write_text(body)
    monkeypatch.setattr(B, "BENCHES", str(d))
    sys.modules.pop("harness", None)
    monkeypatch.setattr(sys, "path", [str(d)] + sys.path)
    return B


def test_bench_refuses_to_time_systems_that_disagree(tmp_path, monkeypatch, capsys):
    B = _fake_benches(tmp_path, monkeypatch, (
        "import harness as H\nimport numpy as np\n"
        "def run(quick=False):\n"
        "    H.check_same({'numpy': np.ones(3), 'tracejit eager': np.ones(3) * 1.1}, label='fake')\n"
        "    return H.compare({'numpy': lambda: 1}, 'fake', 'x', '3')\n"))
    monkeypatch.setattr(B, "_harness", lambda: sys.modules.setdefault("harness", __import__("harness")))
    rc = B.run_suite(["fake"], quick=True)
    out = capsys.readouterr().out
    sys.modules.pop("harness", None)
    assert rc == 1 and "FAILED the correctness check" in out and "tracejit eager disagrees with numpy" in out


def test_bench_skips_missing_benchmarks_and_rejects_unknown_names(tmp_path, monkeypatch, capsys):
    B = _fake_benches(tmp_path, monkeypatch, (
        "import harness as H\nimport numpy as np\n"
        "def run(quick=False):\n"
        "    a = np.arange(1000.0)\n"
        "    H.check_same({'numpy': a + 1, 'tracejit eager': 1 + a}, label='fake')\n"
        "    return H.compare({'numpy': lambda: a + 1, 'tracejit eager': lambda: 1 + a}, 'fake', 'add', '1000',\n"
        "                     baseline='numpy', repeat=3, min_sample=0.001, work={'bytes': 16000})\n"))
    monkeypatch.setattr(B, "_harness", lambda: sys.modules.setdefault("harness", __import__("harness")))
    rc = B.run_suite(["fake", "fused_chain"], quick=True, plot_path=str(tmp_path / "p.png"))
    out = capsys.readouterr().out
    assert rc == 0
    assert "fused_chain: skipped" in out and "| fake/add | numpy | 1000 |" in out and "1.00x (base)" in out
    assert " bw |" in out                                            # fraction of the bandwidth roof
    assert "wrote" in out or "matplotlib is not installed" in out
    assert B.run_suite(["no_such_bench"]) == 2
    sys.modules.pop("harness", None)


def test_bench_records_the_cpu_and_compares_with_an_earlier_run(tmp_path, monkeypatch, capsys):
    B = _fake_benches(tmp_path, monkeypatch, (
        "import harness as H\nimport numpy as np\n"
        "def run(quick=False):\n"
        "    a = np.arange(1000.0)\n"
        "    H.check_same({'numpy': a + 1, 'tracejit eager': 1 + a}, label='fake')\n"
        "    return H.compare({'numpy': lambda: a + 1, 'tracejit eager': lambda: 1 + a}, 'fake', 'add', '1000',\n"
        "                     baseline='numpy', repeat=3, min_sample=0.001)\n"))
    monkeypatch.setattr(B, "_harness", lambda: sys.modules.setdefault("harness", __import__("harness")))
    js = tmp_path / "then.json"
    assert B.run_suite(["fake"], quick=True, json_path=str(js)) == 0
    out = capsys.readouterr().out
    import tracejit.kernels.cpu
    info = tracejit.kernels.cpu.vector_info()
    assert f"(LLVM host CPU {info['llvm_cpu']}, {info['isa']} {info['vector_bits']}-bit vectors)" in out
    doc = json.loads(js.read_text())
    assert {k: doc["machine"][k] for k in info} == info and doc["machine"]["cpu"]
    assert B.run_suite(["fake"], quick=True, compare_to=str(js)) == 0
    out = capsys.readouterr().out
    assert "| benchmark | system | size | then | now | now / then |" in out and "| fake/add | numpy | 1000 |" in out
    assert "2 rows in common" in out and "note: the earlier run was on" not in out
    assert B.run_suite(["fake"], quick=True, compare_to=str(js), cpu_time=True) == 0     # CPU time, not wall
    out = capsys.readouterr().out
    assert "clock: the process's CPU time per call" in out and "timed by the wall clock, this one by the cpu" in out
    # a row 1.5x slower is flagged; another CPU is named
    slow = json.loads(js.read_text())
    for r in slow["results"]:
        r["median"] = r["median"] / 1.5 if r["system"] == "numpy" else r["median"]
    slow["machine"]["llvm_cpu"] = "emeraldrapids"
    now = {"machine": doc["machine"], "results": doc["results"]}
    text = B.compare_runs(slow, now)
    assert "| fake/add | numpy | 1000 |" in text and "1.50x **slower**" in text and "1 row(s) 1.10x or more slower" in text
    assert "note: the earlier run was on" in text and "emeraldrapids" in text
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert B.run_suite(["fake"], quick=True, compare_to=str(bad)) == 2
    assert "--compare-to: cannot read" in capsys.readouterr().out
    sys.modules.pop("harness", None)


def test_check_same_tolerances():
    sys.path.insert(0, os.path.join(ROOT, "benches"))
    import numpy as np
    import harness as H
    import tracejit
    H.check_same({"numpy": (np.ones(4), 2.0), "tracejit eager": (tracejit.ones(4), tracejit.tensor(2.0))})
    with pytest.raises(H.Mismatch, match="shape"):
        H.check_same({"numpy": np.ones(4), "b": np.ones(5)})
    with pytest.raises(H.Mismatch, match="b disagrees with numpy"):
        H.check_same({"numpy": np.ones(4), "b": np.ones(4) + 1e-3})
    H.check_same({"numpy": np.ones(4), "b": np.ones(4) + 1e-3}, rtol=1e-2)


# ----------------------------------------------------------------------------------------------- examples

def test_example_static_vs_dynamic():
    out = _run("examples/static_vs_dynamic.py")
    assert "same grads: True" in out and "cannot trace bool(tensor)" in out


def test_example_eager_vs_traced():
    out = _run("examples/eager_vs_traced.py", "--n", "20000", "--repeat", "3")
    assert "same loss and grads: True" in out and "speedup" in out and "fused kernel(s)" in out


def test_example_custom_function():
    out = _run("examples/custom_function.py")
    assert "SoftplusFnBackward" in out and "ClampGradBackward" in out and "clamp" in out
    assert "both faces match the hand-derived gradient: True" in out


def test_example_higher_order_grads():
    out = _run("examples/higher_order_grads.py")
    assert "all faces agree with the exact derivatives: True" in out


def test_example_read_ir_and_kernels(tmp_path):
    dot = tmp_path / "f.dot"
    out = _run("examples/read_ir_and_kernels.py", "--dot", str(dot))
    assert "= fused_0" in out and "@numba.njit" in out and "per step" in out
    assert dot.read_text().startswith("digraph")


def test_explain_command_from_the_example_docstring(tmp_path):
    out = _run("-m", "tracejit", "explain", "examples.read_ir_and_kernels:gelu_mlp", "--inputs",
               "f32[16,8] f32[8,8] f32[8]", "--html", str(tmp_path / "e.html"))
    assert "fused_0" in out and (tmp_path / "e.html").exists()


def test_train_mlp_example_eager_and_traced_agree():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "examples/train_mlp.py", "--epochs", "2"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("max |loss difference|"))
    assert float(line.split()[3].rstrip(";")) < 1e-4, line
    assert "speedup" in r.stdout


def test_train_resnet_example_eager_and_traced_agree():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "examples/train_resnet.py", "--epochs", "1", "--images", "320"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("max |loss difference|"))
    assert float(line.split()[3].rstrip(";")) < 1e-4, line


def test_precompile_needs_a_worker():
    from tracejit.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["precompile", "--workers", "0"]) == 2
    assert "--workers 0: expected at least 1 process" in err.getvalue()
