"""Forked helpers compile a share of a program's kernels into the disk cache (numba_cpu/workers.py)."""
import os
import time

import numpy as np
import pytest

import tracejit as tj
from tracejit.backends import diskcache as dc
from tracejit.backends.numba_cpu import workers

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="compile helpers are forked (POSIX)")


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "cache"))   # every kernel module is new here
    monkeypatch.setenv("TRACEJIT_COMPILE_WORKERS", "1")
    monkeypatch.setattr(tj.config, "direct_kernels", False)     # numba's compile of every kernel (test_direct.py)


def f(x, w):
    y = tj.softmax(tj.tanh(x) * w, dim=-1)          # row kernels (forward and backward)
    z = tj.relu(x + w).sum(0)                        # nd kernels
    return (y * x).sum() + tj.exp(z * 0.01).sum()


def run(fn, seed=0):
    rng = np.random.default_rng(seed)
    x = tj.tensor(rng.standard_normal((32, 64), dtype=np.float32), requires_grad=True)
    w = tj.tensor(rng.standard_normal(64, dtype=np.float32), requires_grad=True)
    loss = fn(x, w)
    loss.backward()
    return float(loss), x.grad.numpy(), w.grad.numpy()


def check(got, want):
    assert abs(got[0] - want[0]) <= 1e-5 * abs(want[0])
    for g, e in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def stats():
    i = dc.cache_info()
    return np.array([i["helpers"], i["compiled_by_helpers"], i["helper_failures"], i["compiled"]])


def test_helpers_compile_a_share_the_caller_loads_it():
    s0 = stats()
    got = run(tj.trace(f))
    helpers, by_helpers, failures, compiled = stats() - s0
    assert helpers == 1 and by_helpers >= 1 and failures == 0, (helpers, by_helpers, failures)
    # the caller compiled its own share and loaded the helper's from the cache (one module per distinct kernel)
    assert compiled >= 1 and compiled + by_helpers == dc.cache_info()["entries"], (compiled, by_helpers)
    check(got, run(f))
    # all of it is in the cache now: a new function with the same body compiles nothing and forks nothing
    s1 = stats()
    check(run(tj.trace(lambda x, w: f(x, w))), got)
    assert (stats() - s1).tolist() == [0, 0, 0, 0]


def test_a_failed_helper_costs_only_time(monkeypatch):
    monkeypatch.setattr(workers, "_helper", lambda sigs: os._exit(3))
    s0 = stats()
    got = run(tj.trace(f))
    helpers, by_helpers, failures, _ = stats() - s0
    assert (helpers, by_helpers, failures) == (1, 0, 1)
    check(got, run(f))


def test_a_hung_helper_is_killed(monkeypatch):
    monkeypatch.setattr(workers, "_helper", lambda sigs: time.sleep(900))
    monkeypatch.setattr(workers, "_GRACE_S", 0.5)
    s0 = stats()
    t = time.monotonic()
    got = run(tj.trace(f))
    assert time.monotonic() - t < 450     # far below the helper's 900 s: it was killed, not waited for
    assert (stats() - s0)[2] == 1
    check(got, run(f))


def test_off_with_zero_workers(monkeypatch):
    monkeypatch.setenv("TRACEJIT_COMPILE_WORKERS", "0")
    s0 = stats()
    got = run(tj.trace(f))
    assert (stats() - s0)[:3].tolist() == [0, 0, 0]
    check(got, run(f))


def test_sigchld_ignored():
    """With SIGCHLD ignored the kernel reaps helpers itself (waitpid fails): the caller still gets its kernels."""
    import signal
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        got = run(tj.trace(f))
    finally:
        signal.signal(signal.SIGCHLD, old)
    check(got, run(f))


def test_a_bad_worker_count_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TRACEJIT_COMPILE_WORKERS", "many")
    with pytest.raises(ValueError, match="TRACEJIT_COMPILE_WORKERS='many'"):
        run(tj.trace(f))


def test_default_one_helper_per_spare_core_on_linux_only(monkeypatch):
    monkeypatch.delenv("TRACEJIT_COMPILE_WORKERS")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    monkeypatch.setattr(workers.sys, "platform", "linux")
    assert workers.max_helpers() == 3
    monkeypatch.setattr(workers.sys, "platform", "darwin")       # fork-unsafe frameworks: only when asked
    assert workers.max_helpers() == 0
    monkeypatch.setenv("TRACEJIT_COMPILE_WORKERS", "2")
    assert workers.max_helpers() == 2


def test_explain_counts_the_helpers_kernels_as_compiled():
    rng = np.random.default_rng(0)
    x = tj.tensor(rng.standard_normal((32, 64), dtype=np.float32), requires_grad=True)
    w = tj.tensor(rng.standard_normal(64, dtype=np.float32), requires_grad=True)
    info = dict(tj.explain(f, x, w).cache)
    compiled = info["kernels numba compiled for this trace"]
    assert compiled.startswith(f"{dc.cache_info()['entries']} (") and "forked helper" in compiled, compiled
    assert info["kernels loaded from the disk cache for this trace"] == 0


@pytest.fixture
def two_threads_par(monkeypatch):
    """Two numba threads, and prange variants for these small kernels (codegen.PAR_MIN)."""
    import numba
    from tracejit.backends.numba_cpu import codegen
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba runs one thread here")
    monkeypatch.setattr(codegen, "PAR_MIN", 1024)
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    yield
    numba.set_num_threads(before)


def g(x):
    return tj.tanh(x * 1.5 + 0.25) * x + 1.0


def fresh_g():
    """g followed by a number of sines no other program in this process has: a kernel module, and dispatchers, of
    its own (a different constant would not do: the graph's Python floats are kernel arguments)."""
    k = next(_FRESH)

    def f(x):
        y = g(x)
        for _ in range(k):
            y = tj.sin(y)
        return y
    return f


_FRESH = iter(range(1, 1 << 20))


def _par_kernel(tf, x):
    (_, ks, disp), = tf.graph(x).entry.fwd_fn.kernels
    assert disp.py_func.__name__ == "kernel_par"
    return disp


def test_prange_variants_compile_in_the_background(two_threads_par):
    """At two threads a program's first call runs its serial kernels and leaves the prange variants to a background
    helper; once that helper has written one to the disk cache, calls load and run it: the same bits throughout."""
    x = tj.tensor(np.random.default_rng(0).standard_normal(5000, dtype=np.float32))
    f = fresh_g()
    tf = tj.trace(f)
    first = tf(x).numpy()
    par = _par_kernel(tf, x)
    assert not par.signatures and not workers.ready(par)    # (a prange variant compiles for over a second)
    deadline = time.monotonic() + 120
    while not workers.ready(par):
        assert time.monotonic() < deadline, "the background helper never finished"
        time.sleep(0.05)
    c0 = dc.cache_info()["compiled"]
    again = tf(x).numpy()
    assert par.signatures and dc.cache_info()["compiled"] == c0       # loaded from the cache, not compiled here
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, f(x).numpy(), rtol=1e-6, atol=1e-6)


def test_a_failed_background_helper_leaves_the_variant_to_the_caller(two_threads_par, monkeypatch):
    monkeypatch.setattr(workers, "_helper", lambda sigs: os._exit(3))
    x = tj.tensor(np.random.default_rng(1).standard_normal(5000, dtype=np.float32))
    tf = tj.trace(fresh_g())
    first = tf(x).numpy()
    par = _par_kernel(tf, x)
    deadline = time.monotonic() + 60
    while not workers.ready(par):       # the helper exits at once without writing the cache: ready all the same
        assert time.monotonic() < deadline
        time.sleep(0.01)
    np.testing.assert_array_equal(tf(x).numpy(), first)
    assert par.signatures               # compiled by this process (at this call, or the first if the helper had
    #                                     ended by then)


def test_ended_background_helpers_are_reaped(two_threads_par):
    """A background helper whose kernels are never called again is still reaped (no zombie left) when the next
    program forks one."""
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("reads process states from /proc")
    x = tj.tensor(np.random.default_rng(2).standard_normal(5000, dtype=np.float32))
    before = {st[0] for st in workers._BACKGROUND}
    tj.trace(fresh_g())(x)
    pid = workers._BACKGROUND[-1][0]        # (compile_later may have reaped older ones meanwhile)
    assert pid not in before
    deadline = time.monotonic() + 120
    while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    tj.trace(fresh_g())(x)                    # another program: its compile_later reaps the first helper
    assert not os.path.exists(f"/proc/{pid}"), "the first helper is still a zombie"
