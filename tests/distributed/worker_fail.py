"""Run under mpiexec by test_failure.py: the last rank raises while the others
wait in a collective (`collective`) or in DDP's gradient reduction (`ddp`).
The job must end (MPI_Abort from the exception hook), not hang."""
import sys

import jitgrad
import jitgrad.distributed as dist
from jitgrad import nn
from jitgrad.nn.parallel import DistributedDataParallel


def main(where):
    dist.init_process_group("mpi")
    rank, n = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(nn.Linear(4, 2)) if where == "ddp" else None
    print(f"STARTED {where} {rank}", flush=True)
    if rank == n - 1:
        raise ValueError(f"rank {rank} fails on purpose")
    if where == "ddp":
        model(jitgrad.ones(3, 4)).sum().backward()  # waits for the failed rank's gradients
    else:
        dist.all_reduce(jitgrad.ones(3))
    print(f"UNREACHABLE {where} {rank}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
