"""tracejit: tensors with define-by-run autograd (eager) and a tracing JIT compiler (compiled).

`import tracejit as torch` runs PyTorch-style code for the covered API.
"""
__version__ = "0.1.0"


def _kernels_beside():
    """The hand-written numba kernels are the package `tracejit.kernels`. pyproject.toml installs the top-level
    `kernels/` folder there; run from the source tree (or an editable install), it is registered from the folder
    beside this package, before anything imports it."""
    import importlib.util
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(here), "kernels")
    if os.path.isdir(os.path.join(here, "kernels")) or not os.path.isfile(os.path.join(src, "__init__.py")):
        return
    spec = importlib.util.spec_from_file_location(__name__ + ".kernels", os.path.join(src, "__init__.py"),
                                                  submodule_search_locations=[src])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    setattr(sys.modules[__name__], "kernels", mod)


_kernels_beside()

import numpy as _np  # noqa: E402

from . import _malloc
_malloc.tune()

from . import _dtype  # noqa: E402
from ._dtype import (bool_ as bool, uint8, int8, int16, int32, int64, float16, float32, float64, dtype,
                     get_default_dtype, set_default_dtype, promote_types)
from ._tensor import Tensor, device
from ._memory_format import memory_format, contiguous_format, channels_last, channels_last_3d, preserve_format
from .size import Size
from .ops import registry as _registry
from .ops import elementwise as _E, reduction as _R, shape_ops as _S, indexing as _I, linalg as _L, nn_ops as _N
from .ops import random_ops as _random_ops, methods as _methods  # noqa: F401  (registers ops and methods)
from .ops import collective as _collective  # noqa: F401  (tracejit.distributed's ops)
from .ops import control as _control  # noqa: F401  (the scan loop op)
from .ops.elementwise import *  # noqa: F401,F403
from .ops.reduction import *  # noqa: F401,F403
from .ops.shape_ops import *  # noqa: F401,F403
from .ops.indexing import *  # noqa: F401,F403
from .ops.linalg import *  # noqa: F401,F403
from .ops.nn_ops import softmax, log_softmax
from .ops.reduction import max, min, sum, all, any  # noqa: A004
from .ops.elementwise import abs, pow, round  # noqa: A004
from .creation import *  # noqa: F401,F403
from .creation import _standard_gamma  # noqa: F401,E402  (torch._standard_gamma)
from .random import Generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state, default_generator
from . import autograd
from .autograd import no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled
from .autograd.grad_mode import is_inference_mode_enabled
from .autograd.anomaly_mode import is_anomaly_enabled, is_anomaly_check_nan_enabled, set_anomaly_enabled
from .tracing.errors import TraceError
from .tracing.check import CheckError
from . import nn

long, int, float, double, half, short = int64, int32, float32, float64, float16, int16
autograd.Variable = Tensor


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(t):
    return t.dtype.is_floating_point


def numel(t):
    return t.numel()


def is_complex(t):
    return t.is_complex()


def is_conj(t):
    return t.is_conj()


def is_inference(t):
    return t.is_inference()


def conj(t):
    """The conjugate of a real tensor is the tensor itself (tracejit has no complex dtypes)."""
    return t.conj()


def resolve_conj(t):
    return t


resolve_neg = resolve_conj


def conj_physical(t):
    return t.conj_physical()


def result_type(a, b):
    return _dtype.result_type(a, b)


def can_cast(from_, to):
    return from_._cat <= to._cat


def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = [t.numel() for t in tensors]
    if indexing == "xy" and len(tensors) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        j = i
        if indexing == "xy" and len(tensors) >= 2 and i < 2:
            j = 1 - i
        view[j] = -1
        out.append(t.reshape(view).expand(shape))
    return tuple(out)


def cdist(x1, x2, p=2.0):
    d = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return vector_norm(d, p, -1)  # noqa: F405


from . import config
from . import cuda  # noqa: E402  (numba.cuda itself is imported only when CUDA is used)
from .tracing.trace import trace, make_graph, TracedFunction
from ._compile import compile  # noqa: E402,A001  (torch.compile's name: the compiler is trace)
from .scan import scan  # noqa: E402
from . import amp, backends  # noqa: E402  (torch.amp; torch.backends' switches: tracejit/backends/_torch_flags.py)
from .amp import autocast, is_autocast_enabled  # noqa: E402

# nn/optim/data/saving (issue 5)
from . import optim, utils, distributed
from .serialization import save, load
from .nn.functional import conv1d, conv2d, max_pool1d, max_pool2d, avg_pool1d, layer_norm  # noqa: E402
from .explain import explain  # noqa: E402,F811  (tracejit.explain(fn, *args): see tracejit/explain.py)
from ._out import add_out as _add_out  # noqa: E402
_add_out(globals(), (_E,))      # out= on the creation functions and the ops PyTorch gives it (tracejit/_out.py)


def set_num_threads(n):
    """Threads for the CPU work (torch.set_num_threads): numpy's OpenBLAS (matmul) and numba's parallel kernels
    (for the calling thread; numba's pool, one thread per core, is the upper bound)."""
    import builtins
    if isinstance(n, builtins.bool) or not isinstance(n, (builtins.int, _np.integer)) or n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n!r}")
    n = builtins.int(n)
    from tracejit.kernels.cpu.blas import blas_threads     # (tracejit.kernels.cpu first: its numba settings precede numba's pool)
    blas_threads(n)
    import numba
    numba.set_num_threads(builtins.min(n, numba.config.NUMBA_NUM_THREADS))


def get_num_threads():
    """The number of threads set_num_threads set (numba's count for this thread, else OpenBLAS's)."""
    import sys as _sys
    if "numba" in _sys.modules:
        import numba
        return numba.get_num_threads()
    from tracejit.kernels.cpu.blas import blas_threads
    return blas_threads() or 1


def cache_info():
    """The on-disk cache of generated kernels: path, entries, bytes, compilations and hits in this process."""
    from .backends.diskcache import cache_info as _info
    return _info()


def clear_cache():
    """Remove the generated kernels cached on disk (compiled functions in memory keep working)."""
    from .backends.diskcache import clear_cache as _clear
    return _clear()


_SWITCHES = {"matmul_precision": "highest", "deterministic": False, "deterministic_warn_only": False}


def set_float32_matmul_precision(precision):
    """torch.set_float32_matmul_precision: "highest", "high" or "medium" is kept and read back; tracejit's float32
    matmuls are float32 whatever it is (no TF32 or bfloat16 passes)."""
    if precision not in ("highest", "high", "medium"):
        import warnings
        warnings.warn(f"set_float32_matmul_precision: {precision!r} is not one of 'highest', 'high', 'medium': "
                      f"ignored", UserWarning, stacklevel=2)
        return
    _SWITCHES["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _SWITCHES["matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """torch.use_deterministic_algorithms: kept and read back (tracejit has no nondeterministic variant of an op
    to switch off)."""
    import builtins
    _SWITCHES["deterministic"], _SWITCHES["deterministic_warn_only"] = builtins.bool(mode), builtins.bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _SWITCHES["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _SWITCHES["deterministic_warn_only"]

from . import linalg  # noqa: E402  (torch.linalg: tracejit/linalg.py; its ops: tracejit/ops/linalg.py)
from . import jit  # noqa: E402  (torch.jit: tracejit/jit.py)
from . import distributions  # noqa: E402  (torch.distributions: tracejit/distributions/)
from . import special  # noqa: E402  (torch.special: tracejit/special.py)
from . import func  # noqa: E402  (torch.func: tracejit/func.py)
from .func import vmap  # noqa: E402
from .ops.composites import *  # noqa: E402,F401,F403  (functions composed of other ops: tracejit/ops/composites.py)
from .ops.scan_ops import cummax, cummin, logcumsumexp  # noqa: E402,F401
from .ops.lookup_ops import searchsorted, bucketize, histc, bincount, mode  # noqa: E402,F401
