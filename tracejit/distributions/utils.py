"""Helpers the distributions share: broadcasting parameters, probabilities <-> logits, a cached property."""
import numbers

import numpy as np


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape; numbers take the first tensor's dtype (else the default)."""
    import tracejit as tj
    like = next((v for v in values if isinstance(v, tj.Tensor)), None)
    for v in values:
        if not isinstance(v, (tj.Tensor, numbers.Number)):
            raise ValueError("Input arguments must all be instances of numbers.Number or torch.tensor.")
    dtype = like.dtype if like is not None else tj.get_default_dtype()
    return tj.broadcast_tensors(*[v if isinstance(v, tj.Tensor) else tj.tensor(float(v), dtype=dtype)
                                  for v in values])


def finfo(dtype):
    return np.finfo(dtype.np)


def clamp_probs(probs):
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    import tracejit as tj
    return tj.sigmoid(logits) if is_binary else tj.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    import tracejit as tj
    p = clamp_probs(probs)
    return tj.log(p) - tj.log1p(-p) if is_binary else tj.log(p)


def sum_rightmost(value, dim):
    """value summed over its `dim` rightmost dims."""
    return value.sum(tuple(range(-dim, 0))) if dim > 0 else value


class lazy_property:
    """A property computed on first use and then stored on the instance (Bernoulli's logits from its probs...)."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = self.fn(instance)
        instance.__dict__[self.fn.__name__] = value
        return value
