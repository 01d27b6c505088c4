"""tracejit.distributed: torch.distributed's API on MPI (mpi4py), for data-parallel training across processes.

    mpiexec -n 2 python train.py          # in train.py: dist.init_process_group("mpi")

mpi4py is optional (`pip install 'tracejit[mpi]'` brings mpi4py and mpich); importing this module never needs it,
`init_process_group` does. See c10d.py for the process groups and collectives, _mpi.py for how they run.
"""
from .c10d import (ReduceOp, Backend, ProcessGroup, GroupMember, group, Work, DEFAULT_TIMEOUT,  # noqa: F401
                   is_available, is_mpi_available, is_gloo_available, is_nccl_available, is_initialized,
                   init_process_group, destroy_process_group, get_rank, get_world_size, get_backend,
                   get_process_group_ranks, get_global_rank, get_group_rank, new_group,
                   all_reduce, broadcast, all_gather, all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor,
                   reduce, gather, scatter, barrier, monitored_barrier)
