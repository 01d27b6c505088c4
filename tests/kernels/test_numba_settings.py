"""kernels.cpu asks LLVM for 512-bit vectors on the Intel cores where they pay and OpenMP for short spinning,
and leaves what the user set alone."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = r"""
import json, sys
if sys.argv[1] == "numba first":            # the user compiled numba code before tracejit's kernels loaded
    import numba
    numba.njit(lambda x: x + 1)(1)
import llvmlite.binding as ll
import kernels.cpu
from numba.core import config
import os
print(json.dumps({"cpu": ll.get_host_cpu_name(), "avx512f": "+avx512f" in ll.get_host_cpu_features().flatten(),
                  "features": config.CPU_FEATURES, "spin": os.environ.get("GOMP_SPINCOUNT")}))
"""


def probe(order="kernels first", **env):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("NUMBA_CPU", "TRACEJIT_VECTOR", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE, order], cwd=ROOT, env=e, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_512_bit_vectors_only_on_the_listed_intel_cores():
    from kernels.cpu import _CORES_512
    r = probe()
    if r["cpu"] in _CORES_512 and r["avx512f"]:
        assert r["features"].endswith(",-prefer-256-bit") and "+avx512f" in r["features"]
    else:
        assert r["features"] is None


def test_the_users_numba_settings_win():
    assert probe(TRACEJIT_VECTOR_BITS="256")["features"] is None
    assert probe(NUMBA_CPU_FEATURES="+sse2")["features"] == "+sse2"
    assert probe(NUMBA_CPU_NAME="generic")["features"] == ""      # numba's own default for a generic cpu
    assert probe("numba first")["features"] is None                # its code generator exists: left alone


def test_openmp_workers_spin_briefly_unless_the_user_chose():
    assert probe()["spin"] == "10000"
    assert probe(OMP_WAIT_POLICY="active")["spin"] is None
    assert probe(GOMP_SPINCOUNT="5")["spin"] == "5"
