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


# ---- tasks on jitgrad's threads, BLAS at one thread ---------------------------------------------

def test_run_tasks_calls_each_task_once_on_several_threads():
    import threading
    import time
    ran = []

    def task(i):
        def run():
            time.sleep(0.005)  # long enough for a worker to take some
            ran.append((i, threading.get_ident()))
        return run
    threads.run_tasks([task(i) for i in range(8)], 2)
    assert sorted(i for i, _ in ran) == list(range(8))
    assert len({t for _, t in ran}) == 2


def test_run_tasks_on_one_thread_runs_them_in_order_on_the_caller():
    import threading
    ran = []
    threads.run_tasks([lambda i=i: ran.append((i, threading.get_ident())) for i in range(5)], 1)
    assert ran == [(i, threading.get_ident()) for i in range(5)]


def test_a_task_error_reaches_the_caller_after_the_other_tasks():
    ran = []

    def bad():
        raise ValueError("task failed")
    tasks = [lambda: ran.append(0), bad] + [lambda i=i: ran.append(i) for i in range(1, 6)]
    with pytest.raises(ValueError, match="task failed"):
        threads.run_tasks(tasks, 2)
    assert sorted(ran) == list(range(6))


def test_a_forked_child_starts_its_own_workers(monkeypatch):
    monkeypatch.setattr(threads, "_workers", [None, 3, -1])  # a parent's (another pid) threads
    ran = []
    threads.run_tasks([lambda i=i: ran.append(i) for i in range(4)], 2)
    assert sorted(ran) == list(range(4))
    assert threads._workers[1] >= 1 and threads._workers[2] == os.getpid()


def test_one_blas_thread_limits_blas_inside_and_restores_it():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def counts():
        return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    before = counts()
    with threads.one_blas_thread():
        assert counts() and set(counts()) == {1}
        with threads.one_blas_thread():  # nested: still one until the outer one leaves
            pass
        assert set(counts()) == {1}
    assert counts() == before
