"""GEMM into an existing output, C = alpha * A @ B + beta * C, through the OpenBLAS numpy ships.

numpy's matmul always writes a fresh product; an update such as SGD's `W - lr * X.T @ dZ` then needs a second
pass over W and the product. BLAS does it in one call (beta = 1, C = W). The library is the one numpy loaded
(numpy.libs/libscipy_openblas*, cblas with 64-bit integers); where it is not found (another numpy build),
`gemm_acc` returns False and the caller computes with numpy. Both `gemm_acc` and convgemm.py's loops of one product
per image call the cblas function from numba code (`gemm_call`), given its address; so do `stack_matmul` and
`split_matmul`, which share a matmul's products among numba's threads (`np_matmul`: the matmul op's numpy face).
"""
import ctypes
import glob
import os
import threading

import numba
import numpy as np
from numba import prange

from .threads import prange_twin

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_FUNCS = None      # {numpy dtype: the cblas ?gemm's address}, once looked up
_LIB = []          # [numpy's OpenBLAS as a ctypes library, or None], once looked up


def _library():
    """numpy's OpenBLAS: bundled in numpy.libs (pip wheels), or the scipy-openblas wheel a numpy build links."""
    if not _LIB:
        _LIB.append(None)
        root = os.path.join(os.path.dirname(np.__file__), os.pardir)
        for d in ("numpy.libs", os.path.join("scipy_openblas32", "lib"), os.path.join("scipy_openblas64", "lib")):
            for path in sorted(glob.glob(os.path.join(root, d, "*openblas*"))):
                try:
                    _LIB[0] = ctypes.CDLL(path)
                    return _LIB[0]
                except OSError:
                    continue
    return _LIB[0]


def _symbol(lib, *names):
    return next((f for f in (getattr(lib, n, None) for n in names) if f is not None), None) if lib else None


def _load():
    """{numpy dtype: address of the cblas ?gemm (64-bit integer interface)} in numpy's own OpenBLAS, or {}."""
    lib, out = _library(), {}
    for dt, ch in ((np.float32, "s"), (np.float64, "d")):
        f = _symbol(lib, f"scipy_cblas_{ch}gemm64_", f"cblas_{ch}gemm64_")
        if f is not None:
            out[np.dtype(dt)] = ctypes.cast(f, ctypes.c_void_p).value
    return out


def _thread_count_functions():
    """(openblas_set_num_threads, openblas_get_num_threads) of numpy's OpenBLAS (None where not found)."""
    if not _THREAD_FUNCS:
        names = [f"{p}{{}}_num_threads{s}" for p in ("scipy_openblas_", "openblas_") for s in ("64_", "")]
        _THREAD_FUNCS.append([_symbol(_library(), *[nm.format(w) for nm in names]) for w in ("set", "get")])
    return _THREAD_FUNCS[0]


_THREAD_FUNCS = []


def blas_threads(n=None):
    """The number of threads numpy's OpenBLAS uses (None where it is not found); with `n`, set it first. The one
    place that sets it: tracejit.set_num_threads, benches/harness.pin_threads and the tests' fixtures call it
    (`split_matmul` sets one thread for the length of its call)."""
    set_, get = _thread_count_functions()
    if n is not None and set_ is not None:
        set_(ctypes.c_int(n))
    return None if get is None else int(get())


def short_spin():
    """Let numpy's OpenBLAS worker threads sleep right after a product (OPENBLAS_THREAD_TIMEOUT=4: 2**4 cycles
    of spinning instead of OpenBLAS's default 2**28, ~0.1 s).

    With two threads, an OpenBLAS worker spinning after a product holds the second core while the next numba
    parallel kernel wants it: a direct convolution's weight gradient right after a 256x256 product took 3.5 ms
    instead of 0.9 (AMD EPYC, 2 cores), the ResNet bench's traced step at two threads 41.8 ms instead of 26.5 at
    one. OpenBLAS reads the variable when it starts its threads (at numpy's import, before tracejit's), so it is
    set, read again (openblas_read_env) and the threads stopped (blas_thread_shutdown_): the next product
    starts them with the short timeout; products keep their threads (1024x1024: 11.5 ms on two, 22.8 on one).
    Nothing is changed when the user set OPENBLAS_THREAD_TIMEOUT or GOTO_THREAD_TIMEOUT, or set
    TRACEJIT_BLAS_SPIN=default."""
    if any(k in os.environ for k in ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")) or \
            os.environ.get("TRACEJIT_BLAS_SPIN") == "default":
        return False
    lib = _library()
    read, stop = _symbol(lib, "openblas_read_env"), _symbol(lib, "blas_thread_shutdown_")
    if read is None or stop is None:
        return False
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"
    read()
    stop()
    return True


def gemm_acc(a, b, c, alpha, beta):
    """c[...] = alpha * a @ b + beta * c in one BLAS call; False (c untouched) when that cannot be done here:
    no BLAS found, not float32/float64, mixed dtypes, c not C-contiguous and writeable, a read-only operand or one
    BLAS cannot read without a copy, or c overlapping a or b. The call and its checks run compiled (~0.5 us; through ctypes
    they cost ~6 us, a third of a 256x32 @ 32x64 product)."""
    fp = gemm_address(c.dtype) if type(c) is np.ndarray else 0
    if not fp or type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != c.dtype or \
            b.dtype != c.dtype or a.ndim != 2 or b.ndim != 2 or c.ndim != 2 or \
            not (c.flags.c_contiguous and c.flags.writeable and a.flags.writeable and b.flags.writeable):
        return False        # (read-only operands, autodiff's broadcast ones: the compiled signatures take none)
    if not _NB:
        sigs = [numba.boolean(numba.int64, t[:, :], t[:, :], t[:, ::1], t, t) for t in (numba.float32, numba.float64)]
        _NB.append(numba.njit(sigs, cache=True, nogil=True)(_gemm_checked))
    return _NB[0](fp, a, b, c, alpha, beta)


_NB = []       # gemm_acc's compiled core, made at first use (its disk cache loads in milliseconds)


def _ld(shape, strides, z):
    """(transpose flag, leading dimension) of a 2-D operand BLAS reads as it is, else (-1, 0)."""
    if strides[1] == z and strides[0] >= max(1, shape[1]) * z and strides[0] % z == 0:
        return 0, strides[0] // z
    if strides[0] == z and strides[1] >= max(1, shape[0]) * z and strides[1] % z == 0:
        return 1, strides[1] // z
    return -1, 0


def _span(x):
    """The bytes x's elements occupy: [lo, hi)."""
    lo = hi = x.ctypes.data
    for d in range(x.ndim):
        step = (x.shape[d] - 1) * x.strides[d]
        if step < 0:
            lo += step
        else:
            hi += step
    return lo, hi + x.itemsize


def _disjoint(x, y):
    xl, xh = _span(x)
    yl, yh = _span(y)
    return xh <= yl or yh <= xl


def _gemm_checked(fp, a, b, c, alpha, beta):
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or c.shape[0] != m or c.shape[1] != n or m * n == 0 or k == 0:
        return False
    z = c.itemsize
    ta, lda = _ld(a.shape, a.strides, z)
    tb, ldb = _ld(b.shape, b.strides, z)
    if ta < 0 or tb < 0 or not (_disjoint(a, c) and _disjoint(b, c)):
        return False
    gemm_call(fp, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta, c.ctypes.data, n)
    return True


def gemm_address(dtype):
    """The address of the cblas ?gemm for float32/float64 `dtype` in numpy's OpenBLAS (0 where not found): what
    `gemm_call` calls from numba. Passed to compiled kernels as an argument, never baked into them, so their
    disk cache stays valid in another process."""
    global _FUNCS
    if _FUNCS is None:
        _FUNCS = _load()
    return _FUNCS.get(np.dtype(dtype), 0)


def _gemm_call_typing():
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def gemm_call(typingctx, address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        """Inside numba: the row-major cblas ?gemm at `address` (gemm_address), c = alpha * op(a) @ op(b) + beta * c,
        ta/tb 0 or 1 (transpose), a, b, c raw addresses (array.ctypes.data plus byte offsets)."""
        ints = (address, ta, tb, m, n, k, a, lda, b, ldb, c, ldc)
        if not all(isinstance(t, types.Integer) for t in ints) or alpha != beta or \
                alpha not in (types.float32, types.float64):
            return None
        sig = types.void(address, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

        def codegen(context, builder, sig, args):
            i32, i64, vp = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
            real = context.get_value_type(sig.args[6])
            fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, real, vp, i64, vp, i64, real, vp,
                                                   i64])
            i = [builder.sext(v, i64) if isinstance(v.type, ir.IntType) and v.type.width < 64 else v for v in args]
            trans = [builder.select(builder.icmp_signed("!=", i[q], ir.Constant(i64, 0)), ir.Constant(i32, _TRANS),
                                    ir.Constant(i32, _NO_TRANS)) for q in (1, 2)]
            f = builder.inttoptr(i[0], fnty.as_pointer())
            builder.call(f, [ir.Constant(i32, _ROW_MAJOR), trans[0], trans[1], i[3], i[4], i[5], args[6],
                             builder.inttoptr(i[7], vp), i[8], builder.inttoptr(i[9], vp), i[10], args[11],
                             builder.inttoptr(i[12], vp), i[13]])
            return context.get_dummy_value()
        return sig, codegen
    return gemm_call


gemm_call = _gemm_call_typing()


# OpenBLAS runs a product on the calling thread alone below this many multiply-adds (m*n*k; its interface/gemm.c:
# 65536 * GEMM_MULTITHREAD_THRESHOLD, 4 by default): such calls can run on several threads of ours at once.
ONE_THREAD_MACS = 64 ** 3

# numpy's matmul of a stack of products (attention's q @ k^T: 64 products of 64x32 @ 32x64 in the GPT bench) is one
# BLAS call per product, each on one thread (below ONE_THREAD_MACS). Here the stack's products are shared among
# numba's threads (the pool the generated kernels use too), one single-threaded BLAS call each, the same call numpy
# makes: from STACK_MIN multiply-adds of the whole stack up.
STACK_MIN = 1 << 20


def _stack_gemm(fp, ta, tb, m, n, k, a, sa, lda, b, sb, ldb, c, z, dims, one, zero):
    """C[i] = A[i] @ B[i] for every index i of the batch dims `dims` (A's and B's byte strides there: sa, sb; C
    contiguous)."""
    count = 1
    for d in dims:
        count *= d
    for i in prange(count):
        oa, ob, inner = 0, 0, count
        for d in range(len(dims)):
            inner //= dims[d]
            j = i // inner % dims[d]
            oa += j * sa[d]
            ob += j * sb[d]
        gemm_call(fp, ta, tb, m, n, k, one, a + oa, lda, b + ob, ldb, zero, c + i * m * n * z, n)


_STACK = numba.njit(cache=True, nogil=True, parallel=True)(_stack_gemm)


def _blas_operand(x):
    """x (..., r, c) as BLAS reads each matrix: (x or a C-contiguous copy, transpose flag, leading dimension)."""
    t, ld = _ld_py(x.shape[-2:], x.strides[-2:], x.itemsize)
    if t < 0 or any(s % x.itemsize for s in x.strides[:-2]):
        x = np.ascontiguousarray(x)
        t, ld = 0, x.shape[-1]
    return x, t, ld


def stack_matmul(a, b):
    """a @ b for stacks of products with the same batch dims, the products shared among numba's threads; None
    where numpy's matmul does as well (one thread, a single product, products OpenBLAS threads itself, too little
    work, no BLAS found, mixed or non-float dtypes) or while the kernel is being compiled in the background."""
    if a.size * b.shape[-1] < STACK_MIN or a.ndim < 3 or a.shape[:-2] != b.shape[:-2] or a.dtype != b.dtype or \
            a.shape[-1] != b.shape[-2] or type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None         # (the cheap tests first: this runs on every matmul, eager and traced)
    (m, k), n = a.shape[-2:], b.shape[-1]
    count = a.size // (m * k)
    fp = gemm_address(a.dtype) if a.dtype.kind == "f" else 0
    if not fp or count < 2 or m * n * k >= ONE_THREAD_MACS or numba.get_num_threads() < 2:
        return None
    (a, ta, lda), (b, tb, ldb) = _blas_operand(a), _blas_operand(b)
    c = np.empty(a.shape[:-1] + (n,), a.dtype)
    one, zero = a.dtype.type(1), a.dtype.type(0)
    args = (fp, ta, tb, m, n, k, a.ctypes.data, np.array(a.strides[:-2]), lda, b.ctypes.data,
            np.array(b.strides[:-2]), ldb, c.ctypes.data, c.itemsize, np.array(a.shape[:-2]), one, zero)
    from tracejit.backends.numba_cpu.workers import when_compiled
    kern = when_compiled(_STACK, args)
    if kern is None:
        return None
    kern(*args)
    return c


# A 2-D product from SPLIT_MIN multiply-adds up, where numba has several threads: its rows shared among them, one
# BLAS call per part with OpenBLAS at one thread for the call. The same products run at the same speed alone with
# OpenBLAS's own threads and so, but in the GPT step at two threads (medians of 50 alternated rounds, each product
# timed in place) 1024x128 @ 128x128 took 0.35 ms so against 0.54 (0.23 alone), 1024x512 @ 512x128 1.16 against
# 1.43, the others within the noise (AMD EPYC znver4).
SPLIT_MIN = 1 << 22


def _split_gemm(fp, ta, tb, m, n, k, a, lda, b, ldb, c, z, parts, one, zero):
    for p in prange(parts):
        r0, r1 = m * p // parts, m * (p + 1) // parts
        gemm_call(fp, ta, tb, r1 - r0, n, k, one, a + (r0 * z if ta else r0 * lda * z), lda, b, ldb, zero,
                  c + r0 * n * z, n)


# (the twin under its own name: numba's disk cache keys a function by name and signature, not by `parallel`, so two
# dispatchers of one function shared one cache entry and either could load the other's code)
_SPLIT = prange_twin(_split_gemm)
_SPLIT_SERIAL = numba.njit(cache=True, nogil=True)(_split_gemm)     # (the same calls in turn: the same bits)


def split_matmul(a, b):
    """a @ b for 2-D float arrays, its rows shared among numba's threads; None where numpy's matmul is left to do
    it (one thread, under SPLIT_MIN multiply-adds, fewer than 16 rows a thread, no BLAS found, mixed or non-float
    dtypes). The parts give other bits than one call (as OpenBLAS's own threads do); while the prange kernel is
    compiled in the background, its serial twin makes the same calls in turn, so the switch changes no result."""
    if a.ndim != 2 or b.ndim != 2 or a.size * b.shape[1] < SPLIT_MIN or a.dtype != b.dtype or \
            a.shape[1] != b.shape[0] or type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None         # (the cheap tests first, as in stack_matmul)
    (m, k), n = a.shape, b.shape[1]
    threads = numba.get_num_threads()
    fp = gemm_address(a.dtype) if a.dtype.kind == "f" else 0
    set_, get = _thread_count_functions()
    if not fp or set_ is None or get is None or threads < 2 or m < 16 * threads:
        return None
    (a, ta, lda), (b, tb, ldb) = _blas_operand(a), _blas_operand(b)
    c = np.empty((m, n), a.dtype)
    args = (fp, ta, tb, m, n, k, a.ctypes.data, lda, b.ctypes.data, ldb, c.ctypes.data, c.itemsize, threads,
            a.dtype.type(1), a.dtype.type(0))
    from tracejit.backends.numba_cpu.workers import when_compiled
    kern = when_compiled(_SPLIT, args) or _SPLIT_SERIAL
    with _LOCK:     # (the first of concurrent calls saves OpenBLAS's count, the last one out restores it)
        if not _INSIDE[0]:
            _INSIDE[1] = get()
            set_(ctypes.c_int(1))
        _INSIDE[0] += 1
    try:
        kern(*args)
    finally:
        with _LOCK:
            _INSIDE[0] -= 1
            if not _INSIDE[0]:
                set_(ctypes.c_int(_INSIDE[1]))
    return c


_LOCK = threading.Lock()
_INSIDE = [0, None]     # [split_matmul calls running, OpenBLAS's thread count before the first of them]


def np_matmul(a, b):
    """np.matmul(a, b), its products shared among numba's threads where `stack_matmul` or `split_matmul` takes
    them."""
    out = stack_matmul(a, b) if a.ndim > 2 else split_matmul(a, b) if a.ndim == 2 else None
    return np.matmul(a, b) if out is None else out


_ld_py = _ld
_ld, _span, _disjoint = [numba.njit(inline="always")(f) for f in (_ld, _span, _disjoint)]
