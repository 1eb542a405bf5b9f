"""numpy functions of DeviceArrays that are neither reductions, indexing nor
linear algebra: creation (`like=`), copies, where, concatenate and stack, and
functions that only make views (applied to the shadow), registered in array.py's
FUNCTIONS table."""
import numpy as np

from .array import (FUNCTIONS, DeviceArray, check_devices, copyto, empty, full, host_call,
                    launch_elementwise, scalarize, to_device)


def _like_creation(fn):
    def create(*args, **kwargs):
        kwargs.pop("like", None)
        return to_device(fn(*args, **kwargs))
    return create


def _where(cond, a=None, b=None):
    if a is None:
        return host_call("nonzero", np.where, (cond,), {})
    check_devices([cond, a, b])
    vals = [scalarize(v) for v in (cond, a, b)]
    dts = [v.dtype if isinstance(v, (DeviceArray, np.generic)) else type(v) for v in vals[1:]]
    res = np.result_type(*[d if not isinstance(d, type) else d(0) for d in dts])
    shape = np.broadcast_shapes(*[v.shape for v in vals if isinstance(v, DeviceArray)])
    ops = [vals[0] if isinstance(vals[0], DeviceArray) else np.bool_(vals[0])]
    for v in vals[1:]:
        ops.append(v.astype(res, copy=False) if isinstance(v, DeviceArray) else res.type(v))
    return launch_elementwise("(v1 if v0 else v2)", ops, empty(shape, res), res)


def _concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = list(arrays)
    check_devices(arrays)
    if axis is None or out is not None:
        return host_call("concatenate", np.concatenate, (arrays,), {"axis": axis, "out": out})
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*[a.dtype for a in arrays])
    first = arrays[0]
    axis %= first.ndim
    total = sum(a.shape[axis] for a in arrays)
    out = empty(first.shape[:axis] + (total,) + first.shape[axis + 1:], dt)
    pos = 0
    for a in arrays:
        n = a.shape[axis]
        copyto(out[(slice(None),) * axis + (slice(pos, pos + n),)], a)
        pos += n
    return out


def _stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = list(arrays)
    ax = axis % (arrays[0].ndim + 1)
    return _concatenate([np.expand_dims(a, ax) for a in arrays], ax, dtype=dtype)


def _geometry(fn):
    """A numpy function that only makes a view: applied to the shadow."""
    def view(a, *args, **kwargs):
        return a._view(fn(a._shadow(), *args, **kwargs))
    return view


def _result_type(*args):
    return np.result_type(*[a.dtype if isinstance(a, DeviceArray) else a for a in args])


def _empty_like(a, dtype=None, order="K", subok=True, shape=None, device=None):
    return empty(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, device=None):
    return full(a.shape if shape is None else shape, fill_value,
                np.dtype(a.dtype if dtype is None else dtype))


def _copy(a, order="K", subok=False):
    return a.copy()


def _clip(a, a_min=None, a_max=None, out=None, **kw):
    r = a if a_min is None else np.maximum(a, a_min)
    return r if a_max is None else np.minimum(r, a_max)


FUNCTIONS.update({
    np.where: _where,
    np.copyto: copyto,
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.clip: _clip,
    np.result_type: _result_type,
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.copy: _copy,
    np.ascontiguousarray: lambda a, dtype=None, like=None: a.copy() if not a.contiguous() or
        (dtype is not None and np.dtype(dtype) != a.dtype) else a,
    np.empty_like: _empty_like,
    np.zeros_like: lambda a, dtype=None, order="K", subok=True, shape=None, device=None:
        _full_like(a, 0, dtype, shape=shape),
    np.ones_like: lambda a, dtype=None, order="K", subok=True, shape=None, device=None:
        _full_like(a, 1, dtype, shape=shape),
    np.full_like: _full_like,
    np.reshape: lambda a, shape=None, order="C", **kw: a.reshape(shape if shape is not None
                                                                 else kw["newshape"]),
    np.ravel: lambda a, order="C": a.reshape(-1),
    np.transpose: _geometry(np.transpose),
    np.broadcast_to: _geometry(np.broadcast_to),
    np.moveaxis: _geometry(np.moveaxis),
    np.swapaxes: _geometry(np.swapaxes),
    np.expand_dims: _geometry(np.expand_dims),
    np.squeeze: _geometry(np.squeeze),
    np.flip: _geometry(np.flip),
    np.diagonal: _geometry(np.diagonal),
})
for _fn in (np.zeros, np.ones, np.empty, np.full, np.array, np.asarray, np.arange, np.eye,
            np.linspace):
    FUNCTIONS[_fn] = _like_creation(_fn)
