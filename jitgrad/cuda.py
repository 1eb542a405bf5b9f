"""`jitgrad.cuda`: device queries. This build has no CUDA backend yet, so
`is_available()` is False and anything that needs a GPU raises a clear error."""
from .tensor import CUDA_UNAVAILABLE


def is_available():
    return False


def device_count():
    return 0


def synchronize(device=None):
    raise RuntimeError(CUDA_UNAVAILABLE)
