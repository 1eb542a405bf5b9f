"""Data-parallel training across processes: `DistributedDataParallel` (on
jitgrad.distributed, which needs mpi4py at init_process_group, not at import)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
