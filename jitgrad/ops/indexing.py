"""Indexing: basic and advanced `x[key]`, narrow/select, index_put, gather and
index_select. Forward with numpy; backward written with jitgrad ops."""

import numpy as np

from .. import backend
from .._trace import TRACE, graph_break
from ..tensor import Tensor, asarray, wrap_dim
from .registry import Arg, Sample, op
from .views import make_view, sum_to_size


def _index_put_jvp(b, out, inputs, attrs, tx, tv=None):
    (x, vt), key = inputs, attrs[0]
    base = b.zeros(tx, x)
    if vt is None:
        return index_put(base, b.key(key), 0)
    res_ndim = x._data[_norm_key(key, x._data.ndim)[0]].ndim
    return index_put(base, b.key(key), b.align(b.zeros(tv, vt), vt, res_ndim))


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


@op("IndexPutBackward0", backward=_scatter_backward,
    linear=lambda b, shape, key: (b.shape(shape), b.key(key)))
def index_put_zeros(g, shape, key):
    """zeros(shape) with `g` added at `key` (duplicates accumulate): the backward
    of indexing, itself differentiable (its backward is indexing)."""
    arr = np.zeros(shape, g._data.dtype, like=g._data)
    k, advanced = _norm_key(key, len(shape))
    if advanced:
        np.add.at(arr, k, g._data)
    else:
        arr[k] = g._data
    return index_put_zeros.op.emit(Tensor(arr), (g,), (shape, key))


def _getitem_backward(node, g):
    shape, key = node._attrs
    return (index_put_zeros(g, shape, key),)


def _selects_by_mask(key):
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, Tensor):
            k = k._data
        elif isinstance(k, list):
            k = np.asarray(k)
        if getattr(k, "dtype", None) == np.bool_ and getattr(k, "ndim", 0) > 0:
            return True
    return False


@op("SliceBackward0", backward=_getitem_backward, linear=lambda b, shape, key: (b.key(key),),
    samples=(Sample(Arg(4, 5), (slice(1, 3), 2)),
             Sample(Arg(4, 5), (Ellipsis, None, slice(None, None, 2))),
             Sample(Arg(4, 5), Arg(3, high=4, kind="int")), Sample(Arg(4, 5), Arg(4, 5, kind="bool"))))
def getitem(x, key):
    if TRACE[0] is not None and _selects_by_mask(key):
        graph_break("indexing with a boolean mask: the result's shape depends on the mask's "
                    "values (use jitgrad.where or masked_fill to keep the shape)")
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
    return getitem.op.emit(out, (x,), (x._data.shape, key), node=name)


@op(method=True, export=True, samples=(Sample(Arg(4, 5), 1, 1, 3),))
def narrow(x, dim, start, length):
    d = wrap_dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return getitem(x, (slice(None),) * d + (slice(start, start + length),))


@op(method=True, export=True, samples=(Sample(Arg(4, 5), 0, 2),))
def select(x, dim, index):
    d = wrap_dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x._data.shape)} at dimension {d}")
    return getitem(x, (slice(None),) * d + (index,))


def _put_backward(node, g):
    key, v_shape = node._attrs
    gx = index_put(g, key, 0)  # g with the overwritten entries zeroed (as torch's rule)
    gv = getitem(g, key)
    return (gx, sum_to_size(gv, v_shape) if v_shape is not None else None)


@op("IndexPutBackward0", backward=_put_backward, jvp=_index_put_jvp,
    samples=(Sample(Arg(4, 3), (slice(0, 2),), Arg(2, 3)),
             Sample(Arg(4, 3), (Arg(2, high=4, kind="int"),), Arg(3))))
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
    vt = value if isinstance(value, Tensor) else None
    return index_put.op.emit(Tensor(arr), (x, vt), (key, vt._data.shape if vt is not None else None))


def _check_index(index, who):
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError(f"{who}(): Expected dtype int64 for index")
    return index._data


def _gather_backward(node, g):
    dim, shape, _ = node._attrs
    (index,) = node.saved()
    return (scatter_add_zeros(g, dim, index, shape),)


@op("GatherBackward0", backward=_gather_backward, saves=("index",),
    linear=lambda b, dim, shape, index: (b.dim(dim), b.index(index)), method=True, export=True,
    samples=(Sample(Arg(3, 4), 1, Arg(3, 2, high=4, kind="int")),))
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
    return gather.op.emit(Tensor(np.take_along_axis(src, idx, axis=d)), (x,),
                          (d, x._data.shape, index), (index,))


def _scatter_add_backward(node, g):
    dim = node._attrs[0]
    (index,) = node.saved()
    return (gather(g, dim, index),)


@op("ScatterAddBackward0", backward=_scatter_add_backward, saves=("index",),
    linear=lambda b, dim, index, shape: (b.dim(dim), b.index(index), b.shape(shape)))
def scatter_add_zeros(src, dim, index, shape):
    """zeros(shape).scatter_add(dim, index, src): the backward of gather."""
    idx = index._data
    arr = np.zeros(shape, src._data.dtype, like=src._data)
    backend.of(arr).scatter_add(arr, dim, idx, src._data)
    return scatter_add_zeros.op.emit(Tensor(arr), (src,), (dim, index, shape), (index,))


def _index_select_backward(node, g):
    dim, shape, _ = node._attrs
    (index,) = node.saved()
    key = (slice(None),) * dim + (index,)
    return (index_put_zeros(g, shape, key),)


@op("IndexSelectBackward0", backward=_index_select_backward, saves=("index",),
    linear=lambda b, dim, shape, index: (b.dim(dim), index), method=True, export=True,
    samples=(Sample(Arg(3, 4), 0, Arg(5, high=3, kind="int")),))
def index_select(x, dim, index):
    idx = _check_index(index, "index_select")
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = wrap_dim(dim, x._data.ndim)
    try:
        arr = np.take(x._data, idx.reshape(-1), axis=d)
    except IndexError as e:
        raise IndexError(f"index out of range in self: {_index_error(e)}") from None
    return index_select.op.emit(Tensor(arr), (x,), (d, x._data.shape, index), (index,))
