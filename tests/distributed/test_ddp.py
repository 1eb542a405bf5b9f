"""DistributedDataParallel on 2 ranks (see worker_ddp.py for what each scenario checks)."""
import re

import pytest

from mpi_launch import mpirun, passed

SCENARIOS = ["equal", "overlap", "progress", "no_sync", "unused", "compile", "buffers", "model_mismatch"]


@pytest.fixture(scope="module")
def two_ranks():
    return mpirun(2, "worker_ddp.py", *SCENARIOS, timeout=300)


def test_training_equals_one_process_on_the_concatenated_batch(two_ranks):
    """SGD with momentum and Adam, 4 steps, backward fusion on and off, with and
    without gradient_as_bucket_view; the replicas stay identical."""
    passed(two_ranks, "equal", 2)


def test_reductions_start_before_backward_ends(two_ranks):
    passed(two_ranks, "overlap", 2)
    for rank in (0, 1):
        m = re.search(rf"TIMELINE {rank} buckets=(\d+) first_launch=([\d.]+) last_hook=([\d.]+)",
                      two_ranks.stdout)
        assert m and int(m.group(1)) > 2 and float(m.group(2)) < float(m.group(3)), \
            two_ranks.report()


def test_progress_thread_reduces_during_backward(two_ranks):
    passed(two_ranks, "progress", 2)


def test_no_sync_accumulates_locally(two_ranks):
    passed(two_ranks, "no_sync", 2)


def test_unused_parameters(two_ranks):
    passed(two_ranks, "unused", 2)


def test_compiled_step_breaks_the_graph_and_matches_eager(two_ranks):
    passed(two_ranks, "compile", 2)


def test_buffers_come_from_rank_0(two_ranks):
    passed(two_ranks, "buffers", 2)


def test_different_models_raise_on_every_rank(two_ranks):
    passed(two_ranks, "model_mismatch", 2)
    assert two_ranks.returncode == 0, two_ranks.report()
