"""Start a script under `mpiexec -n N` (the tests' MPI jobs), with a timeout that kills the whole job.

Skips the calling test, with the reason, when mpi4py or mpiexec is missing (`pip install 'tracejit[mpi]'`)."""
import importlib.util
import os
import shutil
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def mpiexec():
    """The mpiexec beside this Python (pip's mpich puts it in the venv's bin) or on PATH; None without MPI."""
    if importlib.util.find_spec("mpi4py") is None:
        return None
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.access(here, os.X_OK) else shutil.which("mpiexec")


def _flags(exe):
    """Open MPI refuses to run as root and to start more ranks than cores without these; MPICH needs none."""
    try:
        v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return ["--allow-run-as-root", "--oversubscribe"] if "Open MPI" in v or "OpenRTE" in v else []


def run_mpi(n, script, *args, timeout=120, env=None):
    """Run tests/distributed/scripts/`script` on `n` ranks; returns (returncode, stdout, stderr, seconds).
    A job still running after `timeout` seconds is killed (every process of it) and the test fails."""
    import time
    exe = mpiexec()
    if exe is None:
        pytest.skip("MPI is not installed (mpi4py and an mpiexec): pip install 'tracejit[mpi]' to run the "
                    "multi-process tests")
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e["OMP_NUM_THREADS"] = "1"
    e.update(env or {})
    cmd = [exe] + _flags(exe) + ["-n", str(n), sys.executable, os.path.join(SCRIPTS, script)] + [str(a) for a in args]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"mpiexec -n {n} {script} {' '.join(map(str, args))} did not end in {timeout} s (hang)\n"
                    f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    return p.returncode, out, err, time.monotonic() - t0


def check_ok(n, res, tag="OK"):
    """Every rank printed `tag <rank>` and the job succeeded."""
    rc, out, err, _ = res
    assert rc == 0, f"job failed (rc={rc})\nstdout:\n{out[-4000:]}\nstderr:\n{err[-4000:]}"
    oks = sorted(line.split()[1] for line in out.splitlines() if line.startswith(tag + " "))
    assert oks == [str(r) for r in range(n)], f"ranks that finished: {oks}\nstdout:\n{out[-4000:]}\nstderr:\n{err[-3000:]}"
    return out
