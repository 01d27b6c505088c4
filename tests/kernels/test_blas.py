"""tracejit.kernels.cpu.blas.gemm_acc against numpy: C = alpha * A @ B + beta * C in place, or False and C untouched."""
import time

import numpy as np
import pytest

from tracejit.kernels.cpu.blas import _load, gemm_acc

pytestmark = pytest.mark.skipif(not _load(), reason="numpy's OpenBLAS cblas not found (another numpy build)")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_acc_matches_numpy_for_every_layout(dtype, ta, tb):
    rng = np.random.default_rng(0)
    m, k, n = 37, 23, 19
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    a, b = (a.T if ta else a), (b.T if tb else b)          # transposed views: BLAS reads them as they are
    c = rng.standard_normal((m, n)).astype(dtype)
    want = -0.25 * (a.astype(np.float64) @ b) + 0.5 * c
    assert gemm_acc(a, b, c, -0.25, 0.5)
    np.testing.assert_allclose(c, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_gemm_acc_refuses_what_it_cannot_do_in_place():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    keep = w.copy()
    assert not gemm_acc(w, w, w, 1.0, 1.0)                      # C is an operand
    assert not gemm_acc(w[:, ::2], w[::2], np.zeros((8, 8), np.float32), 1.0, 1.0)     # strided operand
    assert not gemm_acc(w, w.copy(), np.zeros((8, 8), np.float32).T, 1.0, 1.0)         # C not C-contiguous
    assert not gemm_acc(w, w.astype(np.float64), np.zeros((8, 8)), 1.0, 1.0)            # mixed dtypes
    ro = w.copy()
    ro.flags.writeable = False
    assert not gemm_acc(ro, w.copy(), np.zeros((8, 8), np.float32), 1.0, 1.0)           # a read-only operand
    i = np.ones((8, 8), np.int64)
    assert not gemm_acc(i, i, i.copy(), 1.0, 1.0)                # not float
    np.testing.assert_array_equal(w, keep)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_call_from_numba_on_blocks_of_bigger_arrays(dtype, ta, tb):
    """gemm_call (cblas ?gemm from compiled code, by address): operands and result are blocks at an offset inside
    bigger row-major arrays (leading dimensions larger than the block), as convgemm's kernels pass them."""
    import numba
    from tracejit.kernels.cpu.blas import gemm_address, gemm_call

    @numba.njit
    def call(fp, ta, tb, m, n, k, alpha, a, oa, lda, b, ob, ldb, beta, c, oc, ldc):
        z = a.itemsize
        gemm_call(fp, ta, tb, m, n, k, alpha, np.int64(a.ctypes.data) + oa * z, lda, np.int64(b.ctypes.data) + ob * z,
                  ldb, beta, np.int64(c.ctypes.data) + oc * z, ldc)

    rng = np.random.default_rng(2)
    m, n, k = 7, 5, 6
    A = rng.standard_normal((12, 11)).astype(dtype)
    B = rng.standard_normal((10, 13)).astype(dtype)
    C = rng.standard_normal((9, 8)).astype(dtype)
    a = A[1:1 + k, 2:2 + m].T if ta else A[1:1 + m, 2:2 + k]
    b = B[3:3 + n, 1:1 + k].T if tb else B[3:3 + k, 1:1 + n]
    want = C.astype(np.float64)
    want[2:2 + m, 1:1 + n] = 1.5 * (a.astype(np.float64) @ b) - 0.5 * C[2:2 + m, 1:1 + n]
    call(gemm_address(dtype), ta, tb, m, n, k, dtype(1.5), A, 1 * 11 + 2, 11, B, 3 * 13 + 1, 13, dtype(-0.5), C,
         2 * 8 + 1, 8)
    np.testing.assert_allclose(C, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.fixture
def two_numba_threads():
    """The test runs with two numba threads (skipped where numba has one), the caller's count restored after."""
    import numba
    saved = numba.get_num_threads()
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    numba.set_num_threads(2)
    yield
    numba.set_num_threads(saved)


def _when_ready(f, *args):
    """f(*args) (stack_matmul, split_matmul), waiting for its prange kernel (compiled in the background at its
    first call) to be in use."""
    from tracejit.kernels.cpu import blas
    deadline = time.time() + 120
    while time.time() < deadline:
        out = f(*args)
        if out is not None and (f is not blas.split_matmul or blas._SPLIT.signatures):
            return out
        time.sleep(0.1)
    raise AssertionError(f"{f.__name__}'s kernel was never ready")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stacked_products_over_threads_give_numpys_bits(dtype, monkeypatch, two_numba_threads):
    """A stack of small products shared among numba's threads: numpy's bits for every layout BLAS reads in place
    (transposed views, batch dims that do not merge into one, attention's q and k^T sliced out of one qkv array)
    and for those it copies first (a strided last axis)."""
    from tracejit.kernels.cpu import blas
    monkeypatch.setattr(blas, "STACK_MIN", 0)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4, 6, 5)).astype(dtype)
    b = rng.standard_normal((3, 4, 5, 7)).astype(dtype)
    qkv = rng.standard_normal((3, 6, 3 * 4 * 5)).astype(dtype)
    q = qkv[:, :, :20].reshape(3, 6, 4, 5).transpose(0, 2, 1, 3)
    k = qkv[:, :, 20:40].reshape(3, 6, 4, 5).transpose(0, 2, 3, 1)
    cases = [(a, b), (q, k), (np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2)),
             (np.ascontiguousarray(a.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3), b),
             (a[..., ::2], b[..., ::2, :]), (a[0], b[0])]
    for x, y in cases:
        got = _when_ready(blas.stack_matmul, x, y)
        assert got.dtype == dtype and got.flags.c_contiguous
        np.testing.assert_array_equal(got, np.matmul(x, y))


def test_stacked_products_leave_to_numpy_what_it_does_as_well(monkeypatch, two_numba_threads):
    """None (numpy's matmul) for each reason on its own: with two numba threads and no work minimum, the other
    conditions hold but the one named."""
    import numba
    from tracejit.kernels.cpu import blas
    f = np.ones((4, 8, 8), np.float32)
    monkeypatch.setattr(blas, "STACK_MIN", 0)
    assert blas.stack_matmul(f[:1], f[:1]) is None                              # one product
    assert blas.stack_matmul(f, f.astype(np.float64)) is None                   # mixed dtypes
    assert blas.stack_matmul(f.astype(np.int64), f.astype(np.int64)) is None    # not float
    assert blas.stack_matmul(f, np.ones((2, 8, 8), np.float32)) is None         # batch dims differ (broadcast)
    big = np.ones((2, 64, 64), np.float32)
    assert blas.stack_matmul(big, big) is None                                  # OpenBLAS threads 64**3 itself
    assert _when_ready(blas.stack_matmul, f, f) is not None                     # (and the kernel takes the rest)
    numba.set_num_threads(1)
    assert blas.stack_matmul(f, f) is None                                      # one thread
    numba.set_num_threads(2)
    monkeypatch.setattr(blas, "STACK_MIN", 1 << 20)
    assert blas.stack_matmul(f, f) is None                                      # too little work


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_products_rows_over_threads_match_numpy_and_restore_openblas(dtype, monkeypatch, two_numba_threads):
    """A 2-D product's rows shared among numba's threads: numpy's values for every layout (transposed views read in
    place, a strided one copied), the same bits from the prange kernel and from its serial twin (what runs while
    the prange kernel compiles), and OpenBLAS's thread count as it was after the call."""
    from tracejit.kernels.cpu import blas
    monkeypatch.setattr(blas, "SPLIT_MIN", 0)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((70, 24)).astype(dtype)
    b = rng.standard_normal((24, 9)).astype(dtype)
    before = blas.blas_threads()
    for x, y in [(a, b), (a.T.copy().T, b), (a, b.T.copy().T), (a[:, ::2], b[::2])]:
        got = _when_ready(blas.split_matmul, x, y)
        np.testing.assert_allclose(got, np.matmul(x.astype(np.float64), y), rtol=1e-5, atol=1e-5)
        with monkeypatch.context() as m:
            m.setattr(blas, "_SPLIT", blas._SPLIT_SERIAL)
            np.testing.assert_array_equal(blas.split_matmul(x, y), got)
        assert blas.blas_threads() == before
    assert blas.split_matmul(a[:20], b) is None                   # fewer than 16 rows a thread
    # the prange kernel and its serial twin under two names: numba's disk cache would give them one entry
    assert blas._SPLIT.py_func.__qualname__ != blas._SPLIT_SERIAL.py_func.__qualname__
    assert blas.split_matmul(a, b.astype(np.float32 if dtype == np.float64 else np.float64)) is None
    monkeypatch.setattr(blas, "SPLIT_MIN", 1 << 22)
    assert blas.split_matmul(a, b) is None                        # too little work


def test_concurrent_split_products_leave_openblas_thread_count_as_it_was(monkeypatch):
    """split_matmul sets OpenBLAS to one thread for its call: calls from several Python threads at once must not
    leave it at one (the first saves the count, the last one out restores it)."""
    import numba
    from concurrent.futures import ThreadPoolExecutor
    from tracejit.kernels.cpu import blas
    if numba.config.NUMBA_NUM_THREADS < 2 or blas.blas_threads() is None:
        pytest.skip("numba has one thread here, or OpenBLAS is not numpy's")
    monkeypatch.setattr(blas, "SPLIT_MIN", 0)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b)
    before = blas.blas_threads()

    def work(_):
        numba.set_num_threads(2)        # (per thread: each worker thread's own count)
        got = blas.split_matmul(a, b)
        return got is not None and np.allclose(got, want, rtol=1e-5, atol=1e-5)

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(200)))
    assert blas.blas_threads() == before
