"""How many threads jitgrad's kernels use: `set_num_threads` / `get_num_threads`
as torch's, and the `JITGRAD_NUM_THREADS` environment variable.

Two thread pools run jitgrad's work: Numba's (parallel elementwise and fused
kernels) and numpy's BLAS (matmul). A process that also uses torch has torch's
OpenMP pool too; more busy threads than cores make every pool wait for the
others, so a count set here applies to both of jitgrad's pools. Numba starts
its pool lazily: the count is applied when Numba starts, or at once if it has.
"""
import os
import sys

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
