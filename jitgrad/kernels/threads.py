"""How many threads jitgrad's kernels use: `set_num_threads` / `get_num_threads`
as torch's, and the `JITGRAD_NUM_THREADS` environment variable.

Two thread pools run jitgrad's work: Numba's (parallel elementwise and fused
kernels) and numpy's BLAS (matmul). A process that also uses torch has torch's
OpenMP pool too; more busy threads than cores make every pool wait for the
others, so a count set here applies to both of jitgrad's pools. Numba starts
its pool lazily: the count is applied when Numba starts, or at once if it has.

`run_tasks` runs independent tasks (blocks of a matrix product, each a
single-threaded BLAS call under `one_blas_thread`) on the caller and
jitgrad's own worker threads, which sleep between calls instead of spinning.
"""
import contextlib
import os
import queue
import sys
import threading

_ENV = "JITGRAD_NUM_THREADS"
_requested = []  # [n] once set_num_threads was called


def _check(n, where):
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"{where} expects an int, but got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"{where} expects a positive integer, got {n}")
    return n


def _from_env():
    text = os.environ.get(_ENV)
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise RuntimeError(f"{_ENV} must be a positive integer, got {text!r}; unset it to "
                           f"use every core")
    return n


def set_num_threads(n):
    """Use at most `n` threads in jitgrad's multi-threaded kernels and in numpy's
    BLAS (matmul) from now on, as torch.set_num_threads. BLAS is limited through
    threadpoolctl when it is installed (otherwise set OPENBLAS_NUM_THREADS or
    OMP_NUM_THREADS before starting Python). Numba can only lower its thread count
    below the pool it started with (NUMBA_NUM_THREADS, or JITGRAD_NUM_THREADS at
    start-up); a larger `n` is capped there."""
    _check(n, "set_num_threads")
    _requested[:] = [n]
    _apply(n, blas=True)


def get_num_threads():
    """The number of threads jitgrad's kernels use, as torch.get_num_threads."""
    n = _requested[0] if _requested else _from_env()
    if "numba" in sys.modules:
        import numba
        cap = numba.config.NUMBA_NUM_THREADS
        return min(n, cap) if n else cap
    return n or os.cpu_count() or 1


def _apply(n, blas):
    if blas:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            threadpool_limits(limits=n, user_api="blas")
    if "numba.np.ufunc.parallel" in sys.modules:  # Numba's pool exists or can start cheaply
        import numba
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def pool_size_from_env():
    """Make JITGRAD_NUM_THREADS the size of Numba's pool (NUMBA_NUM_THREADS, read when
    Numba is imported) unless NUMBA_NUM_THREADS is set."""
    n = _from_env()
    if n is not None:
        os.environ.setdefault("NUMBA_NUM_THREADS", str(n))


def after_numba_start():
    """Apply a count that set_num_threads or JITGRAD_NUM_THREADS asked for to
    Numba's pool, once Numba is imported."""
    n = _requested[0] if _requested else _from_env()
    if n is not None:
        _apply(n, blas=not _requested)


# ---- BLAS at one thread -------------------------------------------------------------------------

_blas = []         # [threadpoolctl's controllers of the loaded BLAS libraries], once looked up
_one = [0, ()]     # (callers inside one_blas_thread, the thread counts it replaced)
_one_lock = threading.Lock()


def _blas_libraries():
    if not _blas:
        try:
            from threadpoolctl import ThreadpoolController
            libs = ThreadpoolController().select(user_api="blas").lib_controllers
        except Exception:  # optional: not installed, or a BLAS it cannot drive
            libs = []
        _blas[:] = [tuple(libs)]
    return _blas[0]


def blas_controllable():
    """Whether `one_blas_thread` can limit BLAS (threadpoolctl is installed and
    finds numpy's BLAS)."""
    return bool(_blas_libraries())


@contextlib.contextmanager
def one_blas_thread():
    """BLAS calls inside run on their calling thread only: the caller splits its
    products over threads itself (`run_tasks`). Nested and concurrent uses share
    one setting; the last to leave restores the counts found on entry."""
    libs = _blas_libraries()
    with _one_lock:
        if _one[0] == 0:
            _one[1] = tuple(lib.get_num_threads() for lib in libs)
            for lib in libs:
                lib.set_num_threads(1)
        _one[0] += 1
    try:
        yield
    finally:
        with _one_lock:
            _one[0] -= 1
            if _one[0] == 0:
                for lib, n in zip(libs, _one[1]):
                    lib.set_num_threads(n)


# ---- tasks on jitgrad's threads -----------------------------------------------------------------

class _Batch:
    """Tasks that the caller and the workers take one at a time, each thread the next
    one not yet taken whenever it is free: a thread slowed by another process on its
    core does less of the work instead of holding the others up."""
    __slots__ = ("tasks", "taken", "left", "lock", "finished", "error")

    def __init__(self, tasks):
        self.tasks, self.taken, self.left = tasks, 0, len(tasks)
        self.lock = threading.Lock()
        self.finished = threading.Lock()  # released when the last task is done
        self.finished.acquire()
        self.error = None

    def work(self):
        tasks, lock = self.tasks, self.lock
        while True:
            with lock:
                i = self.taken
                if i == len(tasks):
                    return
                self.taken = i + 1
            try:
                tasks[i]()
            except BaseException as e:  # handed to the caller
                self.error = e
            with lock:
                self.left -= 1
                last = self.left == 0
            if last:
                self.finished.release()


_workers = [None, 0, -1]  # the queue the workers wait on, how many there are, the pid they run in


def _serve(todo):
    while True:
        todo.get().work()


def _worker_queue(n):
    """The queue of `n` (or more) worker threads, started here as needed (a forked
    child has the parent's list but none of its threads)."""
    if _workers[2] != os.getpid():
        _workers[:] = [queue.SimpleQueue(), 0, os.getpid()]
    todo = _workers[0]
    while _workers[1] < n:
        threading.Thread(target=_serve, args=(todo,), daemon=True,
                         name=f"jitgrad-worker-{_workers[1]}").start()
        _workers[1] += 1
    return todo


_workers_lock = threading.Lock()


def run_tasks(tasks, n=None):
    """Call each of `tasks` (callables) once, on up to `n` threads (default
    get_num_threads()): the caller and workers that sleep between calls. Returns
    when all are done; the first error a task raised is raised here."""
    n = min(len(tasks), get_num_threads() if n is None else n)
    if n <= 1:
        for task in tasks:
            task()
        return
    with _workers_lock:
        todo = _worker_queue(n - 1)
    batch = _Batch(tasks)
    for _ in range(n - 1):
        todo.put(batch)  # a worker that comes after the caller took the last task returns at once
    batch.work()
    batch.finished.acquire()
    if batch.error is not None:
        raise batch.error
