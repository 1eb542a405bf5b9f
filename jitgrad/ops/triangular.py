"""Parts of matrices: tril, triu, diagonal, diag, trace. tril and triu mask a
copy (linear, their own backward); diagonal is a view whose gradient is made of
indexing's backward."""
import numpy as np

from .. import backend
from ..tensor import Tensor, wrap_dim
from .creation import zeros_as
from .indexing import index_put, index_put_zeros
from .reduce import sum as _sum
from .registry import Arg, Sample, op
from .views import make_view, permute


def _matrices(x, who):
    if x._data.ndim < 2:
        raise RuntimeError(f"{who}: input tensor must have at least 2 dimensions")


@op("TrilBackward0", backward=lambda node, g: (tril(g, node._attrs[0]),),
    linear=lambda b, k: (k,), method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 4)), Sample(Arg(2, 3, 3), -1)))
def tril(x, diagonal=0):
    """The lower triangle of the last two dims (elements on or below the
    `diagonal`-th diagonal); the rest zeros.

    >>> import jitgrad
    >>> jitgrad.ones(2, 3).tril()
    tensor([[1., 0., 0.],
            [1., 1., 0.]])
    """
    _matrices(x, "tril")
    return tril.op.emit(Tensor(np.tril(x._data, diagonal)), (x,), (diagonal,))


@op("TriuBackward0", backward=lambda node, g: (triu(g, node._attrs[0]),),
    linear=lambda b, k: (k,), method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 4)), Sample(Arg(2, 3, 3), 1)))
def triu(x, diagonal=0):
    """The upper triangle of the last two dims (on or above the `diagonal`-th
    diagonal); the rest zeros."""
    _matrices(x, "triu")
    return triu.op.emit(Tensor(np.triu(x._data, diagonal)), (x,), (diagonal,))


def _diagonal_key(n_rows, n_cols, offset, like):
    """Row and column indices of the `offset`-th diagonal of an n_rows x n_cols matrix,
    as arrays: a constant key, which a jitgrad.compile trace records with the indexing
    call (they depend on shapes only)."""
    start_row, start_col = max(-offset, 0), max(offset, 0)
    n = max(min(n_rows - start_row, n_cols - start_col), 0)
    steps = np.arange(n, like=like)
    return steps + start_row, steps + start_col


def _diagonal_backward(node, g):
    """zeros of the input's shape with g on the diagonal (torch's diagonal_backward),
    made of indexing's backward, so differentiable again."""
    offset, a, b, shape = node._attrs
    order = [d for d in range(len(shape)) if d not in (a, b)] + [a, b]
    rows, cols = _diagonal_key(shape[a], shape[b], offset, g._data)
    moved = index_put_zeros(g, tuple(shape[d] for d in order), (Ellipsis, rows, cols))
    return (permute(moved, tuple(int(d) for d in np.argsort(order))),)


@op("DiagonalBackward0", backward=_diagonal_backward,
    linear=lambda batch, offset, a, b, shape: (offset, batch.dim(a), batch.dim(b)),
    method=True, export=True,
    samples=(Sample(Arg(3, 4)), Sample(Arg(2, 3, 4), 1, 0, 2), Sample(Arg(3, 4), -1)))
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The `offset`-th diagonal of the matrices over dims (dim1, dim2), as the
    last dim: a view, as torch's (writing to it writes to x).

    >>> import jitgrad
    >>> m = jitgrad.zeros(3, 3)
    >>> m.diagonal(1).fill_(5.0)
    tensor([5., 5.])
    >>> m
    tensor([[0., 5., 0.],
            [0., 0., 5.],
            [0., 0., 0.]])
    """
    return _diagonal(x, offset, dim1, dim2, view=True)


def _diagonal(x, offset, dim1, dim2, view):
    """diagonal's result: a view of x, or (diag of a matrix, torch's diagonal_copy)
    a new tensor."""
    d = x._data
    a, b = wrap_dim(dim1, d.ndim), wrap_dim(dim2, d.ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    arr = np.diagonal(d, offset, a, b)
    attrs = (offset, a, b, d.shape)
    if not view:
        return diagonal.op.emit(Tensor(arr.copy()), (x,), attrs, node="DiagonalBackward0_copy")
    if backend.is_host(arr) and d.flags.writeable:
        arr.flags.writeable = True  # numpy's diagonal view is read-only, torch's is not
    return diagonal.op.emit(make_view(x, arr, diagonal, (offset, a, b)), (x,), attrs)


@op(method=True, export=True, samples=(Sample(Arg(3)), Sample(Arg(3), -1), Sample(Arg(3, 4), 1)))
def diag(x, diagonal=0):
    """A vector: the square matrix with it on the `diagonal`-th diagonal; a
    matrix: its `diagonal`-th diagonal.

    >>> import jitgrad
    >>> jitgrad.diag(jitgrad.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    nd = x._data.ndim
    if nd == 2:
        return _diagonal(x, diagonal, 0, 1, view=False)
    if nd != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D")
    n = x._data.shape[0] + abs(diagonal)
    rows, cols = _diagonal_key(n, n, diagonal, x._data)
    return index_put(zeros_as((n, n), x._data.dtype, x), (rows, cols), x)


@op(method=True, export=True, samples=(Sample(Arg(3, 4)),))
def trace(x):
    """The sum of the main diagonal of a matrix."""
    if x._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x._data.ndim}")
    return _sum(diagonal(x))
