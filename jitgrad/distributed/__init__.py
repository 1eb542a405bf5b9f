"""Data-parallel training across processes and machines, on MPI (torch.distributed's
names). Launch with `mpiexec -n 4 python train.py`; each process calls
`init_process_group("mpi")`, then `jitgrad.nn.parallel.DistributedDataParallel`
averages gradients, or the collectives below move tensors. Needs mpi4py
(pip install 'jitgrad[mpi]'); importing this package does not import it.
See docs/distributed.md.
"""
from .collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor, all_reduce, barrier,
                          broadcast, gather, reduce_scatter, reduce_scatter_tensor, scatter)
from .process_group import (DebugLevel, destroy_process_group, get_backend, get_debug_level,
                            get_rank, get_world_size, init_process_group, is_available,
                            is_initialized, is_mpi_available, set_debug_level)
from .sampler import DistributedSampler

__all__ = ["init_process_group", "destroy_process_group", "is_available", "is_mpi_available",
           "is_initialized", "get_rank", "get_world_size", "get_backend", "DebugLevel",
           "get_debug_level", "set_debug_level", "ReduceOp", "Work", "all_reduce", "broadcast",
           "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
           "gather", "scatter", "barrier", "DistributedSampler"]
