"""nn.utils.rnn: pad_sequence (packed sequences are not supported)."""
from ... import creation as C
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
