"""nn.utils.rnn: padded and packed batches of sequences of different lengths.

A PackedSequence holds the steps of a batch of sequences sorted by decreasing length, time step by time step:
`data` the rows of step 0 of every sequence, then those of step 1 of the sequences that long, ...; `batch_sizes`
how many sequences each step has (a CPU int64 tensor), and the permutation that sorted them. Lengths are host values
(as in PyTorch, where they live on the CPU): packing and unpacking are index_selects by constant indices, so their
gradients are the gathers' and a trace takes them as constants.
"""
from collections import namedtuple

import numpy as np

from ... import creation as C, _dtype as D
from ..._tensor import Tensor
from ...ops.indexing import index_select
from ...ops.shape_ops import cat, stack


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """The sequences (L_i, *) padded with padding_value to the longest and stacked: (L, B, *), or (B, L, *)."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    n = max(s.shape[0] for s in sequences)
    out = []
    for s in sequences:
        fill = C.full((n - s.shape[0],) + tuple(s.shape[1:]), padding_value, dtype=s.dtype)
        out.append(cat([s, fill] if padding_side == "right" else [fill, s], 0) if n > s.shape[0] else s)
    return stack(out, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences padded_sequences holds, each cut to its length."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[b, :int(n)] for b, n in enumerate(_host(lengths))]


def invert_permutation(permutation):
    if permutation is None:
        return None
    p = _host(permutation)
    inv = np.empty_like(p)
    inv[p] = np.arange(len(p))
    return C.tensor(inv)


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """(data, batch_sizes, sorted_indices, unsorted_indices); made by pack_padded_sequence and pack_sequence."""
    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            data, batch_sizes = data
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes, self.sorted_indices,
                                                         self.unsorted_indices)

    def double(self):
        return self.to(dtype=D.float64)

    def float(self):
        return self.to(dtype=D.float32)

    def cpu(self):
        return self.to("cpu")

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _host(t):
    if isinstance(t, Tensor):
        t._concrete("the lengths of packed sequences (they must be known when packing)")
        return np.asarray(t._data).astype(np.int64).reshape(-1)
    return np.asarray(t, dtype=np.int64).reshape(-1)


def _lengths(batch_sizes):
    """The sorted sequences' lengths from batch_sizes."""
    bs = _host(batch_sizes)
    return (bs[None, :] > np.arange(bs[0] if len(bs) else 0)[:, None]).sum(1)


def _packed_rows(lengths, T, B):
    """Where the packed rows come from in a (T, B) padded batch (flattened), the sequences sorted."""
    t, b = np.nonzero(np.arange(T)[:, None] < lengths[None, :])        # row-major: step by step
    return t * B + b


def _pack(x, lengths):
    """The packed rows of a padded (T, B, *) batch of sorted sequences of the given lengths."""
    T, B = x.shape[0], x.shape[1]
    rows = _packed_rows(_host(lengths), T, B)
    return index_select(x.reshape((T * B,) + tuple(x.shape[2:])), 0, C.tensor(rows))


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """A padded batch (T, B, *) (batch_first: (B, T, *)) of sequences of the given lengths as a PackedSequence."""
    lengths = _host(lengths)
    if enforce_sorted:
        if (np.diff(lengths) > 0).any():
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        order = None
    else:
        order = np.argsort(-lengths, kind="stable")
        lengths = lengths[order]
    x = input.transpose(0, 1) if batch_first else input
    T, B = x.shape[0], x.shape[1]
    if len(lengths) != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={B})")
    if B and lengths.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if B and lengths.max() > T:
        raise RuntimeError(f"pack_padded_sequence: a length of {lengths.max()} is longer than the input's {T} time "
                           f"steps (dim {0 if not batch_first else 1}); give each sequence's length, at most {T}")
    if order is not None:
        x = index_select(x, 1, C.tensor(order))
    data = _pack(x, lengths)
    batch_sizes = C.tensor((lengths[None, :] > np.arange(lengths.max(initial=0))[:, None]).sum(1))
    return PackedSequence(data, batch_sizes, None if order is None else C.tensor(order), None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded batch (T, B, *) or (B, T, *) in the original order, lengths): pack_padded_sequence's inverse."""
    data, batch_sizes, _, unsorted = sequence
    T = len(_host(batch_sizes))
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {T}")
        T = total_length
    lengths = _lengths(batch_sizes)
    B = len(lengths)
    where = np.full(T * B, len(data), np.int64)               # len(data): the appended padding row
    where[_packed_rows(lengths, T, B)] = np.arange(len(data))
    where = where.reshape(T, B)
    if unsorted is not None:
        order = _host(unsorted)
        where, lengths = where[:, order], lengths[order]
    if batch_first:
        where = where.T
    fill = C.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = index_select(cat([data, fill], 0), 0, C.tensor(where.reshape(-1)))
    return padded.reshape(where.shape + tuple(data.shape[1:])), C.tensor(lengths)


def pack_sequence(sequences, enforce_sorted=True):
    """A list of sequences (L_i, *) as a PackedSequence."""
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
