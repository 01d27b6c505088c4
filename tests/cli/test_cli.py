"""The command line runs on a fresh install: demo and explain (bench is covered by its own script)."""
import subprocess
import sys


def _run(*args):
    r = subprocess.run([sys.executable, "-m", "tracejit", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_demo_prints_the_comparison_table():
    out = _run("demo", "--steps", "6")
    assert "| speedup |" in out and "max |loss difference|" in out and "| traces | - | 1 |" in out


def test_explain_shows_both_graphs(tmp_path, monkeypatch):
    (tmp_path / "mymod.py").write_text("import tracejit as t\ndef f(x, w):\n    return (x @ w).relu().sum()\n")
    r = subprocess.run([sys.executable, "-m", "tracejit", "explain", "mymod:f", "--inputs", "f32[8,4] f32[4,3]"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "SumBackward0" in r.stdout and "= matmul %0 %1" in r.stdout and "backward program" in r.stdout


def test_examples_run():
    r = subprocess.run([sys.executable, "examples/static_vs_dynamic.py"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "same grads: True" in r.stdout and "cannot trace bool(tensor)" in r.stdout
