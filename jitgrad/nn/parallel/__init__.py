"""Data parallelism: `DataParallel` (torch's single-process wrapper, on this
process's one device) and `DistributedDataParallel` across processes (on
jitgrad.distributed, which needs mpi4py at init_process_group, not at import)."""
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
