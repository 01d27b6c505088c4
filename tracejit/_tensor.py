"""The Tensor: a numpy array (eager) or an IR value (tracer), with autograd metadata.

A tracer is a Tensor whose `_data` is None and whose `_value` is an IR value: the same class, so user
code, VJP rules and the autograd engine run unchanged on both. Ops and most methods are attached by
the `ops` modules (each op is defined once, in the registry).
"""
import numpy as np

from . import _dtype as D
from ._state import STATE, SERIAL
from .size import Size


class device:
    __slots__ = ("type", "index")

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if ":" in type:
            type, index = type.split(":")
            index = int(index)
        if type not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {type}")
        self.type = type
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"


CPU = device("cpu")


class DeviceArray:
    """Base of array types living on an accelerator (backends/numba_cuda/array.py's CudaArray): a cuda tensor's
    `_data`. Tensor code that needs host values goes through `Tensor._host()`."""
    __slots__ = ()


def check_device(dev):
    if dev is None:
        return
    d = dev if isinstance(dev, device) else device(str(dev))
    if d.type == "cuda":
        from . import cuda
        cuda._require()


_new = object.__new__
_next_serial = SERIAL.__next__
_engine = None      # tracejit.autograd.engine, once Tensor.backward first runs
INFERENCE_INPLACE = ("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone "
                     "to get a normal tensor before doing inplace update.")


class _Version:
    """Version counter shared by a tensor, its views and its detached aliases."""
    __slots__ = ("v",)

    def __init__(self):
        self.v = 0


class Tensor:
    __slots__ = ("_data", "_value", "_requires_grad", "_grad", "grad_fn", "_output_nr", "_version", "_base",
                 "_hooks", "_retains_grad", "_serial", "__weakref__", "__dict__")
    _inference = False      # made in inference mode (set in the instance's __dict__ only then)

    # -------------------------------------------------------------- construction
    def __init__(self, *args, dtype=None, device=None):
        # torch.Tensor(data) / torch.Tensor(2, 3): float32 (the default dtype)
        from .creation import _to_array
        check_device(device)
        if len(args) == 1 and not isinstance(args[0], int):
            arr = _to_array(args[0], D.to_dtype(dtype) if dtype else D.get_default_dtype())
        else:
            arr = np.zeros(tuple(args), (D.to_dtype(dtype) if dtype else D.get_default_dtype()).np)
        self._init(arr)

    def _init(self, arr):
        self._data = arr
        self._value = None
        self._requires_grad = False
        self._grad = None
        self.grad_fn = None
        self._output_nr = 0
        self._version = _Version()
        self._base = None
        self._hooks = None
        self._retains_grad = False
        self._serial = _next_serial()
        if STATE.inference:
            self._inference = True

    @staticmethod
    def _wrap(arr):
        """A new tensor over `arr` (not copied): what every eager op returns, so kept to one call."""
        if type(arr) is not np.ndarray and not isinstance(arr, DeviceArray):
            arr = np.asarray(arr)
        t = _new(Tensor)
        t._init(arr)
        return t

    # -------------------------------------------------------------- metadata
    @property
    def shape(self):
        return Size(self._data.shape if self._data is not None else self._value.shape)

    def size(self, dim=None):
        s = self.shape
        if dim is None:
            return s
        from .ops.registry import norm_dim
        return s[norm_dim(dim, len(s))]

    @property
    def dtype(self):
        if self._data is not None:
            return D._FROM_NP[self._data.dtype]
        return self._value.dtype

    @property
    def ndim(self):
        return self._data.ndim if self._data is not None else len(self._value.shape)

    def dim(self):
        return self.ndim

    ndimension = dim

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    nelement = numel

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def device(self):
        d = self._data
        if d is None:       # a tracer: the device of the trace
            return getattr(STATE.tracer, "device", CPU)
        return d.device if isinstance(d, DeviceArray) else CPU

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def _host(self):
        """The values as a numpy array (a copy from the device for cuda tensors)."""
        d = self._data
        return d.to_host() if isinstance(d, DeviceArray) else d

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def is_tracer(self):
        return self._data is None

    def element_size(self):
        return self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_complex(self):
        return False        # tracejit has no complex dtypes

    def is_conj(self):
        return False

    def conj(self):
        """The conjugate: a real tensor is its own (PyTorch returns the tensor itself)."""
        return self

    resolve_conj = resolve_neg = conj

    def conj_physical(self):
        return self.clone()

    def is_neg(self):
        return False

    def is_inference(self):
        """Was this tensor made in inference mode (or is it a view of such a tensor)?"""
        return self._inference

    def stride(self, dim=None):
        from .tracing.layout import strides_of
        st = strides_of(self)       # a tracer's: the strides eager mode would give it
        if dim is None:
            return st
        from .ops.registry import norm_dim
        return st[norm_dim(dim, self.ndim)]

    def storage_offset(self):
        self._concrete("storage_offset()")
        base = self._data
        while isinstance(base.base, np.ndarray):
            base = base.base
        return (self._data.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // self._data.itemsize

    def data_ptr(self):
        self._concrete("data_ptr()")
        return self._data.__array_interface__["data"][0]

    def is_contiguous(self, memory_format=None):
        from . import _memory_format as M
        fmt = M.check(M.contiguous_format if memory_format is None else memory_format)
        if fmt is M.preserve_format:
            raise RuntimeError("is_contiguous(): preserve_format is not a memory format a tensor can be in")
        if self._data is None:      # a tracer: the strides eager mode would give it (contiguous format only)
            lay = self.__dict__.get("_layout")
            if lay is None or fmt is not M.contiguous_format:
                return fmt is M.contiguous_format
            from .tracing.layout import is_contiguous
            return is_contiguous(self._value.shape, lay)
        if not isinstance(self._data, np.ndarray):
            return fmt is M.contiguous_format        # device arrays: the contiguous format
        return M.is_contiguous_as(self._data, fmt)

    def _is_view(self):
        return self._base is not None

    # -------------------------------------------------------------- autograd attributes
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        flag = bool(flag)
        if self.grad_fn is not None:
            if not flag:
                raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use "
                                   "a computed variable in a subgraph that doesn't require differentiation use "
                                   "var_no_grad = var.detach().")
            return
        if flag and not self.dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if flag and self._inference and not STATE.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self):
        if STATE.tracer is not None:
            STATE.tracer.touch_grad(self)     # lifts the tensor and its .grad on first use inside a trace
        return self._grad

    @grad.setter
    def grad(self, g):
        if STATE.tracer is not None:
            STATE.tracer.touch_grad(self)
        if g is not None:
            if not isinstance(g, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(g).__name__}")
            if g.shape != self.shape:
                raise RuntimeError(f"assigned grad has data of a different size: {list(g.shape)} vs {list(self.shape)}")
            if g.dtype is not self.dtype:
                raise RuntimeError(f"assigned grad has data of a different type ({g.dtype} vs {self.dtype})")
        self._grad = g

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, other):
        if self._data is None or other._data is None:
            self._value, self._data = other._value, other._data
        else:
            self._data = other._data

    @property
    def retains_grad(self):
        return self._retains_grad

    def retain_grad(self):
        if self.grad_fn is None:
            if not self.requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if not self._retains_grad:
            from .autograd.graph import retain
            retain(self)
            self._retains_grad = True

    def register_hook(self, hook):
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from .autograd.graph import RemovableHandle, register_tensor_hook
        if self.grad_fn is not None:
            return register_tensor_hook(self, hook)
        if self._hooks is None:
            self._hooks = {}
        key = object()
        self._hooks[key] = hook
        return RemovableHandle(self._hooks, key)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor) runs after a backward has accumulated this leaf's gradient into its .grad."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        from .autograd.graph import RemovableHandle
        hooks = self.__dict__.setdefault("_post_acc_hooks", {})
        key = object()
        hooks[key] = hook
        return RemovableHandle(hooks, key)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        global _engine
        if _engine is None:
            from .autograd import engine as _engine    # imports this module: bound on first use
        _engine.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self):
        t = object.__new__(type(self)) if type(self) is Tensor else object.__new__(Tensor)
        t._init(self._data)
        t._value = self._value
        t._version = self._version
        t._base = self._base
        if self._data is None and "_layout" in self.__dict__:
            t.__dict__["_layout"] = self.__dict__["_layout"]
        if self._inference:
            t._inference = True
        return t

    def detach_(self):
        if self._base is not None and self._base.requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn = None
        self._requires_grad = False
        return self

    # -------------------------------------------------------------- conversion
    def _concrete(self, what):
        if self._data is None:
            from .tracing.errors import value_dependent
            raise value_dependent(what)

    def numpy(self, force=False):
        self._concrete(".numpy()")
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if isinstance(self._data, DeviceArray):
            if not force:
                raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                                f"the tensor to host memory first.")
            return self._host()
        return self._data

    def __array__(self, dtype=None, copy=None):
        self._concrete("np.asarray(tensor)")
        d = self._data
        if isinstance(d, DeviceArray):
            d.__array__()       # raises PyTorch's TypeError: .cpu() first
        return d if dtype is None else d.astype(dtype)

    def item(self):
        self._concrete(".item()")
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._host().reshape(()).item()

    def tolist(self):
        self._concrete(".tolist()")
        return self._host().tolist()

    def __bool__(self):
        self._concrete("bool(tensor)")
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._host().reshape(()))

    def __float__(self):
        self._concrete("float(tensor)")
        return float(self.item())

    def __int__(self):
        self._concrete("int(tensor)")
        return int(self.item())

    def __index__(self):
        self._concrete("operator.index(tensor)")
        if self.dtype.is_floating_point or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def __hash__(self):
        return id(self)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __reduce_ex__(self, proto):
        self._concrete("pickle")
        from .creation import tensor
        return (tensor, (self._host().copy(),), None)

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol")
        t = self.detach().clone()
        t.__class__ = type(self)
        t._requires_grad = self._requires_grad
        if self.__dict__:
            import copy
            t.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = t
        return t

    def __repr__(self):
        from ._format import format_tensor
        return format_tensor(self)

    __str__ = __repr__
