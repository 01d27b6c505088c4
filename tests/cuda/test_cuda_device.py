"""CUDA support, tested without a GPU. Both tests run child processes, so this process never imports
numba.cuda nor sees NUMBA_ENABLE_CUDASIM:

- the simulator suite (tests/cuda_sim) with NUMBA_ENABLE_CUDASIM=1: every CUDA kernel and the compiled MLP step
  against eager CPU, at tiny sizes (about a minute);
- without the simulator and without a GPU, moving a tensor to cuda raises tracejit's clear RuntimeError.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(extra)
    return env


def test_cuda_simulator_suite():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
                        "-W", "ignore::RuntimeWarning", os.path.join("tests", "cuda_sim")],
                       cwd=ROOT, env=_env(NUMBA_ENABLE_CUDASIM="1"), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"tests/cuda_sim failed under the simulator:\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    last = r.stdout.strip().splitlines()[-1]
    assert " passed" in last and "skipped" not in last, r.stdout[-2000:]


_NO_GPU = """
import tracejit as torch
if torch.cuda.is_available():
    print("GPU")
else:
    for make in (lambda: torch.ones(2).to("cuda"), lambda: torch.ones(2).cuda(), lambda: torch.zeros(2, device="cuda"),
                 lambda: torch.nn.Linear(2, 2).cuda()):
        try:
            make()
            print("NO ERROR")
        except RuntimeError as e:
            print("ERR", e)
    torch.cuda.synchronize()
    print("count", torch.cuda.device_count())
"""


def test_without_gpu_cuda_raises_a_clear_error():
    r = subprocess.run([sys.executable, "-c", _NO_GPU], cwd=ROOT, env=_env(), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    if r.stdout.strip() == "GPU":
        return      # a real GPU: nothing to check here
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "count 0"
    errs = lines[:-1]
    assert len(errs) == 4 and all(l.startswith("ERR CUDA is not available: no NVIDIA GPU/driver found") for l in errs), \
        r.stdout
    assert "NUMBA_ENABLE_CUDASIM=1" in errs[0] and "Traceback" not in r.stderr
