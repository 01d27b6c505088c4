"""Memory formats (PyTorch's torch.memory_format): a tensor's layout, not its values.

`channels_last` is the NHWC layout of an (N, C, H, W) tensor (NDHWC of a 5-d one: `channels_last_3d`), held
as a numpy array with permuted strides, so `.stride()`, `.is_contiguous(memory_format=...)` and numpy's own
ops see it as PyTorch does. Eager ops that preserve layouts in PyTorch (elementwise ops: numpy's order='K';
conv2d, pooling, batch norm) give channels_last results for channels_last inputs. Compiled programs compute in
the contiguous format: the `to_memory_format` op lowers to nothing there (its `decompose` rule is the identity).
"""
import numpy as np


class memory_format:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"tracejit.{self.name}"

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the dims from innermost to outermost of each format (PyTorch's stride order)
_ORDER = {"channels_last": (1, 3, 2, 0), "channels_last_3d": (1, 4, 3, 2, 0)}


def check(fmt, what="memory_format"):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{what} must be a tracejit.memory_format (e.g. tracejit.channels_last), not "
                        f"{type(fmt).__name__}")
    return fmt


def is_contiguous_as(a, fmt):
    """PyTorch's test: the strides are those of a dense tensor laid out in `fmt` (dims of size 1 are free)."""
    if fmt is contiguous_format or fmt is preserve_format:
        return a.flags.c_contiguous
    order = _ORDER[fmt.name]
    if a.ndim != len(order):
        return False
    expected = a.itemsize
    for d in order:
        if a.shape[d] != 1:
            if a.strides[d] != expected:
                return False
            expected *= a.shape[d]
    return True


def suggest(a):
    """The format an op preserving layouts gives its result (PyTorch's suggest_memory_format)."""
    for fmt in (channels_last, channels_last_3d):
        if a.ndim == len(_ORDER[fmt.name]) and not a.flags.c_contiguous and is_contiguous_as(a, fmt):
            return fmt
    return contiguous_format


def as_format(a, fmt):
    """A copy of array `a` laid out in `fmt` (`a` itself when it already is)."""
    if fmt is preserve_format or is_contiguous_as(a, fmt):
        return a
    if fmt is contiguous_format:
        return np.ascontiguousarray(a)
    order = _ORDER[fmt.name]
    if a.ndim != len(order):
        rank = "4" if fmt is channels_last else "5"
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    outer = order[::-1]                                    # dims from outermost to innermost
    dense = np.ascontiguousarray(a.transpose(outer))
    return dense.transpose(np.argsort(outer))


def like(out, *inputs):
    """`out` in the layout PyTorch gives an op's result for these inputs: that of the first one laid out in a
    channels_last format (channels_last in, channels_last out: convolutions, pooling), else `out` as it is."""
    for a in inputs:
        fmt = suggest(a)
        if fmt is not contiguous_format:
            return as_format(out, fmt)
    return out
