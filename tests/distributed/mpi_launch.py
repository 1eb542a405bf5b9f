"""Launching the distributed tests: each runs a worker script of this folder under
`mpiexec -n N` in a subprocess with a time limit, and reads what the ranks print.
They skip when mpi4py or mpiexec is missing (pip install 'jitgrad[mpi]')."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def worker_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    # Header exchange before every collective: a mismatch is an error, not a hang.
    env["JITGRAD_DISTRIBUTED_DEBUG"] = "DETAIL"
    # Ranks share the cores: one thread each.
    env.update(OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    env.update(extra)
    return env


class Launch:
    """The result of one mpiexec run: exit status, output, seconds taken."""

    def __init__(self, proc, seconds):
        self.returncode, self.stdout, self.stderr = proc.returncode, proc.stdout, proc.stderr
        self.seconds = seconds

    def ranks_reporting(self, word, name):
        """The ranks that printed `<word> <name> <rank>` (mpiexec may interleave the
        ranks' lines, so this searches rather than splits lines)."""
        return sorted(int(r) for r in re.findall(rf"{word} {re.escape(name)} (\d+)", self.stdout))

    def report(self):
        return f"exit {self.returncode} after {self.seconds:.1f} s\n{self.stdout}\n{self.stderr}"


def mpirun(nprocs, script, *args, timeout=300, **env):
    """Run tests/distributed/<script> on `nprocs` ranks; fail (not hang) past `timeout` s."""
    if importlib.util.find_spec("mpi4py") is None or shutil.which("mpiexec") is None:
        pytest.skip("mpi4py and mpiexec are needed: pip install 'jitgrad[mpi]'")
    cmd = ["mpiexec", "-n", str(nprocs), sys.executable, os.path.join(HERE, script), *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=worker_env(**env), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish within {timeout} s (a hang)\n"
                    f"{e.stdout}\n{e.stderr}")
    return Launch(proc, time.perf_counter() - start)


def passed(launch, name, nprocs):
    """Every rank printed `OK <name>`."""
    ranks = launch.ranks_reporting("OK", name)
    assert ranks == list(range(nprocs)), f"{name}: not every rank passed\n{launch.report()}"
