"""Some tests here run `tracejit bench` in this process, and benches/harness.py pins OpenBLAS, torch and numba to one
thread and sets OPENBLAS/OMP/MKL_NUM_THREADS in os.environ (inherited by every later child process) for the rest
of the process; test_check_same_tolerances puts benches/ on sys.path. Under pytest-xdist the tests that share a
worker with these vary from run to run (serially: every test after tests/cli), so each test here gives the
process back as it found it: thread counts, those variables and sys.path."""
import os
import sys

import pytest

from tracejit.kernels.cpu.blas import blas_threads

ENV_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
            "PJRT_NPROC")    # harness.try_jax sets it (the jax CPU client's thread count)


def _numba_started():
    if "numba" not in sys.modules:
        return False
    from numba.np.ufunc import parallel
    return parallel._is_initialized


def _threads():
    try:
        import torch    # noqa: F401  (imported before the test: its default thread count is the one to give back)
    except ImportError:
        pass
    out = {"openblas": blas_threads()}
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].get_num_threads()
    if _numba_started():        # numba.get_num_threads() would start its thread pool
        out["numba"] = sys.modules["numba"].get_num_threads()
    return out


@pytest.fixture(autouse=True)
def _give_back_threads_env_and_path():
    env = {v: os.environ.get(v) for v in ENV_VARS}
    path = list(sys.path)
    before = _threads()
    yield
    for v, val in env.items():
        if val is None:
            os.environ.pop(v, None)
        else:
            os.environ[v] = val
    sys.path[:] = path
    if before["openblas"] is not None:
        blas_threads(before["openblas"])
    if "torch" in before and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(before["torch"])
    if _numba_started():
        import numba
        numba.set_num_threads(before.get("numba", numba.config.NUMBA_NUM_THREADS))
