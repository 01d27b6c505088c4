"""Define-by-run automatic differentiation (PyTorch's autograd API)."""
from . import functional, graph, profiler
from .anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled,
                           set_detect_anomaly)
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

Variable = None  # set to Tensor by tracejit/__init__ (legacy alias)
