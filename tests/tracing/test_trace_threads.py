"""Threads: per-thread modes (as PyTorch's), one traced function called from many threads at once (each signature
compiled once, every thread its right answer), eager work in other threads never affected by a trace.

A tiny switch interval (sys.setswitchinterval(1e-5)) makes the interpreter switch threads every few bytecodes, so
the races these tests look for show on every run."""
import sys
import threading

import numpy as np
import pytest

import tracejit
import tracejit.nn as nn
from tracejit._state import STATE


def _anomaly(lib):
    fn = getattr(lib, "is_anomaly_enabled", None)
    return fn() if fn else lib.autograd.anomaly_mode.is_anomaly_enabled()


@pytest.fixture
def switchy():
    prev = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(prev)


def _run_threads(targets):
    """Start every target at once (a barrier), join them, re-raise the first error of any."""
    errors = []
    barrier = threading.Barrier(len(targets))

    def wrap(fn):
        def run():
            try:
                barrier.wait()
                fn()
            except BaseException as e:       # (reported below, in the main thread)
                errors.append(e)
        return run
    threads = [threading.Thread(target=wrap(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def test_grad_and_inference_modes_are_per_thread_anomaly_is_process_wide(switchy):
    seen = {}

    def other():
        seen["grad"] = tracejit.is_grad_enabled()
        seen["inference"] = tracejit.is_inference_mode_enabled()
        seen["anomaly"] = _anomaly(tracejit)
        x = tracejit.ones(2, requires_grad=True)
        seen["rg"] = (x * 2).requires_grad
        with tracejit.no_grad():
            seen["inner"] = tracejit.is_grad_enabled()

    with tracejit.inference_mode(), tracejit.autograd.set_detect_anomaly(True):
        assert not tracejit.is_grad_enabled()
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert not tracejit.is_grad_enabled() and tracejit.is_inference_mode_enabled()   # the thread's no_grad
    # a new thread starts with grad enabled and no inference mode (PyTorch's thread-local grad mode); anomaly
    # mode is one process-wide flag in PyTorch, seen by every thread
    assert seen == {"grad": True, "inference": False, "anomaly": True, "rg": True, "inner": False}
    assert not _anomaly(tracejit)


def test_modes_across_threads_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, tracejit):
        seen = {}

        def other():
            seen["grad"] = lib.is_grad_enabled()
            seen["inference"] = lib.is_inference_mode_enabled()
            seen["anomaly"] = _anomaly(lib)
        prev = _anomaly(lib)
        lib.autograd.set_detect_anomaly(True)
        try:
            with lib.inference_mode():
                t = threading.Thread(target=other)
                t.start()
                t.join()
        finally:
            lib.autograd.set_detect_anomaly(prev)
        if lib is torch:
            expected = seen
        else:
            assert seen == expected


def _reference(w, b, x):
    return np.tanh(x.astype(np.float64) @ w.T.astype(np.float64) + b) * 2.0


def test_many_threads_new_signatures_with_eager_work_alongside(switchy):
    """8 threads call one traced model with new shapes (several threads share each shape) while two threads run
    eager code: one on its own tensors, one on the very model being traced. No error, right answers, and each
    signature traced exactly once."""
    tracejit.manual_seed(0)
    model = nn.Linear(5, 3)
    w, b = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
    shapes = [(1 + i % 4, 5) for i in range(8)]          # 4 shapes a round, each first called by 2 threads at once
    n_signatures = len({shapes[(i + k) % 8][0] + 4 * k for i in range(8) for k in range(3)})
    # (a cache limit of exactly the number of signatures: one traced twice would raise)
    f = tracejit.trace(lambda x: model(x).tanh() * 2.0, max_cache_size=n_signatures)
    grads_of = {}
    done = threading.Event()

    def caller(i):
        def run():
            rng = np.random.default_rng(i)
            for k in range(3):
                n = shapes[(i + k) % 8][0] + 4 * k       # new shapes on every round, shared by two threads
                xa = rng.standard_normal((n, 5)).astype(np.float32)
                x = tracejit.tensor(xa, requires_grad=True)
                y = f(x)
                np.testing.assert_allclose(y.detach().numpy(), _reference(w, b, xa), rtol=1e-5, atol=1e-5)
                (gx,) = tracejit.autograd.grad(y.sum(), x)
                t = np.tanh(xa.astype(np.float64) @ w.T.astype(np.float64) + b)
                np.testing.assert_allclose(gx.numpy(), (2 * (1 - t * t)) @ w.astype(np.float64), rtol=1e-4,
                                           atol=1e-5)
                grads_of[(i, k)] = True
        return run

    eager_rounds = []

    def eager_own():
        a = tracejit.arange(12, dtype=tracejit.float32).reshape(3, 4).requires_grad_()
        while not done.is_set() or not eager_rounds:
            y = (a * a).sum(1)
            np.testing.assert_array_equal(y.detach().numpy(), (np.arange(12.0).reshape(3, 4) ** 2).sum(1))
            y.sum().backward()
            np.testing.assert_array_equal(a.grad.numpy(), 2 * np.arange(12.0).reshape(3, 4))
            a.grad = None
            eager_rounds.append(1)

    def eager_same_model():
        xa = np.ones((2, 5), np.float32)
        n = 0
        while not done.is_set() or n == 0:
            with tracejit.no_grad():
                y = model(tracejit.tensor(xa)).numpy()       # the model's parameters are being lifted elsewhere
            np.testing.assert_allclose(y, xa @ w.T + b, rtol=1e-5, atol=1e-6)
            n += 1

    callers = [caller(i) for i in range(8)]

    def all_callers():
        try:
            _run_threads(callers)
        finally:
            done.set()

    try:
        _run_threads([all_callers, eager_own, eager_same_model])
    finally:
        done.set()
    assert len(grads_of) == 24 and eager_rounds
    assert f.traces == n_signatures, (f.traces, n_signatures)        # once per signature: others waited
    # nothing of the traces is left in this thread or on the model
    assert STATE.tracer is None and tracejit.is_grad_enabled()
    assert type(model.weight) is nn.Parameter and "_tj_real" not in model.weight.__dict__
    np.testing.assert_array_equal(model.weight.detach().numpy(), w)


def test_threads_cycling_through_shapes_do_not_retrace_one_signature(switchy):
    """max_cache_size = the number of signatures: a second trace of any of them would raise the cache limit."""
    f = tracejit.trace(lambda x: (x * 3).sum(0), max_cache_size=6)

    def cycle(i):
        def run():
            for k in range(12):
                n = 1 + (i + k) % 6
                x = tracejit.ones(n, 2)
                np.testing.assert_array_equal(f(x).numpy(), [3.0 * n] * 2)
        return run
    _run_threads([cycle(i) for i in range(8)])
    assert f.traces == 6 and f.cache_info()["entries"] == 6


def test_grad_mode_of_each_calling_thread_is_its_own_signature(switchy):
    """One thread under no_grad, one with grad, calling at once: each gets the output its own mode asks for."""
    w = tracejit.ones(3, requires_grad=True)
    f = tracejit.trace(lambda x: (x * w).sum())
    out = {}

    def call(grad):
        def run():
            with tracejit.set_grad_enabled(grad):
                for _ in range(20):
                    y = f(tracejit.ones(3))
                    assert y.requires_grad == grad and float(y) == 3.0
            out[grad] = True
        return run
    _run_threads([call(True), call(False), call(True), call(False)])
    assert out == {True: True, False: True} and f.traces == 2


def test_compile_helpers_and_numba_registries_under_threads(switchy):
    """Several threads, each tracing its own function whose kernels are new to this process (new fused bodies):
    the compile paths (fork helpers, numba registry refreshes, the disk cache) run under numba's compiler lock."""
    fns = [tracejit.trace(lambda x, k=k: ((x + k) * (x - 0.5 * k)).exp().sum(-1)) for k in range(1, 7)]

    def run(k):
        def go():
            x = tracejit.linspace(-1, 1, 8).reshape(2, 4)
            y = fns[k](x).numpy()
            xa = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4).astype(np.float64)
            np.testing.assert_allclose(y, np.exp((xa + k + 1) * (xa - 0.5 * (k + 1))).sum(-1), rtol=1e-5)
        return go
    _run_threads([run(k) for k in range(6)])
    assert all(f.traces == 1 for f in fns)
