"""The numba CPU backend against the reference interpreter: fusion, generated kernels, executor, disk cache."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracejit
import tracejit.nn.functional as F
from tracejit.passes.fusion import fusion, fused_nodes
from stepcheck import traced_equals_eager

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    # one cache folder for the whole module: kernels compiled by one test are reused by the next
    d = os.environ.get("TJ_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "tjcache")
    os.environ["TJ_TEST_CACHE"] = d
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", d)


def both(fn, *args):
    a = tracejit.trace(fn, backend="numba")(*args)
    b = tracejit.trace(fn, backend="interpreter")(*args)
    return a, b


def assert_same(a, b, tol=1e-5):
    a, b = np.asarray(a.detach()), np.asarray(b.detach())
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


UNARY = [tracejit.exp, tracejit.tanh, tracejit.sigmoid, tracejit.relu, tracejit.abs, tracejit.neg,
         lambda x: tracejit.log(tracejit.abs(x) + 1), lambda x: tracejit.sqrt(tracejit.abs(x)), tracejit.sin,
         tracejit.erf, tracejit.floor, lambda x: tracejit.clamp(x, -0.5, 0.7), lambda x: F.gelu(x),
         lambda x: F.softplus(x), lambda x: tracejit.expm1(x * 0.1), lambda x: F.leaky_relu(x, 0.1)]
BINARY = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / (tracejit.abs(b) + 1),
          tracejit.maximum, tracejit.minimum, lambda a, b: tracejit.where(a > b, a, b * 2),
          lambda a, b: a * 0.5 + b, lambda a, b: 2 - a]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_random_elementwise_chains_with_broadcasting(seed, dtype):
    rng = np.random.default_rng(seed)
    shapes = [(4, 5), (5,), (4, 1), (1, 5), ()]

    def fn(x, y, z):
        vals = [x, y, z]
        for k in range(10):
            if rng.random() < 0.4:
                v = UNARY[rng.integers(len(UNARY))](vals[rng.integers(len(vals))])
            else:
                v = BINARY[rng.integers(len(BINARY))](vals[rng.integers(len(vals))], vals[rng.integers(len(vals))])
            vals.append(v)
        return vals[-1] + vals[-2] * vals[-3], vals[-4]

    args = [tracejit.tensor(rng.standard_normal(shapes[i]).astype(dtype)) for i in rng.choice(4, 3)]
    args[0] = tracejit.tensor(rng.standard_normal((4, 5)).astype(dtype))
    rng_state = rng.bit_generator.state
    a = tracejit.trace(fn, backend="numba")(*args)
    rng.bit_generator.state = rng_state
    b = tracejit.trace(fn, backend="interpreter")(*args)
    for p, q in zip(a, b):
        assert_same(p, q, 1e-5 if dtype == "float32" else 1e-12)


def test_mixed_dtypes_ints_bools_and_casts():
    def fn(i, x, m):
        a = i * 3 + 1                 # int64 stays int64
        b = a // 2 - (a % 5)          # integer division and remainder
        c = x * i + 0.25              # int * float32 -> float32
        d = tracejit.where(m, c, -c)  # bool condition
        e = (x > 0.1) & m             # bool result
        f = d.to(tracejit.float64) * 1.5
        return b, c, d, e, f, (i / 3)  # int / int -> float

    i = tracejit.tensor(np.arange(-6, 6).reshape(3, 4))
    x = tracejit.randn(3, 4)
    m = tracejit.tensor(np.array([True, False, True, True]))
    for p, q in zip(*both(fn, i, x, m)):
        assert_same(p, q)


def test_nan_and_inf_propagate_like_numpy():
    def fn(x, y):
        return tracejit.maximum(x, y), tracejit.minimum(x, y), tracejit.relu(x), tracejit.exp(x), tracejit.tanh(y)

    x = tracejit.tensor(np.array([np.nan, 1.0, -np.inf, np.inf, 0.0, 100.0], np.float32))
    y = tracejit.tensor(np.array([0.0, np.nan, 1.0, -np.inf, -0.0, -100.0], np.float32))
    for p, q in zip(*both(fn, x, y)):
        assert_same(p, q)


def test_infinite_and_nan_constants_in_a_kernel():
    # constants such as the inf of var's backward at N == correction must be valid kernel source
    def fn(x):
        return (x + float("inf")) * 0.5, tracejit.maximum(x, tracejit.tensor(float("-inf"))) - float("nan") * 0, \
            x.var(0, keepdim=True)

    x = tracejit.randn(1, 4)
    for p, q in zip(*both(fn, x)):
        assert_same(p, q)


def chain(x, w, b):
    return tracejit.tanh(x * w + b) * tracejit.sigmoid(x) + 0.5 * x * x


def test_fused_chain_is_one_kernel_and_readable():
    x, w, b = tracejit.randn(16, 8), tracejit.randn(16, 8), tracejit.randn(8)
    tf = tracejit.trace(chain, backend="numba")
    y = tf(x, w, b)
    assert_same(y, chain(x, w, b))
    compiled = tf.graph(x, w, b).entry.fwd_fn
    g = compiled.graph
    assert len(g.nodes) == 1 and len(fused_nodes(g)) == 1
    text = str(g)
    assert "fused_0" in text and "| " in text and "tanh" in text
    src = compiled.source()
    assert "tanh_f32(" in src and "@numba.njit" in src
    # the Python float 0.5 is a typed kernel argument (float32 math stays float32), not part of the source
    ks = compiled.kernels[0][1]
    assert ks.params == (0.5,) and ks.params[0].dtype == np.float32 and ks.extra_args[-1].tolist() == [0.5]
    assert "k0 = np.float32(kp[0])" in src and "0.5" not in src
    assert "cluster_fused_0" in g.to_dot()


def test_kernels_of_the_same_structure_share_one_compilation():
    # the SGD update of parameters of different shapes, in programs whose value ids differ: one module, one
    # dispatcher; the readable source still names each kernel's own shape and IR values
    ps = [tracejit.randn(*s) for s in ((16, 8), (8,), (3, 5, 2))]
    gs = [tracejit.randn(*p.shape) for p in ps]

    def step(p, g):
        return p - 0.1 * g

    def other(a, p, g):
        return a @ a, step(p, g)         # the same update in a program that numbers its values otherwise

    kernels = []
    for p, g in zip(ps, gs):
        tf = tracejit.trace(step, backend="numba")
        assert_same(tf(p, g), p - 0.1 * g)
        kernels.append(tf.graph(p, g).entry.fwd_fn.kernels[0])
    a = tracejit.randn(4, 4)
    tf = tracejit.trace(other, backend="numba")
    assert_same(tf(a, ps[0], gs[0])[1], step(ps[0], gs[0]))
    kernels += tf.graph(a, ps[0], gs[0]).entry.fwd_fn.kernels
    assert len(kernels) == 4 and all(k[2] is kernels[0][2] for k in kernels)
    assert "f32[16,8]" in kernels[0][1].source and "f32[3,5,2]" in kernels[2][1].source
    assert "f32[16,8]" not in kernels[0][1].code


def test_normalizations_of_different_sizes_share_one_compilation():
    """Two BatchNorm-like normalizations over (N, H, W) of different sizes, each divided by an integer of its
    own: the row length is a kernel argument, and so is an integer scalar in float arithmetic (each would be a
    0.3-0.4 s compilation of its own); an exponent stays a literal (x ** 2.0 with the exponent as an argument
    was a libm pow call per element: 33x slower over 4M floats)."""
    def norm(x, k):
        m = x.mean((0, 2, 3), keepdim=True)
        return (x - m) / k + x ** 2 + x.abs() ** 0.5, x.var((0, 2, 3), correction=1)

    xs = [tracejit.randn(4, 3, 5, 5), tracejit.randn(2, 6, 3, 4)]
    disps = []
    for x, k in zip(xs, (3, 7)):
        tf = tracejit.trace(lambda x: norm(x, k), backend="numba")
        for a, b in zip(tf(x), norm(x, k)):
            assert_same(a, b)
        ks = _kernels(tf.graph(x).entry.fwd_fn)
        disps.append([d for _, d in ks])
        pows = [m for k, _ in ks for m in re.findall(r"pow_\(\w+, (\w+)\)", k.code)]
        assert len(set(pows)) == 2 and all(p.startswith("C") for p in pows), pows    # literals, int and float
    assert len(disps[0]) == len(disps[1]) and all(a is b for a, b in zip(*disps))


def test_multi_output_fusion_and_convexity():
    def fn(x, y):
        a = x * y
        s = (a * 2).sum()           # a reduction between two elementwise parts
        return tracejit.exp(a) + s, a.sum(), tracejit.relu(x) - y

    x, y = tracejit.randn(6, 3), tracejit.randn(6, 3)
    tf = tracejit.trace(fn, backend="numba")
    for p, q in zip(tf(x, y), fn(x, y)):
        assert_same(p, q)
    g = tf.graph(x, y).entry.fwd_fn.graph
    assert any(n.op.nout > 1 for n in fused_nodes(g))


def test_mlp_forward_backward_matches_interpreter():
    tracejit.manual_seed(0)
    W1, b1 = tracejit.randn(8, 16) * 0.3, tracejit.zeros(16)
    W2, b2 = tracejit.randn(16, 4) * 0.3, tracejit.zeros(4)
    x, y = tracejit.randn(32, 8), tracejit.randint(0, 4, (32,))

    def loss_fn(w1, c1, w2, c2, x, y):
        h = F.gelu(x @ w1 + c1) * tracejit.sigmoid(x @ w1)
        return F.cross_entropy(F.relu(h) @ w2 + c2, y)

    res = {}
    for be in ("numba", "interpreter"):
        ps = [p.clone().requires_grad_() for p in (W1, b1, W2, b2)]
        loss = tracejit.trace(loss_fn, backend=be)(*ps, x, y)
        loss.backward()
        res[be] = [loss] + [p.grad for p in ps]
    for p, q in zip(res["numba"], res["interpreter"]):
        assert_same(p, q)


def test_intermediate_buffers_are_reused_but_outputs_are_fresh():
    def fn(x):
        a = tracejit.exp(x)
        return (a.sum(0) * 2).reshape(-1), a.reshape(-1) * 1

    tf = tracejit.trace(fn, backend="numba")
    x1, x2 = tracejit.randn(4, 3), tracejit.randn(4, 3)
    r1 = [t.numpy().copy() for t in tf(x1)]
    keep = tf(x1)
    tf(x2)
    for p, q in zip(keep, r1):
        np.testing.assert_array_equal(p.numpy(), q)


def test_compile_error_names_the_kernel_and_offers_the_interpreter():
    from tracejit.backends.numba_cpu import KernelCompileError
    x = tracejit.randn(3)
    tf = tracejit.trace(lambda x: tracejit.exp(x) + 1, backend="numba")
    g = tracejit.trace(lambda x: tracejit.exp(x) + 1, backend="interpreter").graph(x).forward
    fg = fusion(g)
    node = fused_nodes(fg)[0]
    node.attrs["body"].nodes[0].op = type(node.op)("broken", None, None, kind="elementwise", expr="no_such_fn({0})")
    from tracejit.backends.numba_cpu.executor import CompiledGraph
    with pytest.raises(KernelCompileError) as ei:
        CompiledGraph(fg)
    msg = str(ei.value)
    assert "fused_0" in msg and "interpreter" in msg
    assert "Traceback" not in msg
    assert tf(x) is not None


def test_second_process_compiles_nothing(tmp_path):
    script = textwrap.dedent("""
        import json, numpy as np, tracejit
        from tracejit.backends.numba_cpu.executor import compile_stats
        def chain(x, w, b):
            return tracejit.tanh(x * w + b) * tracejit.sigmoid(x) + 0.5 * x * x
        x, w, b = tracejit.randn(16, 8), tracejit.randn(16, 8), tracejit.randn(8)
        tracejit.trace(chain, backend="numba")(x, w, b)
        print(json.dumps(compile_stats()))
    """)
    # (numba's disk cache: every kernel compiled by numba in the first process; test_direct.py has direct.py's)
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT, TRACEJIT_DIRECT_KERNELS="0")
    import json
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True, cwd=ROOT).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert runs[0]["compiled"] >= 1
    assert runs[1]["compiled"] == 0 and runs[1]["loaded"] >= 1


def test_concurrent_calls_from_threads_get_their_own_buffers():
    from concurrent.futures import ThreadPoolExecutor

    def fn(x):
        a = tracejit.exp(x * 0.5)
        return (a.sum(1, keepdim=True) * a).sum(0)

    tf = tracejit.trace(fn, backend="numba")
    xs = [tracejit.randn(64, 256) for _ in range(8)]
    want = [fn(x).numpy() for x in xs]
    tf(xs[0])
    with ThreadPoolExecutor(4) as ex:
        for _ in range(5):
            got = list(ex.map(lambda x: tf(x).numpy(), xs))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5)


def test_non_contiguous_zero_dim_and_scalar_inputs():
    def fn(a, b, s):
        t = a.t() * 2 + b          # a transposed (non-contiguous) input
        return tracejit.sigmoid(t) * s, (t > s).to(tracejit.int32) + 1, s * 3

    a, b, s = tracejit.randn(5, 4), tracejit.randn(4, 5), tracejit.tensor(0.25)
    for p, q in zip(*both(fn, a, b, s)):
        assert_same(p, q)


T = tracejit
OPS_CASES = {
    "remainder": lambda a, b: T.remainder(a, b), "fmod": lambda a, b: T.fmod(a, b),
    "floor_divide": lambda a, b: T.floor_divide(a, b), "pow": lambda a, b: T.pow(T.abs(a) + 0.1, b),
    "pow_scalar": lambda a, b: a ** 2 + 2 ** b, "atan2": T.atan2, "fmax": T.fmax, "fmin": T.fmin,
    "round": lambda a, b: T.round(a * 3), "sign": lambda a, b: T.sign(a), "exp2": lambda a, b: T.exp2(a),
    "log2": lambda a, b: T.log2(T.abs(a)), "log10": lambda a, b: T.log10(T.abs(a)),
    "rsqrt": lambda a, b: T.rsqrt(T.abs(a)), "reciprocal": lambda a, b: T.reciprocal(a),
    "trig": lambda a, b: T.cos(a) + T.tan(a) + T.atan(b) + T.asin(T.tanh(a)) + T.acos(T.tanh(b)),
    "hyper": lambda a, b: T.sinh(a) + T.cosh(b), "silu": lambda a, b: F.silu(a),
    "elu": lambda a, b: F.elu(a), "gelu_tanh": lambda a, b: F.gelu(a, approximate="tanh"),
    "hardtanh": lambda a, b: F.hardtanh(a), "lerp": lambda a, b: T.lerp(a, b, 0.3),
    "logical": lambda a, b: T.logical_xor(a > 0, b > 0) | T.logical_not(a > b) & (a != b),
    "isnan": lambda a, b: T.isnan(T.log(a)) | T.isinf(1 / (a * 0)) | T.isfinite(b),
    "ceil_trunc_frac": lambda a, b: T.ceil(a) + T.trunc(b) + T.frac(a * 2),
    "log1p_expm1": lambda a, b: T.log1p(T.abs(a)) + T.expm1(b), "square": lambda a, b: T.square(a) - b,
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("case", sorted(OPS_CASES))
def test_each_elementwise_op_matches_interpreter(case, dtype):
    rng = np.random.default_rng(1)
    if dtype == "int64":
        if case in ("logical", "isnan", "lerp", "pow", "trig", "hyper", "silu", "elu", "gelu_tanh",
                    "round", "ceil_trunc_frac", "hardtanh"):
            pytest.skip("float-only case")
        a = T.tensor(rng.integers(-9, 10, (3, 4)))
        b = T.tensor(rng.integers(1, 5, (4,)))
    else:
        a = T.tensor((rng.standard_normal((3, 4)) * 2).astype(dtype))
        b = T.tensor((rng.standard_normal((4,)) * 2).astype(dtype))
    fn = OPS_CASES[case]
    p, q = both(fn, a, b)
    assert_same(p, q, 2e-5 if np.asarray(q).dtype != np.float64 else 1e-10)


def test_small_int_overflow_wraps_and_bool_arithmetic_like_numpy():
    def fn(a, b, m, n):
        x = a * 100000 + b             # int32 wraps in numpy; numba would widen to int64
        return x, x > 0, m + n, m * n, (a * 3 // 2).to(tracejit.int16) * 1000

    a = tracejit.tensor(np.arange(-40000, 40000, 7000, dtype=np.int32))
    b = tracejit.tensor(np.int32(5))
    m = tracejit.tensor(np.arange(12) % 2 == 0)
    n = tracejit.tensor(np.arange(12) % 3 == 0)
    for p, q in zip(*both(fn, a, b, m, n)):
        assert_same(p, q)


@pytest.mark.parametrize("dims,keepdim", [(None, False), (0, True), (1, False), ((0, 2), False), (2, True)])
def test_sum_epilogue_fused_into_the_kernel(dims, keepdim):
    def fn(x, b):
        y = tracejit.tanh(x * b) + x * x
        s = y.sum() if dims is None else y.sum(dims, keepdim=keepdim)
        return s * 2, tracejit.exp(x)

    x = tracejit.randn(3, 4, 5)
    b = tracejit.randn(5)
    if dims is not None:    # a NaN in one slice must stay in that slice; a full sum must stay a number to compare
        x.numpy()[0, 1, 2] = np.nan
    tf = tracejit.trace(fn, backend="numba")
    out = tf(x, b)
    for p, q in zip(out, tracejit.trace(fn, backend="interpreter")(x, b)):
        assert_same(p, q)
    ref = np.tanh(x.numpy().astype(np.float64) * b.numpy()) + x.numpy().astype(np.float64) ** 2
    ref = 2 * (ref.sum() if dims is None else ref.sum(axis=dims, keepdims=keepdim))
    assert np.isfinite(out[0].numpy()).sum() == np.isfinite(ref).sum() > 0
    np.testing.assert_allclose(out[0].numpy(), ref, rtol=1e-5, atol=1e-5)
    g = tf.graph(x, b).entry.fwd_fn.graph
    assert any(m.op.name == "sum" for n in fused_nodes(g) for m in n.attrs["body"].nodes)


def _kernels(compiled):
    return [(ks, disp) for _, ks, disp in compiled.kernels]


@pytest.mark.parametrize("shape", [(65537,), (81920,), (7, 11701)])
def test_full_sum_runs_in_chunks_the_same_serially_and_in_threads(shape, monkeypatch):
    """A loss-like full sum (over more elements than a row kernel takes) fused with elementwise outputs:
    chunks of CHUNK elements, each summed from a
    scratch row, partial sums added in chunk order, so the prange variant gives the serial bits."""
    from tracejit.backends.numba_cpu import codegen

    def fn(x, w):
        y = tracejit.tanh(x * w) + x * x
        return y.sum(), y * 3

    rng = np.random.default_rng(sum(shape))
    x = tracejit.tensor(rng.standard_normal(shape).astype(np.float32))
    w = tracejit.tensor(np.float32(0.5))
    outs = {}
    for variant, par_min in (("serial", 1 << 62), ("parallel", 1)):
        monkeypatch.setattr(codegen, "PAR_MIN", par_min)
        tf = tracejit.trace(fn, backend="numba")
        outs[variant] = [o.numpy() for o in tf(x, w)]
        (ks, disp), = _kernels(tf.graph(x, w).entry.fwd_fn)
        assert ks.mode == "chunks" and disp.py_func.__name__ == ("kernel" if variant == "serial" else "kernel_par")
    for a, b in zip(outs["serial"], outs["parallel"]):
        np.testing.assert_array_equal(a, b)
    x64 = x.numpy().astype(np.float64)
    want = (np.tanh(x64 * 0.5) + x64 * x64).sum()
    np.testing.assert_allclose(outs["serial"][0], want, rtol=1e-5)
    for p, q in zip(*both(fn, x, w)):
        assert_same(p, q)


def test_sum_over_a_long_last_dim_with_broadcasting_uses_a_scratch_row():
    # rows longer than a row kernel takes, and a broadcast input: the nd loop, its summands in a scratch row
    def fn(x, b):
        return (tracejit.sigmoid(x + b) * x).sum(1)
    rng = np.random.default_rng(3)
    x = tracejit.tensor(rng.standard_normal((3, 70001)).astype(np.float32))
    b = tracejit.tensor(rng.standard_normal(70001).astype(np.float32))
    got, want = both(fn, x, b)
    assert_same(got, want)
    tf = tracejit.trace(fn, backend="numba")
    tf(x, b)
    (ks, _), = _kernels(tf.graph(x, b).entry.fwd_fn)
    assert ks.mode == "nd" and "rsum(t0" in ks.source


@pytest.mark.parametrize("shape,pshape,dims,loop", [
    ((4, 3, 5, 6), (1, 3, 1, 1), (0,), [4, 3, 30]),            # NCHW, per-channel parameters: H, W merged
    ((4, 3, 5, 6), (5, 6), (0,), [4, 3, 30]),
    ((4, 3, 5, 6), (1, 3, 1, 1), (0, 2), [4, 3, 5, 6]),         # the sum treats H and W apart: not merged
    ((2, 1, 7, 4), (7, 1), (0,), [2, 7, 4]),                    # a size-1 dim dropped
])
def test_nd_kernels_loop_over_merged_dims(shape, pshape, dims, loop):
    # neighbouring dims every operand treats alike loop as one: (N, C, H*W) for per-channel work, not rows of W
    def fn(x, m, s):
        y = (x - m) * s
        return y, (y * x).sum(dims, keepdim=True)
    rng = np.random.default_rng(11)
    x = tracejit.tensor(rng.standard_normal(shape).astype(np.float32))
    m, s = (tracejit.tensor(rng.standard_normal(pshape).astype(np.float32)) for _ in range(2))
    for a, b in zip(*both(fn, x, m, s)):
        assert_same(a, b)
    tf = tracejit.trace(fn, backend="numba")
    tf(x, m, s)
    (ks, _), = _kernels(tf.graph(x, m, s).entry.fwd_fn)
    assert ks.mode == "nd" and list(ks.extra_args[:len(loop)]) == loop


def test_nd_kernel_inner_loop_vectorizes(monkeypatch):
    """The inner loop of a broadcasting kernel (flat unsigned offsets, no slice per row) is SIMD code, the
    per-row accumulator of a sum over the leading dims included."""
    import numba
    monkeypatch.setattr(tracejit.config, "direct_kernels", False)   # (numba's kernel; test_direct.py: direct.py's)

    def fn(x, b):
        y = tracejit.relu(x + b) * x
        return y, y.sum(0)
    x = tracejit.tensor(np.ones((8, 64), np.float32))
    b = tracejit.tensor(np.ones(64, np.float32))
    tf = tracejit.trace(fn, backend="numba")
    tf(x, b)
    (ks, disp), = _kernels(tf.graph(x, b).entry.fwd_fn)
    assert ks.mode == "nd" and "np.uint64(" in ks.code
    fresh = numba.njit(disp.py_func)        # (numba cannot show the code it loaded from its disk cache)
    fresh.compile(disp.signatures[0])
    assert re.search(r"<\d+ x float>", fresh.inspect_llvm(fresh.signatures[0]))


@pytest.mark.parametrize("direct", [False, True])
def test_views_reach_kernels_as_contiguous_arrays(monkeypatch, tmp_path, direct):
    """A stride-0 cotangent (sum's backward expands a scalar), a strided slice, a read-only array: each kernel
    keeps the one specialization compiled at trace time (a view would be typed in Python, compiled again at
    call time and run without vectorizing; a direct kernel would refuse it, and numba's would compile)."""
    from tracejit.backends.numba_cpu.executor import compile_stats
    monkeypatch.setattr(tracejit.config, "direct_kernels", direct)
    if direct:
        monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))     # (new kernels: direct.py lowers them)
    before = compile_stats()

    def fn(x):
        return tracejit.tanh(x) * x
    base = np.random.default_rng(4).standard_normal(200002).astype(np.float32)
    x = tracejit.tensor(base[::2].copy(), requires_grad=True)
    tf = tracejit.trace(fn, backend="numba")
    tf(x).sum().backward()
    g = x.grad.numpy().copy()
    x.grad = None
    fn(x).sum().backward()
    np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-6)
    strided = tracejit.tensor(base)[::2]
    ro = base[::2].copy()
    ro.flags.writeable = False
    for arg in (strided, tracejit.from_numpy(ro)):
        np.testing.assert_allclose(tf(arg.detach()).numpy(), fn(arg.detach()).numpy(), rtol=1e-6)
    gs = tf.graph(x)
    for compiled in (gs.entry.fwd_fn, gs.entry.bwd_fn):
        for ks, disp in _kernels(compiled):
            # (with direct kernels: none, or the one numba's background helper compiled)
            assert len(disp.signatures) == 1 or direct and not disp.signatures, (ks.name, disp.signatures)
    after = compile_stats()
    assert after["direct_mismatch"] == before["direct_mismatch"]
    assert (after["direct"] > before["direct"]) == direct


def test_in_place_updates_are_written_into_the_inputs_arrays(monkeypatch):
    """An SGD step's new parameters are written by the kernel into the parameters' own arrays (no fresh output,
    no copy back), and where that is not safe or possible the result is still eager's."""
    from tracejit.tracing import trace as T
    copies = []
    copy_back = T._copy_back
    monkeypatch.setattr(T, "_copy_back", lambda dst, a: (copies.append(a.shape), copy_back(dst, a)))
    rng = np.random.default_rng(6)
    ws = [rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)]

    def step(x, params):
        loss = (tracejit.tanh(x @ params[0] + params[1]) ** 2).sum()
        loss.backward()
        with tracejit.no_grad():
            for p in params:
                p -= 0.1 * p.grad
                p.grad = None
        return loss.detach()

    x = tracejit.tensor(rng.standard_normal((16, 64)).astype(np.float32))
    eager = [tracejit.tensor(w.copy(), requires_grad=True) for w in ws]
    traced = [tracejit.tensor(w.copy(), requires_grad=True) for w in ws]
    tf = tracejit.trace(lambda x: step(x, traced), backend="numba")
    for _ in range(3):
        np.testing.assert_allclose(tf(x).numpy(), step(x, eager).numpy(), rtol=1e-5)
        for a, b in zip(traced, eager):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=2e-5)
    assert len(tf.graph(x).entry.fwd_fn._donated) == 2 and copies == []

    # the old value read after the update (by a matmul that needs the new value), a strided parameter:
    # no donation, or a copy back
    def reads_old(w, z):
        old = w * 1.0
        w.mul_(2.0)
        return old @ (w.t() @ z)
    base = rng.standard_normal((6, 12)).astype(np.float32)
    for w_t in (tracejit.tensor(base[:, :6].copy()), tracejit.from_numpy(base[:, ::2])):   # strided memory
        z = tracejit.tensor(rng.standard_normal((6, 3)).astype(np.float32))
        w_e = tracejit.tensor(w_t.numpy().copy())
        got = tracejit.trace(reads_old, backend="numba")(w_t, z)
        np.testing.assert_allclose(got.numpy(), reads_old(w_e, z).numpy(), rtol=1e-5)
        np.testing.assert_allclose(w_t.numpy(), w_e.numpy(), rtol=1e-6)
    assert copies == [(6, 6), (6, 6)]       # the old value is read after the update: copied back both times

    def scale(w):
        w.mul_(2.0)
        return w * 3.0
    copies.clear()
    for w_t in (tracejit.tensor(base[:, :6].copy()), tracejit.from_numpy(base[:, ::2])):
        want = 2 * w_t.numpy()
        tracejit.trace(scale, backend="numba")(w_t)
        np.testing.assert_array_equal(w_t.numpy(), want)
    assert copies == [(6, 6)]       # donated into the contiguous array; the strided one takes the copy back


def test_weight_updates_by_a_matrix_gradient_are_one_gemm(monkeypatch):
    """`W - lr * X.T @ dZ` is one BLAS call adding the product into W's own array (gemm_acc, donated): the
    graph shows it, the numbers are the interpreter's, nothing is copied back; an update whose product reads W
    itself still computes the right thing (BLAS refuses C aliasing an operand; the node works on a copy)."""
    from tracejit.kernels.cpu.blas import _load
    from tracejit.tracing import trace as T
    copies = []
    copy_back = T._copy_back
    monkeypatch.setattr(T, "_copy_back", lambda dst, a: (copies.append(a.shape), copy_back(dst, a)))
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((256, 128)).astype(np.float32) * 0.1
    x = tracejit.tensor(rng.standard_normal((32, 256)).astype(np.float32))

    def step(x, w):
        loss = (tracejit.tanh(x @ w) ** 2).sum()
        loss.backward()
        with tracejit.no_grad():
            w -= 0.05 * w.grad
            w.grad = None
        return loss.detach()

    ws = {b: tracejit.tensor(w0.copy(), requires_grad=True) for b in ("numba", "interpreter")}
    fs = {b: tracejit.trace(lambda x, b=b: step(x, ws[b]), backend=b) for b in ws}
    for _ in range(3):
        np.testing.assert_allclose(fs["numba"](x).numpy(), fs["interpreter"](x).numpy(), rtol=1e-5)
        np.testing.assert_allclose(ws["numba"].detach().numpy(), ws["interpreter"].detach().numpy(),
                                   rtol=1e-4, atol=2e-5)
    g = fs["numba"].graph(x).entry.fwd_fn.graph
    assert [n.op.name for n in g.nodes].count("gemm_acc") == 1 and "gemm_acc" in g.text()
    copies.clear()                       # (the interpreter's updates are copied back)
    fs["numba"](x)
    assert copies == [] or not _load()

    # x.grad accumulated over calls, x.grad + dZ @ W.T: a gemm_acc into a copy of the old gradient
    x64 = rng.standard_normal((64, 256)).astype(np.float32)     # a gradient of 16Ki elements: lowered too
    xs = {b: tracejit.tensor(x64.copy(), requires_grad=True) for b in ws}
    ws = {b: tracejit.tensor(w0.copy(), requires_grad=True) for b in ws}
    fs = {b: tracejit.trace(lambda x, b=b: step(x, ws[b]), backend=b) for b in ws}
    for _ in range(3):
        for b in fs:
            fs[b](xs[b])
    want = xs["interpreter"].grad.numpy()
    np.testing.assert_allclose(xs["numba"].grad.numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert [n.op.name for n in fs["numba"].graph(xs["numba"]).entry.fwd_fn.graph.nodes].count("gemm_acc") == 2

    # nn.Linear's weight gradient is a transposed product (dZ.T @ X, written (X.T @ dZ).T): one gemm_acc too
    def linear_step(m, opt, x, y):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    runs = {}
    for b in ("numba", "interpreter"):
        tracejit.manual_seed(3)
        m = tracejit.nn.Linear(256, 128)
        opt = tracejit.optim.SGD(m.parameters(), lr=0.1)
        f = tracejit.trace(lambda x, y, m=m, opt=opt: linear_step(m, opt, x, y), backend=b)
        xs, ys = tracejit.randn(64, 256), tracejit.randint(0, 128, (64,))
        runs[b] = ([float(f(xs, ys)) for _ in range(3)], m.weight.detach().numpy(), f.graph(xs, ys).entry.fwd_fn)
    np.testing.assert_allclose(runs["numba"][0], runs["interpreter"][0], rtol=1e-5)
    np.testing.assert_allclose(runs["numba"][1], runs["interpreter"][1], rtol=1e-4, atol=2e-5)
    assert "gemm_acc" in runs["numba"][2].graph.text()

    # without numpy's OpenBLAS (another numpy build) the node computes with numpy: the same numbers
    import tracejit.kernels.cpu.blas as blas
    monkeypatch.setattr(blas, "_FUNCS", {})
    wn, wi = (tracejit.tensor(w0.copy(), requires_grad=True) for _ in range(2))
    fn, fi = (tracejit.trace(lambda x, w=w: step(x, w), backend=b) for w, b in ((wn, "numba"), (wi, "interpreter")))
    for _ in range(2):
        np.testing.assert_allclose(fn(x).numpy(), fi(x).numpy(), rtol=1e-5)
    np.testing.assert_allclose(wn.detach().numpy(), wi.detach().numpy(), rtol=1e-4, atol=2e-5)
    assert "gemm_acc" in fn.graph(x).entry.fwd_fn.graph.text()

    def self_update(w):
        w -= 0.01 * (w @ w)              # A and B are W: not in place
        return w.sum()
    a = rng.standard_normal((128, 128)).astype(np.float32) * 0.1
    wt, we = tracejit.tensor(a.copy()), tracejit.tensor(a.copy())
    f = tracejit.trace(self_update, backend="numba")
    np.testing.assert_allclose(f(wt).numpy(), self_update(we).numpy(), rtol=1e-4)
    np.testing.assert_allclose(wt.numpy(), we.numpy(), rtol=1e-5, atol=1e-6)
    assert "gemm_acc" in f.graph(wt).entry.fwd_fn.graph.text()


def test_a_sum_of_products_accumulates_into_one_array():
    """An unrolled recurrence's weight gradient, one product per step summed (plain `x @ w` and nn.Linear's
    transposed form), is the first product then a gemm_acc per further product into that same array (into_p);
    a term that is not a product (weight decay's 2*w) is added after. Numbers: the interpreter's."""
    rng = np.random.default_rng(11)
    T = 5
    xs0 = rng.standard_normal((T, 16, 24)).astype(np.float32)
    w0 = (rng.standard_normal((24, 32)) * 0.2).astype(np.float32)
    u0 = (rng.standard_normal((32, 32)) * 0.2).astype(np.float32)

    def unrolled(xs, w, lin):
        h = tracejit.zeros(16, 32)
        for t in range(T):
            h = tracejit.tanh(xs[t] @ w + lin(h))
        loss = (h ** 2).sum() + (w ** 2).sum()
        loss.backward()
        return loss.detach(), w.grad, lin.weight.grad

    out = {}
    for b in ("numba", "interpreter"):
        tracejit.manual_seed(0)
        lin = tracejit.nn.Linear(32, 32, bias=False)
        with tracejit.no_grad():
            lin.weight.copy_(tracejit.tensor(u0))
        w = tracejit.tensor(w0.copy(), requires_grad=True)
        f = tracejit.trace(lambda xs, w=w, lin=lin: unrolled(xs, w, lin), backend=b)
        out[b] = [r.numpy() for r in f(tracejit.tensor(xs0))], f.graph(tracejit.tensor(xs0)).entry.fwd_fn
    for got, want in zip(out["numba"][0], out["interpreter"][0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    nodes = out["numba"][1].graph.nodes
    accs = [n for n in nodes if n.op.name == "gemm_acc"]
    # w: T products, lin.weight: T - 1 (h0 is zeros: its product is folded away or kept, either way summed)
    assert len(accs) >= 2 * (T - 1) - 1 and all(n.attrs["into_p"] for n in accs)
    assert sum(1 for n in nodes if n.op.name == "matmul") >= 2 * T - len(accs)


def test_products_with_biases_in_one_sum_accumulate_into_one_array():
    # LSTM gates (x @ W_ih.T + b_ih) + (h @ W_hh.T + b_hh): the two products are one array, the biases added after
    rng = np.random.default_rng(12)
    x, h = (tracejit.tensor(rng.standard_normal((8, 16)).astype(np.float32)) for _ in range(2))
    tracejit.manual_seed(1)
    ih, hh = tracejit.nn.Linear(16, 32), tracejit.nn.Linear(16, 32)

    def gates(x, h):
        return tracejit.sigmoid(ih(x) + hh(h))

    tf = tracejit.trace(gates)
    np.testing.assert_allclose(tf(x, h).detach().numpy(), gates(x, h).detach().numpy(), rtol=1e-5, atol=1e-6)
    nodes = tf.graph(x, h).entry.fwd_fn.graph.nodes
    names = [n.op.name for n in nodes]
    assert names.count("matmul") == 1 and names.count("gemm_acc") == 1, names


def test_no_donation_into_an_input_another_input_views():
    # w and a view of its memory are both arguments: updating w in its own array would change what the
    # program reads through the view; those calls take the copy back (the program acts on copies)
    def f(w, v):
        w.mul_(2.0)
        return v * w.sum()          # (more elements than a row kernel takes: a chunked sum, then v's kernel)
    base = np.linspace(1, 2, 70001, dtype=np.float32)
    for shared in (True, False):
        w = tracejit.tensor(base.copy())
        v = tracejit.from_numpy(w.numpy()[::-1]) if shared else tracejit.tensor(base[::-1].copy())
        want = base[::-1] * (2 * base.astype(np.float64).sum())
        got = tracejit.trace(f, backend="numba")(w, v)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
        np.testing.assert_allclose(w.numpy(), 2 * base, rtol=1e-6)


def test_a_training_step_copies_each_convolution_input_into_columns_once():
    """conv2d(x, w) and its weight gradient read one conv_columns node (im2col of x), not a copy each; the
    step's numbers equal the interpreter's and eager's."""
    tracejit.manual_seed(0)
    conv = tracejit.nn.Conv2d(3, 8, 3, padding=1, stride=2, bias=True)
    conv2 = tracejit.nn.Conv2d(8, 4, 3, padding=1, groups=2)
    params = list(conv.parameters()) + list(conv2.parameters())
    x = tracejit.randn(4, 3, 9, 9)

    def step(x):
        for p in params:
            p.grad = None
        loss = (F.relu(conv2(F.relu(conv(x)))) ** 2).mean()
        loss.backward()
        return [loss] + [p.grad for p in params]

    got = tracejit.trace(step, backend="numba")(x)
    ref = tracejit.trace(step, backend="interpreter")(x)
    eager = step(x)
    for a, b, c in zip(got, ref, eager):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.numpy(), c.detach().numpy(), rtol=1e-5, atol=1e-6)
    tf = tracejit.trace(step, backend="numba")
    tf(x)
    names = [n.op.name for n in tf.graph(x).entry.fwd_fn.graph.nodes]
    assert names.count("conv_columns") == 2 and "conv2d_backward_weight" not in names, names
    assert names.count("conv2d_from_columns") == 2 and names.count("conv2d_weight_grad_from_columns") == 2


def test_convolution_columns_are_shared_within_a_memory_budget(monkeypatch):
    """Columns live from the forward to the weight gradient: beyond convcols.BUDGET bytes they are copied twice."""
    from tracejit.backends.numba_cpu import convcols
    conv = tracejit.nn.Conv2d(2, 3, 3, padding=1)
    x = tracejit.randn(2, 2, 6, 6)

    def step(x):
        conv.weight.grad = conv.bias.grad = None
        loss = conv(x).square().mean()
        loss.backward()
        return loss, conv.weight.grad

    nbytes = 2 * 9 * 2 * 6 * 6 * 4
    for budget, shared in ((nbytes, True), (nbytes - 1, False)):
        monkeypatch.setattr(convcols, "BUDGET", budget)
        tf = tracejit.trace(step, backend="numba")
        loss, gw = tf(x)
        names = [n.op.name for n in tf.graph(x).entry.fwd_fn.graph.nodes]
        assert ("conv_columns" in names) == shared and ("conv2d_backward_weight" in names) != shared, names
        loss2, gw2 = step(x)
        np.testing.assert_allclose(gw.numpy(), gw2.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_forward_and_derivative_share_one_erf_or_tanh(approximate):
    # gelu lowers to its parts after autodiff (its `decompose`), and CSE merges the forward's erf (tanh) with
    # the one its VJP wrote: one transcendental per element instead of two
    x = tracejit.randn(4, 8, requires_grad=True)

    def step(x):
        y = F.gelu(x, approximate=approximate)
        y.sum().backward()
        return y, x.grad

    g = traced_equals_eager(step, x, [(1e-6, 1e-7)] * 2)
    body = [m.op.name for n in fused_nodes(g) for m in n.attrs["body"].nodes]
    assert "gelu" not in body
    assert body.count("erf" if approximate == "none" else "tanh") == 1


def _window_cases():
    T = tracejit
    return [
        ("chunk gates", lambda g, c: [T.sigmoid(a) * c + T.tanh(b) for a, b in [g.chunk(4, 1)[:2]]][0],
         [(32, 256), (32, 64)]),
        ("steps and offsets", lambda x: x[1:3, ::2] * 2 + x[0:2, 1::2], [(4, 6)]),
        ("an int and a negative int", lambda x: x[:, 3] + x[-1, :4].exp(), [(4, 6)]),
        ("ellipsis, 3-d", lambda x: (x[..., 2:4] * 2).tanh() + x[:, :, 1:3], [(4, 5, 6)]),
        ("contiguous rows of a 3-d input, dims merged", lambda x: x[1:3] * 3 - 1, [(4, 5, 6)]),
        ("a window read by a kernel with a sum epilogue", lambda x: (x[1:5] * x[2:6]).sum(), [(8, 20000)]),
    ]


@pytest.mark.parametrize("name", [c[0] for c in _window_cases()])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_slices_feeding_a_kernel_are_read_in_place(name, dtype):
    """A basic slice (ints, slices with steps, an ellipsis) read only by a loop kernel is no node of its own and
    no copy: the kernel reads the window of its input in place (offset and strides as arguments). Values: eager's."""
    _, f, shapes = next(c for c in _window_cases() if c[0] == name)
    rng = np.random.default_rng(5)
    args = [tracejit.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]
    tf = tracejit.trace(f)
    np.testing.assert_allclose(tf(*args).numpy(), f(*args).numpy(), rtol=1e-5, atol=1e-5)
    cg = tf.graph(*args).entry.fwd_fn
    assert not [n for n in cg.graph.nodes if n.op.name == "slice"], cg.graph.text()
    bodies = [m.op.name for n in cg.graph.nodes if n.op.kind == "fused" for m in n.attrs["body"].nodes]
    assert "slice" in bodies
    # a transposed argument (not C-contiguous) is made contiguous once, then read in place too
    if len(shapes) == 1 and len(shapes[0]) == 2:
        xt = tracejit.tensor(rng.standard_normal(shapes[0][::-1]).astype(dtype)).t()
        np.testing.assert_allclose(tf(xt).numpy(), f(xt).numpy(), rtol=1e-5, atol=1e-5)


def test_a_slice_read_by_a_row_kernel_stays_a_view():
    # row kernels (a sum over a dim, softmax) do not take windows: the slice stays a node; same numbers
    def f(x):
        return (x[:, 1:5] * x[:, 2:6]).sum(1), x[1:3].sum()
    x = tracejit.randn(8, 9)
    tf = tracejit.trace(f)
    for a, b in zip(tf(x), f(x)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert [n.op.name for n in tf.graph(x).entry.fwd_fn.graph.nodes].count("slice") == 3


def test_a_slice_read_outside_the_kernel_stays_a_view():
    # the matmul reads x[:, :4] too: the slice stays a node (a view, no copy) and the kernel reads its output
    def f(x, w):
        a = x[:, :4]
        return (a @ w) + a.exp().sum()
    x, w = tracejit.randn(6, 10), tracejit.randn(4, 4)
    tf = tracejit.trace(f)
    np.testing.assert_allclose(tf(x, w).numpy(), f(x, w).numpy(), rtol=1e-5)
    names = [n.op.name for n in tf.graph(x, w).entry.fwd_fn.graph.nodes]
    assert names.count("slice") == 1


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_a_cat_of_kernel_values_is_stored_in_place(dim):
    """cat of values a loop kernel computes (chunk's backward, say) is no node of its own: the kernel stores each
    piece where it lands in the output. Values: eager's, forward and gradient."""
    def f(x, y):
        return tracejit.cat([x * 2, y.exp(), x - y], dim)

    rng = np.random.default_rng(8)
    x, y = (tracejit.tensor(rng.standard_normal((3, 4, 5)).astype(np.float32)) for _ in range(2))
    tf = tracejit.trace(f)
    np.testing.assert_allclose(tf(x, y).numpy(), f(x, y).numpy(), rtol=1e-6)
    g = tf.graph(x, y).entry.fwd_fn.graph
    assert "cat" not in [n.op.name for n in g.nodes]
    assert "cat" in [m.op.name for n in g.nodes if n.op.kind == "fused" for m in n.attrs["body"].nodes]

    def cell(gates, c):
        gates.requires_grad_(True)
        i, f_, gg, o = gates.chunk(4, 1)
        h = tracejit.sigmoid(o) * tracejit.tanh(tracejit.sigmoid(f_) * c + tracejit.sigmoid(i) * tracejit.tanh(gg))
        (h * h).sum().backward()
        return gates.grad

    gates, c = tracejit.randn(8, 32), tracejit.randn(8, 8)
    tc = tracejit.trace(cell)
    np.testing.assert_allclose(tc(gates, c).numpy(), cell(gates.detach(), c).numpy(), rtol=1e-5, atol=1e-6)
    names = [n.op.name for n in tc.graph(gates, c).entry.fwd_fn.graph.nodes]
    assert "cat" not in names and "slice" not in names


def test_an_in_place_update_of_a_slice_from_a_shifted_slice_equals_eager():
    # w[:-1] = w[:-1] * 2 + w[1:]: two windows of w, one written back into w (read before it is written)
    def f(w):
        with tracejit.no_grad():
            w[:-1] = w[:-1] * 2 + w[1:]
        return w.sum()
    a = np.arange(12, dtype=np.float32)
    wt, we = tracejit.tensor(a.copy()), tracejit.tensor(a.copy())
    tracejit.trace(f)(wt)
    f(we)
    np.testing.assert_array_equal(wt.numpy(), we.numpy())


def test_kernels_of_one_structure_are_generated_once_and_named_each(monkeypatch):
    # an unrolled loop: the same kernel structure at every step is generated once (codegen.generate's memo); each
    # node still gets its own name and header, and a different constant is a different kernel's parameter
    from tracejit.backends.numba_cpu import codegen
    from tracejit.ir.graph import format_node
    made = []
    source = codegen._LoopKernel.source
    monkeypatch.setattr(codegen._LoopKernel, "source", lambda self, *a: made.append(1) or source(self, *a))

    def f(x, w):
        outs = []
        for k in range(4):                  # (the matmul ends each step's kernel)
            x = tracejit.tanh((x @ w) * 0.5 + 1.0) * x
            outs.append(x.exp() * (2.0 if k < 3 else 3.0))
        return outs

    x, w = tracejit.randn(6, 7), tracejit.randn(7, 7) * 0.3
    tf = tracejit.trace(f)
    for a, b in zip(tf(x, w), f(x, w)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
    cg = tf.graph(x, w).entry.fwd_fn
    names = [name for name, _, _ in cg.kernels]
    assert len(set(names)) == len(names) >= 4
    for name, ks, _ in cg.kernels:
        assert ks.name == name and f"kernel {name}:" in ks.source.splitlines()[0]
        node = next(n for n in cg.graph.nodes if n.op.name == name)
        assert ks.node is node and format_node(node.attrs["body"].nodes[0]).split(" = ")[0] in ks.source
    assert len(made) == len({codegen.structure(ks.node, False) for _, ks, _ in cg.kernels}) < len(names)
    assert len({id(ks.node) for _, ks, _ in cg.kernels}) == len(names)


def test_a_product_sum_with_a_read_only_operand_computes_with_numpy():
    # (fuzz seed 7215) the gradient of (v @ v.t()).sum() sums two products of autodiff's read-only ones: gemm_acc
    # refuses read-only operands and the node computes with numpy
    def program(v):
        v3 = v.unsqueeze(0)
        return (v3 @ v3.t()).sum()

    a = np.array([-0.87, -0.33])
    xs = [tracejit.tensor(a.copy(), requires_grad=True) for _ in range(2)]
    program(xs[0]).backward()
    tracejit.trace(lambda v: program(v).backward())(xs[1])
    np.testing.assert_allclose(xs[1].grad.numpy(), xs[0].grad.numpy(), rtol=1e-12)


def test_a_sum_whose_window_is_read_outside_its_kernel_runs_alone():
    # (fuzz seed 7523) x[1::2][0::2] summed and read by another kernel: the window stays a view, its sum is no
    # kernel of its own (an elementwise group of a lone sum has no loop)
    def f(x, y):
        w = x[1::2][0::2]
        return w.sum() + (y + w).sum()

    x, y = tracejit.randn(4, dtype=tracejit.float64), tracejit.randn(3, dtype=tracejit.float64)
    np.testing.assert_allclose(tracejit.trace(f)(x, y).numpy(), f(x, y).numpy(), rtol=1e-12)


def test_fused_steps_read_through_reshapes_and_skip_those_only_they_read():
    # views and reshapes a fused kernel reads are read from the array under them (its elements in the same order):
    # a chain of them, one of a transposed (non-contiguous) input, one that is also returned (computed), and a
    # reshape a non-fused node reads (computed)
    from tracejit.backends.numba_cpu import executor

    def fn(x, w, b, t):
        y = x * w.view(1, 4, 1, 1) + b.reshape(4, 1).view(1, 4, 1, 1)       # a chain of two
        z = tracejit.relu(t.t().reshape(-1)) * 2.0                           # a copy under it (t.t() strided)
        r = b.view(2, 2)
        return y.sum(), z, r, r.sum() + tracejit.matmul(w.view(2, 2), r).sum()

    rng = np.random.default_rng(0)
    args = [tracejit.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((3, 4, 2, 2), (4,), (4,), (3, 5))]
    got, want = both(fn, *args)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)
        assert g.shape == e.shape
    np.testing.assert_array_equal(got[2].numpy(), args[2].numpy().reshape(2, 2))
    tf = tracejit.trace(fn, backend="numba")
    tf(*args)
    cg = tf.graph(*args).entry.fwd_fn
    skipped = [n.op.name for n, st in zip(cg.graph.nodes, cg._steps) if st is executor._skip]
    kept = [n.op.name for n, st in zip(cg.graph.nodes, cg._steps)
            if n.op.name in ("view", "reshape") and st is not executor._skip]
    assert len(skipped) >= 3 and set(skipped) <= {"view", "reshape"}
    assert kept      # the returned view and the matmul's operand are computed
