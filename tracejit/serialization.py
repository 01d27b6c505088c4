"""tracejit.save / tracejit.load: PyTorch's checkpoint format (tracejit/_torch_format.py), both ways.

`save` writes what `torch.save` writes: a zip archive with the object pickled in `data.pkl` and each tensor
storage as raw bytes, so `torch.load(f)` (weights_only=True, its default) reads a state_dict or a checkpoint
dict that tracejit saved, and `tracejit.load` reads the ones torch saved. Like `torch.save`, it pickles any
object (a whole Module too); like `torch.load`, `load` by default (weights_only=True) rebuilds only tensors,
Parameters, containers and plain values and never runs code from the file, and `weights_only=False` is the
explicit opt-in to unpickle anything, for files you trust.

`save(..., format="tracejit")` writes tracejit's earlier data-only format, which `load` still reads:
  - `tracejit/version`: the format version,
  - `tracejit/data.json`: the object tree as tagged JSON (tensors referenced by number),
  - `tracejit/tensors/<k>`: each tensor's raw little-endian bytes, C order.
Only data can be represented there: tensors, Parameters, None, bools, ints, floats, strings, bytes, dtypes,
Sizes, and dicts (plain, OrderedDict, Counter), lists and tuples of them; anything else is refused when saving.
Zip's CRC-32 per member catches corrupted bytes; a truncated file has no central directory and is reported
as such.
"""
import base64
import collections
import io
import json
import os
import zipfile

import numpy as np

from . import _dtype as D
from ._tensor import Tensor
from .size import Size

FORMAT_VERSION = 1
_PREFIX = "tracejit/"
_SAFE_KINDS = "tracejit.save stores tensors, None, bool, int, float, str, bytes, dtypes, Sizes, and dict/list/tuple"


class _Writer:
    def __init__(self):
        self.tensors = []          # (array, meta)
        self.memo = {}             # id(tensor) -> index: the same tensor object is stored once

    def encode(self, obj, path):
        from .nn.parameter import Parameter
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int) and type(obj) is int:
            return obj
        if isinstance(obj, float) and type(obj) is float:
            if obj != obj or obj in (float("inf"), float("-inf")):
                return {"$float": repr(obj)}
            return obj
        if isinstance(obj, Tensor):
            if obj._data is None:
                raise RuntimeError(f"tracejit.save: {path} is a tracer (a tensor inside a traced function): only "
                                   "concrete tensors can be saved; save outside the traced function")
            k = self.memo.get(id(obj))
            if k is None:
                arr = obj._host()       # a cuda tensor is saved from a host copy (and loads on the CPU)
                arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
                meta = {"dtype": obj.dtype.name, "shape": list(arr.shape),
                        "requires_grad": bool(obj.requires_grad and obj.is_leaf),
                        "parameter": isinstance(obj, Parameter)}
                k = self.memo[id(obj)] = len(self.tensors)
                self.tensors.append((arr, meta))
            return {"$tensor": k}
        if isinstance(obj, Size):
            return {"$size": [int(s) for s in obj]}
        if isinstance(obj, D.dtype):
            return {"$dtype": obj.name}
        if isinstance(obj, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(bytes(obj)).decode("ascii")}
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return self.encode(obj.item(), path)
        if isinstance(obj, np.ndarray):
            raise TypeError(f"tracejit.save: {path} is a numpy array; convert it with tracejit.from_numpy(...) "
                            f"first ({_SAFE_KINDS} of them, so that loading a file can never run code)")
        if type(obj) in (dict, collections.OrderedDict, collections.Counter):
            items = []
            for key, value in obj.items():
                if not (key is None or isinstance(key, (str, int, float, bool))):
                    raise TypeError(f"tracejit.save: {path} has a key of type {type(key).__name__} ({key!r}); "
                                    "dict keys must be str, int, float, bool or None")
                items.append([self.encode(key, path), self.encode(value, f"{path}[{key!r}]")])
            node = {"$dict": items, "type": type(obj).__name__}
            meta = getattr(obj, "_metadata", None)
            if meta is not None:
                node["metadata"] = self.encode(meta, f"{path}._metadata")
            return node
        if type(obj) is list:
            return {"$list": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if type(obj) is tuple:
            return {"$tuple": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        hint = ""
        from .nn.modules.module import Module
        if isinstance(obj, Module):
            hint = " Save the module's state_dict() instead, and load it with load_state_dict()."
        elif hasattr(obj, "state_dict"):
            hint = " Save its state_dict() instead."
        raise TypeError(f"tracejit.save: cannot save {path} of type {type(obj).__module__}.{type(obj).__qualname__}: "
                        f"{_SAFE_KINDS} of them, so that loading a file can never run code.{hint}")


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False, *, format="torch"):
    """Save `obj` to a path or a binary file object, in PyTorch's format (or format="tracejit": data only)."""
    if format == "torch":
        from ._torch_format import save as save_torch
        return save_torch(obj, f)
    if format != "tracejit":
        raise ValueError(f"tracejit.save: format must be 'torch' or 'tracejit', got {format!r}")
    w = _Writer()
    tree = w.encode(obj, "obj")
    header = {"format": "tracejit", "version": FORMAT_VERSION, "root": tree,
              "tensors": [meta for _, meta in w.tensors]}
    own = isinstance(f, (str, os.PathLike))
    fh = open(f, "wb") if own else f
    try:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as z:
            z.writestr(_PREFIX + "version", str(FORMAT_VERSION))
            z.writestr(_PREFIX + "data.json", json.dumps(header, allow_nan=False))
            for k, (arr, meta) in enumerate(w.tensors):
                a = arr.astype(arr.dtype.newbyteorder("<"), copy=False) if arr.dtype.byteorder == ">" else arr
                z.writestr(f"{_PREFIX}tensors/{k}", a.tobytes())
    finally:
        if own:
            fh.close()


class _Reader:
    def __init__(self, z, header, name):
        self.z, self.header, self.name = z, header, name
        self.cache = {}

    def tensor(self, k):
        from .nn.parameter import Parameter
        if k in self.cache:
            return self.cache[k]
        try:
            meta = self.header["tensors"][k]
            dtype = D.to_dtype(meta["dtype"])
            shape = tuple(int(s) for s in meta["shape"])
        except (IndexError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise _corrupt(self.name, f"bad tensor record {k} ({e})") from None
        raw = self.member(f"{_PREFIX}tensors/{k}")
        npdt = np.dtype(dtype.np).newbyteorder("<")
        n = int(np.prod(shape)) if shape else 1
        if len(raw) != n * npdt.itemsize:
            raise _corrupt(self.name, f"tensor {k} has {len(raw)} bytes, expected {n * npdt.itemsize} for shape "
                                      f"{list(shape)} and dtype {dtype.name}")
        arr = np.frombuffer(raw, dtype=npdt).astype(dtype.np).reshape(shape).copy()
        t = Tensor._wrap(arr)
        if meta.get("parameter"):
            t = Parameter(t, requires_grad=bool(meta.get("requires_grad", True)))
        elif meta.get("requires_grad"):
            t.requires_grad_(True)
        self.cache[k] = t
        return t

    def member(self, name):
        try:
            return self.z.read(name)
        except KeyError:
            raise _corrupt(self.name, f"the archive has no member {name!r}") from None
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
            raise _corrupt(self.name, str(e)) from None

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, dict):
            if "$tensor" in node:
                return self.tensor(node["$tensor"])
            if "$dict" in node:
                kind = node.get("type", "dict")
                cls = {"dict": dict, "OrderedDict": collections.OrderedDict, "Counter": collections.Counter}.get(kind)
                if cls is None:
                    raise _corrupt(self.name, f"unknown container type {kind!r}")
                out = cls()
                for key, value in node["$dict"]:
                    out[self.decode(key)] = self.decode(value)
                if "metadata" in node:
                    out._metadata = self.decode(node["metadata"])
                return out
            if "$list" in node:
                return [self.decode(v) for v in node["$list"]]
            if "$tuple" in node:
                return tuple(self.decode(v) for v in node["$tuple"])
            if "$size" in node:
                return Size(int(s) for s in node["$size"])
            if "$dtype" in node:
                return D.to_dtype(node["$dtype"])
            if "$bytes" in node:
                return base64.b64decode(node["$bytes"])
            if "$float" in node:
                return float(node["$float"])
        raise _corrupt(self.name, f"unexpected entry {str(node)[:80]!r}")


def _corrupt(name, why):
    return RuntimeError(f"tracejit.load: {name} is corrupted or truncated ({why}); it cannot be loaded. Save it "
                        "again.")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Load what `save` or `torch.save` stored. weights_only=True (the default, as in PyTorch 2.6+): only
    tensors, Parameters, containers and plain values, and nothing in the file can run code; weights_only=False
    unpickles any object, which can run code: only for files from a trusted source."""
    if map_location is not None:
        from ._tensor import device as _device
        if not callable(map_location) and not isinstance(map_location, dict):
            d = _device(map_location) if not isinstance(map_location, _device) else map_location
            if d.type != "cpu":
                from ._tensor import check_device
                check_device(d)
    weights_only = True if weights_only is None else bool(weights_only)
    own = isinstance(f, (str, os.PathLike))
    name = repr(os.fspath(f)) if own else "the file object"
    if own:
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    if len(data) == 0:
        raise RuntimeError(f"tracejit.load: {name} is empty: it is not a checkpoint (or it was truncated to nothing)")
    if data.startswith(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."):   # the pickled magic number of PyTorch < 1.6
        from ._torch_format import load_legacy
        return load_legacy(data, weights_only, lambda why: _corrupt(name, why))
    if not data.startswith(b"PK"):
        hint = " (it looks like a bare pickle, not a checkpoint written by torch.save)" if data[:1] == b"\x80" else ""
        raise RuntimeError(f"tracejit.load: {name} is not a checkpoint{hint}: expected a zip archive written by "
                           "tracejit.save or torch.save")
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise _corrupt(name, f"no valid zip central directory: {e}") from None
    with z:
        names = set(z.namelist())
        if _PREFIX + "data.json" not in names:
            if any(n.endswith("data.pkl") for n in names):
                from ._torch_format import load_zip
                return load_zip(z, data, name, weights_only, lambda why: _corrupt(name, why))
            raise RuntimeError(f"tracejit.load: {name} is a zip archive but not a checkpoint (it has neither "
                               f"<archive>/data.pkl nor {_PREFIX}data.json)")
        r = _Reader(z, None, name)
        try:
            header = json.loads(r.member(_PREFIX + "data.json").decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise _corrupt(name, f"unreadable data.json: {e}") from None
        if not isinstance(header, dict) or header.get("format") != "tracejit":
            raise _corrupt(name, "bad header")
        if header.get("version", 0) > FORMAT_VERSION:
            raise RuntimeError(f"tracejit.load: {name} was written by a newer tracejit (format version "
                               f"{header.get('version')}; this one reads up to {FORMAT_VERSION}). Upgrade tracejit.")
        r.header = header
        try:
            return r.decode(header["root"])
        except (KeyError, TypeError, ValueError) as e:
            raise _corrupt(name, f"malformed object tree: {e!r}") from None
