"""`jitgrad.cuda`: device queries and synchronization.

CUDA tensors need NVIDIA's numba-cuda (`pip install 'jitgrad[cuda]'`) and a
GPU, or Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1 before numba is
imported). Nothing here imports the CUDA stack until it is asked a question.
"""


def is_available():
    """True if `device="cuda"` works here."""
    from . import _cuda  # the CUDA runtime loads numba: only when asked
    return _cuda.unavailable_reason() is None


def device_count():
    return 1 if is_available() else 0


def _numba_cuda():
    from . import _cuda  # the CUDA runtime loads numba: only when asked
    return _cuda.cuda()


def synchronize(device=None):
    """Wait for every kernel launched so far to finish."""
    _numba_cuda().synchronize()


def current_device():
    _numba_cuda()
    return 0


def get_device_name(device=None):
    dev = _numba_cuda().get_current_device()
    name = getattr(dev, "name", b"CUDA simulator")
    return name.decode() if isinstance(name, bytes) else str(name)


def is_simulator():
    """True when kernels run under Numba's CUDA simulator (no GPU involved)."""
    from . import _cuda  # the CUDA runtime loads numba: only when asked
    return is_available() and _cuda.simulator()


def host_fallbacks():
    """{numpy function: calls} that ran on the host for lack of a CUDA kernel
    (each warns once). A training step of the documented ops makes none."""
    from ._cuda.array import host_fallbacks as counts  # the CUDA runtime loads numba: only when asked
    return counts()


def memory_allocated(device=None):
    """Bytes of device memory held by live tensors (rounded to jitgrad's size classes)."""
    from ._cuda.memory import pool_stats  # the CUDA runtime loads numba: only when asked
    return pool_stats()["in_use"]


def memory_reserved(device=None):
    """Bytes held by jitgrad's memory pool: live tensors plus freed buffers kept for reuse."""
    from ._cuda.memory import pool_stats  # the CUDA runtime loads numba: only when asked
    stats = pool_stats()
    return stats["in_use"] + stats["free"]


def empty_cache():
    """Give the pool's unused buffers back to the driver (live tensors keep theirs)."""
    from ._cuda.memory import empty_cache as release  # the CUDA runtime loads numba: only when asked
    release()


def __getattr__(name):
    if name == "OutOfMemoryError":
        from ._cuda.memory import OutOfMemoryError  # the CUDA runtime loads numba: only when asked
        return OutOfMemoryError
    raise AttributeError(f"module 'jitgrad.cuda' has no attribute '{name}'")
