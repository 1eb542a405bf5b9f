"""Indexing DeviceArrays beyond views: integer and boolean array keys, take,
take_along_axis, nonzero and add.at (gather, scatter and compaction kernels),
registered as their numpy functions and DeviceArray's advanced __getitem__ and
__setitem__ (array.py `implements`)."""
import numpy as np

from .. import _determinism
from . import kernels as K
from .array import (DeviceArray, c_strides, check_devices, empty, full, host_call,
                    implements, launch_elementwise, scalarize)


def _indexed(kind, src, index, arr, dim):
    """Run the indexed kernel `kind` (kernels.INDEXED) over src's shape: element p
    pairs src[p] with arr[p, except index[p] along `dim`] (index broadcast to
    src's shape)."""
    shape = src.shape
    idx = index._view(np.broadcast_to(index._shadow(), shape))
    ds = tuple(0 if d == dim or arr.shape[d] == 1 else arr.strides_[d] for d in range(len(shape)))
    kern = K.indexed(kind, len(shape), arr.dtype.name)
    K.run(kern, src.size, shape, src.buf, src.offset, src.strides_, idx.buf, idx.offset,
          idx.strides_, arr.buf, arr.offset, ds, arr.strides_[dim], arr.shape[dim])


def _check_bounds(index, n, axis):
    """numpy's IndexError for an index outside [-n, n) (checked before any kernel
    reads out of bounds)."""
    if index.size and np.logical_or(index < -n, index >= n).any():
        bad = index.get().reshape(-1)
        bad = bad[(bad < -n) | (bad >= n)][0]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")


def _advanced_key(a, key):
    """The integer index arrays of `key` if it is k >= 1 of them (boolean masks
    become their nonzero positions) indexing a's first dims, followed only by full
    slices; None for other keys (those run on the host)."""
    key = key if isinstance(key, tuple) else (key,)
    idxs, used = [], 0
    for k in key:
        if isinstance(k, DeviceArray) and k.dtype.kind == "b" and k.ndim:
            idxs.extend(_nonzero(k))
        elif isinstance(k, DeviceArray) and k.dtype.kind in "iu":
            idxs.append(k)
        else:
            break
        used += 1
    tail = key[used:]
    if not idxs or len(idxs) > a.ndim or any(
            not (t is Ellipsis or (isinstance(t, slice) and t == slice(None))) for t in tail):
        return None
    if not np.broadcast_shapes(*[i.shape for i in idxs]):
        return None  # 0-d indices: a scalar read, on the host
    return idxs


def _advanced(a, idxs):
    """(index, view, dim, result shape) that gather/scatter kernels (_indexed) take
    for a[idxs]: k integer arrays (broadcast together) indexing a's first k dims.
    One index addresses a's first dim directly; several are folded into the
    elements' linear offsets (a dim of stride 1)."""
    k = len(idxs)
    ishape = np.broadcast_shapes(*[i.shape for i in idxs])
    rest = a.shape[k:]
    for j, ix in enumerate(idxs):
        _check_bounds(ix, a.shape[j], j)
    if k == 1:
        index, dim_len, dim_stride = idxs[0], a.shape[0], a.strides_[0]
    else:
        index = full(ishape, 0, np.dtype(np.int64))
        for j, ix in enumerate(idxs):
            n = np.int64(a.shape[j])
            launch_elementwise("v0 + (v1 + v2 if v1 < 0 else v1) * v3",
                               [index, ix.astype(np.int64, copy=False), n, np.int64(a.strides_[j])],
                               index, np.dtype(np.int64))
        dim_len, dim_stride = 1, 1
    nd = len(ishape)
    view = DeviceArray(a.buf, a.offset, (1,) * (nd - 1) + (dim_len,) + rest,
                       (0,) * (nd - 1) + (dim_stride,) + a.strides_[k:], a.dtype)
    index = index.reshape(index.shape + (1,) * len(rest))
    return index, view, nd - 1, ishape + rest


def _values_like(values, shape, dtype):
    src = values if isinstance(values, DeviceArray) else full((), scalarize(values), dtype)
    src = src.astype(dtype, copy=False)
    return src._view(np.broadcast_to(src._shadow(), shape))


@implements(np.nonzero)
def _nonzero(a):
    """np.nonzero: each thread counts the nonzeros of one chunk, a scan gives the
    chunks' write positions, then each thread writes its chunk's flat indices;
    the flat indices are unravelled per dim. The count is read back (the size of
    the result), as it must be."""
    if not a.ndim:
        return host_call("nonzero", np.nonzero, (a,), {})
    flat = (a if a.dtype.kind == "b" else a != 0).reshape(-1)
    flat = flat if flat.contiguous() else flat.copy()
    n, chunk = flat.size, K.compact_chunk()
    nchunks = max(1, -(-n // chunk))
    counts = empty(nchunks, np.dtype(np.int64))
    fv, cv = flat.flat_view(), counts.flat_view()
    blocks, t = K.launch_1d(nchunks)
    K.launch(K.compact(False), blocks, t, nchunks, chunk, n, fv, cv, cv)
    starts = np.cumsum(counts) - counts  # exclusive scan
    total = int(starts[nchunks - 1].item() + counts[nchunks - 1].item()) if n else 0
    positions = empty(total, np.dtype(np.int64))
    if total:
        K.launch(K.compact(True), blocks, t, nchunks, chunk, n, fv, starts.flat_view(),
                 positions.flat_view())
    if a.ndim == 1:
        return (positions,)
    out = []
    for d, (size, stride) in enumerate(zip(a.shape, c_strides(a.shape))):
        out.append(launch_elementwise("(v0 // v1) % v2",
                                      [positions, np.int64(stride), np.int64(size)],
                                      empty(total, np.dtype(np.int64)), np.dtype(np.int64)))
    return tuple(out)


@implements((np.add, "at"))
def _add_at(dst, index, values, out=None):
    """np.add.at(dst, index, values) for integer index arrays on dst's first dims
    (the backward of indexing and index_select) with atomics; other forms on the host."""
    check_devices([index, values])
    idxs = _advanced_key(dst, index) if isinstance(dst, DeviceArray) and \
        dst.dtype.kind == "f" and not _determinism.enabled() else None
    if idxs is None:
        return host_call("add.at", np.add.at, (dst, index, values), {})
    idx, view, dim, shape = _advanced(dst, idxs)
    _indexed("scatter_add", _values_like(values, shape, dst.dtype), idx, view, dim)


def scatter_add(dst, dim, index, src, host_version):
    """dst[..., index[p], ...] += src[p] along `dim` (torch's scatter_add_). Floats
    add with atomics, in no fixed order: under use_deterministic_algorithms they run
    as `host_version` (the host backend's) on host copies instead."""
    if dst.dtype.kind in "fc" and _determinism.enabled():
        return host_call("scatter_add", host_version, (dst, dim, index, src), {})
    _indexed("scatter_add", src, index, dst, dim % dst.ndim)


@implements(np.take)
def _take(a, indices, axis=None, out=None, mode="raise"):
    """np.take along one axis with a 1-D index (index_select) as a gather kernel."""
    check_devices([indices])
    if axis is None or out is not None or mode != "raise" or \
            not isinstance(indices, DeviceArray) or indices.ndim != 1:
        return host_call("take", np.take, (a, indices), {"axis": axis, "out": out, "mode": mode})
    axis %= a.ndim
    _check_bounds(indices, a.shape[axis], axis)
    out = empty(a.shape[:axis] + indices.shape + a.shape[axis + 1:], a.dtype)
    _indexed("gather", out, indices.reshape((1,) * axis + (-1,) + (1,) * (a.ndim - axis - 1)),
             a, axis)
    return out


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis):
    """np.take_along_axis as one gather kernel (no host copy)."""
    check_devices([arr, indices])
    if not isinstance(indices, DeviceArray) or axis is None or indices.ndim != arr.ndim:
        return host_call("take_along_axis", np.take_along_axis, (arr, indices, axis), {})
    axis %= arr.ndim
    shape = list(np.broadcast_shapes(
        tuple(1 if d == axis else s for d, s in enumerate(arr.shape)),
        tuple(1 if d == axis else s for d, s in enumerate(indices.shape))))
    shape[axis] = indices.shape[axis]
    out = empty(tuple(shape), arr.dtype)
    _indexed("gather", out, indices, arr, axis)
    return out


def _take_axis(a, key):
    """The axis of the one 1-D integer array in a key of it and full slices (a[:, idx]
    is np.take(a, idx, axis=1)), or None."""
    if not isinstance(key, tuple) or len(key) > a.ndim:
        return None
    arrays = [d for d, k in enumerate(key) if not (isinstance(k, slice) and k == slice(None))]
    if len(arrays) != 1:
        return None
    k = key[arrays[0]]
    return arrays[0] if isinstance(k, DeviceArray) and k.dtype.kind in "iu" and k.ndim == 1 \
        else None


@implements("getitem")
def getitem(a, key):
    """a[key] for a key that is not basic indexing: gather kernels where
    `_advanced_key` knows the key, else the host."""
    check_devices(key if isinstance(key, tuple) else (key,))
    idxs = _advanced_key(a, key)
    if idxs is not None:
        index, view, dim, shape = _advanced(a, idxs)
        out = empty(shape, a.dtype)
        _indexed("gather", out, index, view, dim)
        return out
    axis = _take_axis(a, key)
    if axis is not None:
        return _take(a, key[axis], axis)
    return host_call("getitem", lambda arr, k: arr[k], (a, key), {})


@implements("setitem")
def setitem(a, key, value):
    """a[key] = value for a key that is not basic indexing (scatter kernels or the host)."""
    check_devices(key if isinstance(key, tuple) else (key,))
    idxs = _advanced_key(a, key)
    if idxs is None:
        return host_call("setitem", _host_setitem, (a, key, value), {})
    index, view, dim, shape = _advanced(a, idxs)
    _indexed("scatter_store", _values_like(value, shape, a.dtype), index, view, dim)


def _host_setitem(a, key, value):
    a[key] = value
