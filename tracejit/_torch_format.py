"""PyTorch's checkpoint format (what `torch.save` writes), read and written without torch.

A checkpoint is a zip archive (stored, not compressed) under one folder `<prefix>/`:
  - `data.pkl`: the object, pickled (protocol 2); each tensor is `torch._utils._rebuild_tensor_v2(storage,
    offset, size, stride, requires_grad, hooks)` and each storage a persistent id
    `('storage', torch.<Type>Storage, key, location, numel)` naming the member `data/<key>`,
  - `data/<key>`: a storage's raw little-endian bytes (tensors that share memory share one storage),
  - `version`, `byteorder`, `.format_version`, `.storage_alignment`.

Reading with weights_only=True (the default) goes through `WeightsUnpickler`: a pickle machine that knows only
the opcodes that build data, checks what each one is applied to (SETITEM(S) on dicts, APPEND(S) on lists,
BUILD on an OrderedDict's attributes), resolves only a fixed list of globals (tensor and parameter rebuild
functions, storage types, dtypes, torch.Size/device, OrderedDict/Counter/set/bytearray/complex and `_codecs.encode`
for bytes), and checks every storage (byte length = numel x element size) and tensor (size and stride not
negative, its extent inside its storage) before making it. It never imports a module or calls a function
the file names beyond that list, and it never writes a file.
"""
import collections
import io
import os
import pickle
import warnings
import zipfile
import zlib

import numpy as np

from . import _dtype as D
from ._tensor import Tensor, device
from .size import Size

# -------------------------------------------------------------------------------------- names shared both ways

_STORAGE_OF = {D.float32: "FloatStorage", D.float64: "DoubleStorage", D.float16: "HalfStorage",
               D.int64: "LongStorage", D.int32: "IntStorage", D.int16: "ShortStorage", D.int8: "CharStorage",
               D.uint8: "ByteStorage", D.bool_: "BoolStorage"}
_BF16 = "BFloat16Storage"
# torch dtype attribute names (torch.float32, torch.half, ...) -> tracejit dtype
_TORCH_DTYPES = {"float32": D.float32, "float": D.float32, "float64": D.float64, "double": D.float64,
                 "float16": D.float16, "half": D.float16, "int64": D.int64, "long": D.int64, "int32": D.int32,
                 "int": D.int32, "int16": D.int16, "short": D.int16, "int8": D.int8, "uint8": D.uint8,
                 "bool": D.bool_}
_UNSAFE = ("Re-running `tracejit.load` with `weights_only` set to `False` will likely succeed, but it can result "
           "in arbitrary code execution. Do it only if you got the file from a trusted source.")
_MAX_PICKLE = 1 << 30       # data.pkl larger than this is not a checkpoint anyone wrote


class _Global:
    """A torch global (function or class) as the writer names it: pickled as GLOBAL module.name."""
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __repr__(self):
        return f"{self.module}.{self.name}"

    def __call__(self, *args):      # pickle wants the function of a reduction to be callable; it is never called
        raise TypeError(f"{self!r} stands for torch's function in a checkpoint; it cannot be called")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_SIZE = _Global("torch", "Size")
_DEVICE = _Global("torch", "device")
_ENCODE = _Global("_codecs", "encode")
_STORAGE_GLOBALS = {d: _Global("torch", n) for d, n in _STORAGE_OF.items()}
_DTYPE_GLOBALS = {d: _Global("torch", d.name) for d in D.ALL}


# -------------------------------------------------------------------------------------------------- writing

class _Storage:
    """One storage of the archive: a flat C-ordered array (held, so its id stays unique while pickling)."""
    __slots__ = ("key", "array", "dtype")

    def __init__(self, key, array, dtype):
        self.key, self.array, self.dtype = key, array, dtype


def _root(arr):
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root


class _Pickler(pickle._Pickler):
    """The standard pickler, plus: tensors as torch's rebuild calls over storages, torch's globals by name."""
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, f):
        super().__init__(f, protocol=2)
        self.storages = {}      # id(root array) -> _Storage

    def persistent_id(self, obj):
        if type(obj) is _Storage:
            return ("storage", _STORAGE_GLOBALS[obj.dtype], obj.key, "cpu", obj.array.size)
        return None

    def save_torch_global(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("ascii"))
        self.memoize(obj)

    dispatch[_Global] = save_torch_global
    dispatch[D.dtype] = lambda self, obj: self.save(_DTYPE_GLOBALS[obj])
    # b"" too as _codecs.encode (protocol 2 would write bytes(), a global torch's weights_only load refuses)
    dispatch[bytes] = lambda self, obj: self.save_reduce(_ENCODE, (obj.decode("latin1"), "latin1"), obj=obj)

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            from .nn.parameter import Parameter
            if obj._data is None:
                raise RuntimeError("tracejit.save: cannot save a tracer (a tensor inside a traced function); save "
                                   "outside the traced function")
            if isinstance(obj, Parameter):
                return _REBUILD_PARAMETER, (obj.detach(), obj.requires_grad, collections.OrderedDict())
            storage, offset, stride = self.storage_of(obj)
            return _REBUILD_TENSOR, (storage, offset, tuple(obj.shape), stride, obj.requires_grad,
                                     collections.OrderedDict())
        if isinstance(obj, Size):
            return _SIZE, (tuple(obj),)
        if isinstance(obj, device):
            return _DEVICE, (str(obj),)
        return NotImplemented

    def storage_of(self, t):
        """(storage, offset, stride) of tensor t: the storage is its array's base when that is a plain flat
        buffer of the same dtype (so views and the tensors they share memory with share one storage)."""
        arr = t._host()
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        item = arr.itemsize
        root = _root(arr)
        if (root.dtype != arr.dtype or not root.flags.c_contiguous or any(s < 0 or s % item for s in arr.strides)
                or root.dtype.byteorder == ">"):
            root = arr = np.ascontiguousarray(arr)
        st = self.storages.get(id(root))
        if st is None:
            st = self.storages[id(root)] = _Storage(str(len(self.storages)), root, t.dtype)
        offset = (arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // item if arr.size else 0
        return st, offset, tuple(s // item for s in arr.strides)


def save(obj, f):
    buf = io.BytesIO()
    p = _Pickler(buf)
    p.dump(obj)
    own = isinstance(f, (str, os.PathLike))
    fh = open(f, "wb") if own else f
    try:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as z:
            _member(z, fh, "archive/data.pkl", buf.getbuffer())
            _member(z, fh, "archive/.format_version", b"1")
            _member(z, fh, "archive/.storage_alignment", b"64")
            _member(z, fh, "archive/byteorder", b"little")
            for st in p.storages.values():
                _member(z, fh, f"archive/data/{st.key}", st.array.reshape(-1).view(np.uint8).data)
            _member(z, fh, "archive/version", b"3\n")
    finally:
        if own:
            fh.close()


def _member(z, fh, name, data):
    """Write one stored member, its bytes aligned to 64 in the file (as PyTorch's writer does, for mmap)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    try:
        start = fh.tell() + 30 + len(name.encode()) + 4
        pad = -start % 64
        info.extra = b"FB" + pad.to_bytes(2, "little") + b"Z" * pad
    except (OSError, AttributeError):
        pass
    nbytes = len(data) if isinstance(data, (bytes, bytearray)) else data.nbytes
    with z.open(info, "w", force_zip64=nbytes > 0x7FFF0000) as w:
        w.write(data)


# -------------------------------------------------------------------------------------------------- reading

class _Refused(pickle.UnpicklingError):
    """The file asks for something weights_only loading does not do (a global, an opcode, a call)."""


class _Malformed(ValueError):
    """The file's data is inconsistent (a storage or tensor that does not fit, a malformed record)."""


def _refuse(msg):
    return pickle.UnpicklingError(
        "Weights only load failed. This file can still be loaded, to do so you have two options, do those steps "
        f"only if you trust the source of the checkpoint.\n\t(1) {_UNSAFE}\n\t(2) Alternatively, save the data as "
        f"tensors and plain containers only.\n\tWeightsUnpickler error: {msg}")


class _StorageType:
    """What GLOBAL torch.<Type>Storage resolves to: the dtype of the storage."""
    __slots__ = ("name", "np", "dtype")

    def __init__(self, name, npd, dtype):
        self.name, self.np, self.dtype = name, np.dtype(npd).newbyteorder("<"), dtype


_STORAGE_TYPES = {n: _StorageType(n, d.np, d) for d, n in _STORAGE_OF.items()}
_STORAGE_TYPES[_BF16] = _StorageType(_BF16, np.uint16, D.float32)


class _LoadedStorage:
    __slots__ = ("array", "type")

    def __init__(self, array, stype):
        self.array, self.type = array, stype


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    if type(storage) is not _LoadedStorage:
        raise _Malformed(f"a tensor's storage is a {type(storage).__name__}, not a storage of the archive")
    if not (_ints(size) and _ints(stride) and len(size) == len(stride) and type(storage_offset) is int):
        raise _Malformed(f"a tensor has malformed size/stride/offset ({size!r}, {stride!r}, {storage_offset!r})")
    if storage_offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise _Malformed(f"a tensor has a negative size, stride or offset ({size}, {stride}, {storage_offset})")
    arr = storage.array
    n = arr.shape[0]
    if 0 not in size:
        extent = storage_offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1
        if extent > n:
            raise _Malformed(f"a tensor of size {list(size)}, stride {list(stride)} and offset {storage_offset} "
                                  f"reaches element {extent - 1} of a storage of {n} elements")
    if 0 in size or storage_offset >= n:
        data = np.zeros(size, arr.dtype)
    else:
        data = np.ndarray(tuple(size), arr.dtype, buffer=arr, offset=storage_offset * arr.itemsize,
                          strides=tuple(s * arr.itemsize for s in stride))     # a view: storages stay shared
    t = Tensor._wrap(data)
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise _Malformed("only tensors of floating point dtype can require gradients")
        t.requires_grad_(True)
    return t


def _ints(v):
    return type(v) in (tuple, list) and all(type(x) is int for x in v)


def _rebuild_parameter(data, requires_grad, backward_hooks=None, *state):
    from .nn.parameter import Parameter
    if not isinstance(data, Tensor) or type(requires_grad) is not bool:
        raise _Malformed("a parameter's data is not a tensor")
    return Parameter(data, requires_grad)


def _codecs_encode(s, encoding="utf-8"):
    if type(s) is not str or encoding not in ("latin1", "latin-1"):
        raise _Refused("_codecs.encode is only allowed for bytes (a str with encoding latin1)")
    return s.encode("latin1")


def _size(values=()):
    if not _ints(values):
        raise _Malformed("torch.Size takes a tuple of ints")
    return Size(values)


def _device(name, index=None):
    if type(name) is not str or not (index is None or type(index) is int):
        raise _Malformed("torch.device takes a device name")
    return device(name) if index is None else device(name, index)


def _typed(cls, kinds):
    def make(arg=()):
        if type(arg) not in kinds:
            raise _Malformed(f"{cls.__name__} takes a {' or '.join(k.__name__ for k in kinds)}")
        return cls(arg)
    return make


def _complex(re=0.0, im=0.0):
    if type(re) not in (int, float) or type(im) not in (int, float):
        raise _Malformed("complex takes two numbers")
    return complex(re, im)


_ALLOWED = {
    ("collections", "OrderedDict"): _typed(collections.OrderedDict, (tuple, list, dict, collections.OrderedDict)),
    ("collections", "Counter"): _typed(collections.Counter, (dict, tuple, list)),
    ("builtins", "set"): _typed(set, (list, tuple)),
    ("builtins", "frozenset"): _typed(frozenset, (list, tuple)),
    ("builtins", "bytearray"): _typed(bytearray, (bytes, list, tuple)),
    ("builtins", "complex"): _complex,
    ("_codecs", "encode"): _codecs_encode,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch", "Size"): _size,
    ("torch", "device"): _device,
}
_ALLOWED.update({("torch", n): st for n, st in _STORAGE_TYPES.items()})
_ALLOWED.update({("torch", n): d for n, d in _TORCH_DTYPES.items()})
_CALLABLE = {id(v) for v in _ALLOWED.values() if callable(v) and not isinstance(v, D.dtype)}

# opcodes that only build plain values: run as the standard unpickler runs them
_PLAIN_OPS = (b"\x80", b"\x95", b".", b"(", b"0", b"1", b"2", b"N", b"\x88", b"\x89", b"I", b"J", b"K", b"M",
              b"L", b"\x8a", b"\x8b", b"F", b"G", b"S", b"T", b"U", b"V", b"X", b"\x8c", b"\x8d", b"B", b"C",
              b"\x8e", b"\x96", b")", b"t", b"\x85", b"\x86", b"\x87", b"]", b"l", b"}", b"d", b"\x8f", b"\x91",
              b"g", b"h", b"j", b"p", b"q", b"r", b"\x94")


class _Dispatch(dict):
    def __missing__(self, key):
        raise _Refused(f"Unsupported operand {key} ({bytes([key])!r}): only data is allowed")


class WeightsUnpickler(pickle._Unpickler):
    """Rebuilds tensors, storages, OrderedDicts and plain values; refuses anything else (see the module doc)."""
    dispatch = _Dispatch({op[0]: pickle._Unpickler.dispatch[op[0]] for op in _PLAIN_OPS})

    def __init__(self, data, persistent_load):
        super().__init__(data if isinstance(data, io.BytesIO) else io.BytesIO(data))
        self._persistent = persistent_load

    def find_class(self, module, name):
        if module == "__builtin__":     # protocol 2 names Python 3's builtins by their Python 2 name
            module = "builtins"
        obj = _ALLOWED.get((module, name))
        if obj is None:
            raise _Refused(f"Unsupported global: GLOBAL {module}.{name} was not an allowed global by default.")
        return obj

    def load_global(self):
        module = self.readline()[:-1].decode("utf-8")
        name = self.readline()[:-1].decode("utf-8")
        self.append(self.find_class(module, name))
    dispatch[pickle.GLOBAL[0]] = load_global

    def load_stack_global(self):
        name = self.stack.pop()
        module = self.stack.pop()
        if type(name) is not str or type(module) is not str:
            raise _Refused("STACK_GLOBAL requires str")
        self.append(self.find_class(module, name))
    dispatch[pickle.STACK_GLOBAL[0]] = load_stack_global

    def load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if id(func) not in _CALLABLE or type(args) is not tuple:
            raise _Refused(f"REDUCE of {type(func).__name__} is not allowed: only the rebuild functions of "
                                  "tensors and the allowed containers can be called")
        self.stack[-1] = func(*args)
    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_binpersid(self):
        pid = self.stack.pop()
        self.append(self._persistent(pid))
    dispatch[pickle.BINPERSID[0]] = load_binpersid

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(state) is tuple and len(state) == 2 and state[1] is None:
            state = state[0]
        if type(inst) is collections.OrderedDict and type(state) is dict and all(type(k) is str for k in state):
            inst.__dict__.update(state)         # a state_dict's _metadata
        elif isinstance(inst, Tensor) and (state is None or state == {} or state == collections.OrderedDict()):
            pass
        else:
            raise _Refused(f"BUILD of {type(inst).__name__} with {type(state).__name__} state is not allowed")
    dispatch[pickle.BUILD[0]] = load_build

    def load_setitem(self):
        value = self.stack.pop()
        key = self.stack.pop()
        self._dict_target()[key] = value
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        items = self.pop_mark()
        d = self._dict_target()
        if len(items) % 2:
            raise _Malformed("SETITEMS with an odd number of items")
        for i in range(0, len(items), 2):
            d[items[i]] = items[i + 1]
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def _dict_target(self):
        d = self.stack[-1]
        if type(d) not in (dict, collections.OrderedDict, collections.Counter):
            raise _Refused(f"SETITEM(S) on a {type(d).__name__}: only dicts take items")
        return d

    def load_append(self):
        value = self.stack.pop()
        self._list_target().append(value)
    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        items = self.pop_mark()
        self._list_target().extend(items)
    dispatch[pickle.APPENDS[0]] = load_appends

    def _list_target(self):
        lst = self.stack[-1]
        if type(lst) is not list:
            raise _Refused(f"APPEND(S) on a {type(lst).__name__}: only lists take appends")
        return lst

    def load_additems(self):
        items = self.pop_mark()
        s = self.stack[-1]
        if type(s) is not set:
            raise _Refused(f"ADDITEMS on a {type(s).__name__}: only sets take items")
        s.update(items)
    dispatch[pickle.ADDITEMS[0]] = load_additems


class _FullUnpickler(pickle._Unpickler):
    """weights_only=False: the standard unpickler (it can run code), with torch's rebuild functions mapped."""

    def __init__(self, data, persistent_load):
        super().__init__(data if isinstance(data, io.BytesIO) else io.BytesIO(data))
        self.persistent_load = persistent_load

    def find_class(self, module, name):
        obj = _ALLOWED.get((module, name))
        return obj if obj is not None else super().find_class(module, name)


def _safe_name(n):
    parts = n.replace("\\", "/").split("/")
    return not (n.startswith(("/", "\\")) or ":" in parts[0] or ".." in parts or "\x00" in n)


def load_zip(z, data, name, weights_only, corrupt):
    """Load a torch-format archive `z` (a ZipFile over the file's bytes, `data`)."""
    infos = {i.filename: i for i in z.infolist()}
    for n in infos:
        if not _safe_name(n):
            raise corrupt(f"the archive has an unsafe member name {n!r} (absolute or with '..')")
    pkls = [n for n in infos if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkls) != 1:
        raise corrupt("expected exactly one <archive>/data.pkl")
    prefix = pkls[0][:-len("data.pkl")]
    if infos[pkls[0]].file_size > _MAX_PICKLE:
        raise corrupt("data.pkl is larger than 1 GiB")
    bo = infos.get(prefix + "byteorder")
    if bo is not None and _read(z, bo, corrupt) not in (b"little", b"little\n"):
        raise RuntimeError(f"tracejit.load: {name} was written on a big-endian machine; tracejit reads "
                           "little-endian checkpoints only")
    storages = {}

    def persistent_load(pid):
        stype, key, numel = _storage_record(pid, 5)
        st = storages.get(key)
        if st is not None:
            if st.type is not stype:
                raise _Malformed(f"storage {key} is read as {st.type.name} and as {stype.name}")
            return st
        info = infos.get(f"{prefix}data/{key}")
        if info is None:
            raise corrupt(f"the archive has no member {prefix}data/{key}")
        nbytes = numel * stype.np.itemsize
        if info.file_size != nbytes:
            raise corrupt(f"storage {key} has {info.file_size} bytes, expected {nbytes} ({numel} elements of "
                          f"{stype.name})")
        st = storages[key] = _storage(_stored_bytes(data, info, corrupt) or _read(z, info, corrupt), stype)
        return st

    return _unpickle(_read(z, infos[pkls[0]], corrupt), persistent_load, weights_only, corrupt)


def _storage_record(pid, n):
    """(storage type, key, numel) of a persistent id ('storage', type, key, location, numel[, view])."""
    if (type(pid) is not tuple or len(pid) != n or pid[0] != "storage" or type(pid[1]) is not _StorageType
            or type(pid[2]) is not str or type(pid[3]) is not str or type(pid[4]) is not int or pid[4] < 0):
        raise _Malformed(f"malformed storage record {str(pid)[:120]}")
    if n == 6 and pid[5] is not None:
        raise _Malformed("storage views of PyTorch's legacy format are not supported")
    key = pid[2]
    if not key or "/" in key or "\\" in key or ".." in key:
        raise _Malformed(f"bad storage key {key!r}")
    return pid[1], key, pid[4]


def _storage(raw, stype, out=None):
    """A storage from its bytes `raw`: a new array (one copy, writable), or `out` (made while unpickling, in
    PyTorch's legacy format) filled with them."""
    arr = np.frombuffer(raw, dtype=stype.np)
    if stype.name == _BF16:
        warnings.warn("tracejit has no bfloat16 dtype: bfloat16 tensors are loaded as float32 (exactly)")
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    elif out is None:
        arr = arr.astype(stype.dtype.np)        # (native byte order)
    if out is None:
        return _LoadedStorage(arr, stype)
    out[...] = arr
    return None


def _unpickle(data, persistent_load, weights_only, corrupt):
    unpickler = (WeightsUnpickler if weights_only else _FullUnpickler)(data, persistent_load)
    try:
        return unpickler.load()
    except _Refused as e:
        raise _refuse(str(e)) from None
    except _Malformed as e:
        raise corrupt(str(e)) from None
    except (EOFError, pickle.UnpicklingError, IndexError, KeyError, TypeError, ValueError, AttributeError) as e:
        if not weights_only and not isinstance(e, (EOFError, pickle.UnpicklingError)):
            raise       # an error of the user's own classes while unpickling them
        raise corrupt(f"malformed pickle ({type(e).__name__}: {e})") from None


_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


def load_legacy(data, weights_only, corrupt):
    """PyTorch's format before 1.6 (`_use_new_zipfile_serialization=False`): pickles of the magic number, the
    protocol version and system info, the object (persistent ids name storages), the list of storage keys,
    then each storage as an 8-byte element count and its bytes. As PyTorch's reader: one pass over the object
    pickle makes each storage it names (their sizes together bounded by the file's size), then the storages'
    bytes fill them (the tensors are views of them)."""
    f = io.BytesIO(data)
    header = [_unpickle(f, _no_storage, True, corrupt) for _ in range(3)]
    if header[0] != _LEGACY_MAGIC or header[1] != 1001 or type(header[2]) is not dict:
        raise corrupt("not a PyTorch legacy checkpoint (bad magic number or protocol version)")
    if not header[2].get("little_endian", True):
        raise corrupt("written on a big-endian machine")
    storages, declared = {}, [0]

    def persistent_load(pid):
        if not weights_only and type(pid) is tuple and len(pid) == 4 and pid[0] == "module":
            return pid[1]       # a whole module's class, with its source (PyTorch checks the source, if it can)
        stype, key, numel = _storage_record(pid, 6)
        st = storages.get(key)
        if st is None:
            declared[0] += numel * stype.np.itemsize
            if declared[0] > len(data):
                raise corrupt(f"storage {key} declares {numel} elements, more than the file holds")
            st = storages[key] = _LoadedStorage(np.zeros(numel, stype.dtype.np), stype)
        elif st.type is not stype or st.array.shape[0] != numel:
            raise _Malformed(f"storage {key} is declared twice differently")
        return st

    obj = _unpickle(f, persistent_load, weights_only, corrupt)
    keys = _unpickle(f, _no_storage, True, corrupt)
    if type(keys) is not list or not all(type(k) is str for k in keys):
        raise corrupt("malformed storage key list")
    if set(keys) != set(storages):
        raise corrupt("the storage key list does not match the object's storages")
    pos = f.tell()
    for k in keys:
        st = storages[k]
        n = int.from_bytes(data[pos:pos + 8], "little")
        end = pos + 8 + n * st.type.np.itemsize
        if pos + 8 > len(data) or n != st.array.shape[0] or end > len(data):
            raise corrupt(f"storage {k} does not match its record or is cut off")
        _storage(memoryview(data)[pos + 8:end], st.type, out=st.array)
        pos = end
    return obj


def _no_storage(pid):
    raise _Malformed("a storage record outside the object pickle")


def _stored_bytes(data, info, corrupt):
    """A stored (uncompressed) member's bytes as a view of the file's bytes, CRC-checked; None if compressed."""
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    off = info.header_offset
    head = data[off:off + 30]
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise corrupt(f"{info.filename}: bad local header")
    start = off + 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
    view = memoryview(data)[start:start + info.file_size]
    if len(view) != info.file_size or zlib.crc32(view) != info.CRC:
        raise corrupt(f"{info.filename}: bad CRC-32 or cut off")
    return view


def _read(z, info, corrupt):
    try:
        return z.read(info)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zipfile.LargeZipFile) as e:
        raise corrupt(f"{info.filename}: {e}") from None
