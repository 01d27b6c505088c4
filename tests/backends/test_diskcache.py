"""The disk cache of generated kernel source (tracejit.backends.diskcache): write once, reuse across processes,
survive corrupt files (ours and numba's) and concurrent writers."""
import glob
import json
import os
import random
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tracejit.backends import diskcache as dc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kernel_source(tag, scale=2.0):
    # `tag` makes each test's source (and so its module name) distinct
    return textwrap.dedent(f"""\
        # tracejit diskcache test kernel: {tag}
        import numba


        @numba.njit(cache=True, nogil=True, error_model='numpy')
        def kern(x, out):
            for i in range(x.size):
                out[i] = x[i] * numba.float32({scale}) + numba.float32(1.0)
        """)


def run_kernel(mod, scale=2.0, n=1000):
    x = np.linspace(-3, 3, n).astype(np.float32)
    out = np.empty_like(x)
    mod.kern(x, out)
    np.testing.assert_allclose(out, x * np.float32(scale) + np.float32(1), rtol=1e-6)
    return out


def numba_files(src, kind="k"):
    d = os.path.dirname(dc.entry_path(src, kind))
    name = os.path.basename(dc.entry_path(src, kind))[:-3]
    return sorted(glob.glob(os.path.join(d, "__pycache__", name + ".*.nb[ic]")))


def run_child(code, cache_dir, timeout=900):
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    d = tmp_path / "tjcache"
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(d))
    return d


def test_cache_dir_reads_env_each_call(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "a"))
    a = dc.cache_dir()
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "b"))
    b = dc.cache_dir()
    assert os.path.isdir(a) and os.path.isdir(b)
    assert os.path.dirname(a) == str(tmp_path / "a") and os.path.dirname(b) == str(tmp_path / "b")
    import numba
    tag = os.path.basename(a)
    assert tag == dc.version_tag() and f"numba{numba.__version__}" in tag and "llvmlite" in tag
    monkeypatch.delenv("TRACEJIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert dc.cache_root() == str(tmp_path / "xdg" / "tracejit")
    assert dc.cache_dir().startswith(str(tmp_path / "xdg" / "tracejit" / "tj"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert dc.cache_root() == str(tmp_path / "home" / ".cache" / "tracejit")


def test_write_load_run(cache_env):
    src = kernel_source("write_load_run")
    c0 = dc.compile_count()
    mod = dc.load_module(src)
    path = dc.entry_path(src)
    assert mod.__file__ == path and os.path.basename(path).startswith("tj_k_")
    assert len(os.path.basename(path)) == len("tj_k_") + 24 + 3
    with open(path, encoding="utf-8") as f:
        assert f.read() == src
    assert sys.modules[mod.__name__] is mod
    run_kernel(mod)
    assert dc.compile_count() - c0 == 1
    assert numba_files(src), "numba wrote no cache files next to the entry"
    info = dc.cache_info()
    assert info["path"] == os.path.dirname(path) and info["path"].startswith(str(cache_env))
    assert info["entries"] == 1 and info["bytes"] > len(src) and info["loaded"] >= 1
    assert not [f for f in os.listdir(info["path"]) if f.endswith(".tmp")]


def test_same_source_same_module_not_rewritten():
    src = kernel_source("same_module")
    w0 = dc.cache_info()["written"]
    m1 = dc.load_module(src)
    assert dc.cache_info()["written"] == w0 + 1
    path = dc.entry_path(src)
    st = os.stat(path)
    assert dc.load_module(src) is m1
    # a process that has not loaded it yet (memo forgotten) reuses the file as it is
    written = dc.cache_info()["written"]
    dc._MEMO.pop(path)
    m2 = dc.load_module(src)
    assert m2 is not m1
    st2 = os.stat(path)
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert dc.cache_info()["written"] == written
    # kinds are separate entries
    assert dc.entry_path(src, "other") != path
    with pytest.raises(ValueError):
        dc.load_module(src, "bad/kind")


@pytest.mark.parametrize("corruption", ["truncated", "garbage", "empty"])
def test_corrupt_source_entry_is_rewritten(corruption, caplog):
    src = kernel_source(f"corrupt_py_{corruption}", scale=3.0)
    path = dc.entry_path(src)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    bad = {"truncated": src.encode()[: len(src) // 2],
           "garbage": bytes(random.Random(0).randrange(256) for _ in range(300)),
           "empty": b""}[corruption]
    with open(path, "wb") as f:
        f.write(bad)
    n = dc.cache_info()["rewritten_corrupt"]
    with caplog.at_level("WARNING", logger="tracejit"):
        mod = dc.load_module(src)
    assert [r.getMessage() for r in caplog.records] == [
        f"tracejit: the kernel cache file {path} did not hold its source (truncated, emptied or replaced): written again"]
    with open(path, encoding="utf-8") as f:
        assert f.read() == src
    assert dc.cache_info()["rewritten_corrupt"] == n + 1
    run_kernel(mod, scale=3.0, n=17)


def _truncate(p):
    with open(p, "rb") as f:
        b = f.read()
    with open(p, "wb") as f:
        f.write(b[: len(b) // 2])


def _garble(p):
    # overwrite 64 bytes in the middle: for a data file the pickle may still load, with broken machine code
    with open(p, "rb") as f:
        b = bytearray(f.read())
    r = random.Random(1)
    mid = len(b) // 2
    for i in range(max(0, mid - 32), min(len(b), mid + 32)):
        b[i] = r.randrange(256)
    with open(p, "wb") as f:
        f.write(bytes(b))


def _empty(p):
    open(p, "wb").close()


def test_corrupt_numba_cache_recovers():
    src = kernel_source("corrupt_numba", scale=5.0)
    path = dc.entry_path(src)
    run_kernel(dc.load_module(src), scale=5.0)          # compiles and writes the numba cache
    files = numba_files(src)
    assert {os.path.splitext(f)[1] for f in files} == {".nbi", ".nbc"}
    good = {}
    for f in files:
        with open(f, "rb") as fh:
            good[f] = fh.read()

    def fresh_module():   # what a new process would do: a new module and a new dispatcher
        dc._MEMO.pop(path, None)
        return dc.load_module(src)

    # sanity: intact files are a cache hit
    c0, h0 = dc.compile_count(), dc.cache_hit_count()
    run_kernel(fresh_module(), scale=5.0)
    assert (dc.compile_count() - c0, dc.cache_hit_count() - h0) == (0, 1)

    for ext in (".nbi", ".nbc"):
        for damage in (_truncate, _garble, _empty):
            what = f"{damage.__name__} {ext}"
            for f, b in good.items():
                with open(f, "wb") as fh:
                    fh.write(b)
            damage(next(f for f in files if f.endswith(ext)))
            c0, e0 = dc.compile_count(), dc.cache_info()["numba_cache_errors"]
            run_kernel(fresh_module(), scale=5.0)           # must not raise, must be right
            assert dc.compile_count() - c0 == 1, what       # it recompiled ...
            assert dc.cache_info()["numba_cache_errors"] - e0 >= 1, what
            c0, h0 = dc.compile_count(), dc.cache_hit_count()
            run_kernel(fresh_module(), scale=5.0)           # ... and wrote a good cache again
            assert (dc.compile_count() - c0, dc.cache_hit_count() - h0) == (0, 1), what


def test_fresh_process_compiles_nothing(cache_env):
    src = kernel_source("fresh_process", scale=7.0)
    t0 = time.perf_counter()
    run_kernel(dc.load_module(src), scale=7.0)
    cold = time.perf_counter() - t0
    child = f"""
        import json, time
        t0 = time.perf_counter()
        import numpy as np
        from tracejit.backends import diskcache as dc
        t1 = time.perf_counter()
        mod = dc.load_module({src!r})
        x = np.arange(100, dtype=np.float32); out = np.empty_like(x)
        mod.kern(x, out)
        t2 = time.perf_counter()
        info = dc.cache_info()
        print(json.dumps(dict(ok=bool(np.allclose(out, x * 7 + 1)), compiled=dc.compile_count(),
                              hits=dc.cache_hit_count(), written=info["written"], entries=info["entries"],
                              imports=t1 - t0, load_and_call=t2 - t1)))
        """
    r = run_child(child, cache_env)
    assert r["ok"] and r["compiled"] == 0 and r["hits"] >= 1 and r["written"] == 0 and r["entries"] == 1, r
    print(f"cold load+compile+call in-process {cold:.3f}s; fresh process: imports {r['imports']:.3f}s, "
          f"cache-hit load+call {r['load_and_call']:.3f}s")


def test_racing_processes(cache_env, tmp_path):
    src = kernel_source("race", scale=11.0)
    nproc = 2
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    child = f"""
        import json, os, sys, time
        import numpy as np
        from tracejit.backends import diskcache as dc
        me, n, barrier, src = int(sys.argv[1]), {nproc}, {str(barrier)!r}, {src!r}
        path = dc.entry_path(src)
        open(os.path.join(barrier, str(me)), "w").close()
        while len(os.listdir(barrier)) < n:          # start together
            time.sleep(0.001)
        mod = dc.load_module(src)                    # races: .py write, numba compile + cache save
        x = np.arange(100, dtype=np.float32); out = np.empty_like(x)
        mod.kern(x, out)
        ok = bool(np.allclose(out, x * 11 + 1))
        bad = 0
        data = src.encode()
        for i in range(80):                          # hammer the atomic write while the others read
            if (i + me) % 2:
                dc._atomic_write(path, data)
            else:
                with open(path, "rb") as f:
                    bad += f.read() != data
        print(json.dumps(dict(ok=ok, bad_reads=bad)))
        """
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(cache_env))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(child), str(i)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(nproc)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] and r["bad_reads"] == 0 for r in results), results
    d = dc.cache_dir()
    with open(dc.entry_path(src), encoding="utf-8") as f:
        assert f.read() == src
    leftovers = [f for f in os.listdir(d) + os.listdir(os.path.join(d, "__pycache__")) if ".tmp" in f]
    assert not leftovers and dc.cache_info()["entries"] == 1
    # what the racers left is a valid numba cache: loading it here compiles nothing
    c0, h0 = dc.compile_count(), dc.cache_hit_count()
    run_kernel(dc.load_module(src), scale=11.0)
    assert (dc.compile_count() - c0, dc.cache_hit_count() - h0) == (0, 1)


def test_clear_cache():
    srcs = [kernel_source(f"clear_{i}", scale=float(i)) for i in (1, 2)]
    mods = [dc.load_module(s) for s in srcs]
    for i, m in zip((1, 2), mods):
        run_kernel(m, scale=float(i), n=10)
    d = dc.cache_dir()
    foreign = os.path.join(d, "README.txt")
    with open(foreign, "w") as f:
        f.write("not ours")
    assert dc.cache_info()["entries"] == 2
    assert dc.clear_cache() == 2
    info = dc.cache_info()
    assert info["entries"] == 0 and info["bytes"] == len("not ours")
    assert os.listdir(d) == ["README.txt"]            # only tracejit's files (and empty __pycache__) removed
    run_kernel(mods[0], scale=1.0, n=10)                # loaded modules keep working
    c0 = dc.compile_count()
    m = dc.load_module(srcs[0])                          # future loads write and compile again
    assert m is not mods[0] and os.path.exists(dc.entry_path(srcs[0]))
    run_kernel(m, scale=1.0, n=10)
    assert dc.compile_count() - c0 == 1
    assert dc.clear_cache(all_versions=True) == 1 and dc.cache_info()["entries"] == 0


def test_kernel_compile_error():
    bad = "import numba\n\ndef kern(x:\n    pass\n"
    KernelCompileError = dc.KernelCompileError
    with pytest.raises(KernelCompileError) as ei:
        dc.load_module(bad)
    assert isinstance(ei.value, RuntimeError)
    assert "interpreter" in str(ei.value) and ei.value.path == dc.entry_path(bad)
    assert ei.value.kernel == os.path.basename(dc.entry_path(bad))[:-3]
    assert ei.value.kernel not in sys.modules
    # the error class is raisable by the code generator with its own message
    with pytest.raises(RuntimeError, match="fused_3"):
        raise KernelCompileError("kernel fused_3 failed; use backend=\"interpreter\"", kernel="fused_3")


def test_entry_removed_before_import_is_rewritten(monkeypatch):
    # another process's clear_cache can remove the file between our write and numba's decorator, which
    # needs the file ("no locator available"): load_module writes it again and retries once
    src = kernel_source("removed_before_import", scale=13.0)
    real = dc._exec_module
    calls = []

    def exec_after_removal(name, path, source):
        if not calls:
            os.unlink(path)
        calls.append(path)
        return real(name, path, source)

    monkeypatch.setattr(dc, "_exec_module", exec_after_removal)
    mod = dc.load_module(src)
    assert len(calls) == 2 and os.path.exists(dc.entry_path(src))
    run_kernel(mod, scale=13.0, n=10)


def test_fresh_process_traced_program_from_cache(cache_env):
    """A traced program whose kernels span the ways a cached kernel can depend on numba's runtime (prange
    variants through the threading layer, a row kernel with scratch rows, an integer division that raises):
    a second process loads them all without compiling, gets eager's numbers, and still raises on x // 0."""
    child = """
        import json, os, sys
        import numpy as np
        import tracejit as tj
        from tracejit.backends import diskcache as dc

        def f(x, w, k, d):
            y = tj.softmax(tj.tanh(x) * w, dim=-1)
            return (y * x).sum(), k // d

        rng = np.random.default_rng(0)
        xs, ws = rng.standard_normal((64, 256), dtype=np.float32), rng.standard_normal(256, dtype=np.float32)
        k, d = tj.tensor(np.arange(-20, 20)), tj.tensor(np.arange(1, 41))

        def run(fn):
            x = tj.tensor(xs, requires_grad=True)
            loss, q = fn(x, tj.tensor(ws), k, d)
            loss.backward()
            return float(loss), x.grad.numpy(), q.numpy()

        got, want = run(tj.trace(f)), run(f)
        try:
            tj.trace(f)(tj.tensor(xs), tj.tensor(ws), k, tj.tensor(np.arange(40) % 3))
            raised = ""
        except RuntimeError as e:
            raised = str(e)
        print(json.dumps(dict(compiled=dc.compile_count(), hits=dc.cache_hit_count(),
                              loss=abs(got[0] - want[0]) / abs(want[0]),
                              grad=float(np.abs(got[1] - want[1]).max()), q=bool((got[2] == want[2]).all()),
                              raised=raised)))
        """
    env_par = dict(os.environ, TRACEJIT_PARALLEL_MIN="1000",     # the prange variants run at these sizes
                   TRACEJIT_DIRECT_KERNELS="0")                 # (numba's compile of each: test_direct.py)
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(child)], cwd=ROOT, capture_output=True, text=True,
                           env=dict(env_par, TRACEJIT_CACHE_DIR=str(cache_env)), timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["compiled"] > 0, cold
    assert warm["compiled"] == 0 and warm["hits"] >= cold["compiled"], warm
    for r in runs:
        assert r["loss"] < 1e-5 and r["grad"] < 1e-5 and r["q"], r
        assert "ZeroDivisionError" in r["raised"], r


def test_cold_program_compiles_only_its_kernels(cache_env):
    """A cold process (empty cache) compiles the program's kernels and tracejit's helpers, nothing of numba's
    own: kernels allocate no arrays (scratch rows come from the host), call the per-dtype math helpers, and
    numba's start-up leaves scipy.linalg unimported. Each of numba's overloads costs 30-100 ms per process."""
    child = """
        import json, os, sys, importlib.util
        os.environ["TRACEJIT_COMPILE_WORKERS"] = "0"      # every compilation in this process, where we listen
        import numpy as np
        import tracejit as tj
        from numba.core import event

        compiled = []

        class Listen(event.Listener):
            def on_start(self, ev):
                pass

            def on_end(self, ev):
                if listening:
                    compiled.append(ev.data["dispatcher"].py_func.__module__)

        listening = [1]
        event.register("numba:compile", Listen())

        def f(x, w, b):
            y = tj.softmax(tj.tanh(x) * w, dim=-1)                    # a row kernel
            z = tj.relu(x + b).sum(0) / 64                             # an nd kernel summing over rows
            return (y * x).sum() + (tj.exp(z) * 0.5).sum() + tj.sigmoid(x).sum()   # full sums (chunks)

        rng = np.random.default_rng(0)
        out = {}
        for dt in (np.float32, np.float64):
            a = [rng.standard_normal(s).astype(dt) for s in ((64, 256), (256,), (256,))]
            ts = [tj.tensor(v, requires_grad=True) for v in a]
            loss = tj.trace(f)(*ts)
            loss.backward()
            es = [tj.tensor(v, requires_grad=True) for v in a]
            listening.clear()           # (the eager reference: its hand-written kernels allocate, numba's overloads
            want = f(*es)               # compile with them where no earlier process cached them)
            want.backward()
            listening.append(1)
            out[dt.__name__] = max([abs(float(loss) - float(want)) / abs(float(want))] +
                                   [float(np.abs(t.grad.numpy() - e.grad.numpy()).max() / np.abs(e.grad.numpy()).max())
                                    for t, e in zip(ts, es)])
        scipy = importlib.util.find_spec("scipy") is not None
        print(json.dumps(dict(compiled=compiled, err=out, scipy=scipy, linalg="scipy.linalg" in sys.modules)))
        """
    r = run_child(child, cache_env, timeout=900)
    mods = r["compiled"]
    assert any(m.startswith("tj_kernel_") for m in mods), mods
    assert all(m.startswith(("tj_kernel_", "kernels.", "tracejit.")) for m in mods), mods
    assert r["err"]["float32"] < 1e-4 and r["err"]["float64"] < 1e-10, r["err"]
    assert not r["linalg"], "numba's start-up imported scipy.linalg"


def test_tampered_machine_code_is_caught_by_checksum(caplog):
    # Unlike _garble, this keeps the pickle framing intact: only a constant inside the cached machine code
    # changes (5.0 -> 7.0), so the data file still unpickles. Only the checksum can tell; without it the
    # kernel would load and silently compute x * 7 + 1.
    src = kernel_source("tampered_code", scale=5.0)
    path = dc.entry_path(src)
    run_kernel(dc.load_module(src), scale=5.0)
    (nbc,) = [f for f in numba_files(src) if f.endswith(".nbc")]
    with open(nbc, "rb") as f:
        blob = f.read()
    five, seven = np.float32(5.0).tobytes(), np.float32(7.0).tobytes()
    assert blob.count(five) >= 1, "the constant 5.0 is not in the cached machine code"
    with open(nbc, "wb") as f:
        f.write(blob.replace(five, seven))
    dc._MEMO.pop(path, None)
    c0, e0 = dc.compile_count(), dc.cache_info()["numba_cache_errors"]
    with caplog.at_level("WARNING", logger="tracejit"):
        run_kernel(dc.load_module(src), scale=5.0)      # right numbers: the tampered entry was not used
    assert dc.compile_count() - c0 == 1
    assert dc.cache_info()["numba_cache_errors"] - e0 == 1
    assert any("(ValueError: corrupt numba cache file " in r.getMessage() for r in caplog.records)   # the checksum


def test_unwritable_cache_folder_falls_back_to_a_private_folder_then_to_memory(cache_env, monkeypatch, caplog):
    # in-process (the subprocess tests of test_cache_recovery.py cover the same from outside): writes into the
    # cache folder fail, so the entry goes to this process's fallback folder; when that fails too, the kernel
    # runs from memory, uncached, with one warning naming it
    real = dc._ensure_file
    primary = os.path.realpath(str(cache_env))
    blocked = [primary]

    def ensure(path, data):
        if any(os.path.realpath(path).startswith(b) for b in blocked):
            raise OSError(28, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(dc, "_ensure_file", ensure)
    monkeypatch.setitem(dc._STATS, "fallback_dir", None)
    at_exit = []
    monkeypatch.setattr(dc.atexit, "register", lambda fn, *args: at_exit.append((fn, args)))
    src = kernel_source("fallback_folder", scale=5.0)
    with caplog.at_level("WARNING", logger="tracejit"):
        mod = dc.load_module(src)
    fb = dc._STATS["fallback_dir"]
    name = os.path.basename(dc.entry_path(src))
    assert fb and mod.__file__ == os.path.join(fb, name)
    # named for this process (a later process removes it if this one dies without its exit handler)
    assert os.path.basename(fb).startswith(f"tracejit-cache-{os.getpid()}-") and at_exit == [(dc._remove_tree, (fb,))]
    assert [r.getMessage() for r in caplog.records] == [
        f"tracejit: the kernel cache folder {dc._dir_path()} cannot be written; kernels compiled now are kept in "
        f"{fb} until this process exits"]
    with open(mod.__file__, encoding="utf-8") as f:
        assert f.read() == src
    run_kernel(mod, scale=5.0)
    assert dc.load_module(src) is mod                  # memoized under the cache folder's path too
    blocked.append(os.path.realpath(fb))
    src2 = kernel_source("nowhere_to_write", scale=6.0)
    with caplog.at_level("WARNING", logger="tracejit"):
        mod2 = dc.load_module(src2)
    run_kernel(mod2, scale=6.0)
    name2 = os.path.basename(dc.entry_path(src2))[:-3]
    assert f"tracejit: cannot write the kernel {name2} anywhere ([Errno 28] No space left on device); it runs " \
           "uncached" in [r.getMessage() for r in caplog.records]
    with pytest.raises(dc.KernelCompileError):      # a bad module with nowhere to write: its own error, once
        dc.load_module("def f(:\n")
    assert not os.path.exists(os.path.join(fb, name2 + ".py"))
    assert type(mod2.kern._cache).__name__ == "NullCache"          # numba's cache=False
    assert type(mod.kern._cache).__name__ != "NullCache"
    dc._remove_tree(fb)


def test_version_tag_names_the_versions_and_hashes_every_helper(monkeypatch):
    import llvmlite
    import numba
    import re
    files = dc._helper_files()
    assert [os.path.relpath(f, os.path.dirname(os.path.dirname(dc.__file__))) for f in files[3:]] == [
        os.path.join("backends", "numba_cpu", "rt.py"), os.path.join("backends", "scalar_rt.py"),
        os.path.join("backends", "diskcache.py")]
    assert [os.path.basename(f) for f in files[:3]] == ["vmath.py", "rows.py", "special.py"] and \
        all(map(os.path.isfile, files))
    monkeypatch.setattr(dc, "_TAG", None)
    tag = dc.version_tag()
    py = f"{sys.version_info[0]}{sys.version_info[1]}"
    np_ver = ".".join(np.__version__.split(".")[:2])
    assert re.fullmatch(rf"tj[0-9][0-9a-z.+_]*-numba{re.escape(numba.__version__)}-llvmlite"
                        rf"{re.escape(llvmlite.__version__)}-np{re.escape(np_ver)}-py{py}-[0-9a-f]{{12}}", tag), tag
    real = dc._file_hash
    for f in files:             # a change to any helper gives another folder
        monkeypatch.setattr(dc, "_file_hash", lambda p, f=f: real(p) + ("x" if p == f else ""))
        monkeypatch.setattr(dc, "_TAG", None)
        assert dc.version_tag() != tag, f


def test_atomic_write_goes_through_a_temp_file_beside_the_entry(monkeypatch, tmp_path):
    renames = []
    real = os.replace
    monkeypatch.setattr(dc.os, "replace", lambda a, b: (renames.append((a, b)), real(a, b))[1])
    path = str(tmp_path / "tj_k_abc.py")
    dc._atomic_write(path, b"x = 1\n")
    ((tmp, dst),) = renames
    assert dst == path and os.path.dirname(tmp) == str(tmp_path) and not os.path.exists(tmp)
    assert os.path.basename(tmp).startswith(".tmp-tj_k_abc.py.") and tmp.endswith(".tmp") and dc._ours(
        os.path.basename(tmp))
    with open(path, "rb") as f:
        assert f.read() == b"x = 1\n"


def test_clear_cache_removes_only_tracejits_files_and_version_folders(cache_env, tmp_path):
    assert dc.clear_cache() == 0 and dc.clear_cache(all_versions=True) == 0      # nothing there yet
    d = dc.cache_dir()
    other = os.path.join(str(cache_env), "tj-an-older-version")
    mine = os.path.join(str(cache_env), "notes")
    target = tmp_path / "linked"
    for folder in (other, mine, str(target), os.path.join(d, "sub")):
        os.makedirs(folder)
    files = {os.path.join(d, "tj_k_1.py"), os.path.join(d, ".tmp-tj_k_2.py.123.tmp"), os.path.join(other, "tj_k_3.py"),
             os.path.join(other, "tj_k_4.py")}
    kept = {os.path.join(mine, "tj_k_5.py"), str(target / "tj_k_6.py"), os.path.join(d, "sub", "tj_k_7.py")}
    for f in files | kept:
        open(f, "w").close()
    os.symlink(str(target), os.path.join(str(cache_env), "tj-linked"))
    assert dc.clear_cache() == 1                        # this version's folder only; a leftover temp file too
    assert os.path.exists(os.path.join(other, "tj_k_3.py")) and not os.path.exists(os.path.join(d, "tj_k_1.py"))
    assert not os.path.exists(os.path.join(d, ".tmp-tj_k_2.py.123.tmp"))
    open(os.path.join(d, "tj_k_8.py"), "w").close()
    assert dc.clear_cache(all_versions=True) == 3       # summed over the folders
    assert not os.path.exists(other) and os.path.isdir(d)  # an emptied older version's folder goes, ours stays
    assert all(map(os.path.exists, kept))               # not a version folder, behind a link, or a sub-folder


def test_clear_cache_removes_numbas_files_in_numba_cache_dir(monkeypatch, tmp_path):
    from numba.core import config
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "numba"))
    src = kernel_source("numba_cache_dir", scale=3.0)
    run_kernel(dc.load_module(src), scale=3.0, n=10)
    nd = dc._numba_cache_dir_for(os.path.dirname(dc.entry_path(src)))
    assert nd.startswith(str(tmp_path / "numba")) and any(n.startswith("tj_") for n in os.listdir(nd))
    assert dc.clear_cache() == 1
    assert not os.path.exists(nd) or not any(n.startswith("tj_") for n in os.listdir(nd))


def test_stale_fallback_folders_of_dead_processes_are_removed(monkeypatch, tmp_path):
    monkeypatch.setattr(dc.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = ["a-unrelated", f"tracejit-cache-{dead}-abc", f"tracejit-cache-{os.getpid()}-own",
                 f"tracejit-cache-{live.pid}-live", "tracejit-cache-notapid-x", f"zz-{dead}-abc"]
        for n in names:
            os.makedirs(str(tmp_path / n / "inner"))
        dc._remove_stale_fallbacks()
        assert sorted(os.listdir(str(tmp_path))) == sorted(n for n in names if n != f"tracejit-cache-{dead}-abc")
        with pytest.raises(subprocess.TimeoutExpired):   # asked whether it lives (signal 0), nothing sent
            live.wait(timeout=0.3)
        dc._remove_tree(str(tmp_path / "missing"))          # no error
    finally:
        live.kill()
        live.wait()


def test_cache_info_counts_entries_and_bytes_without_following_links(cache_env, tmp_path):
    info = dc.cache_info()
    assert not os.path.exists(info["path"]) and info["entries"] == 0 and info["bytes"] == 0
    assert set(info) == {"path", "root", "version_tag", "entries", "bytes", "loaded", "compiled", "cache_hits",
                         "written", "rewritten_corrupt", "numba_cache_errors", "fallback_dir", "helpers",
                         "compiled_by_helpers", "helper_failures"}
    assert (info["root"], info["version_tag"]) == (dc.cache_root(), dc.version_tag())
    assert (info["compiled"], info["cache_hits"]) == (dc.compile_count(), dc.cache_hit_count())
    d = dc.cache_dir()
    outside = tmp_path / "outside"
    os.makedirs(str(outside))
    os.makedirs(os.path.join(d, "sub"))
    for path, size in ((os.path.join(d, "tj_a.py"), 10), (os.path.join(d, "tj_b.py"), 20),
                       (os.path.join(d, "notes.txt"), 5), (os.path.join(d, "sub", "inner.bin"), 7),
                       (os.path.join(d, "sub", "tj_c.py"), 3), (str(outside / "big.bin"), 1000)):
        with open(path, "wb") as f:
            f.write(b"x" * size)
    os.symlink(str(outside / "big.bin"), os.path.join(d, "tj_link.py"))
    os.symlink(str(outside), os.path.join(d, "linked"))
    info = dc.cache_info()
    assert (info["entries"], info["bytes"]) == (2, 45)      # .py entries at the top; all files, no links


def test_compile_count_over_loaded_modules_and_their_own_dispatchers(monkeypatch):
    monkeypatch.setattr(dc, "_LOADED", [])
    assert dc.compile_count() == 0 and dc.cache_hit_count() == 0
    a = dc.load_module(kernel_source("own_dispatchers_a", scale=4.0))
    run_kernel(a, scale=4.0, n=10)
    assert dc.compile_count() == 1
    b = dc.load_module(f"from {a.__name__} import kern as imported\n" + kernel_source("own_dispatchers_b"))
    assert dc._dispatchers(b) == [b.kern] and dc._dispatchers(a) == [a.kern]


def test_atomic_write_keeps_its_mode_and_leaves_nothing_when_the_write_fails(monkeypatch, tmp_path):
    path = str(tmp_path / "tj_k_mode.py")
    dc._atomic_write(path, b"a")
    assert os.stat(path).st_mode & 0o777 == 0o644

    def fail(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(dc.os, "fsync", fail)
    with pytest.raises(OSError, match="Input/output error"):
        dc._atomic_write(path, b"b")
    assert os.listdir(str(tmp_path)) == ["tj_k_mode.py"]
    with open(path, "rb") as f:
        assert f.read() == b"a"


def test_ensure_file_says_what_it_did_and_a_bad_kind_is_refused(tmp_path):
    path = str(tmp_path / "tj_k_state.py")
    assert dc._ensure_file(path, b"a = 1\n") == "written"
    assert dc._ensure_file(path, b"a = 1\n") == "ok"
    assert dc._ensure_file(path, b"a = 2\n") == "rewritten"
    with open(path, "rb") as f:
        assert f.read() == b"a = 2\n"
    with pytest.raises(ValueError, match="^kind must be letters, digits or '_', got 'a-b'$"):
        dc.load_module("x = 1\n", kind="a-b")


def test_version_tag_keeps_only_safe_characters(monkeypatch):
    monkeypatch.setattr(dc, "_tracejit_version", lambda: "1.0+Local/x y")
    monkeypatch.setattr(dc, "_TAG", None)
    assert dc.version_tag().startswith("tj1.0_Local_x_y-numba")


_BAD_MODULES = [("def kern(x:\n    pass\n", None), ("raise RuntimeError()\n", "RuntimeError: "),
                ("raise ValueError('first\\nsecond')\n", "ValueError: first")]


@pytest.mark.parametrize("case", range(3))
def test_a_module_that_fails_to_load_says_why_once_and_restores_sys_modules(case, monkeypatch):
    src, why = _BAD_MODULES[case]
    name = os.path.basename(dc.entry_path(src))[:-3]
    if why is None:             # the syntax error's first line, as Python words it here
        with pytest.raises(SyntaxError) as e:
            compile(src, dc.entry_path(src), "exec")
        why = "SyntaxError: " + str(e.value).splitlines()[0]
    calls = []
    real = dc._exec_module
    monkeypatch.setattr(dc, "_exec_module", lambda *a: (calls.append(a[0]), real(*a))[1])
    with pytest.raises(dc.KernelCompileError) as ei:
        dc.load_module(src)
    assert str(ei.value).startswith(f"tracejit: generated module {name} failed to load ({why}); source: "
                                    f"{dc.entry_path(src)}. This is a tracejit bug")
    assert calls == [name] and ei.value.kernel == name       # the file was fine: no second try
    sentinel = object()
    monkeypatch.setitem(sys.modules, name, sentinel)        # a module of that name, loaded before
    with pytest.raises(dc.KernelCompileError):
        real(name, dc.entry_path(src), src)
    assert sys.modules[name] is sentinel


def test_a_vanishing_entry_is_written_again_and_tried_once_more(monkeypatch):
    # each import attempt finds the file removed (another process clearing the cache): two tries, then the error
    calls = []

    def vanished(name, path, source):
        calls.append(path)
        os.unlink(path)
        raise dc.KernelCompileError("no locator available", kernel=name, path=path)
    monkeypatch.setattr(dc, "_exec_module", vanished)
    src = kernel_source("vanishing")
    with pytest.raises(dc.KernelCompileError, match="no locator available"):
        dc.load_module(src)
    assert calls == [dc.entry_path(src)] * 2
