"""Fused loops with several costly calls run in stages over tiles (codegen.stages): the same bits as the one-loop
kernel, serially and in threads, in every loop layout (flat, nd with broadcasting and sums, chunks with a full
sum), with values of several dtypes crossing stages and an output written into its input's buffer."""
import os

import numpy as np
import pytest

import tracejit
from tracejit.backends.numba_cpu import codegen


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    d = os.environ.get("TJ_TEST_CACHE") or str(tmp_path_factory.getbasetemp() / "tjcache")
    os.environ["TJ_TEST_CACHE"] = d
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", d)


def run(fn, args, monkeypatch, staged, parallel):
    """fn traced with stages on or off, serial or threaded: (outputs as numpy, the kernels' KernelSources)."""
    monkeypatch.setattr(codegen, "STAGE_HEAVY", 1 if staged else 1 << 30)
    monkeypatch.setattr(codegen, "STAGE_MAX", 4 if staged else 1 << 30)
    monkeypatch.setattr(codegen, "PAR_MIN", 1 if parallel else 1 << 62)
    tf = tracejit.trace(fn, backend="numba")
    outs = tf(*[tracejit.tensor(a.copy()) for a in args])
    outs = outs if isinstance(outs, tuple) else (outs,)
    kernels = [ks for _, ks, _ in tf.graph(*[tracejit.tensor(a) for a in args]).entry.fwd_fn.kernels]
    return [o.numpy() for o in outs], kernels


def check(fn, args, monkeypatch, reference, modes, rtol=2e-6):
    base, ks = run(fn, args, monkeypatch, staged=False, parallel=False)
    assert not any("for tt in" in k.code for k in ks)
    for got, want in zip(base, reference(*[a.astype(np.float64) for a in args])):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    for parallel in (False, True):
        outs, ks = run(fn, args, monkeypatch, staged=True, parallel=parallel)
        assert sorted(k.mode for k in ks if "for tt in" in k.code) == sorted(modes)
        for a, b in zip(outs, base):
            np.testing.assert_array_equal(a, b)


def sig(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize("n", [3, 2500])
def test_flat_chain_of_transcendentals(n, monkeypatch):
    def fn(x):
        y = x
        for k in range(4):
            y = (tracejit.tanh(y * 0.7 + 0.2) if k % 2 else tracejit.exp(y * 0.3)) + x
        return y, tracejit.sigmoid(y) * x     # x read by the first and the last stage

    def ref(x):
        y = x
        for k in range(4):
            y = (np.tanh(y * 0.7 + 0.2) if k % 2 else np.exp(y * 0.3)) + x
        return y, sig(y) * x

    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    check(fn, [x], monkeypatch, ref, ["flat"])


def test_values_of_several_dtypes_cross_stages(monkeypatch):
    def fn(x):
        m = tracejit.tanh(x) > 0.1                       # bool, read two stages later
        d = tracejit.exp(x.double() * 0.5)               # float64
        return tracejit.where(m, tracejit.sigmoid(x), tracejit.tanh(d).float()), d

    def ref(x):
        d = np.exp(x * 0.5)
        return np.where(np.tanh(x) > 0.1, sig(x), np.tanh(d)), d

    x = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    check(fn, [x], monkeypatch, ref, ["flat"])


@pytest.mark.parametrize("shape,dim", [((2, 66000), 1), ((3, 2100), 0)])
def test_broadcasting_and_a_sum(shape, dim, monkeypatch):
    # a sum over rows longer than a row kernel takes (summands in a scratch row) and over the first dim
    def fn(x, b, c):
        y = tracejit.sigmoid(tracejit.tanh(x + b) * c) * tracejit.exp(-x * x)
        return y.sum(dim), y

    def ref(x, b, c):
        y = sig(np.tanh(x + b) * c) * np.exp(-x * x)
        return y.sum(dim), y

    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    c = rng.standard_normal((shape[0], 1)).astype(np.float32)
    check(fn, [x, b, c], monkeypatch, ref, ["nd"], rtol=2e-5)


def test_a_full_sum_in_chunks(monkeypatch):
    def fn(x):
        y = tracejit.tanh(tracejit.exp(x * 0.5)) * x
        return y.sum(), y

    def ref(x):
        y = np.tanh(np.exp(x * 0.5)) * x
        return y.sum(), y

    x = np.random.default_rng(3).standard_normal(70000).astype(np.float32)
    check(fn, [x], monkeypatch, ref, ["chunks"], rtol=2e-5)


def test_in_place_update_written_into_its_input(monkeypatch):
    # the update's kernel may write into x's own array: the stages that read x run before x is written
    def fn(x):
        x.mul_(tracejit.tanh(tracejit.exp(x * 0.5)) + tracejit.sigmoid(x))
        return x * 1

    def ref(x):
        return (x * (np.tanh(np.exp(x * 0.5)) + sig(x)),)

    x = np.random.default_rng(4).standard_normal(5000).astype(np.float32)
    check(fn, [x], monkeypatch, ref, ["flat"])


def test_only_bodies_with_several_costly_calls_are_staged():
    from tracejit.backends.numba_cpu.rt import HEAVY
    assert {"exp_f32", "tanh_f64", "sigmoid_f32", "erf_f32", "log_f32"} <= HEAVY and "relu_f32" not in HEAVY
    assert codegen.stages(["v0 = exp_f32(x0)    # exp", "v1 = (v0 * x0)    # mul"]) is None
    assert codegen.stages(["v0 = exp_f32(x0)    # exp", "v1 = (v0 * x0)    # mul", "v2 = tanh_f32(v1)    # tanh",
                           "v3 = relu_f32(v2)    # relu"]) == [[0, 1], [2, 3]]
    # independent costly calls share a stage (they overlap in one loop), at most STAGE_MAX of them
    assert codegen.stages(["v0 = tanh_f32(x0)    # tanh", "v1 = sigmoid_f32(x1)    # sigmoid",
                           "v2 = (v0 * v1)    # mul"]) is None
    assert codegen.stages([f"v{k} = exp_f32(x{k})    # exp" for k in range(codegen.STAGE_MAX + 1)]) == \
        [list(range(codegen.STAGE_MAX)), [codegen.STAGE_MAX]]
    # a first statement with more costly calls than a stage takes starts the first stage (no empty stage before it)
    assert codegen.stages(["v0 = exp_f32(tanh_f32(x0))    # x", "v1 = exp_f32(v0)    # exp"]) == [[0], [1]]


def test_interleaved_vectors_from_interleave_min(monkeypatch):
    # a loop of costly calls over INTERLEAVE_MIN elements or more compiles with LLVM interleaving INTERLEAVE vectors
    # (workers.vector_interleave): the same bits as without, and only large kernels pay its compile time
    def fn(x):
        return tracejit.sigmoid(tracejit.tanh(x * 0.7 + 0.2) * 1.5) + tracejit.exp(x * 0.25)

    monkeypatch.setattr(codegen, "INTERLEAVE_MIN", 4096)
    big = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
    outs = {}
    for ic in (0, 4):
        monkeypatch.setattr(codegen, "INTERLEAVE", ic)
        for a in (big, big[:100]):
            got, ks = run(fn, [a], monkeypatch, staged=True, parallel=False)
            assert ("VECTOR_INTERLEAVE = 4" in ks[0].code) == (ic == 4 and a.size >= 4096)
            outs[ic, a.size] = got[0]
    np.testing.assert_array_equal(outs[0, 5000], outs[4, 5000])
    np.testing.assert_allclose(outs[4, 5000], sig(np.tanh(big * 0.7 + 0.2) * 1.5) + np.exp(big * 0.25), rtol=2e-6)


def test_interleave_is_chosen_per_cpu(monkeypatch):
    # unset, INTERLEAVE follows the CPU numba compiles for: 8 vectors, except 4 on Intel at 256 bits or less
    # (measured: codegen.interleave's docstring); TRACEJIT_INTERLEAVE (the module's INTERLEAVE) overrides it,
    # 0 leaves LLVM its own choice
    import tracejit.kernels.cpu as kcpu
    for cpu, bits, ic in (("emeraldrapids", 512, 8), ("emeraldrapids", 256, 4), ("haswell", 256, 4),
                          ("znver4", 256, 8), ("znver3", 256, 8), ("znver4", 512, 8), ("x86-64", 128, 4)):
        codegen._interleave_for_cpu.cache_clear()
        monkeypatch.setattr(kcpu, "vector_info", lambda cpu=cpu, bits=bits: {"llvm_cpu": cpu, "vector_bits": bits})
        monkeypatch.setattr(codegen, "INTERLEAVE", None)
        assert codegen.interleave() == ic, (cpu, bits)
        monkeypatch.setattr(codegen, "INTERLEAVE", 0)
        assert codegen.interleave() == 0
    codegen._interleave_for_cpu.cache_clear()


def test_vector_interleave_applies_to_its_kernels_only():
    # LLVM's option is set while a kernel whose module asks for it compiles, and reset afterwards
    import types

    import numba
    from tracejit.backends.numba_cpu import workers

    def f(x, y):
        for i in range(x.size):
            y[i] = x[i] * 1.5 + 0.5

    def vector_stores(globals_):
        disp = numba.njit(types.FunctionType(f.__code__, globals_))
        with workers.vector_interleave(disp):
            disp.compile((numba.float32[::1], numba.float32[::1]))
        asm = disp.inspect_asm(disp.signatures[0])
        return sum(asm.count(f"vmovups\t%{r}mm") for r in "xyz") + asm.count("\tmovups\t%xmm")

    plain = vector_stores({})
    assert vector_stores({"VECTOR_INTERLEAVE": 8}) > plain    # 8 vectors stored per iteration: more than LLVM's choice
    assert vector_stores({}) == plain                          # and what compiles afterwards is as before
