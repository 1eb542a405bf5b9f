"""Indexing: basic and advanced `x[key]`, narrow/select, index_put, gather and
index_select. Forward with numpy; backward written with jitgrad ops."""

import numpy as np

from .. import backend
from .._trace import TRACE, graph_break
from ..tensor import Tensor, asarray, ascontiguous, result_tensor, wrap_dim
from .legacy import scalar_type
from .record import records_nothing, shared
from .registry import Arg, Dims, Sample, op
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
        elif isinstance(k, (list, range)):  # torch indexes with any sequence of ints
            k = np.asarray(k, dtype=np.intp if len(k) == 0 else None)
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
    return index_put_zeros.op.emit(Tensor(_scattered(g._data, shape, key)), (g,), (shape, key))


def _scattered(g, shape, key):
    """zeros(shape) with array `g` added at `key`."""
    arr = np.zeros(shape, g.dtype, like=g)
    if type(key) is int:  # x[i], as getitem takes it
        arr[key] = g
        return arr
    k, advanced = _norm_key(key, len(shape))
    if advanced:
        np.add.at(arr, k, g)
    else:
        arr[k] = g
    return arr


def _getitem_backward(node, g):
    shape, key = node._attrs
    if records_nothing():  # index_put_zeros would only add its dispatch
        return (result_tensor(_scattered(g._data, shape, key)),)
    return (index_put_zeros(g, shape, key),)


def _selects_by_mask(key):
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, Tensor):
            k = k._data
        elif isinstance(k, (list, range)):  # torch indexes with any sequence of ints
            k = np.asarray(k, dtype=np.intp if len(k) == 0 else None)
        if getattr(k, "dtype", None) == np.bool_ and getattr(k, "ndim", 0) > 0:
            return True
    return False


def _getitem_batched(b, x, key):
    """Basic indexing, and unbatched index tensors next to each other (numpy puts
    the dims of advanced indices apart from each other first, before the batch dim)."""
    key = key if isinstance(key, tuple) else (key,)
    advanced = [i for i, k in enumerate(key) if not (k is None or k is Ellipsis or
                                                     type(k) is slice)]
    arrays = [k for k in key if isinstance(k, (Tensor, list, np.ndarray)) or type(k) is bool]
    if any(b.batched(k) or getattr(k, "dtype", None) in (np.bool_, bool) or type(k) is bool
           or isinstance(k, Tensor) and k._data.dtype == np.bool_ for k in arrays) or \
            not b.batched(x) or arrays and advanced != list(range(advanced[0], advanced[-1] + 1)):
        return NotImplemented
    return getitem(x, (slice(None),) + key)


@op("SliceBackward0", backward=_getitem_backward, linear=lambda b, shape, key: (b.key(key),),
    vmap=_getitem_batched,
    samples=(Sample(Arg(4, 5), (slice(1, 3), 2)),
             Sample(Arg(4, 5), (Ellipsis, None, slice(None, None, 2))),
             Sample(Arg(4, 5), Arg(3, high=4, kind="int")), Sample(Arg(4, 5), Arg(4, 5, kind="bool"))))
def getitem(x, key):
    d = x._data
    if type(key) is int:  # x[i], the commonest index
        try:
            # with `...`, as every view key without one below: numpy gives a full integer
            # index a scalar copy, torch a 0-d view that in-place ops write through
            arr = d[key, ...]
        except IndexError as e:
            raise _index_error(e) from None
        out = make_view(x, arr, getitem, shared((key,)))  # the same for every x[i]
        return getitem.op.emit(out, (x,), shared((d.shape, key)), node="SelectBackward0")
    if TRACE[0] is not None and _selects_by_mask(key):
        graph_break("indexing with a boolean mask: the result's shape depends on the mask's "
                    "values (use jitgrad.where or masked_fill to keep the shape)")
    k, advanced = _norm_key(key, d.ndim)
    if not advanced and Ellipsis not in k:
        k += (Ellipsis,)
    try:
        arr = d[k]
    except IndexError as e:
        raise _index_error(e) from None
    if advanced:
        out = Tensor(asarray(arr))
        name = "IndexBackward0"
    else:
        out = make_view(x, arr, getitem, (key,))
        name = _view_node_name(k)
    return getitem.op.emit(out, (x,), (d.shape, key), node=name)


def _view_node_name(key):
    """torch's grad_fn name for a basic index: that of the last view it applies
    (full slices and `...` apply none)."""
    for k in reversed(key):
        if k is None:
            return "UnsqueezeBackward0"
        if type(k) is slice:
            if k != _ALL:
                return "SliceBackward0"
        elif k is not Ellipsis:
            return "SelectBackward0"
    return "AliasBackward0"


_ALL = slice(None)


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


def _check_index(index, who, dtypes="int64"):
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError(f"{who}(): Expected dtype {dtypes} for index")
    return index._data


def _gather_backward(node, g):
    dim, shape, _ = node._attrs
    (index,) = node.saved()
    return (scatter_add_zeros(g, dim, index, shape),)


def _checked_index(x, dim, index, who):
    """(index array, wrapped dim) for gather/scatter: an integer index of x's
    rank, no larger than x apart from `dim`, with indices in range there."""
    scattering = who.startswith("scatter")
    idx = _check_index(index, who, "int32/int64" if scattering else "int64")
    d = wrap_dim(dim, x._data.ndim)
    if idx.ndim != x._data.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as "
                           f"{'self' if scattering else 'input'} tensor")
    for i, (a, b) in enumerate(zip(idx.shape, x._data.shape)):
        if i != d and a > b:
            raise RuntimeError(f"Size does not match at dimension {i} expected index "
                               f"{list(idx.shape)} to be smaller than self {list(x._data.shape)} "
                               f"apart from dimension {d}")
    if idx.size and (idx.min() < -x._data.shape[d] or idx.max() >= x._data.shape[d]):
        bad = int(idx.max() if idx.max() >= x._data.shape[d] else idx.min())
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size "
                           f"{x._data.shape[d]}")
    return idx, d


def _one_element_index(x, index, src):
    """torch scatters into a 1-d tensor with a 0-d index (and a 0-d src) as if both
    were 1-d with one element: the one-hot idiom `zeros(10).scatter_(0, tensor(y), 1)`."""
    if isinstance(index, Tensor) and index.ndim == 0 and x.ndim == 1:
        index = index.reshape(1)
        if isinstance(src, Tensor) and src.ndim == 0:
            src = src.reshape(1)
    return index, src


def _leading(arr, shape, d=None):
    """arr's leading block of `shape` (all of dim `d`): where gather reads and
    scatter writes."""
    return arr[tuple(slice(None) if i == d else slice(0, s) for i, s in enumerate(shape))]


@op("GatherBackward0", backward=_gather_backward, saves=("index",),
    linear=lambda b, dim, shape, index: (b.dim(dim), b.index(index)), method=True, export=True,
    vmap=Dims("dim", expand=True),
    samples=(Sample(Arg(3, 4), 1, Arg(3, 2, high=4, kind="int")),))
def gather(x, dim, index):
    idx, d = _checked_index(x, dim, index, "gather")
    src = _leading(x._data, idx.shape, d)
    return gather.op.emit(Tensor(np.take_along_axis(src, idx, axis=d)), (x,),
                          (d, x._data.shape, index), (index,))


def _scatter_key(idx, d):
    """The advanced-index key that puts element p of a block of idx's shape at
    position p, except idx[p] along d (numpy's sparse grids, on idx's device)."""
    nd = idx.ndim
    return tuple(idx if i == d else np.arange(s, like=idx).reshape((1,) * i + (s,) + (1,) * (nd - i - 1))
                 for i, s in enumerate(idx.shape))


def _scatter_source(x, src, idx, who):
    if not isinstance(src, Tensor):
        return None, src
    if src._data.dtype != x._data.dtype:
        raise RuntimeError(f"{who}(): Expected self.dtype to be equal to src.dtype (got "
                           f"{x.dtype.name} and {src.dtype.name}); convert src with "
                           ".to(self.dtype)")
    if src._data.ndim != idx.ndim or any(a > b for a, b in zip(idx.shape, src._data.shape)):
        raise RuntimeError(f"Expected index {list(idx.shape)} to be smaller than self "
                           f"{list(x.shape)} apart from dimension and to be smaller size than src "
                           f"{list(src.shape)}")
    return src, _leading(src._data, idx.shape)


def _src_grad(g, dim, index, src_shape):
    """The gradient of scatter's src: g where each element went, zeros for the part
    of src past the index's shape (torch fails there with a shape error)."""
    part = gather(g, dim, index)
    if part._data.shape == src_shape:
        return part
    return index_put_zeros(part, src_shape, tuple(slice(0, s) for s in part._data.shape))


def _scatter_backward(node, g):
    dim, src_shape, _ = node._attrs
    (index,) = node.saved()
    src_grad = _src_grad(g, dim, index, src_shape) if src_shape is not None else None
    return scatter(g, dim, index, 0.0), src_grad


def _scatter_jvp(b, out, inputs, attrs, tx, ts=None):
    (x, src), (dim, _, index) = inputs, attrs
    value = b.zeros(ts, src) if src is not None else 0.0
    return scatter(b.zeros(tx, x), b.dim(dim), b.index(index), value)


@op("ScatterBackward0", backward=_scatter_backward, jvp=_scatter_jvp, saves=("index",),
    vmap=Dims("dim", expand=True),
    method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 4), 0, Arg(1, 4, high=3, kind="int"), Arg(1, 4)),
             Sample(Arg(3, 4), 1, Arg(2, 2, high=4, kind="int"), 2.5)))
def scatter(x, dim, index, src=None, *, value=None):
    """A copy of x with `src` (a tensor, or a number) written at `index` along
    `dim`: out[i][index[i][j]] = src[i][j] for dim 1. Where an index repeats,
    which write wins is unspecified (as in torch).

    >>> import jitgrad
    >>> jitgrad.zeros(2, 3).scatter(1, jitgrad.tensor([[2], [0]]), 1.0)
    tensor([[0., 0., 1.],
            [1., 0., 0.]])
    """
    index, src = _one_element_index(x, index, src)
    idx, d = _checked_index(x, dim, index, "scatter")
    if (src is None) == (value is None):
        raise TypeError("scatter() received an invalid combination of arguments: give the values "
                        "as src (a tensor or a number) or as value=, once")
    src_t, values = _scatter_source(x, value if src is None else src, idx, "scatter")
    arr = x._data.copy()
    arr[_scatter_key(idx, d)] = values
    src_shape = src_t._data.shape if src_t is not None else None
    return scatter.op.emit(Tensor(arr), (x, src_t), (d, src_shape, index), (index,),
                           node="ScatterBackward0" if src_t is not None else "ScatterBackward1")


def _scatter_add_into_backward(node, g):
    dim, src_shape, _ = node._attrs
    (index,) = node.saved()
    return g, _src_grad(g, dim, index, src_shape)


def _scatter_add_jvp(b, out, inputs, attrs, tx, ts):
    (x, src), (dim, _, index) = inputs, attrs
    return scatter_add(b.zeros(tx, x), b.dim(dim), b.index(index), b.zeros(ts, src))


@op("ScatterAddBackward0", backward=_scatter_add_into_backward, jvp=_scatter_add_jvp,
    vmap=Dims("dim", expand=True),
    saves=("index",), method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 4), 0, Arg(2, 4, high=3, kind="int"), Arg(2, 4)),
             Sample(Arg(4, 3), 1, Arg(2, 2, high=3, kind="int"), Arg(2, 2))))
def scatter_add(x, dim, index, src):
    """A copy of x with `src` added at `index` along `dim` (repeated indices add up).

    >>> import jitgrad
    >>> jitgrad.zeros(3).scatter_add(0, jitgrad.tensor([0, 0, 2]), jitgrad.ones(3))
    tensor([2., 0., 1.])
    """
    index, src = _one_element_index(x, index, src)
    idx, d = _checked_index(x, dim, index, "scatter_add")
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add(): argument 'src' (position 3) must be Tensor, not "
                        f"{type(src).__name__}")
    src, values = _scatter_source(x, src, idx, "scatter_add")
    arr = x._data.copy()
    backend.of(arr).scatter_add(arr, d, idx, ascontiguous(values))
    return scatter_add.op.emit(Tensor(arr), (x, src), (d, src._data.shape, index), (index,))


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
    vmap=Dims("dim"),
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


@op(method=True, export=True)
def nonzero(x, *, as_tuple=False):
    """The indices of the nonzero elements: an (n, ndim) int64 tensor, or with
    `as_tuple=True` one index tensor per dim (what `where(condition)` gives).

    >>> import jitgrad
    >>> jitgrad.tensor([[0, 1], [2, 0]]).nonzero()
    tensor([[0, 1],
            [1, 0]])
    """
    graph_break("nonzero (argwhere, where(condition)): the result's shape depends on how "
                "many elements are nonzero")
    d = x._data
    found = [i.astype(np.int64) for i in np.nonzero(d.reshape(d.shape or (1,)))]
    if as_tuple:
        return tuple(Tensor(ascontiguous(i)) for i in found)
    return Tensor(ascontiguous(np.stack(found, axis=1)[:, :d.ndim]))


@op(method=True, export=True)
def argwhere(x):
    """`nonzero(x)`: an (n, ndim) tensor of the indices of the nonzero elements."""
    return nonzero(x)


@op(method=True, export=True,
    samples=(Sample(Arg(3, 4), Arg(3, 4, kind="bool")), Sample(Arg(3, 4), Arg(4, kind="bool"))))
def masked_select(x, mask):
    """The elements where the bool `mask` (broadcast with x) is True, as a 1-D tensor.

    >>> import jitgrad
    >>> jitgrad.tensor([[1, 2], [3, 4]]).masked_select(jitgrad.tensor([True, False]))
    tensor([1, 3])
    """
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, but got {got}")
    shape = np.broadcast_shapes(x._data.shape, mask._data.shape)
    return getitem(x.expand(shape), mask.expand(shape))


def _dim_key(x, dim, index, who):
    """The key that selects `index` (1-D integers) along `dim` of x."""
    idx = _check_index(index, who)
    if idx.ndim > 1:
        raise IndexError(f"{who}_(): Index is supposed to be a vector, but got dim: {idx.ndim} with "
                         f"type: {scalar_type(index)} and size: {list(idx.shape)}")
    d = wrap_dim(dim, x._data.ndim)
    return (slice(None),) * d + (index,)


@op(method=True, export=True, inplace=True,
    samples=(Sample(Arg(4, 3), 0, Arg(5, high=4, kind="int"), Arg(5, 3)),))
def index_add(x, dim, index, source, *, alpha=1):
    """x with `alpha * source` added at `index` along `dim` (repeated indices add up).

    >>> import jitgrad
    >>> jitgrad.zeros(3).index_add(0, jitgrad.tensor([0, 0, 2]), jitgrad.ones(3))
    tensor([2., 0., 1.])
    """
    key = _dim_key(x, dim, index, "index_add")
    return x + index_put_zeros(source * alpha if alpha != 1 else source, x._data.shape, key)


@op(method=True, export=True, inplace=True, vmap=Dims("dim"),
    samples=(Sample(Arg(4, 3), 1, Arg(2, high=3, kind="int"), 0.5),))
def index_fill(x, dim, index, value):
    """x with `value` written at `index` along `dim`."""
    return index_put(x, _dim_key(x, dim, index, "index_fill"), value)


@op(method=True, inplace=True,
    samples=(Sample(Arg(3, 4), Arg(3, 4, kind="bool"), Arg(20)),))
def masked_scatter(x, mask, source):
    """x with the first elements of `source` written, in order, where `mask` is True."""
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        raise RuntimeError("masked_scatter_ only supports boolean masks")
    shape = np.broadcast_shapes(x._data.shape, mask._data.shape)
    m = mask.expand(shape)
    n = int(m._data.sum())
    if source.numel() < n:
        raise RuntimeError(f"Number of elements of source < number of ones in mask ({source.numel()} "
                           f"< {n}): give masked_scatter at least one value per True")
    return index_put(x.expand(shape) if shape != x._data.shape else x, m, source.reshape(-1)[:n])


@op(method=True)
def fill_diagonal_(x, fill_value, wrap=False):
    """Write `fill_value` on the main diagonal of x in place (all dims of equal
    size, or a tall matrix; with `wrap`, the diagonal restarts every ncols + 1 rows)."""
    d = x._data
    if d.ndim < 2 or (d.ndim > 2 and len(set(d.shape)) != 1):
        raise RuntimeError("all dimensions of input must be of equal length")
    if d.ndim == 2:  # flat positions k * (ncols + 1): with wrap, past the square part too
        ncols = d.shape[1]
        count = -(-d.size // (ncols + 1)) if wrap else min(d.shape)
        flat = np.arange(count, like=d) * (ncols + 1)
        key = (Tensor(flat // ncols), Tensor(flat % ncols))
    else:
        key = (Tensor(np.arange(d.shape[0], like=d)),) * d.ndim
    return x.__setitem__(key, fill_value) or x
