"""Compiler passes, each `Graph -> Graph` in its own module."""
from .autodiff import autodiff
from .cse import cse
from .dce import dce
from .partition import partition
from .simplify import simplify
from .transpose import transposed_products

DEFAULT_PASSES = (transposed_products, simplify, cse, dce)
