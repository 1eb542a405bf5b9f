"""CUDA tensors in the collectives and in DDP, staged through host memory (on
Numba's CUDA simulator when there is no GPU)."""
import pytest

from mpi_launch import mpirun, passed


def test_cuda_tensors_go_through_host_memory():
    launch = mpirun(2, "worker_cuda.py", timeout=300, NUMBA_ENABLE_CUDASIM="1")
    if launch.ranks_reporting("SKIP", "cuda"):
        pytest.skip("no CUDA here, not even Numba's simulator (pip install numba-cuda)")
    passed(launch, "collectives", 2)
    passed(launch, "ddp", 2)
