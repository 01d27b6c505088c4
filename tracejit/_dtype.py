"""dtypes with PyTorch's names and PyTorch's type promotion."""
import numpy as np


class dtype:
    __slots__ = ("name", "np", "short", "is_floating_point", "is_complex", "is_signed", "itemsize", "_cat")

    def __init__(self, name, np_dtype, short, cat):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.short = short  # IR text form: f32, i64, b8 ...
        self._cat = cat  # 0 bool, 1 integer, 2 floating
        self.is_floating_point = cat == 2
        self.is_complex = False
        self.is_signed = cat != 0 and self.np.kind != "u"
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return "tracejit." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_complex(self):
        raise NotImplementedError("complex dtypes are not supported by tracejit")


bool_ = dtype("bool", np.bool_, "b8", 0)
uint8 = dtype("uint8", np.uint8, "u8", 1)
int8 = dtype("int8", np.int8, "i8", 1)
int16 = dtype("int16", np.int16, "i16", 1)
int32 = dtype("int32", np.int32, "i32", 1)
int64 = dtype("int64", np.int64, "i64", 1)
float16 = dtype("float16", np.float16, "f16", 2)
float32 = dtype("float32", np.float32, "f32", 2)
float64 = dtype("float64", np.float64, "f64", 2)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64)
_FROM_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_SHORT = {d.short: d for d in ALL}


def _by_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(npd):
    try:
        return _FROM_NP[np.dtype(npd)]
    except KeyError:
        raise TypeError(f"can't convert numpy dtype {np.dtype(npd)} to a tracejit dtype; "
                        f"supported: {', '.join(d.name for d in ALL)}") from None


def from_short(s):
    return _BY_SHORT[s]


_default = [float32]


def get_default_dtype():
    return _default[0]


def set_default_dtype(d):
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default[0] = d


def to_dtype(d):
    """Accept a tracejit dtype, a numpy dtype, a Python type or a name."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return _default[0]
    if d is int:
        return int64
    if d is bool:
        return bool_
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    return from_numpy_dtype(d)


def promote_types(a, b):
    """PyTorch's promotion of two tensor dtypes (both 'dimensioned' operands)."""
    if a is b:
        return a
    if a._cat != b._cat:
        return a if a._cat > b._cat else b
    return _FROM_NP[np.promote_types(a.np, b.np)]


def scalar_category(v):
    if isinstance(v, (bool, np.bool_)):
        return 0
    if isinstance(v, (int, np.integer)):
        return 1
    return 2


def result_type(*operands):
    """PyTorch's result_type over tensors (by dtype) and Python scalars (weakly typed).

    Zero-dim tensors participate like dimensioned ones only when no dimensioned tensor of the same
    or a higher category exists (PyTorch's three-tier rule: dimensioned > zero-dim > scalar)."""
    dim_t = None
    zero_t = None
    scal_cat = -1
    for o in operands:
        d = getattr(o, "dtype", None)
        if isinstance(d, dtype):
            if o.ndim:
                dim_t = d if dim_t is None else promote_types(dim_t, d)
            else:
                zero_t = d if zero_t is None else promote_types(zero_t, d)
        elif o is not None:
            c = scalar_category(o)
            if c > scal_cat:
                scal_cat = c
    res = dim_t
    if zero_t is not None:
        if res is None:
            res = zero_t
        elif zero_t._cat > res._cat:
            res = zero_t
    if scal_cat >= 0:
        if res is None:
            res = (bool_, int64, _default[0])[scal_cat]
        elif scal_cat > res._cat:
            res = int64 if scal_cat == 1 else _default[0]
    return res
