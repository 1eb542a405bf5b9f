"""Device memory for DeviceArrays: a caching pool over the driver's allocations,
and CUDA's out-of-memory error."""
import weakref

import numpy as np

from . import cuda


class OutOfMemoryError(RuntimeError):
    pass


def _nbytes_text(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} bytes"


# A driver allocation per temporary would cost more than the kernels that use
# it; freed buffers are kept by size class and handed out again, as torch's
# caching allocator does. All kernels run on one stream, so a buffer released
# while queued kernels still use it is only reused by kernels queued after them.
_free = {}  # size class in bytes -> [raw uint8 device arrays]
_pool = {"in_use": 0, "free": 0, "hits": 0, "misses": 0}


def _size_class(nbytes):
    """nbytes rounded up to a multiple of 512 B or of a quarter of its power of two
    (at most 25% waste; few classes, so buffers get reused)."""
    step = max(512, 1 << max(0, nbytes.bit_length() - 3))
    return -(-nbytes // step) * step


def _recycle(size, raw):
    _pool["in_use"] -= size
    _pool["free"] += size
    _free.setdefault(size, []).append(raw)


def empty_cache():
    """Give every pooled (unused) buffer back to the driver."""
    _free.clear()
    _pool["free"] = 0


def pool_stats():
    return dict(_pool)


def alloc(n, dtype):
    """A 1-D device buffer of n elements of `dtype`, from the pool when a freed one
    of its size class is there."""
    nbytes = max(n, 1) * dtype.itemsize
    size = _size_class(nbytes)
    lst = _free.get(size)
    if lst:
        raw = lst.pop()
        _pool["free"] -= size
        _pool["hits"] += 1
    else:
        raw = _driver_alloc(size)
        _pool["misses"] += 1
    buf = raw[:nbytes].view(dtype)
    _pool["in_use"] += size
    weakref.finalize(buf, _recycle, size, raw).atexit = False
    return buf


def _driver_alloc(size):
    """A new raw buffer; on out-of-memory, the pool is emptied and the allocation
    tried once more before a clear error naming the size (nothing changed)."""
    cu = cuda()
    for attempt in (0, 1):
        try:
            return cu.device_array(size, np.uint8)
        except (MemoryError, ValueError) as e:  # the simulator allocates with numpy
            detail = str(e)
        except Exception as e:  # the driver's CUDA_ERROR_OUT_OF_MEMORY, after numba's retry
            if "OUT_OF_MEMORY" not in str(e):
                raise
            detail = _memory_info(cu)
        if attempt == 0 and _pool["free"]:
            empty_cache()
            continue
        break
    raise OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {_nbytes_text(size)} ({detail}). Use smaller "
        "tensors or batches, or free memory: drop references to tensors (and graphs) you no "
        "longer need.") from None


def _memory_info(cu):
    try:
        free, total = cu.current_context().get_memory_info()
    except Exception:
        return "free memory unknown"
    return (f"GPU 0 has a total capacity of {_nbytes_text(total)} of which "
            f"{_nbytes_text(free)} is free")
