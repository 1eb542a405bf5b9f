"""Rearranging copies: roll, repeat, tile. Each is linear in its input; the
backward undoes the move (roll back) or sums the copies (repeat)."""
import numpy as np

from ..tensor import Tensor, wrap_dim
from .reduce import sum as _sum
from .registry import Arg, Sample, op
from .indexing import index_select
from .views import _as_shape, reshape


def _as_tuple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


@op("RollBackward0", backward=lambda node, g: (roll(g, [-s for s in node._attrs[0]],
                                                     node._attrs[1]),),
    linear=lambda b, shifts, dims: (shifts, b.dims(dims)), method=True, export=True,
    samples=(Sample(Arg(3, 4), 1, 1), Sample(Arg(3, 4), (2, -1), (0, 1)), Sample(Arg(3, 4), 5)))
def roll(x, shifts, dims=None):
    """Shift the elements along `dims` cyclically; without `dims` the tensor is
    rolled as if flattened.

    >>> import jitgrad
    >>> jitgrad.arange(6).reshape(2, 3).roll(1, 1)
    tensor([[2, 0, 1],
            [5, 3, 4]])
    """
    shifts = _as_tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0 "
                               "(without dims, give one shift)")
        return reshape(roll(reshape(x, -1), shifts, 0), x._data.shape)
    dims = _as_tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    nd = max(x._data.ndim, 1)
    axes = tuple(wrap_dim(d, nd) for d in dims)
    shifts = tuple(int(s) for s in shifts)
    return roll.op.emit(Tensor(np.roll(x._data, shifts, axes)), (x,), (shifts, axes))


def _repeat_backward(node, g):
    shape, reps = node._attrs
    # the copies of each element sit at (copy, index) pairs of a split shape: sum the copies
    split = [n for r, s in zip(reps, shape) for n in (r, s)]
    return (_sum(reshape(g, split), tuple(range(0, len(split), 2))),)


def _repeat_jvp(b, out, inputs, attrs, tx):
    shape, reps = attrs
    return repeat(b.align(tx, inputs[0], len(reps)), (1,) * b.k + reps)


@op("RepeatBackward0", backward=_repeat_backward, jvp=_repeat_jvp, method=True,
    samples=(Sample(Arg(2, 3), 2, 1), Sample(Arg(2, 3), (3, 1, 2)), Sample(Arg(3), 2)))
def repeat(x, *sizes):
    """The tensor tiled `sizes[i]` times along each dim (leading new dims where
    `sizes` is longer than the tensor's shape).

    >>> import jitgrad
    >>> jitgrad.tensor([1, 2]).repeat(2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    reps = _as_shape(sizes)
    d = x._data
    if len(reps) < d.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           f"dimensions of tensor (repeat dims {list(reps)}, tensor shape "
                           f"{list(d.shape)})")
    if any(r < 0 for r in reps):
        raise RuntimeError(f"Trying to create tensor with negative dimension: repeats {list(reps)}")
    shape = (1,) * (len(reps) - d.ndim) + d.shape
    out = Tensor(np.tile(d.reshape(shape), reps))
    return repeat.op.emit(out, (x,), (shape, reps))


@op(method=True, export=True, samples=(Sample(Arg(2, 3), (2,)), Sample(Arg(2, 3), (2, 1, 1))))
def tile(x, dims):
    """`repeat` with `dims` padded by ones in front to the tensor's dims.

    >>> import jitgrad
    >>> jitgrad.tensor([[1, 2]]).tile((2,))
    tensor([[1, 2, 1, 2]])
    """
    dims = _as_tuple(dims)
    return repeat(x, (1,) * (x._data.ndim - len(dims)) + dims)


@op(method=True, export=True, samples=(Sample(Arg(2, 3), 2, dim=1), Sample(Arg(2, 3), 3)))
def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along `dim`) repeated `repeats` times in a row
    (an int, or a tensor with one count per element); without `dim` the tensor
    is flattened. `repeat_interleave(counts)` alone gives the index of each count.

    >>> import jitgrad
    >>> jitgrad.tensor([1, 2]).repeat_interleave(2)
    tensor([1, 1, 2, 2])
    """
    if repeats is None:  # repeat_interleave(counts): 0 counts[0] times, 1 counts[1] times, ...
        counts = x._data
        return Tensor(np.repeat(np.arange(counts.shape[0], like=counts), counts))
    if dim is None:
        x, dim = reshape(x, -1), 0
    d = wrap_dim(dim, x._data.ndim)
    counts = repeats._data if isinstance(repeats, Tensor) else int(repeats)
    n = x._data.shape[d]
    index = Tensor(np.repeat(np.arange(n, like=x._data), counts))
    return index_select(x, d, index)
