"""The reference counts that buffer reuse and gradient stealing read (tracejit/_keep.py): the import-time probe,
what it guards (an array someone holds is never written into nor taken over), and the fallback when it fails."""
import numpy as np
import pytest

import tracejit
from tracejit import _keep
from tracejit.autograd import engine
from tracejit.backends.numba_cpu import executor


def test_probe_matches_this_interpreter_and_refuses_a_borrowed_count():
    assert _keep.REFCOUNTS_EXACT == _keep._probe()
    assert _keep._probe(lambda slot: _keep._count(slot) - 1) is False     # a CPython that borrows the local
    assert _keep._probe(lambda slot: _keep._count(slot) + 1) is False


def _held_outputs_survive():
    f = tracejit.trace(lambda x: x * 2 + 1)
    x = tracejit.tensor(np.arange(6, dtype=np.float32))
    a = f(x)                                  # held by the test
    first = a.numpy().copy()
    b = f(x + 1)
    assert np.shares_memory(a.numpy(), b.numpy()) is False
    np.testing.assert_array_equal(a.numpy(), first)
    del a
    c = f(x + 2)
    np.testing.assert_array_equal(b.numpy(), first + 2)
    np.testing.assert_array_equal(c.numpy(), first + 4)
    return f


def _grads_right():
    w = tracejit.tensor(np.ones(4, np.float32), requires_grad=True)
    g = tracejit.tensor(np.full(4, 3.0, np.float32))
    (w * 2).backward(g)
    (w * 2).backward(g)                        # accumulates into the .grad the first backward made (or copied)
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 12.0, np.float32))
    np.testing.assert_array_equal(g.numpy(), np.full(4, 3.0, np.float32))     # the user's gradient untouched


@pytest.mark.skipif(not _keep.REFCOUNTS_EXACT, reason="this interpreter's counts are not the probed ones")
def test_counts_guard_held_arrays():
    _held_outputs_survive()
    _grads_right()


def test_without_exact_counts_nothing_is_reused_or_stolen(monkeypatch):
    monkeypatch.setattr(executor, "REFCOUNTS_EXACT", False)
    monkeypatch.setattr(engine, "REFCOUNTS_EXACT", False)
    f = _held_outputs_survive()
    assert all(not cg.keep_returned for cg in _compiled_graphs(f))
    _grads_right()
    assert engine._unseen(tracejit.ones(3)) is False


def _compiled_graphs(f):
    out = [fn for es in f.cache.values() for e in es for fn in (e.fwd_fn, e.bwd_fn)
           if isinstance(fn, executor.CompiledGraph)]
    assert out, "no compiled graph found"
    return out
