"""Each collective against numpy on every dtype, on 2 ranks (and all at once on 4);
mismatched shapes across ranks raise on every rank."""
import pytest

from mpi_launch import mpirun, passed

CHECKS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather", "scatter"]


@pytest.fixture(scope="module")
def two_ranks():
    return mpirun(2, "worker_collectives.py", timeout=180)


@pytest.mark.parametrize("name", CHECKS)
def test_collective_matches_numpy(two_ranks, name):
    passed(two_ranks, name, 2)


def test_mismatched_shapes_raise_on_every_rank(two_ranks):
    passed(two_ranks, "mismatch", 2)
    assert two_ranks.returncode == 0, two_ranks.report()


def test_four_ranks():
    launch = mpirun(4, "worker_collectives.py", timeout=240)
    for name in CHECKS + ["mismatch"]:
        passed(launch, name, 4)
