"""Every file in the cache folders can go bad, and the next process still answers correctly.

Real processes on real folders: one fills a cache (tracejit's generated kernels and numba's caches of them and of
the runtime helpers in kernels/cpu, all under folders of this test), then every file in it is truncated, emptied,
replaced by garbage or by another kernel's valid file, and new processes must print the right answer, log one
line per bad file, and heal the cache (the process after compiles nothing). Also: a read-only cache is read, a
full disk loses only cache entries, and the per-process fallback folder is removed."""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = r'''
import numpy as np, tracejit as t, tracejit.nn.functional as F
@t.trace
def f(x):
    return (F.softmax(x * 2, -1).tanh() + x.exp()).sum(-1)
x = t.linspace(-1, 1, 12).reshape(3, 4)
xa = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4).astype(np.float64)
e = np.exp(xa * 2)
want = (np.tanh(e / e.sum(-1, keepdims=True)) + np.exp(xa)).sum(-1)
np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-5)
import sys
from numba.core.dispatcher import Dispatcher
n = 0                               # numba compilations of the runtime helpers and the generated kernels
for m in list(sys.modules.values()):
    if getattr(m, "__name__", "").startswith(("kernels.", "tj_")):
        n += sum(sum(v.stats.cache_misses.values()) for v in vars(m).values() if isinstance(v, Dispatcher))
print("RESULT-OK compiled", n)
'''

# (a process that cannot write under `ro`: what a read-only folder does to Python code, for a root user too,
# whom permission bits do not stop)
READ_ONLY = r'''
import builtins, errno, os, sys
ro = os.path.realpath(os.environ["TJ_TEST_READ_ONLY"])
def _in(p):
    try:
        return os.path.realpath(os.fspath(p)).startswith(ro)
    except TypeError:
        return False
def _deny(p):
    raise PermissionError(errno.EROFS, "Read-only file system", os.fspath(p))
_open, _os_open, _replace, _unlink, _mkdir = builtins.open, os.open, os.replace, os.unlink, os.mkdir
def open_(f, mode="r", *a, **k):
    if isinstance(f, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+") and _in(f):
        _deny(f)
    return _open(f, mode, *a, **k)
def os_open(p, flags, *a, **k):
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and _in(p):
        _deny(p)
    return _os_open(p, flags, *a, **k)
def replace(a, b, **k):
    if _in(b):
        _deny(b)
    return _replace(a, b, **k)
def unlink(p, **k):
    if _in(p):
        _deny(p)
    return _unlink(p, **k)
def mkdir(p, *a, **k):
    if _in(p) and not os.path.isdir(p):
        _deny(p)
    return _mkdir(p, *a, **k)
builtins.open, os.open, os.replace, os.unlink, os.remove, os.mkdir = open_, os_open, replace, unlink, unlink, mkdir
'''

# a full disk: every file write past 3000 bytes fails (EFBIG), in the cache and in TMPDIR alike
FULL_DISK = r'''
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))
'''


def _run(cache, prelude="", env=None, tmpdir=None):
    e = dict(os.environ, TRACEJIT_CACHE_DIR=os.path.join(cache, "tj"), NUMBA_CACHE_DIR=os.path.join(cache, "nb"),
             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    if tmpdir:
        e["TMPDIR"] = tmpdir
    r = subprocess.run([sys.executable, "-c", prelude + PROGRAM], env=e, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "RESULT-OK" in r.stdout, r.stdout + r.stderr[-3000:]
    return int(r.stdout.split("RESULT-OK compiled")[1].split()[0]), r.stderr


def _files(d):
    return sorted(os.path.join(p, n) for p, _, ns in os.walk(d) for n in ns)


@pytest.fixture(scope="module")
def filled():
    d = tempfile.mkdtemp(prefix="tj-recovery-")
    try:
        compiled, _ = _run(d)
        assert compiled > 0
        kinds = {os.path.splitext(f)[1] for f in _files(d)}
        assert kinds >= {".py", ".nbi", ".nbc"}, kinds
        assert any("/nb/cpu_" in f for f in _files(d))      # numba's cache of the runtime helpers is in there
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _spoil(d, how):
    files = _files(d)
    by_ext = {}
    for f in files:
        by_ext.setdefault(os.path.splitext(f)[1], []).append(f)
    if how == "foreign":            # each file gets another file's (valid) content of the same kind
        for group in by_ext.values():
            blobs = [open(f, "rb").read() for f in group]
            for f, b in zip(group, blobs[1:] + blobs[:1]):
                open(f, "wb").write(b if len(group) > 1 else b"X = 1\n")
        return files
    for f in files:
        data = open(f, "rb").read()
        new = {"truncated": data[:len(data) // 2], "emptied": b"", "garbage": os.urandom(max(64, len(data)))}[how]
        open(f, "wb").write(new)
    return files


@pytest.mark.parametrize("how", ["truncated", "emptied", "garbage", "foreign"])
def test_every_file_spoiled_next_process_answers_and_heals(filled, tmp_path, how):
    d = str(tmp_path / "cache")
    shutil.copytree(filled, d)
    spoiled = _spoil(d, how)
    compiled, err = _run(d)                      # right answer (checked inside), kernels compiled again
    assert compiled > 0
    logged = [ln for ln in err.splitlines() if ln.startswith("tracejit:")]
    # one line per bad file it met (no tracebacks), naming the file; the numba helper caches among them
    assert logged and "Traceback" not in err, err[-3000:]
    assert len(logged) <= len(spoiled), logged
    assert any("/nb/cpu_" in ln for ln in logged) or how == "foreign", logged
    compiled, err = _run(d)                      # healed: the next process compiles nothing, says nothing
    assert compiled == 0 and "tracejit:" not in err, err[-3000:]


def test_read_only_cache_is_read_and_nothing_is_left_behind(filled, tmp_path):
    d = filled          # (in place: numba's folder names for the generated kernels hold their folder's path)
    before = {f: os.path.getmtime(f) for f in _files(d)}
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    compiled, err = _run(d, READ_ONLY, {"TJ_TEST_READ_ONLY": d}, tmpdir=tmp)
    assert compiled == 0, err[-3000:]            # every kernel loaded from the read-only folders
    assert {f: os.path.getmtime(f) for f in _files(d)} == before
    assert os.listdir(tmp) == []


def test_unwritable_cache_uses_a_fallback_folder_that_is_removed(tmp_path):
    d = str(tmp_path / "cache")
    os.makedirs(d)
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    stale = os.path.join(tmp, "tracejit-cache-%d-x" % _dead_pid())    # left by a process killed earlier
    os.makedirs(os.path.join(stale, "__pycache__"))
    compiled, err = _run(d, READ_ONLY, {"TJ_TEST_READ_ONLY": d}, tmpdir=tmp)
    assert "cannot be written" in err and err.count("Traceback") == 0, err[-3000:]
    assert os.listdir(tmp) == []                 # its own fallback removed at exit, the stale one too
    assert _files(d) == []


def test_full_disk_loses_only_cache_entries(tmp_path):
    d = str(tmp_path / "cache")
    tmp = str(tmp_path / "tmp")
    os.makedirs(tmp)
    compiled, err = _run(d, FULL_DISK, tmpdir=tmp)     # the right answer though no write succeeds in full
    assert compiled > 0 and "Traceback" not in err, err[-3000:]
    assert not [f for f in _files(d) + _files(tmp) if ".tmp" in os.path.basename(f)]   # no partial files
    compiled, err = _run(d, tmpdir=tmp)          # space again: entries written now, then used
    compiled, err = _run(d, tmpdir=tmp)
    assert compiled == 0 and "tracejit:" not in err, err[-3000:]


def _dead_pid():
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            pass
        pid -= 1
