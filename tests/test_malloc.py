"""tracejit tunes glibc malloc at import so big temporaries reuse heap memory instead of fresh mmap'd pages."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = r"""
import json, numpy as np
import tracejit, tracejit._malloc as m
def minflt():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[7])
for _ in range(3):
    (np.ones(1 << 19, np.float32) * 2).sum()
a = minflt()
for _ in range(50):
    x = np.ones(1 << 19, np.float32)      # 2 MiB: above glibc's default mmap threshold
    y = x * 2
    z = y * 2
    del x, y, z
print(json.dumps({"applied": m.applied, "faults": (minflt() - a) / 50}))
"""


def probe(**env):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "TRACEJIT_MALLOC", "GLIBC_TUNABLES"))}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=e, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.exists("/proc/self/stat"),
                    reason="glibc malloc tuning and /proc fault counters are Linux-only")
def test_big_temporaries_reuse_memory_unless_the_user_tuned_malloc():
    tuned, default = probe(), probe(TRACEJIT_MALLOC="default")
    assert tuned["applied"] and not default["applied"]
    # three 2 MiB arrays per iteration: ~1000 faults when they come from fresh pages. (With two, glibc's default
    # kept them in the heap or not depending on what it held before: 0 faults with TRACEJIT_CACHE_DIR set, 992
    # without; three leave a freed top above its dynamic trim threshold, twice the largest freed mmap chunk)
    assert default["faults"] > 500 and tuned["faults"] < 50, (tuned, default)
    assert not probe(MALLOC_MMAP_THRESHOLD_="131072")["applied"]
