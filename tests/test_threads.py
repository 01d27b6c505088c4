"""tracejit.set_num_threads / get_num_threads (torch's): numpy's OpenBLAS and numba's parallel kernels."""
import numpy as np
import pytest

import tracejit


def test_set_num_threads_sets_blas_and_numba_and_rejects_bad_counts():
    import numba
    from tracejit.kernels.cpu.blas import blas_threads
    before_blas, before = blas_threads(), numba.get_num_threads()
    try:
        tracejit.set_num_threads(1)
        assert tracejit.get_num_threads() == 1 and numba.get_num_threads() == 1
        assert blas_threads() in (1, None)          # None: this numpy has no OpenBLAS of its own
        tracejit.set_num_threads(np.int64(numba.config.NUMBA_NUM_THREADS + 3))
        assert tracejit.get_num_threads() == numba.config.NUMBA_NUM_THREADS      # numba's pool is the bound
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(RuntimeError, match="positive integer"):
                tracejit.set_num_threads(bad)
        # a traced program still runs (and equals eager) on one thread
        tracejit.set_num_threads(1)
        x = tracejit.randn(1 << 21)
        f = tracejit.trace(lambda x: (x * 2).tanh().sum())
        np.testing.assert_allclose(float(f(x)), float((x * 2).tanh().sum()), rtol=1e-4)
    finally:
        if before_blas:
            blas_threads(before_blas)
        numba.set_num_threads(before)
