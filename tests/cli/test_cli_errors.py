"""Every mistake a user can make on `tracejit explain|bench|demo` is one line on stderr saying what to type, exit
status 2 (1 for an error inside the user's own function); `--debug` shows the traceback instead."""
import os
import subprocess
import sys

import pytest

from tracejit.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MYMOD = "def f(x, w):\n    return (x @ w).relu().sum()\n\ndef boom(x):\n    raise ValueError('inside f')\n\nN = 3\n"


@pytest.fixture
def here(tmp_path, monkeypatch):
    (tmp_path / "mymod.py").write_text(MYMOD)
    (tmp_path / "broken.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for m in ("mymod", "broken"):
        sys.modules.pop(m, None)
    yield tmp_path


def _one_line(capsys, argv, status=2):
    assert main(argv) == status
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"tracejit {argv[0]}")
    return lines[0]


@pytest.mark.parametrize("argv,says", [
    (["explain", "nosuchmod:f", "--inputs", "f32[2]"], "no module named 'nosuchmod'"),
    (["explain", "mymod.py:f", "--inputs", "f32[2]"], "tracejit explain mymod:f"),
    (["explain", "sub/dir/mymod.py:f", "--inputs", "f32[2]"], "cd sub/dir && tracejit explain mymod:f"),
    (["explain", "mymod", "--inputs", "f32[2]"], "MODULE:FUNCTION"),
    (["explain", "mymod:g", "--inputs", "f32[2]"], "has no 'g'; it defines: boom, f"),
    (["explain", "mymod:N", "--inputs", "f32[2]"], "not a function"),
    (["explain", "broken:f", "--inputs", "f32[2]"], "importing 'broken' failed: ModuleNotFoundError"),
    (["explain", "mymod:f", "--inputs", "float32[8,4] f32[4,3]"], "unknown dtype 'float32'"),
    (["explain", "mymod:f", "--inputs", "f32[8,4] f32(4,3)"], "cannot read 'f32(4,3)'"),
    (["explain", "mymod:f", "--inputs", "f32[8,x]"], "cannot read the shape"),
    (["explain", "mymod:f", "--inputs", "f32[8,4]"], "takes 2 input(s) (x, w), --inputs gives 1"),
    (["explain", "mymod:f", "--inputs", "f32[8,4] f32[4,3] f32[3]"], "--inputs gives 3"),
    (["explain", "mymod:f", "--inputs", "f32[8,4] f32[4,3]", "--backend", "nope"], "'nope': choose 'numba'"),
    (["explain", "mymod:f", "--inputs", "f32[8,4] f32[4,3]", "--html", "/no/such/dir/x.html"], "--html"),
    (["demo", "--steps", "0"], "at least 2"),
    (["demo", "--threads", "0"], "positive number of threads"),
    (["demo", "--backend", "nope"], "'nope': choose 'numba'"),
    (["bench", "--json", "/no/such/dir/x.json"], "does not exist"),
])
def test_a_mistake_is_one_line_with_the_fix(here, capsys, argv, says):
    line = _one_line(capsys, argv)
    assert says in line, line


def test_an_error_inside_the_users_function_is_one_line_and_debug_shows_the_traceback(here, capsys):
    line = _one_line(capsys, ["explain", "mymod:boom", "--inputs", "f32[3]"], status=1)
    assert "ValueError: inside f" in line and "--debug" in line
    with pytest.raises(ValueError, match="inside f"):
        main(["explain", "mymod:boom", "--inputs", "f32[3]", "--debug"])


def test_unknown_benchmark_and_compare_system_say_what_exists(capsys):
    assert main(["bench", "no_such_bench"]) == 2
    assert "available:" in capsys.readouterr().out
    assert main(["bench", "--compare", "tensorflow"]) == 2
    assert "choose from" in capsys.readouterr().out


def test_debug_flag_in_a_real_process_prints_the_traceback(tmp_path):
    (tmp_path / "mymod.py").write_text(MYMOD)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "tracejit", "explain", "mymod:f", "--inputs", "float32[8,4] f32[4,3]"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "f32" in r.stderr, r.stderr
    r = subprocess.run(cmd + ["--debug"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode != 0 and "Traceback" in r.stderr and "UsageError" in r.stderr, r.stderr[-2000:]
