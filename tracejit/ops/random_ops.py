"""Random ops: impure registry entries. Traced graphs draw fresh numbers on every run, CSE and constant
folding leave them alone (op.random). How eager and traced draws relate: tracejit/random.py."""
import numpy as np

from .. import _dtype as D
from .registry import AVal, defop


def _gen(generator):
    from ..random import default_generator
    return (generator or default_generator)._rng


def _rand_np(shape, dtype, low=0.0, high=1.0, generator=None):
    r = _gen(generator).random(shape, dtype=np.float64 if dtype is D.float64 else np.float32)
    if (low, high) != (0.0, 1.0):
        r = r * (high - low) + low
    return r.astype(dtype.np, copy=False)


def _randn_np(shape, dtype, mean=0.0, std=1.0, generator=None):
    r = _gen(generator).standard_normal(shape, dtype=np.float64 if dtype is D.float64 else np.float32)
    if (mean, std) != (0.0, 1.0):
        r = r * std + mean
    return r.astype(dtype.np, copy=False)


def _randint_np(shape, dtype, low, high, generator=None):
    return _gen(generator).integers(low, high, size=shape).astype(dtype.np)


def _bernoulli_np(p, generator=None):
    return (_gen(generator).random(p.shape) < p).astype(p.dtype)


def _randperm_meta(n, dtype, generator=None):
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return AVal((n,), dtype)


def _randperm_np(n, dtype, generator=None):
    _randperm_meta(n, dtype)
    return _gen(generator).permutation(n).astype(dtype.np)


def _multinomial_meta(p, num_samples, replacement=False, generator=None):
    if p.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not p.dtype.is_floating_point:
        from .._out import _CATEGORY
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_CATEGORY.get(p.dtype.np.name, p.dtype.np.name)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > p.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    return AVal(p.shape[:-1] + (num_samples,), D.int64)


def _multinomial_np(p, num_samples, replacement=False, generator=None):
    """num_samples category indices per row of p (unnormalized probabilities), checked as PyTorch checks them when
    the op runs (so a traced program checks every call's probabilities too)."""
    _multinomial_meta(AVal(p.shape, D._FROM_NP[p.dtype]), num_samples, replacement)
    rows = p.astype(np.float64).reshape(-1, p.shape[-1])
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if rows.shape[0] and (rows.sum(-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = _gen(generator)
    out = np.empty((rows.shape[0], num_samples), np.int64)
    for r, row in zip(out, rows):
        nz = np.count_nonzero(row)
        if replacement or nz >= num_samples:
            r[:] = rng.choice(row.size, num_samples, replace=replacement, p=row / row.sum())
        else:       # every category of nonzero probability first, then categories of probability zero (PyTorch's)
            r[:nz] = rng.choice(row.size, nz, replace=False, p=row / row.sum())
            r[nz:] = rng.choice(np.flatnonzero(row == 0), num_samples - nz, replace=False)
    return out.reshape(p.shape[:-1] + (num_samples,))


_meta = lambda shape, dtype, **kw: AVal(shape, dtype)  # noqa: E731
defop("rand", _rand_np, _meta, random=True, kind="random")
defop("randn", _randn_np, _meta, random=True, kind="random")
defop("randint", _randint_np, _meta, random=True, kind="random")
defop("bernoulli", _bernoulli_np, lambda p, generator=None: AVal(p.shape, p.dtype), random=True, kind="random")
defop("randperm", _randperm_np, _randperm_meta, random=True, kind="random")
defop("multinomial", _multinomial_np, _multinomial_meta, random=True, kind="random")
