"""jitgrad.set_num_threads / get_num_threads / JITGRAD_NUM_THREADS, as torch's."""
import os
import subprocess
import sys
import textwrap

import pytest

import jitgrad
from jitgrad.kernels import threads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def restore_threads():
    numba = pytest.importorskip("numba")
    before = numba.get_num_threads()
    yield numba
    threads._requested.clear()
    numba.set_num_threads(before)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=before, user_api="blas")


def test_set_num_threads_applies_to_numba_pool(restore_threads):
    numba = restore_threads
    jitgrad.set_num_threads(1)
    assert jitgrad.get_num_threads() == 1
    assert numba.get_num_threads() == 1
    big = numba.config.NUMBA_NUM_THREADS + 5  # capped at the pool Numba started with
    jitgrad.set_num_threads(big)
    assert jitgrad.get_num_threads() == numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS


def test_set_num_threads_limits_blas(restore_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    jitgrad.set_num_threads(1)
    blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas)


@pytest.mark.parametrize("bad, message", [(0, "expects a positive integer"), (-2, "expects a positive integer"),
                                          (1.5, "expects an int, but got float"),
                                          (True, "expects an int, but got bool")])
def test_bad_counts_raise_as_torch(bad, message):
    with pytest.raises(RuntimeError, match=f"set_num_threads {message}"):
        jitgrad.set_num_threads(bad)
    assert not threads._requested


def test_bad_counts_match_torch_wording():
    torch = pytest.importorskip("torch")
    for bad in (0, 1.5):
        with pytest.raises(RuntimeError) as theirs:
            torch.set_num_threads(bad)
        with pytest.raises(RuntimeError) as ours:
            jitgrad.set_num_threads(bad)
        assert str(ours.value).startswith(str(theirs.value))


def test_env_sizes_the_pool_in_a_new_process():
    script = textwrap.dedent("""
        import jitgrad, numba
        x = jitgrad.ones(1 << 19)
        (x.sin() * 2).sum()
        print(jitgrad.get_num_threads(), numba.config.NUMBA_NUM_THREADS, numba.get_num_threads())
    """)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    env["JITGRAD_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1", "1"]


def test_bad_env_is_reported_with_the_fix(monkeypatch):
    monkeypatch.setenv("JITGRAD_NUM_THREADS", "many")
    with pytest.raises(RuntimeError, match="JITGRAD_NUM_THREADS must be a positive integer"):
        threads.pool_size_from_env()
