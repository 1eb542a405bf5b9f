"""The process group without mpiexec (a world of size 1), the errors raised before
any communication, and mpi4py staying out of `import jitgrad`."""
import subprocess
import sys

import pytest

import jitgrad
import jitgrad.distributed as dist
from mpi_launch import ROOT, HERE, worker_env


def run_python(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=worker_env(), capture_output=True,
                          text=True, timeout=120)


def test_import_jitgrad_does_not_import_mpi4py():
    proc = run_python("-c", "import sys, jitgrad, jitgrad.distributed, jitgrad.nn.parallel; "
                            "print('mpi4py' in sys.modules, 'mpi4py.MPI' in sys.modules)")
    assert proc.stdout.split() == ["False", "False"], proc.stderr


def test_missing_mpi4py_says_what_to_install():
    proc = run_python("-c", "import sys; sys.modules['mpi4py'] = None\n"
                            "import jitgrad.distributed as dist\n"
                            "print(dist.is_available())\n"
                            "dist.init_process_group()")
    assert proc.returncode == 1
    assert "Distributed package doesn't have MPI built in" in proc.stderr, proc.stderr
    assert "pip install 'jitgrad[mpi]'" in proc.stderr, proc.stderr


def test_world_of_size_one_outside_mpiexec():
    pytest.importorskip("mpi4py")
    proc = run_python(f"{HERE}/worker_single.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("size_one", "errors", "ddp_size_one", "reinit"):
        assert f"OK {name} 0" in proc.stdout, proc.stdout + proc.stderr


def test_only_the_mpi_backend():
    with pytest.raises(ValueError, match="backend 'nccl' is not available: jitgrad.distributed "
                                         "runs on MPI; pass backend='mpi'"):
        dist.init_process_group("nccl")


def test_no_group_yet():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(jitgrad.ones(2))


def test_debug_level_from_the_environment(monkeypatch):
    monkeypatch.setenv("JITGRAD_DISTRIBUTED_DEBUG", "detail")
    assert dist.get_debug_level() is dist.DebugLevel.DETAIL
    monkeypatch.setenv("JITGRAD_DISTRIBUTED_DEBUG", "LOUD")
    with pytest.raises(ValueError, match="JITGRAD_DISTRIBUTED_DEBUG='LOUD' is not a debug level"):
        dist.get_debug_level()
