"""On-disk cache of generated kernel source, so that numba's ``cache=True`` works and a new process
compiles nothing.

numba cannot cache a function built by ``exec`` of a string ("no locator available"), so each generated
module is written to ``<cache_dir()>/tj_<kind>_<sha256(source)[:24]>.py`` and imported from there:

* content-addressed and written once, atomically (unique temp file in the same folder, fsync, os.replace);
  a file whose content does not match its source (truncated, corrupt) is rewritten;
* registered in ``sys.modules`` before it runs: numba's cache unpickles the kernel's environment with
  ``importlib.import_module(<module name>)`` and fails hard without it;
* memoized in-process: the same source gives the same module object.

numba keeps the machine code beside it, in ``__pycache__`` (``*.nbi`` index, ``*.nbc`` data). numba's cache
key covers the kernel's bytecode but not the modules it calls, so ``cache_dir()`` is a per-version folder:
its name holds the tracejit, numba, llvmlite, numpy and Python versions and a hash of the runtime helpers
that generated kernels call (``kernels/cpu/vmath.py``, ``kernels/cpu/rows.py``, ``numba_cpu/rt.py``,
``scalar_rt.py``) and of this file (the format of the data files).

numba itself raises (no recompile) when an index or data file is truncated or unreadable, and cannot notice
flipped bytes inside a data file. So every numba cache in the process recovers (``kernels/cpu/__init__.py``, on
numba's cache classes, installed before the first module loads): a cache file that fails to load is dropped with
one log line and the kernel recompiled (counted in ``cache_info()["numba_cache_errors"]``); a failure to *save*
the cache never fails the call; a read-only cache folder is read. The dispatchers of every loaded module also get
checksummed data files: a sha256 of their kernel's name and content (a flipped byte or another kernel's valid file
is refused too). A cache folder that cannot be written sends new entries to a per-process folder in TMPDIR,
removed at exit; when even that cannot be written (a full disk), the kernel runs uncached.

Only the standard library, numpy and numba are imported (numba lazily); nothing else from tracejit.
"""
import atexit
import hashlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import threading

__all__ = ["KernelCompileError", "INTERPRETER_HINT", "cache_root", "cache_dir", "version_tag", "entry_path",
           "load_module", "compile_count", "cache_hit_count", "cache_info", "clear_cache"]

INTERPRETER_HINT = ('To run this function anyway, use backend="interpreter" '
                    '(e.g. @tracejit.trace(..., backend="interpreter")).')


class KernelCompileError(RuntimeError):
    """A generated kernel failed to load or to compile. ``kernel``: its name; ``path``: its source file."""

    def __init__(self, message, kernel=None, path=None):
        super().__init__(message)
        self.kernel = kernel
        self.path = path


log = logging.getLogger("tracejit")
_LOCK = threading.RLock()
_MEMO = {}            # absolute path of the .py entry -> module (forgotten by clear_cache)
_LOADED = []          # every module loaded in this process (kept for compile_count)
_STATS = {"written": 0, "rewritten_corrupt": 0, "numba_cache_errors": 0, "fallback_dir": None,
          "helpers": 0, "compiled_by_helpers": 0, "helper_failures": 0}     # (numba_cpu/workers.py)
_TAG = None
_KIND_RE = re.compile(r"^[A-Za-z0-9_]+$")
_TMP_PREFIX = ".tmp-"
_DATA_MAGIC = b"TJNBC1\0"


# ----------------------------------------------------------------------------------------------- folders
def cache_root():
    """``$TRACEJIT_CACHE_DIR``, else ``($XDG_CACHE_HOME or ~/.cache)/tracejit``; read on every call, not created."""
    d = os.environ.get("TRACEJIT_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "tracejit")
    return os.path.abspath(os.path.expanduser(d))


def _file_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _helper_files():
    """The runtime helper modules generated kernels call (numba's cache key does not cover them)."""
    files = []
    for mod in ("tracejit.kernels.cpu.vmath", "tracejit.kernels.cpu.rows", "tracejit.kernels.cpu.special"):
        try:
            spec = importlib.util.find_spec(mod)
            if spec is not None and spec.origin and os.path.isfile(spec.origin):
                files.append(spec.origin)
        except Exception:   # no `kernels` package: nothing to hash
            pass
    here = os.path.dirname(os.path.abspath(__file__))
    for rt in (os.path.join(here, "numba_cpu", "rt.py"), os.path.join(here, "scalar_rt.py")):
        if os.path.isfile(rt):
            files.append(rt)
    files.append(os.path.abspath(__file__))     # (this file defines the cached data files' format)
    return files


def _dist_version(dist, default="unknown"):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return default


def _tracejit_version():
    return _dist_version("tracejit", "0.1.0")


def version_tag():
    """Name of the per-version folder under cache_root(); computed once per process."""
    global _TAG
    if _TAG is None:
        import numba   # imports llvmlite, whose version is part of the tag too
        import numpy
        llvmlite_version = getattr(sys.modules.get("llvmlite"), "__version__", None) or _dist_version("llvmlite")
        h = hashlib.sha256()
        for p in _helper_files():
            h.update(os.path.basename(p).encode() + b"\0" + _file_hash(p).encode() + b"\0")
        tag = (f"tj{_tracejit_version()}-numba{numba.__version__}-llvmlite{llvmlite_version}"
               f"-np{'.'.join(numpy.__version__.split('.')[:2])}-py{sys.version_info[0]}{sys.version_info[1]}"
               f"-{h.hexdigest()[:12]}")
        _TAG = re.sub(r"[^A-Za-z0-9._-]", "_", tag)
    return _TAG


def _dir_path():
    return os.path.join(cache_root(), version_tag())


def cache_dir():
    """The folder that holds the entries: ``cache_root()/version_tag()``, created on demand."""
    d = _dir_path()
    os.makedirs(d, exist_ok=True)
    return d


def _entry_name(source, kind):
    if not isinstance(kind, str) or not _KIND_RE.match(kind):
        raise ValueError(f"kind must be letters, digits or '_', got {kind!r}")
    return f"tj_{kind}_{hashlib.sha256(source.encode('utf-8')).hexdigest()[:24]}"


def entry_path(source, kind="k"):
    """Where load_module(source, kind) keeps the module's source (the file may not exist yet)."""
    return os.path.join(_dir_path(), _entry_name(source, kind) + ".py")


# ------------------------------------------------------------------------------------------ writing
def _atomic_write(path, data):
    """Write bytes to path so that no reader, in any process, ever sees a partial file."""
    d, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}{base}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    # no fsync of the folder: a rename lost in a crash only means the entry is written again later


def _ensure_file(path, data):
    """Make path hold exactly data; returns 'ok', 'written' (new) or 'rewritten' (was corrupt)."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return "ok"
        state = "rewritten"
    except FileNotFoundError:
        state = "written"
    except OSError:
        state = "rewritten"
    _atomic_write(path, data)
    return state


_FALLBACK_PREFIX = "tracejit-cache-"


def _fallback_dir():
    """A private per-process folder, used only when the cache folder cannot be written; removed at exit (and,
    when a later process makes its own, the folders of processes that died without their exit handlers)."""
    if _STATS["fallback_dir"] is None:
        _remove_stale_fallbacks()
        d = tempfile.mkdtemp(prefix=f"{_FALLBACK_PREFIX}{os.getpid()}-")
        atexit.register(_remove_tree, d)
        _STATS["fallback_dir"] = d
        log.warning("tracejit: the kernel cache folder %s cannot be written; kernels compiled now are kept in %s "
                    "until this process exits", _dir_path(), d)
    return _STATS["fallback_dir"]


def _remove_tree(d):
    import shutil
    shutil.rmtree(d, ignore_errors=True)


def _remove_stale_fallbacks():
    tmp = tempfile.gettempdir()
    try:
        names = os.listdir(tmp)
    except OSError:
        return
    for n in names:
        if not n.startswith(_FALLBACK_PREFIX):
            continue
        pid = n[len(_FALLBACK_PREFIX):].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            _remove_tree(os.path.join(tmp, n))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # (another user's process: alive)
        pass
    return True


# ------------------------------------------------------------------------------------------ loading
def load_module(source, kind="k"):
    """Import generated ``source`` from the disk cache (writing it first if needed); memoized in-process.

    Raises KernelCompileError when the module fails to run (syntax error, decorator error, ...).
    """
    name = _entry_name(source, kind)
    path = os.path.join(_dir_path(), name + ".py")
    mod = _MEMO.get(path)
    if mod is not None:
        return mod
    with _LOCK:
        mod = _MEMO.get(path)
        if mod is not None:
            return mod
        data = source.encode("utf-8")
        _recovering_numba()
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            state = _ensure_file(path, data)
        except OSError:   # read-only or full cache folder: work from a private folder, uncached across runs
            path = os.path.join(_fallback_dir(), name + ".py")
            try:
                state = _ensure_file(path, data)
            except OSError as e:        # nowhere to write (a full disk): run it uncached, from memory
                log.warning("tracejit: cannot write the kernel %s anywhere (%s); it runs uncached", name, e)
                source, state = source.replace("cache=True", "cache=False"), "uncached"
        if state == "written":
            _STATS["written"] += 1
        elif state == "rewritten":
            _STATS["rewritten_corrupt"] += 1
            log.warning("tracejit: the kernel cache file %s did not hold its source (truncated, emptied or "
                        "replaced): written again", path)
        for attempt in range(2):
            try:
                mod = _exec_module(name, path, source)
                break
            except KernelCompileError:
                # the entry may have been removed or replaced (clear_cache in another process) between the
                # write and numba's decorator, which needs the file: write it again and retry once
                if attempt or state == "uncached" or _ensure_file(path, data) == "ok":
                    raise
        _MEMO[os.path.join(_dir_path(), name + ".py")] = mod
        _MEMO[path] = mod
        _LOADED.append(mod)
        return mod


def _recovering_numba():
    """numba's cache, made to recover from bad files (kernels/cpu/__init__.py, which installs it on import; the
    generated kernels import the runtime helpers there anyway): each bad file counts in numba_cache_errors."""
    import tracejit.kernels.cpu
    if _note_cache_error not in tracejit.kernels.cpu.ON_DISCARD:
        tracejit.kernels.cpu.ON_DISCARD.append(_note_cache_error)


def _exec_module(name, path, source):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    prev = sys.modules.get(name)
    sys.modules[name] = mod   # before exec: numba's cache imports the module by name
    try:
        # compile the validated in-memory text (same bytes as the file): no stale .pyc can get in the way
        exec(compile(source, path, "exec", dont_inherit=True), mod.__dict__)
    except Exception as e:
        if prev is not None:
            sys.modules[name] = prev
        else:
            sys.modules.pop(name, None)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise KernelCompileError(
            f"tracejit: generated module {name} failed to load ({type(e).__name__}: {msg}); source: {path}. "
            f"This is a tracejit bug; please report it. {INTERPRETER_HINT}", kernel=name, path=path) from e
    for disp in _dispatchers(mod):
        _harden(disp)
    return mod


# ------------------------------------------------------------------------- numba dispatchers and cache
def _dispatchers(mod):
    """numba dispatchers defined (not imported) at module level in mod."""
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:
        return []
    out = []
    for v in list(vars(mod).values()):
        if isinstance(v, Dispatcher) and getattr(getattr(v, "py_func", None), "__module__", None) == mod.__name__:
            out.append(v)
    return out


def _note_cache_error():
    _STATS["numba_cache_errors"] += 1


def _harden(disp):
    """Checksum a generated kernel's numba data files and load its cache without numba's context refresh. (A bad
    cache file is discarded and the kernel compiled again, and a failed save never fails the call, by the recovery
    kernels/cpu/__init__.py installs on numba's cache classes: Cache._load_overload, which the load below calls,
    and Cache.save_overload. Each discarded file counts in numba_cache_errors, through tracejit.kernels.cpu.ON_DISCARD.)"""
    cache = getattr(disp, "_cache", None)
    cf = getattr(cache, "_cache_file", None)
    if cache is None or cf is None or getattr(cache, "_tj_hardened", False):
        return   # NullCache (cache=False) or an unknown numba layout
    if hasattr(cache, "_load_overload"):
        def load_overload(sig, target_context):
            # numba's load_overload first refreshes the target context: it imports and installs every typing and
            # lowering registry (~0.1 s, the largest cost of a cache hit in a new process) though rebuilding a
            # cached kernel only links machine code. Linking needs numba's runtime symbols (NRT); a later compile
            # in this process refreshes the context as usual.
            from numba.core.runtime import rtsys
            rtsys.initialize(target_context)
            return cache._load_overload(sig, target_context)
        cache.load_overload = load_overload
    if all(hasattr(cf, a) for a in ("_load_data", "_save_data", "_data_path", "_dump", "_open_for_write")):
        import pickle

        def _save_data(name, data):
            payload = cf._dump(data)
            with cf._open_for_write(cf._data_path(name)) as f:
                f.write(_DATA_MAGIC + _digest(name, payload) + payload)

        def _load_data(name):
            with open(cf._data_path(name), "rb") as f:
                blob = f.read()
            n = len(_DATA_MAGIC)
            payload = blob[n + 32:]
            if blob[:n] != _DATA_MAGIC or _digest(name, payload) != blob[n:n + 32]:
                raise ValueError(f"corrupt numba cache file {cf._data_path(name)}")
            return pickle.loads(payload)

        def _digest(name, payload):     # (of this kernel's file: another kernel's valid file is refused too)
            return hashlib.sha256(cf._index_name.encode() + b"\0" + name.encode() + b"\0" + payload).digest()

        cf._save_data = _save_data
        cf._load_data = _load_data
    cache._tj_hardened = True


def _stat_sum(field):
    n = 0
    if not _LOADED:
        return 0
    for mod in list(_LOADED):
        for disp in _dispatchers(mod):
            try:
                n += sum(getattr(disp.stats, field).values())
            except Exception:
                pass
    return n


def compile_count():
    """Signatures numba compiled (cache misses) in this process, over the dispatchers of loaded modules."""
    return _stat_sum("cache_misses")


def cache_hit_count():
    """Signatures numba loaded from its disk cache in this process, over the dispatchers of loaded modules."""
    return _stat_sum("cache_hits")


# ----------------------------------------------------------------------------------- info and clearing
def _dir_usage(d):
    entries, total = 0, 0
    stack = [d]
    while stack:
        try:
            it = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in it:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    total += e.stat(follow_symlinks=False).st_size
                    if e.name.startswith("tj_") and e.name.endswith(".py") and os.path.dirname(e.path) == d:
                        entries += 1
            except OSError:
                pass
    return entries, total


def cache_info():
    """path, entries (.py files), bytes (all files, numba's included); loaded / compiled / cache hits: this process;
    compiled_by_helpers: kernels forked helper processes compiled into the cache for this process."""
    d = _dir_path()
    entries, total = _dir_usage(d) if os.path.isdir(d) else (0, 0)
    return {
        "path": d,
        "root": cache_root(),
        "version_tag": version_tag(),
        "entries": entries,
        "bytes": total,
        "loaded": len(_LOADED),
        "compiled": compile_count(),
        "cache_hits": cache_hit_count(),
        "written": _STATS["written"],
        "rewritten_corrupt": _STATS["rewritten_corrupt"],
        "numba_cache_errors": _STATS["numba_cache_errors"],
        "fallback_dir": _STATS["fallback_dir"],
        "helpers": _STATS["helpers"],                            # forked compile helpers (numba_cpu/workers.py)
        "compiled_by_helpers": _STATS["compiled_by_helpers"],
        "helper_failures": _STATS["helper_failures"],
    }


def _ours(fname):
    return fname.startswith("tj_") or fname.startswith(_TMP_PREFIX + "tj_")


def _clear_folder(d):
    """Remove tracejit's files from d and from its __pycache__; other files are left alone."""
    removed = 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for fname in names:
        p = os.path.join(d, fname)
        if fname == "__pycache__" and os.path.isdir(p) and not os.path.islink(p):
            for sub in os.listdir(p):
                if _ours(sub):
                    try:
                        os.unlink(os.path.join(p, sub))
                    except OSError:
                        pass
            try:
                os.rmdir(p)   # only if now empty
            except OSError:
                pass
        elif _ours(fname) and not os.path.isdir(p):
            try:
                os.unlink(p)
                if fname.endswith(".py"):
                    removed += 1
            except OSError:   # already gone (another process cleared it)
                pass
    return removed


def _numba_cache_dir_for(d):
    """numba's cache folder for sources in d when NUMBA_CACHE_DIR is set (else None)."""
    try:
        from numba.core import config
        from numba.core.caching import _CacheLocator
        if config.CACHE_DIR:
            return os.path.join(config.CACHE_DIR, _CacheLocator.get_suitable_cache_subpath(os.path.join(d, "x.py")))
    except Exception:
        pass
    return None


def clear_cache(all_versions=False):
    """Remove the entries of cache_dir() (all per-version folders under cache_root() if all_versions) and
    numba's cache files for them; returns the number of .py entries removed.

    Modules already loaded keep working; the in-process memo forgets entries under the cleared folders, so a
    later load_module writes and compiles them again.
    """
    with _LOCK:
        root = cache_root()
        if all_versions:
            try:
                dirs = [os.path.join(root, n) for n in os.listdir(root) if n.startswith("tj")
                        and os.path.isdir(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n))]
            except OSError:
                dirs = []
        else:
            dirs = [_dir_path()]
        removed = 0
        for d in dirs:
            removed += _clear_folder(d)
            nd = _numba_cache_dir_for(d)
            if nd and os.path.isdir(nd):
                _clear_folder(nd)
            if all_versions and d != _dir_path():
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            prefix = d + os.sep
            for p in [p for p in _MEMO if p.startswith(prefix)]:
                del _MEMO[p]
        return removed
