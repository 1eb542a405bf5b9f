"""Indexing: basic and advanced `x[key]`, narrow/select, index_put, gather and
index_select. Forward with numpy; backward written with jitgrad ops."""

import numpy as np

from .. import backend
from ..tensor import Tensor, asarray, wrap_dim
from .record import FW, jvp, nb, record
from .registry import Arg, Sample, register_function
from .views import align_tangent, batched_index, batched_key, make_view, or_zeros, sum_to_size


def _index_put_jvp(x, key, vt, tx, tv):
    lead = (tx if tx is not None else tv)._data.shape[
        :nb(tx, x) if tx is not None else nb(tv, vt)]
    k = len(lead)
    base = or_zeros(tx, x, lead)
    if vt is None:
        return index_put(base, batched_key(key, k), 0)
    value = or_zeros(tv, vt, lead)
    res_ndim = x._data[_norm_key(key, x._data.ndim)[0]].ndim
    return index_put(base, batched_key(key, k), align_tangent(value, vt, res_ndim))


def _norm_key(key, ndim):
    """numpy form of a torch index, and whether it has advanced parts."""
    if not isinstance(key, tuple):
        key = (key,)
    out, advanced = [], False
    for k in key:
        if isinstance(k, Tensor):
            k = k._data
        elif isinstance(k, list):
            k = np.asarray(k)
        if backend.is_array(k):
            if k.dtype == np.bool_:
                out.extend(np.nonzero(k)) if k.ndim else out.append(k)
            elif k.dtype.kind in "iu":
                out.append(k.astype(np.intp, copy=False))
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            advanced = True
        elif isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            out.append(k)
        elif k is None or k is Ellipsis or isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            out.append(k)
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"byte Variables are valid indices (got {type(k).__name__})")
    return tuple(out), advanced


def _index_error(e):
    return IndexError(str(e).replace("axis", "dimension"))


def _scatter_backward(node, g):
    return (getitem(g, node._attrs[1]),)


def index_put_zeros(g, shape, key):
    """zeros(shape) with `g` added at `key` (duplicates accumulate): the backward
    of indexing, itself differentiable (its backward is indexing)."""
    arr = np.zeros(shape, g._data.dtype, like=g._data)
    k, advanced = _norm_key(key, len(shape))
    if advanced:
        np.add.at(arr, k, g._data)
    else:
        arr[k] = g._data
    out = Tensor(arr)
    if FW[0] is not None:
        jvp(out, (g,), lambda tg: index_put_zeros(
            tg, tg.shape[:nb(tg, g)] + shape, batched_key(key, nb(tg, g))))
    record("IndexPutBackward0", (g,), (out,), _scatter_backward, attrs=(shape, key))
    return out


def _getitem_backward(node, g):
    shape, key = node._attrs
    return (index_put_zeros(g, shape, key),)


def getitem(x, key):
    k, advanced = _norm_key(key, x._data.ndim)
    try:
        arr = x._data[k]
    except IndexError as e:
        raise _index_error(e) from None
    if advanced:
        out = Tensor(asarray(arr))
        name = "IndexBackward0"
    else:
        out = make_view(x, arr, getitem, (key,))
        ints = all(isinstance(i, (int, np.integer)) for i in k)
        name = "SelectBackward0" if ints else "SliceBackward0"
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: getitem(tx, batched_key(key, nb(tx, x))))
    record(name, (x,), (out,), _getitem_backward, attrs=(x._data.shape, key))
    return out


def narrow(x, dim, start, length):
    d = wrap_dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return getitem(x, (slice(None),) * d + (slice(start, start + length),))


def select(x, dim, index):
    d = wrap_dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x._data.shape)} at dimension {d}")
    return getitem(x, (slice(None),) * d + (index,))


def _put_backward(node, g):
    key, v_shape = node._attrs
    gx = g * Tensor(_zero_mask(g._data.shape, key, g._data))
    gv = getitem(g, key)
    return (gx, sum_to_size(gv, v_shape) if v_shape is not None else None)


def _zero_mask(shape, key, like):
    m = np.ones(shape, np.bool_, like=like)
    m[_norm_key(key, len(shape))[0]] = False
    return m


def index_put(x, key, value):
    """Out-of-place x[key] = value, differentiable in both."""
    arr = x._data.copy()
    k, _ = _norm_key(key, arr.ndim)
    v = value._data if isinstance(value, Tensor) else value
    try:
        arr[k] = v
    except IndexError as e:
        raise _index_error(e) from None
    except ValueError:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(np.shape(v))} cannot be broadcast to "
            f"indexing result of shape {list(x._data[k].shape)}") from None
    out = Tensor(arr)
    vt = value if isinstance(value, Tensor) else None
    if FW[0] is not None:
        jvp(out, (x, vt), lambda tx, tv: _index_put_jvp(x, key, vt, tx, tv))
    record("IndexPutBackward0", (x, vt), (out,), _put_backward,
           attrs=(key, vt._data.shape if vt is not None else None))
    return out


def _check_index(index, who):
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError(f"{who}(): Expected dtype int64 for index")
    return index._data


def _gather_backward(node, g):
    dim, shape = node._attrs
    (index,) = node.saved()
    return (scatter_add_zeros(g, dim, index, shape),)


def gather(x, dim, index):
    idx = _check_index(index, "gather")
    d = wrap_dim(dim, x._data.ndim)
    if idx.ndim != x._data.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for i, (a, b) in enumerate(zip(idx.shape, x._data.shape)):
        if i != d and a > b:
            raise RuntimeError(f"Size does not match at dimension {i} expected index "
                               f"{list(idx.shape)} to be smaller than self {list(x._data.shape)} "
                               f"apart from dimension {d}")
    if idx.size and (idx.min() < -x._data.shape[d] or idx.max() >= x._data.shape[d]):
        raise RuntimeError(f"index {int(idx.max())} is out of bounds for dimension {d} with size "
                           f"{x._data.shape[d]}")
    src = x._data[tuple(slice(0, s) if i != d else slice(None) for i, s in enumerate(idx.shape))]
    out = Tensor(np.take_along_axis(src, idx, axis=d))
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: gather(tx, d + nb(tx, x), batched_index(index, tx, x)))
    record("GatherBackward0", (x,), (out,), _gather_backward, save=(index,), names=("index",),
           attrs=(d, x._data.shape))
    return out


def _scatter_add_backward(node, g):
    dim, _ = node._attrs
    (index,) = node.saved()
    return (gather(g, dim, index),)


def scatter_add_zeros(src, dim, index, shape):
    """zeros(shape).scatter_add(dim, index, src): the backward of gather."""
    idx = index._data
    arr = np.zeros(shape, src._data.dtype, like=src._data)
    backend.of(arr).scatter_add(arr, dim, idx, src._data)
    out = Tensor(arr)
    if FW[0] is not None:
        jvp(out, (src,), lambda ts: scatter_add_zeros(
            ts, dim + nb(ts, src), batched_index(index, ts, src), ts.shape[:nb(ts, src)] + shape))
    record("ScatterAddBackward0", (src,), (out,), _scatter_add_backward, save=(index,),
           names=("index",), attrs=(dim, shape))
    return out


def _index_select_backward(node, g):
    dim, shape = node._attrs
    (index,) = node.saved()
    key = (slice(None),) * dim + (index,)
    return (index_put_zeros(g, shape, key),)


def index_select(x, dim, index):
    idx = _check_index(index, "index_select")
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = wrap_dim(dim, x._data.ndim)
    try:
        arr = np.take(x._data, idx.reshape(-1), axis=d)
    except IndexError as e:
        raise IndexError(f"index out of range in self: {_index_error(e)}") from None
    out = Tensor(arr)
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: index_select(tx, d + nb(tx, x), index))
    record("IndexSelectBackward0", (x,), (out,), _index_select_backward, save=(index,),
           names=("index",), attrs=(d, x._data.shape))
    return out


# ---- registry samples ------------------------------------------------------------------------

register_function("narrow", narrow, Sample(Arg(4, 5), 1, 1, 3))
register_function("select", select, Sample(Arg(4, 5), 0, 2))
register_function("getitem", getitem, Sample(Arg(4, 5), (slice(1, 3), 2)),
                  Sample(Arg(4, 5), (Ellipsis, None, slice(None, None, 2))),
                  Sample(Arg(4, 5), Arg(3, high=4, kind="int")),
                  Sample(Arg(4, 5), Arg(4, 5, kind="bool")))
register_function("gather", gather, Sample(Arg(3, 4), 1, Arg(3, 2, high=4, kind="int")))
register_function("index_select", index_select, Sample(Arg(3, 4), 0, Arg(5, high=3, kind="int")))
register_function("index_put", index_put, Sample(Arg(4, 3), (slice(0, 2),), Arg(2, 3)),
                  Sample(Arg(4, 3), (Arg(2, high=4, kind="int"),), Arg(3)))
