"""tracejit.kernels.cpu asks LLVM for 512-bit vectors on the Intel cores where they pay and OpenMP for short spinning,
and leaves what the user set alone; TRACEJIT_VECTOR_BITS forces each vector instruction set the host has, and
generated kernels compute the same numbers in each."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = r"""
import json, sys
if sys.argv[1] == "numba first":            # the user compiled numba code before tracejit's kernels loaded
    import numba
    numba.njit(lambda x: x + 1)(1)
import llvmlite.binding as ll
import tracejit.kernels.cpu
from numba.core import config
import os
from tracejit.kernels.cpu.blas import _library
lib = _library()
print(json.dumps({"cpu": ll.get_host_cpu_name(), "avx512f": "+avx512f" in ll.get_host_cpu_features().flatten(),
                  "features": config.CPU_FEATURES, "spin": os.environ.get("GOMP_SPINCOUNT"),
                  "blas_timeout": lib.openblas_thread_timeout() if lib is not None else None}))
"""


def probe(order="kernels first", **env):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("NUMBA_CPU", "TRACEJIT_VECTOR", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                              "OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT", "TRACEJIT_BLAS_SPIN"))}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE, order], cwd=ROOT, env=e, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_512_bit_vectors_only_on_the_listed_intel_cores():
    from tracejit.kernels.cpu import _CORES_512
    r = probe()
    if r["cpu"] in _CORES_512 and r["avx512f"]:
        assert r["features"].endswith(",-prefer-256-bit") and "+avx512f" in r["features"]
    else:
        assert r["features"] is None


def test_the_users_numba_settings_win():
    r = probe(TRACEJIT_VECTOR_BITS="256")
    assert r["features"] is None if not r["avx512f"] else "-avx512f" in r["features"].split(",")
    assert probe(NUMBA_CPU_FEATURES="+sse2")["features"] == "+sse2"
    assert probe(NUMBA_CPU_NAME="generic")["features"] == ""      # numba's own default for a generic cpu
    assert probe("numba first")["features"] is None                # its code generator exists: left alone


# LLVM feature strings as llvmlite flattens them: an Intel AVX-512 server core and an AVX2-only core (Zen 3)
_AVX512_HOST = ("+sse4.2,+avx,+avx2,+fma,+f16c,+vaes,+avx512f,+avx512bw,+avx512vl,+avx512fp16,+avx10.1,+evex512,"
                "+amx-tile,+amx-bf16,+avxvnni,+fma4,-xop")
_AVX2_HOST = "+sse4.2,+avx,+avx2,+fma,+f16c,+vaes,-avx512f,-avx512bw,-evex512,-amx-tile,-avx10.1"


def test_every_setting_on_any_host(monkeypatch):
    """What each TRACEJIT_VECTOR_BITS setting asks of LLVM, and what vector_info then reports, for an AVX-512 and
    an AVX2 CPU whatever this host is (the compiled code paths: test_each_vector_instruction_set...)."""
    from numba.core import config
    from tracejit.kernels.cpu import vector_features, vector_info
    spr, zen3 = _AVX512_HOST, _AVX2_HOST
    assert vector_features(spr, "auto", "sapphirerapids") == spr + ",-prefer-256-bit"
    assert vector_features(spr, "auto", "skylake-avx512") == spr            # LLVM's choice (256-bit) kept
    assert vector_features(spr, "512", "skylake-avx512") == spr + ",-prefer-256-bit"
    assert vector_features(zen3, "512", "znver3") == zen3 == vector_features(zen3, "auto", "znver3")
    on = lambda f: {x[1:] for x in f.split(",") if x.startswith("+")}      # noqa: E731
    assert on(vector_features(spr, "256")) == {"sse4.2", "avx", "avx2", "fma", "f16c", "vaes", "avxvnni", "fma4"}
    assert on(vector_features(spr, "128")) == on(vector_features(zen3, "128")) == {"sse4.2"}
    assert vector_features(zen3, "256") == zen3
    cases = [("sapphirerapids", spr, "auto", "AVX-512", 512), ("skylake-avx512", spr, "auto", "AVX-512", 256),
             ("skylake-avx512", spr, "512", "AVX-512", 512), ("znver4", spr, "auto", "AVX-512", 512),
             ("sapphirerapids", spr, "256", "AVX2", 256), ("sapphirerapids", spr, "128", "SSE4.2", 128),
             ("znver3", zen3, "auto", "AVX2", 256), ("znver3", zen3, "128", "SSE4.2", 128)]
    for cpu, feats, bits, isa, width in cases:
        monkeypatch.setattr(config, "CPU_NAME", cpu)
        monkeypatch.setattr(config, "CPU_FEATURES", vector_features(feats, bits, cpu))
        assert vector_info() == {"llvm_cpu": cpu, "isa": isa, "vector_bits": width}, (cpu, bits)


def test_openblas_workers_spin_briefly_unless_the_user_chose():
    """numpy's OpenBLAS (loaded before tracejit's kernels) is told to let its threads sleep right after a product
    (its timeout read again at run time), unless the user set a timeout or TRACEJIT_BLAS_SPIN=default."""
    r = probe()
    if r["blas_timeout"] is None:
        pytest.skip("numpy's OpenBLAS not found")
    assert r["blas_timeout"] == 4
    assert probe(OPENBLAS_THREAD_TIMEOUT="12")["blas_timeout"] == 12
    assert probe(TRACEJIT_BLAS_SPIN="default")["blas_timeout"] == 0


def test_openmp_workers_spin_briefly_unless_the_user_chose():
    assert probe()["spin"] == "10000"
    assert probe(OMP_WAIT_POLICY="active")["spin"] is None
    assert probe(GOMP_SPINCOUNT="5")["spin"] == "5"


ISA_PROBE = r"""
import json, math, sys
import numpy as np
import tracejit.kernels.cpu
import tracejit
from tracejit.backends.numba_cpu import codegen
codegen.PAR_MIN = 1 << 62

def chain(x):
    y = tracejit.tanh(x * 0.7 + 0.2) + tracejit.sigmoid(x)
    y = tracejit.exp(y * 0.5) * tracejit.log1p(tracejit.abs(x)) + tracejit.erf(x)
    return tracejit.exp(x), tracejit.tanh(x), tracejit.sigmoid(x), y

rng = np.random.default_rng(0)
edge = [0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, 89.0, -103.0, -110.0, 1e-40, -1e-40, 0.3, -0.6249, 0.6251, 9.5]
x = np.concatenate([rng.standard_normal(3000) * 4, edge, rng.uniform(-10, 10, 200_000),
                    np.exp(rng.uniform(-20, 2.5, 200_000)) * np.sign(rng.standard_normal(200_000))]).astype(np.float32)
f = tracejit.trace(chain)
outs = [o.numpy() for o in f(tracejit.tensor(x))]
ks = [ks for _, ks, _ in f.graph(tracejit.tensor(x)).entry.fwd_fn.kernels]
(disp,) = [d for _, _, d in f.graph(tracejit.tensor(x)).entry.fwd_fn.kernels]
asm = "\n".join(disp.inspect_asm().values())
x64 = x.astype(np.float64)
with np.errstate(all="ignore"):
    erf = np.array([math.erf(v) for v in x64])
    s64 = 1 / (1 + np.exp(-x64))
    a = np.exp((np.tanh(x64 * np.float32(0.7) + np.float32(0.2)) + s64) * 0.5) * np.log1p(np.abs(x64))
    refs = [np.exp(x64), np.tanh(x64), s64, a + erf]
    scale = [None, None, None, np.abs(a) + np.abs(erf)]
err, ulp = [], []
for o, r in zip(outs[:3], refs[:3]):
    r32 = r.astype(np.float32)
    ok = np.isfinite(r32) & (r32 != 0)
    ulp.append(float((np.abs(o[ok].astype(np.float64) - r[ok]) / np.spacing(np.abs(r32[ok])).astype(np.float64)).max()))
for o, r, sc in zip(outs, refs, scale):
    r32 = r.astype(np.float32)
    fin = np.isfinite(r32)
    same_special = bool(np.array_equal(np.isnan(o), np.isnan(r32)) and np.array_equal(o[~fin], r32[~fin], equal_nan=True))
    ok = fin & (np.abs(r) > 1e-30)
    rel = float((np.abs(o[ok] - r[ok]) / (np.abs(r[ok]) if sc is None else sc[ok])).max())
    err.append((rel, same_special))
print(json.dumps({"info": tracejit.kernels.cpu.vector_info(), "err": err, "ulp": ulp, "staged": any("for tt in" in k.code for k in ks),
                  "interleaved": [f"VECTOR_INTERLEAVE = {codegen.interleave()}" in k.code for k in ks],
                  "ic": codegen.interleave(),
                  "zmm": "zmm" in asm, "ymm": "ymm" in asm}))
"""


def test_each_vector_instruction_set_computes_the_same_numbers(tmp_path):
    import llvmlite.binding as ll
    host = ll.get_host_cpu_features().flatten().split(",")
    forced = ["256", "128"] + (["512"] if "+avx512f" in host else [])
    if "+avx2" not in host:
        pytest.skip("the host has no AVX2")
    for bits in forced:
        e = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_CPU", "TRACEJIT_VECTOR"))}
        # (numba's kernel, whose assembly the probe reads: not direct.py's, which runs until numba's is compiled)
        e.update(TRACEJIT_VECTOR_BITS=bits, TRACEJIT_CACHE_DIR=str(tmp_path / "cache"), TRACEJIT_DIRECT_KERNELS="0")
        out = subprocess.run([sys.executable, "-c", ISA_PROBE], cwd=ROOT, env=e, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        r = json.loads(out.stdout.strip().splitlines()[-1])
        # (a kernel this large with vmath calls compiles with codegen.INTERLEAVE vectors per loop iteration)
        # (8 vectors, except 4 on Intel at 256 bits or less)
        assert r["info"]["vector_bits"] == int(bits) and r["staged"] and all(r["interleaved"]), (bits, r)
        amd = r["info"]["llvm_cpu"].startswith("znver")
        assert r["ic"] == (8 if bits == "512" or amd else 4), (bits, r)
        assert r["zmm"] == (bits == "512") and r["ymm"] == (bits != "128"), (bits, r)
        # vmath's float32 functions are within 2 ulp: relative error <= 2.4e-7 (the composite: a few roundings,
        # relative to the size of its two terms)
        for (rel, same_special), bound in zip(r["err"], [2.4e-7, 2.4e-7, 2.4e-7, 1e-6]):
            assert same_special and rel <= bound, (bits, r["err"])
        # exp, tanh, sigmoid within 2 ulp with and without FMA (at 128 bits there is none: tanh and sigmoid then
        # compute their correction term in float64; before, tanh reached 2.12 ulp there)
        assert max(r["ulp"]) <= 2.0, (bits, r["ulp"])
