"""Compiler passes, each in its own module: `Graph -> Graph` (autodiff, simplify, cse, dce, fusion), except
`partition`, which splits a joint forward+backward graph into `(forward graph, backward graph, n_saved)`."""
from .autodiff import autodiff
from .cse import cse
from .dce import dce
from .partition import partition
from .simplify import simplify
from .transpose import transposed_products

DEFAULT_PASSES = (transposed_products, simplify, cse, dce)
