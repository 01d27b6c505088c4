"""CudaArray: what a cuda tensor's `_data` holds. A flat numba.cuda device buffer plus a view on it
(shape, element strides, element offset), like PyTorch's storage + TensorImpl.

Every kernel receives the flat 1-D buffer and the view's offset and strides as integers, so permute,
expand (stride 0), basic slicing, flip and compatible reshapes are free views that share the buffer (in-place
updates of a view write through to its base, as on the CPU), and kernels have one canonical argument
type (1-D C-contiguous arrays) whatever the view.

View metadata is computed by numpy itself on a zero-strided stand-in array (no device memory is touched), so
slicing, broadcasting and reshape-as-view follow numpy's rules and errors exactly.
"""
from sys import getrefcount

import numpy as np

from ..._keep import REFCOUNTS_EXACT
from ..._tensor import DeviceArray, device as _device

_CUDA0 = _device("cuda", 0)


def _contig_strides(shape):
    st, acc = [0] * len(shape), 1
    for a in range(len(shape) - 1, -1, -1):
        st[a] = acc
        acc *= shape[a]
    return tuple(st)


def _cuda():
    from numba import cuda
    return cuda


class _Flags:
    __slots__ = ("c_contiguous",)

    def __init__(self, c):
        self.c_contiguous = c


class CudaArray(DeviceArray):
    __slots__ = ("buf", "shape", "st", "offset", "dtype")

    def __init__(self, buf, shape, st=None, offset=0):
        self.buf = buf                      # 1-D device array (numba.cuda DeviceNDArray, or the simulator's)
        self.shape = tuple(int(s) for s in shape)
        self.st = _contig_strides(self.shape) if st is None else tuple(st)
        self.offset = int(offset)
        self.dtype = np.dtype(buf.dtype)

    # ------------------------------------------------------------------ numpy-like metadata
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def strides(self):
        """Byte strides, like numpy's (element strides are `st`)."""
        return tuple(s * self.dtype.itemsize for s in self.st)

    @property
    def device(self):
        return _CUDA0

    @property
    def contiguous(self):
        for s, st, want in zip(self.shape, self.st, _contig_strides(self.shape)):
            if s != 1 and st != want:
                return False
        return True

    @property
    def flags(self):
        return _Flags(self.contiguous)

    @property
    def base(self):
        """Like numpy's: None when no other array shares the buffer (refs: the slot, `b`, getrefcount's)."""
        b = self.buf
        return None if REFCOUNTS_EXACT and getrefcount(b) <= 3 else b

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        return f"CudaArray(shape={self.shape}, dtype={self.dtype}, strides={self.st}, offset={self.offset})"

    def __array__(self, dtype=None, copy=None):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                        "host memory first.")

    # ------------------------------------------------------------------ views (numpy computes the metadata)
    def _stand_in(self):
        it = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(np.zeros(1, self.dtype), self.shape, tuple(s * it for s in self.st))

    def _from_stand_in(self, base, v):
        it = self.dtype.itemsize
        delta = v.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return CudaArray(self.buf, v.shape, tuple(s // it for s in v.strides), self.offset + delta // it)

    def view_by(self, fn):
        """The view numpy's `fn(stand_in)` describes (fn must return a view, never a copy)."""
        base = self._stand_in()
        return self._from_stand_in(base, fn(base))

    def permute(self, dims):
        return self.view_by(lambda a: np.transpose(a, dims))

    def expand(self, shape):
        return self.view_by(lambda a: np.broadcast_to(a, shape))

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if not any(k is Ellipsis for k in key):
            key = key + (Ellipsis,)         # integer-only keys give a 0-d view, not a numpy scalar
        return self.view_by(lambda a: a[key])

    def __setitem__(self, key, value):
        from .ops import setitem
        setitem(self, key, value)

    def flip(self, dims):
        return self.view_by(lambda a: np.flip(a, dims))

    def try_view(self, shape):
        """A view with `shape` sharing the buffer, or None when the strides do not allow one."""
        shape = tuple(shape)
        if self.contiguous:
            return CudaArray(self.buf, shape, None, self.offset)
        from ...tracing.layout import reshape_view
        base = self._stand_in()
        v = reshape_view(base, shape)
        return None if v is None else self._from_stand_in(base, v)

    def reshape(self, shape):
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(shape)
        if -1 in shape:
            known = 1
            for s in shape:
                if s != -1:
                    known *= s
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        v = self.try_view(shape)
        return v if v is not None else CudaArray(self.copy().buf, shape)

    # ------------------------------------------------------------------ copies
    def copy(self):
        """A C-contiguous copy on the device."""
        out = empty(self.shape, self.dtype)
        copy_into(out, self)
        return out

    def copy_from(self, src):
        """self[...] = src in place (src: device array, host array or scalar; broadcast and cast)."""
        for n, st in zip(self.shape, self.st):
            if st == 0 and n > 1:
                raise ValueError("assignment destination is read-only")
        if isinstance(src, np.ndarray) and src.ndim:
            src = from_host(src)
        copy_into(self, src)

    def fill(self, value):
        self.copy_from(value)

    def ascontiguous(self):
        return self if self.contiguous and self.offset == 0 else self.copy()

    def to_host(self):
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        a = self if self.contiguous else self.copy()
        host = a.buf[a.offset:a.offset + a.size].copy_to_host()
        return host.reshape(self.shape)


def empty(shape, dtype):
    shape = tuple(int(s) for s in shape)
    n = 1
    for s in shape:
        n *= s
    return CudaArray(_cuda().device_array(max(n, 1), np.dtype(dtype)), shape)


def from_host(a):
    """Upload a numpy array (any layout) as a new C-contiguous device array."""
    from ... import cuda as tcuda
    tcuda._require()
    tcuda._activate()
    a = np.asarray(a)
    flat = np.ascontiguousarray(a).reshape(-1)
    if flat.size == 0:
        flat = np.zeros(1, a.dtype)
    return CudaArray(_cuda().to_device(flat), a.shape)


def copy_into(dst, src):
    """dst[...] = src (same shape after broadcasting src; dtype cast like numpy's copyto(casting='unsafe'))."""
    from .eager import run_copy
    run_copy(dst, src)
