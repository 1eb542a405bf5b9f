"""Sorting: sort, argsort, topk; the values are gathered at the sorted indices,
so the backward puts the gradient back at those indices (as max(dim) does).
Searching and counting: unique, bincount, searchsorted, bucketize."""
import collections

import numpy as np

from .._trace import graph_break
from ..tensor import Tensor, asarray, ascontiguous, wrap_dim
from .legacy import scalar_type
from .reduce import scatter_to_indices, take_at_indices
from .registry import Arg, Sample, op

sort_result = collections.namedtuple("sort", ["values", "indices"])
topk_result = collections.namedtuple("topk", ["values", "indices"])


def _order(d, axis, descending):
    """Indices that sort `d` along `axis`, stable both ways (ties keep their order,
    NaN counts as the largest value, as in torch)."""
    if not descending:
        return np.argsort(d, axis=axis, kind="stable")
    # ascending on the reversed axis, reversed back: descending with ties in order
    rev = np.argsort(np.flip(d, axis), axis=axis, kind="stable")
    return d.shape[axis] - 1 - np.flip(rev, axis)


def _sorted(x, dim, descending, k, node, result):
    d = x._data
    if d.ndim == 0:
        idx = np.zeros((), np.int64, like=d)
        values = Tensor(d.copy())
        ax = 0
    else:
        ax = wrap_dim(dim, d.ndim)
        idx = _order(d, ax, descending)
        if k is not None:
            idx = idx[(slice(None),) * ax + (slice(0, k),)]
        values = Tensor(ascontiguous(np.take_along_axis(d, idx, axis=ax)))
    indices = Tensor(ascontiguous(idx).astype(np.int64, copy=False))
    sort.op.emit(values, (x,), (ax, d.shape, True, indices), (indices,), node=node)
    return result(values, indices)


@op("SortBackward0", backward=scatter_to_indices, jvp=take_at_indices, saves=("indices",),
    method=True, export=True, test=lambda *a, **k: sort(*a, **k).values,
    samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 0, descending=True), Sample(Arg(5))))
def sort(x, dim=-1, descending=False, stable=False):
    """Sorted values along `dim` and their indices, as `(values, indices)`. The
    sort is always stable (`stable` is accepted for torch's signature).

    >>> import jitgrad
    >>> jitgrad.tensor([3.0, 1.0, 2.0]).sort(descending=True)
    sort(values=tensor([3., 2., 1.]), indices=tensor([0, 2, 1]))
    """
    return _sorted(x, dim, descending, None, "SortBackward0", sort_result)


@op(method=True, export=True)
def argsort(x, dim=-1, descending=False, stable=False):
    """The indices that sort `x` along `dim` (stable); not differentiable.

    >>> import jitgrad
    >>> jitgrad.argsort(jitgrad.tensor([[3, 1, 2]]))
    tensor([[1, 2, 0]])
    """
    d = x._data
    if d.ndim == 0:
        return Tensor(np.zeros((), np.int64, like=d))
    return Tensor(ascontiguous(_order(d, wrap_dim(dim, d.ndim), descending)).astype(np.int64))


@op(method=True, export=True, test=lambda *a, **k: topk(*a, **k).values,
    samples=(Sample(Arg(3, 5), 2), Sample(Arg(4, 3), 3, 0, largest=False)))
def topk(x, k, dim=-1, largest=True, sorted=True):
    """The `k` largest (or smallest) values along `dim` and their indices, in
    sorted order (`sorted=False` gives the same order).

    >>> import jitgrad
    >>> jitgrad.tensor([1.0, 5.0, 3.0, 4.0]).topk(2)
    topk(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    size = x._data.shape[wrap_dim(dim, x._data.ndim)] if x._data.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"selected index k out of range: k={k}, but dimension {dim} has size "
                           f"{size}")
    return _sorted(x, dim, largest, k, "TopkBackward0", topk_result)


# ---- searching and counting: not differentiable ---------------------------------------------


@op(method=True, export=True)
def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values, sorted (of the flattened tensor, or the distinct
    slices along `dim`); with `return_inverse` the index of each element in
    them, with `return_counts` how often each occurs. Not differentiable.

    >>> import jitgrad
    >>> jitgrad.tensor([3, 1, 3]).unique(return_counts=True)
    (tensor([1, 3]), tensor([1, 2]))
    """
    graph_break("unique: the result's shape depends on how many distinct values there are")
    d = x._data
    axis = None if dim is None else wrap_dim(dim, d.ndim)
    values, inverse, counts = np.unique(d, return_inverse=True, return_counts=True, axis=axis)
    out = [Tensor(ascontiguous(values))]
    if return_inverse:
        shape = d.shape if axis is None else (d.shape[axis],)
        out.append(Tensor(inverse.reshape(shape).astype(np.int64)))
    if return_counts:
        out.append(Tensor(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


@op(method=True, export=True)
def bincount(x, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs in a 1-D tensor of non-negative
    integers (the sum of `weights` at its positions, if given).

    >>> import jitgrad
    >>> jitgrad.tensor([0, 2, 2]).bincount()
    tensor([1, 0, 2])
    """
    d = x._data
    if d.dtype.kind not in "iu":
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{scalar_type(x)}'; "
                                  "bincount counts integers")
    if d.ndim != 1 or (d.size and d.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    graph_break("bincount: the result's length depends on the largest value")
    w = None if weights is None else weights._data
    counts = np.bincount(d, w, minlength)
    return Tensor(counts.astype(np.int64 if w is None else w.dtype))


@op(export=True)
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each of `values` would go in the last dim of `sorted_sequence` to
    keep it sorted (the first such place, or the last with `right=True`).

    >>> import jitgrad
    >>> jitgrad.searchsorted(jitgrad.tensor([1, 3, 5]), jitgrad.tensor([3, 6]))
    tensor([1, 3])
    """
    seq = sorted_sequence._data
    v = values._data if isinstance(values, Tensor) else np.asarray(values)
    how = side or ("right" if right else "left")
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter._data, -1)
    if seq.ndim == 1:
        r = np.searchsorted(seq, v, side=how)
    else:
        rows = seq.reshape(-1, seq.shape[-1])
        r = np.stack([np.searchsorted(s, q, side=how)
                      for s, q in zip(rows, v.reshape(rows.shape[0], -1))]).reshape(v.shape)
    return Tensor(asarray(r, dtype=np.int32 if out_int32 else np.int64))


@op(export=True)
def bucketize(x, boundaries, *, out_int32=False, right=False):
    """The bucket of each element among the 1-D sorted `boundaries`:
    `searchsorted(boundaries, x)`, as torch."""
    return searchsorted(boundaries, x, out_int32=out_int32, right=right)
