"""Optimizer updates as one loop per parameter (PyTorch's `fused` idea): eager Adam/AdamW read and write each
element of the parameter, its gradient and the two moment buffers once, instead of a dozen numpy passes with a
temporary array each; eager SGD likewise (parameter, gradient, momentum buffer). The arithmetic is the op
sequence of the optimizer's step in the same order; the scalar factors are float64 (Python floats), so each
element is computed in float64 and rounded once when stored, where the ops round after each op in the
parameter's dtype (eager and traced steps agree to rounding)."""
import math

import numba


@numba.njit(cache=True, nogil=True)
def adam_update(p, g, m, v, neg_step_size, bc2_sqrt, eps, one_minus_beta1, beta2, one_minus_beta2, decay_mul,
                l2, maximize):
    """p, g, m, v: flat arrays of one dtype. decay_mul: AdamW's 1 - lr * wd (1: none); l2: Adam's weight decay
    added to the gradient (0: none)."""
    for i in range(p.size):
        gi = -g[i] if maximize else g[i]
        pi = p[i]
        if l2 != 0:
            gi = gi + l2 * pi
        pi = pi * decay_mul
        mi = m[i] + one_minus_beta1 * (gi - m[i])
        vi = v[i] * beta2 + one_minus_beta2 * gi * gi
        m[i] = mi
        v[i] = vi
        p[i] = pi + neg_step_size * mi / (math.sqrt(vi) / bc2_sqrt + eps)


@numba.njit(cache=True, nogil=True)
def sgd_update(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
    """p, g, buf: flat arrays of one dtype (buf unused without momentum); tracejit.optim.SGD.step's op sequence:
    d = g (+ weight_decay * p), buf = d on the `first` step else momentum * buf + (1 - dampening) * d, then
    p -= lr * (d + momentum * buf if nesterov else buf)."""
    for i in range(p.size):
        d = -g[i] if maximize else g[i]
        if weight_decay != 0:
            d = d + weight_decay * p[i]
        if momentum != 0:
            b = d if first else buf[i] * momentum + (1 - dampening) * d
            buf[i] = b
            d = d + momentum * b if nesterov else b
        p[i] = p[i] - lr * d
