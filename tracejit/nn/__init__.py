"""tracejit.nn: modules, parameters, functional ops, initializers and utilities (PyTorch's torch.nn)."""
from .parameter import Parameter, Buffer
from . import functional, init
from .modules import *  # noqa: F401,F403
from .modules import Module
from . import utils, parallel
