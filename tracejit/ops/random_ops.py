"""Random ops: impure registry entries. Traced graphs draw fresh numbers on every run, CSE and constant
folding leave them alone (op.random)."""
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


_meta = lambda shape, dtype, **kw: AVal(shape, dtype)  # noqa: E731
defop("rand", _rand_np, _meta, random=True, kind="random")
defop("randn", _randn_np, _meta, random=True, kind="random")
defop("randint", _randint_np, _meta, random=True, kind="random")
defop("bernoulli", _bernoulli_np, lambda p, generator=None: AVal(p.shape, p.dtype), random=True, kind="random")
