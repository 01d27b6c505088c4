"""Compile every CUDA kernel the simulator suite launched to PTX with the real numba-cuda compiler (NVVM),
no GPU needed. The simulator runs kernels as Python and accepts code a GPU compile rejects; this catches
typing errors and reports float64 instructions in float32 kernels (slow on GPUs).

    python tests/cuda/ptx_check.py [--site DIR] [--cc 8.0]

Step 1 runs tests/cuda_sim under the simulator with TRACEJIT_CUDA_RECORD set (kernels/cuda/launch.py logs
each launch's kernel and argument types); step 2, in a fresh process without the simulator, rebuilds each
kernel (generated modules from the disk cache, factories in kernels/cuda/) and compiles it for those types.
It needs numba-cuda with NVVM (`pip install "numba-cuda[cu12]"` or `[cu13]`); `--site DIR` adds a
`pip install --target DIR` location (its .pth redirect to numba-cuda included), and the NVIDIA libraries
found there are put on LD_LIBRARY_PATH.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def record(path):
    env = {k: v for k, v in os.environ.items()}
    env.update(NUMBA_ENABLE_CUDASIM="1", TRACEJIT_CUDA_RECORD=path)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-x",
                        "-W", "ignore::RuntimeWarning", os.path.join("tests", "cuda_sim")], cwd=ROOT, env=env)
    if r.returncode:
        sys.exit("the simulator suite failed; fix it first")


GEOMETRY_LAST = {"row_kernel", "arg_kernel", "softmax_kernel", "matmul_kernel"}   # last factory arg: block shape


def check(path, cc):
    import importlib
    import importlib.util
    import numpy as np
    from numba import cuda, types
    from numba.np.numpy_support import from_dtype
    import numba.cuda.dispatcher as disp
    if getattr(cuda, "implementation", "") != "NVIDIA":
        sys.exit("numba.cuda is numba's built-in (deprecated) copy: install numba-cuda with NVVM, or pass --site")

    class _Dev:                     # device functions ask the (absent) driver for the compute capability
        compute_capability = cc
    disp.get_current_device = lambda: _Dev()
    sys.path.insert(0, ROOT)

    entries = [json.loads(line) for line in open(path)]
    # the simulator ran tiny blocks: compile the GPU geometry (the factories' defaults here) as well
    entries += [[key[:-1], argtypes] for key, argtypes in entries if key[0] != "gen" and key[1] in GEOMETRY_LAST]
    seen, failures, f64 = set(), [], []
    for key, argtypes in entries:
        k = json.dumps([key, argtypes])
        if k in seen:
            continue
        seen.add(k)
        if key[0] == "gen":
            name = os.path.splitext(os.path.basename(key[1]))[0]
            mod = sys.modules.get(name)
            if mod is None:
                spec = importlib.util.spec_from_file_location(name, key[1])
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
            kern = getattr(mod, key[2])
        else:
            kern = getattr(importlib.import_module(key[0]), key[1])(*[tuple(x) if isinstance(x, list) else x
                                                                      for x in key[2:]])
        sig = []
        for t in argtypes:
            if t[0] == "array":
                sig.append(types.Array(from_dtype(np.dtype(t[1])), t[2], "C"))
            elif t[1] == "none":
                sig.append(types.none)
            elif t[1] == "bool":
                sig.append(types.boolean)
            else:
                sig.append(from_dtype(np.dtype(t[1])))
        what = f"{key} {[str(s) for s in sig]}"
        try:
            ptx, _ = cuda.compile_ptx(kern.py_func, tuple(sig), cc=cc)
        except Exception as e:   # noqa: BLE001
            failures.append(f"{what}\n    {type(e).__name__}: {str(e).strip().splitlines()[0][:300]}")
            continue
        floats = [t for t in argtypes if t[0] == "array" and t[1] in ("<f4",)]
        if floats and not any(t[1] == "<f8" for t in argtypes) and ".f64" in ptx:
            f64.append(what)
    print(f"{len(seen)} kernel signatures compiled for sm_{cc[0]}{cc[1]}: {len(failures)} failed, "
          f"{len(f64)} float32 kernels use float64 instructions")
    for f in failures:
        print("FAIL", f)
    for f in f64:
        print("F64 ", f)
    return not failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", help="a `pip install --target` folder holding numba-cuda and its NVIDIA wheels")
    ap.add_argument("--cc", default="8.0")
    ap.add_argument("--record", help="reuse this launch log instead of running the simulator suite")
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    cc = tuple(int(x) for x in a.cc.split("."))
    if a._child:
        if a.site:
            import site
            site.addsitedir(a.site)
        sys.exit(0 if check(a.record, cc) else 1)
    path = a.record
    if path is None:
        path = os.path.join(tempfile.mkdtemp(prefix="tj-ptx-"), "launches.jsonl")
        record(path)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    if a.site:
        libs = sorted({os.path.dirname(p) for p in glob.glob(os.path.join(a.site, "nvidia", "**", "lib*.so*"),
                                                              recursive=True)})
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")])
    cmd = [sys.executable, __file__, "--_child", "--record", path, "--cc", a.cc] + (["--site", a.site] if a.site else [])
    sys.exit(subprocess.run(cmd, env=env, cwd=ROOT).returncode)


if __name__ == "__main__":
    main()
