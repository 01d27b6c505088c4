"""tracejit.nn.parallel: DistributedDataParallel (data parallelism over tracejit.distributed's MPI processes)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
