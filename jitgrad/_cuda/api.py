"""DeviceArrays with every numpy implementation registered: the module the CUDA
backend (jitgrad/backend/cuda.py) loads. array.py defines the type and its
FUNCTIONS table; each module imported here fills in the functions of one concern."""
from . import functions, indexing, linalg, reductions
from .array import DeviceArray, empty, full, host_fallbacks, to_device
from .indexing import scatter_add


def from_host(host):
    """A device copy of a numpy array: what a pickled DeviceArray unpickles as."""
    return to_device(host)


DeviceArray.unpickler = staticmethod(from_host)

__all__ = ["DeviceArray", "empty", "full", "host_fallbacks", "scatter_add", "to_device",
           "functions", "indexing", "linalg", "reductions"]
