"""Sorting: sort, argsort, topk. The values are gathered at the sorted indices,
so the backward puts the gradient back at those indices (as max(dim) does)."""
import collections

import numpy as np

from ..tensor import Tensor, ascontiguous, wrap_dim
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
