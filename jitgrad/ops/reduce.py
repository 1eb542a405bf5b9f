"""Reductions. Forward with numpy (pairwise float sums, already optimal);
backward with jitgrad ops, so each is differentiable twice."""
import collections

import numpy as np

from .. import dtypes as _dt
from ..backend import HOST_ARRAY
from ..tensor import Tensor, asarray, ascontiguous, result_tensor, wrap_dim
from . import formulas as E
from .record import records_nothing_on
from .registry import Arg, Dims, Sample, op
from .indexing import gather, scatter_add_zeros
from .views import broadcast, expand, flip, reshape, unsqueeze

values_indices = collections.namedtuple("return_types", ["values", "indices"])


def _axes(dim, ndim):
    """Reduced axes as a sorted tuple (None: all)."""
    if dim is None:
        return tuple(range(ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    out = tuple(sorted({wrap_dim(d, ndim) for d in dims}))
    if len(out) != len(dims):
        raise RuntimeError("dim appears multiple times in the list of dims")
    return out if ndim else ()


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _unreduce(g, shape, axes, keepdim):
    """Broadcast a reduced gradient back to the input's shape."""
    if records_nothing_on(g):  # the reshape and expand below would only add dispatch
        arr = g._data
        if type(arr) is HOST_ARRAY and arr.size == 1 and shape != (1,) * len(shape):
            return result_tensor(broadcast(arr, shape))  # a full reduction's: one value
        if not keepdim and axes:
            arr = arr.reshape(_kept_shape(shape, axes))
        if arr.shape == shape:
            return result_tensor(arr)
        return result_tensor(broadcast(arr, shape))
    if not keepdim and axes:
        g = reshape(g, _kept_shape(shape, axes))
    return expand(g, shape)


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _sum_backward(node, g):
    shape, axes, keepdim = node._attrs
    return (_unreduce(g, shape, axes, keepdim),)


def _reduced(b, shape, axes, keepdim, *_):
    """The linear rule of a reduction: the same reduction of the tangent."""
    return (b.dims(axes), keepdim)


@op("SumBackward0", backward=_sum_backward, linear=_reduced, method=True, export=True,
    vmap=Dims("dim"), samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1), Sample(Arg(2, 3, 4), (0, 2), True)))
def sum(x, dim=None, keepdim=False, dtype=None):
    d = x._data
    if dim is None and dtype is None and type(d) is HOST_ARRAY and d.dtype.kind == "f":
        # the ufunc's reduce over all axes: what the general path below runs, without
        # ndarray.sum's Python layer (small tensors: W2 in asv_bench/workloads.py)
        r = np.add.reduce(d, axis=None, keepdims=keepdim)
        out = result_tensor(np.asarray(r))
        return sum.op.emit(out, (x,), (d.shape, tuple(range(d.ndim)), keepdim),
                           node="SumBackward0")
    axes = _axes(dim, d.ndim)
    out_dt = _dt.to_dtype(dtype).np if dtype is not None else (
        np.dtype(np.int64) if d.dtype.kind in "biu" else d.dtype)
    out = Tensor(asarray(d.sum(axis=axes, keepdims=keepdim, dtype=out_dt)))
    return sum.op.emit(out, (x,), (d.shape, axes, keepdim),
                       node="SumBackward0" if dim is None else "SumBackward1")


def _mean_backward(node, g):
    shape, axes, keepdim = node._attrs
    return (_unreduce(g, shape, axes, keepdim) / _count(shape, axes),)


def _need_float(x, who):
    if x._data.dtype.kind not in "fc":
        raise RuntimeError(
            f"{who}(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {x.dtype.name}; convert with .float() first")


@op("MeanBackward0", backward=_mean_backward, linear=_reduced, method=True, export=True,
    vmap=Dims("dim"), samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), -1, keepdim=True)))
def mean(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    _need_float(x, "mean")
    d = x._data
    axes = _axes(dim, d.ndim)
    out = Tensor(asarray(d.mean(axis=axes, keepdims=keepdim)).astype(d.dtype, copy=False))
    return mean.op.emit(out, (x,), (d.shape, axes, keepdim),
                        node="MeanBackward0" if dim is None else "MeanBackward1")


def _prod_backward(node, g):
    shape, axes, keepdim = node._attrs
    x, out = node.saved()
    ge = _unreduce(g, shape, axes, keepdim)
    o = out._data
    # out / x is 0 / 0 at a zero and loses the gradient where the product falls below
    # the normal range (a subnormal factor): exclusive products there. (NaN: out / x,
    # NaN everywhere, as torch.)
    if not (x._data == 0).any() and not (abs(o) < np.finfo(o.dtype).tiny).any():
        return (ge * _unreduce(out, shape, axes, keepdim) / x,)
    return (ge * _prod_others(x._data, axes),)


def _prod_others(d, axes):
    """For each element, the product of the other elements of its reduction
    (exclusive cumulative products from both sides: exact where out / x is 0 / 0)."""
    shape = d.shape
    kept = [s for i, s in enumerate(shape) if i not in axes]
    moved = np.moveaxis(d, axes, range(-len(axes), 0)).reshape(kept + [-1])
    ones = np.ones(moved.shape[:-1] + (1,), moved.dtype, like=moved)
    left = np.concatenate([ones, np.cumprod(moved, -1)[..., :-1]], -1)
    right = np.concatenate([np.cumprod(moved[..., ::-1], -1)[..., :-1][..., ::-1], ones], -1)
    excl = (left * right).reshape(kept + [shape[a] for a in axes])
    return Tensor(ascontiguous(np.moveaxis(excl, range(-len(axes), 0), axes)))


def _prod_jvp(b, out, inputs, attrs, tx):
    shape, axes, keepdim = attrs
    return sum(tx * _prod_others(inputs[0]._data, axes), b.dims(axes), keepdim)


# vmap: prod takes one dim; a whole-sample product is one over the flattened sample
def _prod_batched(b, x, dim=None, keepdim=False, dtype=None):
    if dim is None:
        return prod(reshape(x, (b.size, -1)), 1, dtype=dtype)
    return prod(x, b.dim(dim, x), keepdim, dtype)


@op("ProdBackward0", backward=_prod_backward, jvp=_prod_jvp, saves=("self", "result"),
    vmap=_prod_batched, method=True, export=True, samples=(Sample(Arg(3, 4, low=0.5, high=1.5)),
                                       Sample(Arg(3, 4, low=0.5, high=1.5), 1)))
def prod(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    d = x._data
    axes = _axes(dim, d.ndim)
    out_dt = np.dtype(np.int64) if d.dtype.kind in "biu" else d.dtype
    out = Tensor(asarray(d.prod(axis=axes, keepdims=keepdim, dtype=out_dt)))
    return prod.op.emit(out, (x,), (d.shape, axes, keepdim), (x, out),
                        node="ProdBackward0" if dim is None else "ProdBackward1")


def _amax_jvp(b, out, inputs, attrs, tx):
    shape, axes, keepdim, _ = attrs
    mask = E.eq(inputs[0], _unreduce(out, shape, axes, keepdim))
    return sum(tx * mask, b.dims(axes), keepdim) / sum(mask, axes, keepdim)


def take_at_indices(b, out, inputs, attrs, tx):
    """The tangent's elements at the indices along dim (max/min, sort, topk; attrs
    are (dim, _, keepdim, indices))."""
    dim, _, keepdim, indices = attrs
    idx = indices if keepdim else unsqueeze(indices, dim)
    r = gather(tx, b.dim(dim), b.index(idx))
    return r if keepdim else r.squeeze(b.dim(dim))


def _amax_backward(node, g):
    shape, axes, keepdim, nan_aware = node._attrs
    x, out = node.saved()
    oe = _unreduce(out, shape, axes, keepdim)
    mask = E.eq(x, oe)
    if nan_aware:  # full max()/min(): a NaN result comes from the NaN elements
        mask = E.where(E.ne(oe, oe), E.ne(x, x), mask)
    count = sum(mask, axes, keepdim=True)
    # Ties share the gradient evenly (torch's amax/amin and full max/min rule); amax and
    # amin of a NaN have no equal element, so 0 / 0 = NaN everywhere, as in torch.
    return (_unreduce(g, shape, axes, keepdim) * mask / count,)


@op("AmaxBackward0", backward=_amax_backward, jvp=_amax_jvp, saves=("self", "result"), vmap=Dims("dim"))
def _extreme(x, dim, keepdim, fn, name):
    d = x._data
    axes = _axes(dim, d.ndim)
    if d.size == 0 and dim is None:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0."
                           " Specify the reduction dim with the 'dim' argument.")
    for a in axes:
        if d.shape[a] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")
    r = fn(d, axis=axes, keepdims=keepdim)
    out = Tensor(asarray(r))
    full = name in ("max", "min")  # max()/min() without dim: MaxBackward1, NaN-aware
    node = name.capitalize() + ("Backward1" if full else "Backward0")
    return _extreme.op.emit(out, (x,), (d.shape, axes, keepdim, full), (x, out), node=node)


@op(method=True, export=True, samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1, True)))
def amax(x, dim=(), keepdim=False):
    return _extreme(x, None if dim == () else dim, keepdim, np.max, "amax")


@op(method=True, export=True, samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 0)))
def amin(x, dim=(), keepdim=False):
    return _extreme(x, None if dim == () else dim, keepdim, np.min, "amin")


def scatter_to_indices(node, g, _g_indices=None):
    """The gradient put back where the indices along dim took the values (max/min,
    sort, topk; attrs are (dim, input shape, keepdim, _), the indices saved)."""
    dim, shape, keepdim, _ = node._attrs
    (idx,) = node.saved()
    if not keepdim:
        g = unsqueeze(g, dim)
        idx = unsqueeze(idx, dim)
    return (scatter_add_zeros(g, dim, idx, shape),)


def _max_min_batched(b, x, dim, keepdim, name, arg_fn, full_fn):
    if dim is None:
        return _extreme(reshape(x, (b.size, -1)), 1, False, full_fn, name)
    return _max_min(x, b.dim(dim, x), keepdim, name, arg_fn, full_fn)


@op("MaxBackward0", backward=scatter_to_indices, jvp=take_at_indices, saves=("indices",),
    vmap=_max_min_batched)
def _max_min(x, dim, keepdim, name, arg_fn, full_fn):
    if dim is None:
        return _extreme(x, None, False, full_fn, name)
    d = x._data
    ax = wrap_dim(dim, d.ndim)
    if d.ndim and d.shape[ax] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {ax} to have non-zero size.")
    idx = np.expand_dims(arg_fn(d, axis=ax), ax) if d.ndim else np.zeros((), np.int64, like=d)
    vals = np.take_along_axis(d, idx, axis=ax) if d.ndim else d.copy()
    if not keepdim and d.ndim:
        vals, idx = vals.squeeze(ax), idx.squeeze(ax)
    values, indices = Tensor(ascontiguous(vals)), Tensor(idx.astype(np.int64))
    _max_min.op.emit(values, (x,), (ax, d.shape, keepdim, indices), (indices,),
                     node=name.capitalize() + "Backward0")
    return values_indices(values, indices)


def _values(fn):
    """Tested through its values: max(x, dim) also returns indices."""
    return lambda x, *a, **k: fn(x, *a, **k) if not a and not k else fn(x, *a, **k)[0]


@op(method=True, export=True, test=_values(lambda *a, **k: max(*a, **k)),
    samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1), Sample(Arg(3, 4), 0, keepdim=True)))
def max(x, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return E.maximum(x, dim)
    return _max_min(x, dim, keepdim, "max", np.argmax, np.max)


@op(method=True, export=True, test=_values(lambda *a, **k: min(*a, **k)),
    samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1)))
def min(x, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return E.minimum(x, dim)
    return _max_min(x, dim, keepdim, "min", np.argmin, np.min)


def _arg_extreme(x, dim, keepdim, np_fn):
    d = x._data
    if dim is None:
        r = asarray(np_fn(d), dtype=np.int64)
        return Tensor(r.reshape((1,) * d.ndim) if keepdim else r)
    r = np_fn(d, axis=wrap_dim(dim, d.ndim), keepdims=keepdim)
    return Tensor(asarray(r, dtype=np.int64))


def _arg_extreme_batched(np_fn):
    def rule(b, x, dim=None, keepdim=False):
        if dim is not None:
            return _arg_extreme(x, b.dim(dim, x), keepdim, np_fn)
        out = _arg_extreme(reshape(x, (b.size, -1)), 1, False, np_fn)
        return reshape(out, (b.size,) + (1,) * (x.ndim - 1)) if keepdim else out
    return rule


@op(method=True, export=True, vmap=_arg_extreme_batched(np.argmax))
def argmax(x, dim=None, keepdim=False):
    return _arg_extreme(x, dim, keepdim, np.argmax)


@op(method=True, export=True, vmap=_arg_extreme_batched(np.argmin))
def argmin(x, dim=None, keepdim=False):
    return _arg_extreme(x, dim, keepdim, np.argmin)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _pivot(d, axes):
    """The first element of each reduction (keepdims shape; 0 for an empty input)."""
    if not d.size:
        return d.dtype.type(0)
    return d[tuple(slice(0, 1) if i in axes else slice(None) for i in range(d.ndim))]


def _centered(x, axes):
    return x - mean(x, axes, keepdim=True)


def _moment(d, axes, corr, keepdim, fn):
    """numpy's var or std (`fn`) of the input minus one of its elements per reduction:
    exactly 0 for a constant input, where x - mean(x) keeps the rounding error of the
    mean. float32 is summed in float64, so values near the float32 limit do not
    overflow the squares."""
    wide = np.float64 if d.dtype == np.float32 else d.dtype
    z = d.astype(wide) - _pivot(d, axes)
    r = getattr(z, fn)(axis=axes, ddof=corr, keepdims=keepdim)
    return asarray(r).astype(d.dtype, copy=False)


def _var_backward(node, g):
    shape, axes, keepdim, corr = node._attrs
    (x,) = node.saved()
    n = _count(shape, axes)
    centered = _centered(x, axes)
    return (_unreduce(g, shape, axes, keepdim) * centered * (2.0 / (n - corr)),)


def _var_jvp(b, out, inputs, attrs, tx):
    shape, axes, keepdim, corr = attrs
    return sum(_centered(inputs[0], axes) * tx, b.dims(axes), keepdim) * (
        2.0 / (_count(shape, axes) - corr))


@op("VarBackward0", backward=_var_backward, jvp=_var_jvp, saves=("self",), method=True,
    vmap=Dims("dim"), export=True, samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1),
                          Sample(Arg(3, 4), 0, correction=0)))
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # var(x, False): the old unbiased positional form
        dim, unbiased = None, dim
    _need_float(x, "var")
    corr = _correction(unbiased, correction)
    d = x._data
    axes = _axes(dim, d.ndim)
    out = Tensor(_moment(d, axes, corr, keepdim, "var"))
    return var.op.emit(out, (x,), (d.shape, axes, keepdim, corr), (x,))


def _over_std(t, out):
    """t / out, 0 where the std is 0 (torch's subgradient for a constant input)."""
    return E.where(E.eq(out, 0), 0.0, t / out)


def _std_backward(node, g):
    shape, axes, keepdim, corr = node._attrs
    x, out = node.saved()
    n = _count(shape, axes)
    centered = _centered(x, axes)
    ge = _unreduce(_over_std(g, out), shape, axes, keepdim)
    return (ge * centered / (n - corr),)


def _std_jvp(b, out, inputs, attrs, tx):
    shape, axes, keepdim, corr = attrs
    return _over_std(sum(_centered(inputs[0], axes) * tx, b.dims(axes), keepdim), out) / (
        _count(shape, axes) - corr)


@op("StdBackward0", backward=_std_backward, jvp=_std_jvp, saves=("self", "result"), method=True,
    vmap=Dims("dim"), export=True, samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1, keepdim=True)))
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    _need_float(x, "std")
    corr = _correction(unbiased, correction)
    d = x._data
    axes = _axes(dim, d.ndim)
    out = Tensor(_moment(d, axes, corr, keepdim, "std"))
    return std.op.emit(out, (x,), (d.shape, axes, keepdim, corr), (x, out))


def _logsumexp_backward(node, g):
    shape, axes, keepdim = node._attrs
    x, out = node.saved()
    return (_unreduce(g, shape, axes, keepdim) * E.exp(x - _unreduce(out, shape, axes, keepdim)),)


def _logsumexp_jvp(b, out, inputs, attrs, tx):
    shape, axes, keepdim = attrs
    return sum(tx * E.exp(inputs[0] - _unreduce(out, shape, axes, keepdim)), b.dims(axes), keepdim)


@op("LogsumexpBackward0", backward=_logsumexp_backward, jvp=_logsumexp_jvp, vmap=Dims("dim"),
    saves=("self", "result"), method=True, export=True,
    samples=(Sample(Arg(3, 4), 1), Sample(Arg(3, 4), (0, 1))))
def logsumexp(x, dim, keepdim=False):
    _need_float(x, "logsumexp")
    d = x._data
    axes = _axes(dim, d.ndim)
    m = d.max(axis=axes, keepdims=True) if d.size else np.zeros(_kept_shape(d.shape, axes), d.dtype, like=d)
    m = np.where(np.isfinite(m), m, 0)  # all -inf (or inf) rows: no shift
    r = np.log(np.exp(d - m).sum(axis=axes, keepdims=True)) + m
    if not keepdim:
        r = r.reshape([s for i, s in enumerate(d.shape) if i not in axes])
    out = Tensor(asarray(r, dtype=d.dtype))
    return logsumexp.op.emit(out, (x,), (d.shape, axes, keepdim), (x, out))


def _norm_backward(node, g):
    shape, axes, keepdim, p = node._attrs
    x, out = node.saved()
    return (_unreduce(g, shape, axes, keepdim) * _norm_backward_core(x, out, shape, axes, keepdim, p),)


def _norm_backward_core(x, out, shape, axes, keepdim, p):
    """d norm / d x, with torch's subgradient 0 where the norm is 0."""
    oe = _unreduce(out, shape, axes, keepdim)
    if p == 1:
        return E.sign(x)
    if p == float("inf"):  # as amax, but a NaN counts as a maximum (torch; sign(nan) is 0)
        nan = E.ne(x, x)
        mask = E.where(nan, nan, E.eq(E.abs(x), oe))
        return E.sign(x) * mask / sum(mask, axes, keepdim=True)
    safe = E.where(E.eq(oe, 0), 1.0, oe)
    if p == 2:
        return E.where(E.eq(oe, 0), 0.0, x / safe)
    return E.where(E.eq(oe, 0), 0.0, x * E.abs(x) ** (p - 2) / safe ** (p - 1))


def _norm_jvp(b, out, inputs, attrs, tx):
    shape, axes, keepdim, p = attrs
    return sum(tx * _norm_backward_core(inputs[0], out, shape, axes, keepdim, p), b.dims(axes),
               keepdim)


@op("NormBackward1", backward=_norm_backward, jvp=_norm_jvp, saves=("self", "result"), vmap=Dims("dim"),
    method=True, export=True, samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1, 1),
                                       Sample(Arg(3, 4), 3, 0), Sample(Arg(3, 4), float("inf"), 1)))
def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    _need_float(x, "norm")
    if p == "fro" or p is None:
        p = 2
    if not isinstance(p, (int, float)) or p <= 0:
        raise RuntimeError(f"norm(): only p > 0 (or 'fro', inf) is supported, got p={p!r}")
    d = x._data
    axes = _axes(dim, d.ndim)
    a = np.abs(d)
    if p == float("inf"):
        r = a.max(axis=axes, keepdims=keepdim)
    elif p == 2:
        r = np.sqrt((a * a).sum(axis=axes, keepdims=keepdim))
    elif p == 1:
        r = a.sum(axis=axes, keepdims=keepdim)
    else:
        r = (a ** p).sum(axis=axes, keepdims=keepdim) ** (1.0 / p)
    out = Tensor(asarray(r, dtype=d.dtype))
    return norm.op.emit(out, (x,), (d.shape, axes, keepdim, float(p)), (x, out))


def _cumsum_backward(node, g):
    (dim,) = node._attrs
    return (flip(cumsum(flip(g, dim), dim), dim),)


@op("CumsumBackward0", backward=_cumsum_backward, linear=lambda b, dim: (b.dim(dim),), vmap=Dims("dim"),
    method=True, export=True, inplace=True, samples=(Sample(Arg(3, 4), 1), Sample(Arg(5), 0)))
def cumsum(x, dim, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    d = x._data
    ax = wrap_dim(dim, d.ndim)
    out_dt = np.dtype(np.int64) if d.dtype.kind in "biu" else d.dtype
    out = Tensor(np.cumsum(d, axis=ax, dtype=out_dt) if d.ndim else d.astype(out_dt).copy())
    return cumsum.op.emit(out, (x,), (ax,))


def _reverse_cumsum(t, dim):
    return flip(cumsum(flip(t, dim), dim), dim)


def _zero_split(x, dim):
    """Masks along dim: before the first zero, at it, and from it on; and x with
    that first zero set to 1 (the products that skip it)."""
    zeros_so_far = cumsum(E.eq(x, 0).to(_dt.int64), dim)  # counted in int64 on every device
    before = E.eq(zeros_so_far, 0)
    first_zero = E.eq(x, 0) * E.eq(zeros_so_far, 1)
    skipped = E.where(first_zero, 1.0, x)
    return before, first_zero, E.ne(zeros_so_far, 0), skipped


def _cumprod_backward(node, g):
    # d out_j / d x_i = prod_{k <= j, k != i} x_k: out_j / x_i before the first zero; at
    # the first zero, the products that skip it; after it, 0 (torch's rule, exact at zeros).
    (dim,) = node._attrs
    x, out = node.saved()
    before, first_zero, after, skipped = _zero_split(x, dim)
    safe = E.where(before, x, 1.0)
    head = E.where(before, _reverse_cumsum(g * out, dim) / safe, 0.0)
    at_zero = _reverse_cumsum(g * cumprod(skipped, dim) * after, dim)
    return (head + E.where(first_zero, at_zero, 0.0),)


def _cumprod_jvp(b, out, inputs, attrs, tx):
    (dim,) = attrs
    x = inputs[0]
    before, first_zero, after, skipped = _zero_split(x, dim)
    head = E.where(before, out * cumsum(tx / E.where(before, x, 1.0), b.dim(dim)), 0.0)
    t_zero = sum(E.where(first_zero, tx, 0.0), b.dim(dim), keepdim=True)
    return head + E.where(after, t_zero * cumprod(skipped, dim), 0.0)


@op("CumprodBackward0", backward=_cumprod_backward, jvp=_cumprod_jvp, saves=("self", "result"),
    vmap=Dims("dim"),
    method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 4, low=0.5, high=1.5), 1), Sample(Arg(5, low=-1.5, high=1.5), 0)))
def cumprod(x, dim, dtype=None):
    """Cumulative products along `dim`; its gradient is exact where elements are 0.

    >>> import jitgrad
    >>> jitgrad.tensor([1.0, 2.0, 0.0, 4.0]).cumprod(0)
    tensor([1., 2., 0., 0.])
    """
    if dtype is not None:
        x = x.to(dtype)
    d = x._data
    ax = wrap_dim(dim, d.ndim)
    out_dt = np.dtype(np.int64) if d.dtype.kind in "biu" else d.dtype
    # float32 and float16 accumulate in float64, as torch's CPU kernel: a product that
    # passes the float32 limit can come back under it
    wide = np.float64 if d.dtype in (np.float32, np.float16) else out_dt
    out = Tensor((np.cumprod(d.astype(wide), axis=ax) if d.ndim else d.copy()).astype(out_dt))
    return cumprod.op.emit(out, (x,), (ax,), (x, out))
