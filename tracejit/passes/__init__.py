"""Compiler passes, each in its own module: `Graph -> Graph` (autodiff, batch_matmuls, simplify, cse, dce, fusion), except
`partition`, which splits a joint forward+backward graph into `(forward graph, backward graph, n_saved)`."""
from .autodiff import autodiff
from .batch_matmul import batch_matmuls  # noqa: F401  (a backend's, after decompose: addmm -> matmul)
from .cse import cse
from .dce import dce
from .partition import partition
from .simplify import simplify
from .transpose import transposed_products

DEFAULT_PASSES = (transposed_products, simplify, cse, dce)
