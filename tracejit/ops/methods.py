"""Tensor methods and Python operators, bound to the functional ops (nothing is defined twice)."""
import types

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor, device as _device, check_device
from . import elementwise as E, reduction as R, shape_ops as S, indexing as I, linalg as L, nn_ops as N
from .inplace import inplace, make_inplace


def _bind(name, fn):
    if isinstance(fn, types.FunctionType):
        setattr(Tensor, name, fn)   # a function is its own method: no forwarding call per op
        return
    setattr(Tensor, name, lambda self, *a, **k: fn(self, *a, **k))
    getattr(Tensor, name).__name__ = name


_METHODS = {}
for mod in (E, R, S, I, L, N):
    for name in dir(mod):
        f = getattr(mod, name)
        if callable(f) and not name.startswith("_") and not isinstance(f, type) \
                and getattr(f, "__module__", None) == mod.__name__:
            _METHODS[name] = f
for skip in ("apply", "defop", "pointwise", "norm_dim", "norm_dims", "broadcast_shapes", "aval_of", "cat", "stack",
             "hstack", "vstack", "dstack", "row_stack", "column_stack", "concat", "concatenate", "einsum",
             "einsum_terms", "broadcast_tensors", "where", "getitem", "setitem", "sum_to", "cat_one", "count_like",
             "index_put", "slice_dim", "allclose", "isclose", "equal", "atleast_1d", "atleast_2d", "atleast_3d",
             "scatter_add_", "values_indices", "float_power", "make_inplace", "inplace", "meshgrid", "cast",
             "threshold", "check_classes", "check_unpool_index"):
    _METHODS.pop(skip, None)
for name, f in _METHODS.items():
    _bind(name, f)

for name in ("allclose", "isclose", "equal", "index_put", "float_power"):
    _bind(name, getattr(E if hasattr(E, name) else I, name))
Tensor.where = lambda self, condition, other: E.where(condition, self, other)
Tensor.polygamma = lambda self, n: E.polygamma(n, self)      # (torch.polygamma takes n first, the method n only)
Tensor.T = property(lambda self: S.permute(self, tuple(range(self.ndim))[::-1]))
Tensor.mT = property(lambda self: S.transpose(self, -2, -1))
Tensor.H = Tensor.T
Tensor.__getitem__ = I.getitem
Tensor.__setitem__ = I.setitem
Tensor.expand = lambda self, *sizes: S.expand(self, *sizes)


def _flip(self, *dims, **kwargs):
    """x.flip(0, 1), x.flip((0, 1)), x.flip(dims=[0]): the method takes dims as varargs too, as PyTorch's."""
    if "dims" in kwargs:
        if dims:
            raise TypeError("flip() got multiple values for argument 'dims'")
        dims = kwargs.pop("dims")
    elif len(dims) == 1 and not isinstance(dims[0], int):
        dims = dims[0]
    if kwargs:
        raise TypeError(f"flip() got an unexpected keyword argument '{next(iter(kwargs))}'")
    return S.flip(self, dims)


Tensor.flip = _flip
Tensor.view_as = lambda self, other: S.view(self, tuple(other.shape))
Tensor.reshape_as = lambda self, other: S.reshape(self, tuple(other.shape))
Tensor.type_as = lambda self, other: self.to(other.dtype)

# in-place variants: x.add_(y) from add(x, y), ...
_INPLACE = ["add", "sub", "mul", "div", "pow", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "cos", "tanh",
            "sigmoid", "relu", "clamp", "clamp_min", "clamp_max", "floor", "ceil", "round", "trunc", "sign",
            "reciprocal", "remainder", "fmod", "lerp", "maximum", "minimum", "masked_fill", "index_fill",
            "index_add", "index_copy", "scatter", "scatter_add", "addcmul", "addcdiv", "leaky_relu", "elu",
            "square", "log1p", "expm1", "erf", "erfinv", "frac", "floor_divide", "tril", "triu", "silu", "gelu", "hardtanh",
            "logical_not", "logical_and", "logical_or", "logical_xor", "eq", "ne", "lt", "le", "gt", "ge", "atan2", "exp2",
            "log2", "log10", "sin", "tan", "asin", "acos", "atan", "sinh", "cosh", "true_divide", "xlogy",
            "index_put", "clip", "mish", "hardsigmoid", "hardswish", "logit", "negative", "multiply", "subtract",
            "divide", "fmax", "fmin", "lgamma", "digamma", "polygamma", "mvlgamma"]
for name in _INPLACE:
    fn = getattr(Tensor, name)
    setattr(Tensor, name + "_", make_inplace(lambda self, *a, _f=fn, **k: _f(self, *a, **k)))


def _view_inplace(fn):
    """x.t_(), x.squeeze_(): the tensor itself becomes the view (a metadata change, as in PyTorch)."""
    def method(self, *args, **kwargs):
        from .._state import STATE
        if STATE.grad_enabled and self._requires_grad and self.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        res = fn(self, *args, **kwargs)
        if res is self:
            return self
        if STATE.tracer is not None:
            STATE.tracer.rebind(self, res)
        else:
            self._data = res._data
        self._version.v += 1
        if res.grad_fn is not None:
            self.grad_fn, self._output_nr = res.grad_fn, res._output_nr
        return self
    method.__name__ = fn.__name__ + "_"
    return method


for name in ("t", "transpose", "squeeze", "unsqueeze", "swapaxes", "swapdims"):
    setattr(Tensor, name + "_", _view_inplace(getattr(Tensor, name)))


def _binary(fn, reflected=False):
    if reflected:
        return lambda self, other: fn(other, self)
    return fn if isinstance(fn, types.FunctionType) else (lambda self, other: fn(self, other))


def _iop(fn):
    def m(self, other):
        return inplace(self, lambda s: fn(s, s if other is self else other), (other,))
    return m


for name, fn in [("add", E.add), ("sub", E.sub), ("mul", E.mul), ("truediv", E.div), ("floordiv", E.floor_divide),
                 ("mod", E.remainder), ("pow", E.pow), ("matmul", L.matmul), ("and", E.bitwise_and),
                 ("or", E.bitwise_or), ("xor", E.bitwise_xor)]:
    setattr(Tensor, f"__{name}__", _binary(fn))
    # 3 * x is x * 3 for the commutative ops, as in PyTorch (the tensor is the node's first input)
    setattr(Tensor, f"__r{name}__", _binary(fn, name not in ("add", "mul")))
    setattr(Tensor, f"__i{name}__", _iop(fn))
# PyTorch's `2 / x` is x.reciprocal() * 2 (MulBackward0 over ReciprocalBackward0), values and graph alike
Tensor.__rtruediv__ = lambda self, other: E.mul(E.reciprocal(self), other)
for name, fn in [("eq", E.eq), ("ne", E.ne), ("lt", E.lt), ("le", E.le), ("gt", E.gt), ("ge", E.ge)]:
    setattr(Tensor, f"__{name}__", _binary(fn))
Tensor.__neg__ = lambda self: E.neg(self)
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = lambda self: E.abs(self)
Tensor.__invert__ = lambda self: E.logical_not(self) if self.dtype is D.bool_ else E.bitwise_not(self)
Tensor.__hash__ = lambda self: id(self)


def _and(self, other):
    return E.logical_and(self, other) if self.dtype is D.bool_ else E.bitwise_and(self, other)


def _or(self, other):
    return E.logical_or(self, other) if self.dtype is D.bool_ else E.bitwise_or(self, other)


def _xor(self, other):
    return E.logical_xor(self, other) if self.dtype is D.bool_ else E.bitwise_xor(self, other)


Tensor.__and__, Tensor.__or__, Tensor.__xor__ = _and, _or, _xor
Tensor.__rand__, Tensor.__ror__, Tensor.__rxor__ = _and, _or, _xor


# ----------------------------------------------------------------------------- conversions

def to(self, *args, **kwargs):
    fmt = kwargs.get("memory_format")
    if fmt is not None:
        from .._memory_format import check, preserve_format
        if check(fmt) is not preserve_format:
            out = to(self, *args, **{k: v for k, v in kwargs.items() if k != "memory_format"})
            res = S._to_memory_format(out, fmt)
            return res.clone(memory_format=fmt) if res is self and kwargs.get("copy", False) else res
    dtype = kwargs.get("dtype")
    dev = kwargs.get("device")
    copy = kwargs.get("copy", False)
    for a in args:
        if isinstance(a, Tensor):
            dtype, dev = a.dtype, a.device
        elif isinstance(a, (D.dtype, type)) or (isinstance(a, str) and a in D._BY_NAME):
            dtype = a
        elif isinstance(a, (str, _device)):
            dev = a
    check_device(dev)
    if dev is not None:             # a device change is a copy (differentiable), then the dtype cast
        from .. import cuda as _cuda
        moved = _cuda.to_device(self, dev)
        copy = copy and moved is self
        self = moved
    if dtype is None:
        return self.clone() if copy else self
    dtype = D.to_dtype(dtype)
    if dtype is self.dtype and not copy:
        return self
    if dtype is self.dtype:
        return self.clone()
    return E.cast(self, dtype)


Tensor.to = to
Tensor.float = lambda self: to(self, D.float32)
Tensor.double = lambda self: to(self, D.float64)
Tensor.half = lambda self: to(self, D.float16)
Tensor.long = lambda self: to(self, D.int64)
Tensor.int = lambda self: to(self, D.int32)
Tensor.short = lambda self: to(self, D.int16)
Tensor.char = lambda self: to(self, D.int8)
Tensor.byte = lambda self: to(self, D.uint8)
Tensor.bool = lambda self: to(self, D.bool_)
Tensor.cpu = lambda self, memory_format=None: to(self, device="cpu")
Tensor.cuda = lambda self, device=None, non_blocking=False, memory_format=None: to(
    self, device="cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))
Tensor.type = lambda self, dtype=None: ("tracejit." + {"float32": "FloatTensor", "float64": "DoubleTensor",
                                                          "int64": "LongTensor", "int32": "IntTensor",
                                                          "bool": "BoolTensor", "float16": "HalfTensor",
                                                          "uint8": "ByteTensor", "int8": "CharTensor",
                                                          "int16": "ShortTensor"}[self.dtype.name]
                                         if dtype is None else to(self, dtype))


# ----------------------------------------------------------------------------- in-place fills

def _fill(self, compute):
    return inplace(self, compute)


def fill_(self, value):
    from .shape_ops import expand
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               f"dimensions.")
        return inplace(self, lambda s: expand(value.to(self.dtype), tuple(self.shape)), (value,))
    if self._data is not None and self.grad_fn is None and not self._requires_grad and not self._inference:
        from .._state import STATE
        if STATE.tracer is None:
            self._data.fill(value)
            self._version.v += 1
            return self
    from ..creation import full
    return inplace(self, lambda s: full(tuple(self.shape), value, dtype=self.dtype))


def zero_(self):
    return fill_(self, 0)


def copy_(self, src, non_blocking=False):
    from .shape_ops import expand
    if not isinstance(src, Tensor):
        from ..creation import tensor
        src = tensor(src)
    return inplace(self, lambda s: expand(src.to(self.dtype), tuple(self.shape)), (src,))


def _random_fill(fn):
    def m(self, *args, generator=None, **kw):
        from .._state import STATE
        r = fn(tuple(self.shape), *args, generator=generator, dtype=self.dtype, **kw)
        if STATE.tracer is None and self._data is not None and not self._inference:
            np.copyto(self._data, r._data)
            self._version.v += 1
            return self
        return inplace(self, lambda s: r)
    return m


def _uniform(shape, a=0.0, b=1.0, *, generator, dtype):
    from .registry import apply, OPS
    return apply(OPS["rand"], shape=shape, dtype=dtype, low=float(a), high=float(b), generator=generator)


def _normal(shape, mean=0.0, std=1.0, *, generator, dtype):
    from .registry import apply, OPS
    return apply(OPS["randn"], shape=shape, dtype=dtype, mean=float(mean), std=float(std), generator=generator)


def _bernoulli(shape, p=0.5, *, generator, dtype):
    from ..creation import full, bernoulli
    return bernoulli(full(shape, float(p), dtype=dtype), generator=generator)


def _random(shape, low=0, high=None, *, generator, dtype):
    from ..creation import randint
    if high is None:
        low, high = 0, low
    return randint(low, high, shape, generator=generator, dtype=dtype)


Tensor.fill_ = fill_
Tensor.zero_ = zero_
Tensor.copy_ = copy_
Tensor.uniform_ = _random_fill(_uniform)
Tensor.normal_ = _random_fill(_normal)
Tensor.bernoulli_ = _random_fill(_bernoulli)
Tensor.random_ = _random_fill(_random)
Tensor.new_zeros = lambda self, *size, dtype=None, device=None, **k: __import__("tracejit").zeros(
    *size, dtype=dtype or self.dtype, device=device or self.device)
Tensor.new_ones = lambda self, *size, dtype=None, device=None, **k: __import__("tracejit").ones(
    *size, dtype=dtype or self.dtype, device=device or self.device)
Tensor.new_empty = lambda self, *size, dtype=None, device=None, **k: __import__("tracejit").empty(
    *size, dtype=dtype or self.dtype, device=device or self.device)
Tensor.new_full = lambda self, size, v, dtype=None, device=None, **k: __import__("tracejit").full(
    size, v, dtype=dtype or self.dtype, device=device or self.device)
Tensor.new_tensor = lambda self, data, dtype=None, device=None, **k: __import__("tracejit").tensor(
    data, dtype=dtype or self.dtype, device=device or self.device)
Tensor.bernoulli = lambda self, p=None, *, generator=None: __import__("tracejit").bernoulli(self, p,
                                                                                           generator=generator)
Tensor.multinomial = lambda self, n, replacement=False, generator=None: __import__("tracejit").multinomial(
    self, n, replacement, generator=generator)
Tensor.softmax = lambda self, dim, dtype=None: N.softmax(self, dim, dtype)
Tensor.log_softmax = lambda self, dim, dtype=None: N.log_softmax(self, dim, dtype)
Tensor.max = R.max
Tensor.min = R.min
Tensor.sum = R.sum
Tensor.mean = R.mean
Tensor.all = R.all
Tensor.any = R.any
Tensor.abs = E.abs
Tensor.pow = E.pow
Tensor.round = E.round
Tensor.masked_fill_ = make_inplace(I.masked_fill)


# the Tensor methods PyTorch has among the functions of composites.py, scan_ops.py and lookup_ops.py
def _bind_more():
    from . import composites as C, scan_ops as SC, lookup_ops as LK
    for mod, names in ((C, ("unfold", "repeat_interleave", "diff", "kron", "rot90", "nan_to_num", "heaviside",
                            "logaddexp", "logaddexp2", "hypot", "copysign", "quantile", "nanquantile",
                            "unique_consecutive")),
                       (SC, ("cummax", "cummin", "logcumsumexp")), (LK, ("bincount", "histc", "mode"))):
        for name in names:
            _bind(name, getattr(mod, name))
    for name in ("nan_to_num", "hypot", "copysign", "heaviside"):
        if name + "_" not in Tensor.__dict__:
            setattr(Tensor, name + "_", make_inplace(getattr(C, name)))
    if "scatter_reduce_" not in Tensor.__dict__:
        Tensor.scatter_reduce_ = make_inplace(I.scatter_reduce)


_bind_more()
