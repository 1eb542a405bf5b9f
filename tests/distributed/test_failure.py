"""A rank that raises ends the whole job (MPI_Abort), well within the time limit,
while the other ranks wait for it in a collective or in DDP's backward."""
import pytest

from mpi_launch import mpirun

LIMIT = 120  # seconds: the launch fails as a hang past this


@pytest.mark.parametrize("where", ["collective", "ddp"])
def test_failing_rank_aborts_the_job(where):
    launch = mpirun(2, "worker_fail.py", where, timeout=LIMIT)
    assert launch.returncode != 0, launch.report()
    assert launch.ranks_reporting("STARTED", where) == [0, 1], launch.report()
    assert "UNREACHABLE" not in launch.stdout, launch.report()
    assert "ValueError: rank 1 fails on purpose" in launch.stderr, launch.report()
    assert "rank 1 of 2 raised ValueError; aborting the job (MPI_Abort)" in launch.stderr, \
        launch.report()
