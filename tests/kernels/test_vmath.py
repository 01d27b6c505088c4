"""Accuracy / edge-case / codegen tests of tracejit.kernels.cpu.vmath.

Every check runs the helpers inside an njit loop generated from source text,
the way tracejit's code generator emits them (``vmath.<name>(x[i])``).
"""

import math
import os
import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

numba = pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tracejit.kernels.cpu import vmath  # noqa: E402

UNARY = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf"]
BINARY = ["maximum", "minimum"]
DTYPES = [np.float32, np.float64]

# long double is only useful as a reference where it is wider than double
_HAVE_LD = np.finfo(np.longdouble).eps < 1e-18
_L = np.longdouble if _HAVE_LD else np.float64


# ---------------------------------------------------------------------------
# generated kernels
# ---------------------------------------------------------------------------

_KERNELS = {}


def _kernel(op, fastmath=False):
    key = (op, str(fastmath))
    if key not in _KERNELS:
        name = vmath.VMATH_NAMES[op]
        args = "x[i], y[i]" if op in BINARY else "x[i]"
        src = textwrap.dedent(f"""
            from numba import njit
            from tracejit.kernels.cpu import vmath

            @njit(fastmath={fastmath!r}, error_model="numpy")
            def kern(x, y, out):
                for i in range(out.size):
                    out[i] = vmath.{name}({args})
            """)
        ns = {}
        exec(compile(src, f"<vmath-test-{op}>", "exec"), ns)
        _KERNELS[key] = ns["kern"]
    return _KERNELS[key]


def run(op, x, y=None, fastmath=False):
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    _kernel(op, fastmath)(x, x if y is None else y, out)
    return out


# one kernel computing every unary op (checks caller fastmath flags)
_ALL_SRC = textwrap.dedent("""
    from numba import njit
    from tracejit.kernels.cpu import vmath

    @njit(fastmath=FASTMATH)
    def kern_all(x, out):
        for i in range(x.size):
            v = x[i]
            out[0, i] = vmath.vexp(v)
            out[1, i] = vmath.vexpm1(v)
            out[2, i] = vmath.vlog(v)
            out[3, i] = vmath.vlog1p(v)
            out[4, i] = vmath.vtanh(v)
            out[5, i] = vmath.vsigmoid(v)
            out[6, i] = vmath.verf(v)
            out[7, i] = vmath.vmaximum(v, out[0, i])
            out[8, i] = vmath.vminimum(v, out[0, i])
    """)


# ---------------------------------------------------------------------------
# references and error measures
# ---------------------------------------------------------------------------

def _erf_ref(x):
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(
        np.float64)


def _sigmoid_ref(x):
    v = x.astype(_L)
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1 / (1 + e), e / (1 + e))


def reference(op, x):
    """Best available reference (float64 for float32 inputs, long double for
    float64 inputs where the platform has it)."""
    wide = np.float64 if x.dtype == np.float32 else _L
    with np.errstate(all="ignore"):
        if op == "erf":
            return _erf_ref(x)
        if op == "sigmoid":
            return _sigmoid_ref(x).astype(wide)
        return getattr(np, op)(x.astype(wide))


def numpy_same_dtype(op, x):
    with np.errstate(all="ignore"):
        if op in ("erf", "sigmoid"):
            return reference(op, x).astype(x.dtype)
        return getattr(np, op)(x)


def ulp_error(got, ref, dtype):
    """max |got - ref| in units of the dtype spacing at ref; also checks that
    non-finite values and the signs of zeros agree exactly."""
    with np.errstate(all="ignore"):
        ref_r = np.asarray(ref).astype(dtype)
    assert got.dtype == dtype
    nan_r, nan_g = np.isnan(ref_r), np.isnan(got)
    assert np.array_equal(nan_r, nan_g), _first_mismatch(got, ref_r,
                                                         nan_r != nan_g)
    inf_r = np.isinf(ref_r)
    bad = inf_r & (got != ref_r)
    assert not bad.any(), _first_mismatch(got, ref_r, bad)
    fin = ~(nan_r | inf_r)
    bad = fin & ~np.isfinite(got)
    assert not bad.any(), _first_mismatch(got, ref_r, bad)
    zero = fin & (ref_r == 0)
    bad = zero & (np.signbit(got) != np.signbit(ref_r)) & (got == 0)
    assert not bad.any(), _first_mismatch(got, ref_r, bad)
    if not fin.any():
        return 0.0
    w = _L if dtype == np.float64 else np.float64
    sp = np.spacing(np.abs(ref_r[fin])).astype(w)
    err = np.abs(got[fin].astype(w) - np.asarray(ref)[fin].astype(w)) / sp
    return float(err.max())


def _first_mismatch(got, ref, mask):
    i = np.flatnonzero(mask)[0]
    return f"mismatch at index {i}: got {got[i]!r}, expected {ref[i]!r}"


# ---------------------------------------------------------------------------
# samples
# ---------------------------------------------------------------------------

def _bits_sweep(dtype, n, seed):
    """Values spread uniformly over all bit patterns (all exponents, both
    signs, denormals, infs and NaNs)."""
    if dtype == np.float32:
        return np.arange(0, 2**32, 2**32 // n, dtype=np.uint64).astype(
            np.uint32).view(np.float32)
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**64, n, dtype=np.uint64).view(np.float64)


def samples(op, dtype, n=100_000, seed=0):
    rng = np.random.default_rng(seed)
    lim = 89.0 if dtype == np.float32 else 710.0
    tiny = -40.0 if dtype == np.float32 else -300.0
    mags = np.exp(rng.uniform(tiny, 3.0, n))         # log-uniform magnitudes
    sgn = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    parts = [sgn * mags, rng.uniform(-2, 2, n)]
    if op in ("exp", "expm1", "sigmoid"):
        parts.append(rng.uniform(-1.18 * lim, lim, n))
    elif op == "log":
        lo = -149 if dtype == np.float32 else -1074
        hi = 128 if dtype == np.float32 else 1024
        parts.append(np.exp2(rng.uniform(lo, hi, n)))
        parts.append(rng.uniform(0.5, 2.0, n))
    elif op == "log1p":
        parts.append(np.exp(rng.uniform(tiny, 0.7 * lim, n)))
        parts.append(-np.exp(rng.uniform(tiny, 0.0, n)))
        parts.append(-1.0 + np.exp(rng.uniform(tiny, -0.1, n)))
    else:  # tanh, erf: the interesting range is |x| < 10
        parts.append(rng.uniform(-10, 10, n))
    x = np.concatenate(parts).astype(dtype)
    return np.concatenate([x, _bits_sweep(dtype, n, seed)])


# measured maxima (over these samples) are in the module docstring; these
# bounds leave a little room
MAX_ULP_EXACT = {np.float32: 2.0, np.float64: 2.5}
MAX_ULP_NUMPY = {np.float32: 4.0, np.float64: 3.0}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", UNARY)
def test_accuracy(op, dtype):
    x = samples(op, dtype)
    got = run(op, x)
    e_ref = ulp_error(got, reference(op, x), dtype)
    assert e_ref <= MAX_ULP_EXACT[dtype], (op, dtype, e_ref)
    e_np = ulp_error(got, numpy_same_dtype(op, x), dtype)
    assert e_np <= MAX_ULP_NUMPY[dtype], (op, dtype, e_np)
    # relative error where the result is a normal number
    ref = numpy_same_dtype(op, x).astype(np.float64)
    fin = np.isfinite(ref) & (np.abs(ref) >= np.finfo(dtype).tiny)
    rel = np.abs(got[fin] - ref[fin]) / np.abs(ref[fin])
    assert rel.max() <= (1e-6 if dtype == np.float32 else 1e-14)


# ---------------------------------------------------------------------------
# edge cases
# ---------------------------------------------------------------------------

def _edge_values(dtype):
    fi = np.finfo(dtype)
    v = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5,
         fi.max, -fi.max, fi.tiny, -fi.tiny, fi.smallest_subnormal,
         -fi.smallest_subnormal, 3 * fi.smallest_subnormal, fi.tiny / 3,
         -fi.tiny / 3, fi.eps, -fi.eps, fi.eps / 4, 1e-30, -1e-30,
         0.84375, 1.25, 1 / 0.35, 6.0, 0.625, 9.0, 10.0, 20.0, 30.0,
         -1.0 + fi.eps, -1.0 - fi.eps, -2.0, 2.0, math.sqrt(2) / 2 - 1,
         math.sqrt(2) - 1, 1e30, -1e30, -17.0, -18.0, -30.0, -40.0,
         -87.3, -100.0, -103.0, -103.97, -104.0, -105.0, 88.0, 88.5,
         88.72, 89.0, 700.0, 709.78, 709.79, 710.0, -708.0, -740.0,
         -745.0, -745.2, -746.0, -1000.0, 1000.0]
    x = np.array(v, dtype=np.float64)
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    # the float32 exp/expm1 overflow and underflow boundaries, ulp by ulp
    for b in ((88.72283, -103.27893, -103.97208, -87.33654)
              if dtype == np.float32 else
              (709.782712893384, -745.1332191019411, -708.3964185322641)):
        c = dtype(b)
        x = np.concatenate([x, c + np.arange(-4, 5, dtype=dtype)
                            * np.spacing(c)])
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", UNARY)
def test_edge_cases_match_numpy(op, dtype):
    x = _edge_values(dtype)
    got = run(op, x)
    # NaN/inf/signed-zero agreement is asserted inside ulp_error
    assert ulp_error(got, numpy_same_dtype(op, x), dtype) <= \
        MAX_ULP_NUMPY[dtype]
    assert ulp_error(got, reference(op, x), dtype) <= MAX_ULP_EXACT[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_edge_cases_explicit(dtype):
    d = dtype
    inf, nan = d(np.inf), d(np.nan)
    big = d(88.8) if d == np.float32 else d(709.8)

    def one(op, v):
        return run(op, np.array([v], dtype=d))[0]

    def same(a, b):
        return (np.isnan(a) and np.isnan(b)) or (
            a == b and np.signbit(a) == np.signbit(b))

    cases = [
        ("exp", nan, nan), ("exp", inf, inf), ("exp", -inf, 0.0),
        ("exp", 0.0, 1.0), ("exp", -0.0, 1.0), ("exp", big, inf),
        ("exp", d(-1000), 0.0),
        ("expm1", nan, nan), ("expm1", inf, inf), ("expm1", -inf, -1.0),
        ("expm1", -0.0, -0.0), ("expm1", 0.0, 0.0), ("expm1", big, inf),
        ("expm1", d(-1000), -1.0),
        ("log", nan, nan), ("log", 0.0, -inf), ("log", -0.0, -inf),
        ("log", d(-1), nan), ("log", -inf, nan), ("log", inf, inf),
        ("log", 1.0, 0.0),
        ("log1p", nan, nan), ("log1p", d(-1), -inf), ("log1p", d(-2), nan),
        ("log1p", -inf, nan), ("log1p", inf, inf), ("log1p", -0.0, -0.0),
        ("log1p", 0.0, 0.0),
        ("tanh", nan, nan), ("tanh", inf, 1.0), ("tanh", -inf, -1.0),
        ("tanh", d(25), 1.0), ("tanh", d(-25), -1.0), ("tanh", -0.0, -0.0),
        ("tanh", 0.0, 0.0),
        ("sigmoid", nan, nan), ("sigmoid", -inf, 0.0), ("sigmoid", inf, 1.0),
        ("sigmoid", 0.0, 0.5), ("sigmoid", -0.0, 0.5),
        ("sigmoid", d(-2000), 0.0), ("sigmoid", d(2000), 1.0),
        ("erf", nan, nan), ("erf", inf, 1.0), ("erf", -inf, -1.0),
        ("erf", d(7), 1.0), ("erf", d(-7), -1.0), ("erf", -0.0, -0.0),
        ("erf", 0.0, 0.0),
    ]
    for op, v, want in cases:
        got = one(op, d(v))
        assert same(got, d(want)), (op, v, got, want)
    # denormal inputs / outputs
    sub = np.finfo(d).smallest_subnormal
    for op in ("expm1", "log1p", "tanh"):
        assert one(op, sub) == sub and one(op, -sub) == -sub, op
    assert one("exp", sub) == 1.0
    assert 0 < one("sigmoid", d(-100)) < np.finfo(d).tiny or d == np.float64
    assert np.isclose(one("log", sub), math.log(float(sub)), rtol=1e-6)
    assert one("exp", d(-103.5) if d == np.float32 else d(-745.0)) == sub


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", BINARY)
def test_maximum_minimum_numpy_semantics(op, dtype):
    rng = np.random.default_rng(3)
    n = 20_000
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0],
                       dtype=dtype)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    a[::3] = rng.choice(special, a[::3].size)
    b[::5] = rng.choice(special, b[::5].size)
    a[::7] = b[::7]
    # every pair of specials, both orders
    sa, sb = np.meshgrid(special, special)
    a = np.concatenate([a, sa.ravel()])
    b = np.concatenate([b, sb.ravel()])
    got = run(op, a, b)
    want = getattr(np, op)(a, b)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


# ---------------------------------------------------------------------------
# robustness to the caller's fastmath flags
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fastmath", [True, {"reassoc", "contract"}],
                         ids=["fastmath-all", "reassoc-contract"])
def test_caller_fastmath_does_not_leak(fastmath):
    """Helpers keep their own (IEEE) semantics inside a fastmath kernel."""
    ns = {}
    exec(_ALL_SRC.replace("FASTMATH", repr(fastmath)), ns)
    kern_all = ns["kern_all"]
    for dtype in DTYPES:
        x = np.concatenate([_edge_values(dtype),
                            samples("tanh", dtype, n=5_000)])
        out = np.empty((9, x.size), dtype=dtype)
        kern_all(x, out)
        for j, op in enumerate(UNARY):
            assert ulp_error(out[j], numpy_same_dtype(op, x), dtype) <= \
                MAX_ULP_NUMPY[dtype], (op, dtype)
        e = run("exp", x)
        for j, op in ((7, "maximum"), (8, "minimum")):
            want = getattr(np, op)(x, e)
            assert np.array_equal(np.isnan(out[j]), np.isnan(want))
            ok = ~np.isnan(want)
            assert np.array_equal(out[j][ok], want[ok])


# ---------------------------------------------------------------------------
# typing, Python fallback, registry
# ---------------------------------------------------------------------------

def test_registry_and_names():
    assert set(vmath.VMATH) == set(UNARY + BINARY)
    for op, fn in vmath.VMATH.items():
        name = vmath.VMATH_NAMES[op]
        assert getattr(vmath, name) is fn
        assert op in vmath.VMATH_F32 and op in vmath.VMATH_F64
    assert len(vmath.SOURCE_HASH) == 64


def test_result_types_and_python_fallback():
    from numba import njit, types

    @njit
    def f(x):
        return vmath.vexp(x), vmath.vtanh(x), vmath.verf(x)

    f(np.float32(0.5))
    f(np.float64(0.5))
    f(3)
    rts = {tuple(sig.args): sig.return_type for sig in f.nopython_signatures}
    assert rts[(types.float32,)] == types.UniTuple(types.float32, 3)
    assert rts[(types.float64,)] == types.UniTuple(types.float64, 3)
    assert rts[(types.int64,)] == types.UniTuple(types.float64, 3)
    assert f(3)[0] == pytest.approx(math.exp(3), rel=1e-15)
    # plain Python calls work too (elementwise, same algorithms)
    r = vmath.vexp(np.float32(1.0))
    assert isinstance(r, np.float32) and abs(r - np.e) < 1e-6
    arr = vmath.vlog(np.array([[1.0, np.e]], dtype=np.float32))
    assert arr.dtype == np.float32 and arr.shape == (1, 2)
    assert np.allclose(arr, [[0.0, 1.0]])
    assert vmath.vmaximum(1.0, np.nan) != vmath.vmaximum(1.0, np.nan)


_VEC_ARCH = platform.machine().lower() in ("x86_64", "amd64", "aarch64",
                                           "arm64")


@pytest.mark.skipif(not _VEC_ARCH, reason="vectorization check for x86/arm")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_loops_vectorize(dtype):
    """A loop calling any helper is SIMD-vectorized: vector types in the
    optimized IR and no call left to a helper or to libm."""
    vt = "float" if dtype == np.float32 else "double"
    for op in UNARY + BINARY:
        x = np.ones(64, dtype=dtype)
        run(op, x)
        k = _kernel(op)
        sig = [s for s in k.signatures if s[0].dtype == numba.from_dtype(
            dtype)][0]
        llvm_ir = k.inspect_llvm(sig)
        widths = {int(w) for w in re.findall(r"<(\d+) x %s>" % vt, llvm_ir)}
        assert widths and max(widths) >= 2, (op, dtype)
        calls = re.findall(r"call [^\n]*@\"?([\w.$]+)", llvm_ir)
        assert not [c for c in calls if "vmath" in c or c.startswith(
            ("exp", "log", "tanh", "erf"))], (op, calls)
        assert "fpext" not in llvm_ir or dtype == np.float64, op


# ---------------------------------------------------------------------------
# generated file-based module with cache=True
# ---------------------------------------------------------------------------

_GEN_SRC = textwrap.dedent("""
    from numba import njit
    from tracejit.kernels.cpu import vmath

    @njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")
    def kern(x, out):
        for i in range(x.size):
            out[i] = vmath.vmaximum(vmath.vexp(x[i]) * vmath.vtanh(x[i]),
                                    vmath.vsigmoid(x[i]))
    """)

_DRIVER = textwrap.dedent("""
    import importlib.util, sys
    import numpy as np
    path, modname = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod          # required for numba's cache
    spec.loader.exec_module(mod)
    x = np.linspace(-20, 20, 10001).astype(np.float32)
    out = np.empty_like(x)
    mod.kern(x, out)
    xd = x.astype(np.float64)
    ref = np.maximum(np.exp(xd) * np.tanh(xd), 1 / (1 + np.exp(-xd)))
    assert np.allclose(out, ref, rtol=2e-6, atol=0), "wrong result"
    st = mod.kern.stats
    print("HITS", sum(st.cache_hits.values()), "MISSES",
          sum(st.cache_misses.values()))
    """)


def test_generated_module_with_disk_cache(tmp_path):
    modname = "tj_vmath_test_" + vmath.SOURCE_HASH[:12]
    path = tmp_path / (modname + ".py")
    path.write_text(_GEN_SRC)
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba_cache")
    results = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(driver), str(path),
                               modname], env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        m = re.search(r"HITS (\d+) MISSES (\d+)", proc.stdout)
        results.append((int(m.group(1)), int(m.group(2))))
    assert results[0] == (0, 1), results
    assert results[1] == (1, 0), results


# ---------------------------------------------------------------------------
# expshift (softmax's exp of a row minus its max) and the row reductions
# ---------------------------------------------------------------------------

def _exp_and_expshift(x, a, b):
    sfx = "_f32" if x.dtype == np.float32 else "_f64"
    exp, expshift = getattr(vmath, "exp" + sfx), getattr(vmath, "expshift" + sfx)

    @numba.njit(error_model="numpy")
    def both(x, a, b):
        for i in range(x.size):
            a[i], b[i] = exp(x[i]), expshift(x[i])
    both(x, a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_expshift_is_exp_on_nonpositive_arguments(dtype):
    rng = np.random.default_rng(5)
    lo = -110.0 if dtype == np.float32 else -760.0
    x = np.concatenate([-np.abs(rng.standard_normal(200_000)) * 30, np.linspace(lo, 0, 200_001),
                        [-np.inf, -0.0, 0.0, np.nan, np.inf, 1.5, lo / 2]]).astype(dtype)
    x = np.concatenate([x, -np.abs(_edge_values(dtype))])
    a, b = np.empty_like(x), np.empty_like(x)
    _exp_and_expshift(x, a, b)
    neg = x <= 0
    # bit for bit (denormal results included) where the argument is <= 0
    assert np.array_equal(a[neg].view(f"i{x.itemsize}"), b[neg].view(f"i{x.itemsize}"))
    # elsewhere the argument itself: NaN stays NaN, +inf stays +inf (the row's sum carries them)
    assert np.array_equal(b[~neg], x[~neg], equal_nan=True)


def test_row_max_min_propagate_nan_and_vectorize():
    from tracejit.kernels.cpu.rows import rmax, rmin
    rng = np.random.default_rng(6)
    for dtype in DTYPES:
        for n in (1, 7, 16, 1000, 1031):
            t = rng.standard_normal(n).astype(dtype)
            assert rmax(t, n) == t.max() and rmin(t, n) == t.min()
            assert rmax(t, n - 1) == (t[:n - 1].max() if n > 1 else -np.inf)
            for where in {0, n // 2, n - 1}:
                u = t.copy()
                u[where] = np.nan
                assert np.isnan(rmax(u, n)) and np.isnan(rmin(u, n))
            u = t.copy()
            u[n // 2] = np.inf
            assert rmax(u, n) == np.inf and rmin(-u, n) == -np.inf
        assert rmax(np.zeros(1, dtype), 0) == -np.inf and rmin(np.zeros(1, dtype), 0) == np.inf
        fresh = numba.njit(rmax.py_func)          # (code loaded from numba's cache cannot be inspected)
        fresh(np.ones(4, dtype), 4)
        vt = "float" if dtype == np.float32 else "double"
        assert re.search(r"<\d+ x %s>" % vt, fresh.inspect_llvm(fresh.signatures[0])), "rmax does not vectorize"
