"""A size-bucketed pool for large arrays.

Freshly allocated big arrays cost page faults on first touch (at 1e7 float32
elements that is most of an eager step's time). Arrays of at least
MIN_BYTES come from recycled buffers instead: each array is exposed through
a small owner object (via `__array_interface__`), so numpy's views keep the
owner alive and the buffer returns to the pool only when the last view dies.
The pool keeps at most `MAX_FREE_BYTES` of idle buffers and `clear_pool()`
releases them all.
"""
import weakref

import numpy as np

MIN_BYTES = 1 << 20
MAX_FREE_BYTES = 1 << 30
_BUCKET = 1 << 16

_free = {}  # bucket bytes -> [raw uint8 arrays]
_stats = {"free_bytes": 0, "hits": 0, "misses": 0}


class _Owner:
    __slots__ = ("raw", "__array_interface__", "__weakref__")


def _recycle(bucket, raw):
    if _stats["free_bytes"] + bucket <= MAX_FREE_BYTES:
        _free.setdefault(bucket, []).append(raw)
        _stats["free_bytes"] += bucket


def empty(shape, dtype):
    """Like np.empty; large arrays reuse pooled memory."""
    dtype = np.dtype(dtype)
    if isinstance(shape, int):
        shape = (shape,)
    n = 1
    for s in shape:
        n *= s
    nbytes = n * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    bucket = -(-nbytes // _BUCKET) * _BUCKET
    lst = _free.get(bucket)
    if lst:
        raw = lst.pop()
        _stats["free_bytes"] -= bucket
        _stats["hits"] += 1
    else:
        raw = np.empty(bucket, np.uint8)
        _stats["misses"] += 1
    owner = _Owner()
    owner.raw = raw
    owner.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str,
                                 "data": (raw.ctypes.data, False), "version": 3}
    arr = np.asarray(owner)
    weakref.finalize(owner, _recycle, bucket, raw)
    return arr


def clear_pool():
    """Release every idle pooled buffer to the system."""
    _free.clear()
    _stats["free_bytes"] = 0


def pool_stats():
    return dict(_stats)
