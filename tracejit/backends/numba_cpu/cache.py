"""Fallback disk cache of generated kernel modules (used when tracejit.backends.diskcache is absent).

numba cannot cache functions built from strings, so each generated module is written once to
`<cache>/tj_<kind>_<sha256>.py` (atomically: tmp file + os.replace), imported from there and registered in
sys.modules; its kernels use `@njit(cache=True)`, so numba keeps their machine code beside the file and a
second process compiles nothing. The hash covers the source, tracejit's runtime helpers and the numba and
llvmlite versions. A corrupt entry is rewritten.
"""
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile

import llvmlite
import numba

_STATS = {"written": 0, "loaded": 0}


class KernelCompileError(RuntimeError):
    pass


def cache_dir():
    d = os.environ.get("TRACEJIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tracejit")
    os.makedirs(d, exist_ok=True)
    return d


def _runtime_hash():
    from kernels.cpu import vmath
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256(vmath.SOURCE_HASH.encode())
    with open(os.path.join(here, "rt.py"), "rb") as f:
        h.update(f.read())
    return h.hexdigest()


_RT = None


def load_module(source, kind="kernel"):
    global _RT
    if _RT is None:
        _RT = _runtime_hash()
    key = hashlib.sha256((source + _RT + numba.__version__ + llvmlite.__version__).encode()).hexdigest()[:32]
    name = f"tj_{kind}_{key}"
    if name in sys.modules:
        return sys.modules[name]
    d = cache_dir()
    path = os.path.join(d, name + ".py")
    if not _valid(path, source):
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
        _STATS["written"] += 1
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[name]
        raise KernelCompileError(f"generated module {path} failed to import: {e}") from None
    _STATS["loaded"] += 1
    return mod


def _valid(path, source):
    try:
        with open(path) as f:
            return f.read() == source
    except OSError:
        return False


def cache_info():
    d = cache_dir()
    files = [f for f in os.listdir(d) if f.endswith(".py")]
    return {"dir": d, "modules": len(files), **_STATS}


def clear_cache():
    d = cache_dir()
    for f in os.listdir(d):
        p = os.path.join(d, f)
        if f.startswith("tj_") or f == "__pycache__":
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.remove(p)
