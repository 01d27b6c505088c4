"""CUDA tests under numba's simulator. They run only with NUMBA_ENABLE_CUDASIM=1 set before numba is imported:
tests/cuda/test_cuda_device.py launches them in a child process (`python -m pytest tests/cuda_sim`), so the
main test process never imports numba.cuda. Sizes are tiny: the simulator runs each CUDA thread as a Python
thread. Results are compared with eager CPU results: the simulator evaluates math in float64 before storing
float32, a real GPU in float32, so comparisons allow a few float32 ulps.

On a machine with an NVIDIA GPU, TRACEJIT_TEST_GPU=1 runs the same tests on the GPU (tests/cuda/gpu_check.sh)."""
import os

import pytest

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("TRACEJIT_TEST_GPU") == "1"


def pytest_collection_modifyitems(config, items):
    if SIM:
        return
    skip = pytest.mark.skip(reason="CUDA simulator test: run with NUMBA_ENABLE_CUDASIM=1 "
                                   "(tests/cuda/test_cuda_device.py does, in a child process)")
    here = os.path.dirname(os.path.abspath(__file__))
    for it in items:
        if str(it.fspath).startswith(here):
            it.add_marker(skip)
