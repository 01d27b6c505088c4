"""Scalar helpers of the ops' `expr` templates written once and compiled for every target.

Each helper is a factory `(T, primitives...) -> function`: `T` casts to the compute dtype (the argument's numba
type in a CPU `@overload`, a numpy scalar type for CUDA: a bare float literal would promote float32 work to
float64) and the primitives are the target's math (`tracejit.kernels.cpu.vmath`'s vectorizable functions on the CPU, the
per-dtype device functions of `numba_cuda/rt.py` on CUDA). `numba_cpu/rt.py` returns the functions from its
overloads (inlined into the fused loop); `numba_cuda/rt.py` compiles them with `cuda.jit(device=True)`.
Both runtimes' disk-cache keys cover this file.
"""
import math

INV_SQRT_2 = 1.0 / math.sqrt(2.0)
SQRT_2_PI = math.sqrt(2.0 / math.pi)


def gelu_none(T, erf):
    def f(x):
        return T(T(0.5) * x * (T(1) + erf(x * T(INV_SQRT_2))))
    return f


def gelu_tanh(T, tanh):
    def f(x):
        return T(T(0.5) * x * (T(1) + tanh(T(SQRT_2_PI) * (x + T(0.044715) * x * x * x))))
    return f


def softplus(T, maximum, exp, log1p):
    def f(x, beta, threshold):
        bx = T(x * beta)
        if bx > threshold:
            return x
        # logaddexp(bx, 0) = max(bx, 0) + log1p(exp(-|bx|)), like numpy
        return T((maximum(bx, T(0)) + log1p(exp(-abs(bx)))) / beta)
    return f


def relu(T):
    def f(x):
        return x if (x > T(0) or x != x) else T(0)
    return f


def int_pow(T):
    """x ** y of integers: exact, wrapping as numpy does; a negative exponent (numpy raises) gives what
    PyTorch gives (1 for x == 1, +-1 for x == -1, else 0)."""
    def f(x, y):
        if y < 0:
            if x == 1:
                return T(1)
            if x == -1:
                return T(1) if y % 2 == 0 else T(-1)
            return T(0)
        r = T(1)
        b = x
        e = y
        while e:
            if e & 1:
                r = T(r * b)
            b = T(b * b)
            e >>= 1
        return r
    return f
