"""Rearranging copies: roll, repeat, tile, repeat_interleave, unfold,
meshgrid. Each is linear in its input; the backward undoes the move (roll
back) or sums the copies (repeat; the others through indexing/expand)."""
import numpy as np

from .._trace import graph_break
from ..tensor import Tensor, wrap_dim
from .reduce import sum as _sum
from .registry import Arg, Dims, Sample, op
from .indexing import getitem
from .join import stack
from .views import _as_shape, permute, reshape


def _as_tuple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


@op("RollBackward0", backward=lambda node, g: (roll(g, [-s for s in node._attrs[0]],
                                                     node._attrs[1]),),
    linear=lambda b, shifts, dims: (shifts, b.dims(dims)), method=True, export=True,
    vmap=Dims("dims", none_is_all=False),
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
    vmap=lambda b, x, *sizes: repeat(b.pad(x, len(_as_shape(sizes))), (1,) + _as_shape(sizes)),
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


@op(method=True, export=True, vmap=Dims("dim", none_is_all=False),
    samples=(Sample(Arg(2, 3), 2, dim=1), Sample(Arg(2, 3), 3)))
def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along `dim`) repeated `repeats` times in a row
    (an int, or a tensor with one count per element); without `dim` the tensor
    is flattened. `repeat_interleave(counts)` alone gives the index of each count.

    >>> import jitgrad
    >>> jitgrad.tensor([1, 2]).repeat_interleave(2)
    tensor([1, 1, 2, 2])
    """
    if repeats is None or isinstance(repeats, Tensor):
        graph_break("repeat_interleave with a tensor of repeats: the result's shape depends "
                    "on the counts' values (an int `repeats` keeps it fixed)")
    if repeats is None:  # repeat_interleave(counts): 0 counts[0] times, 1 counts[1] times, ...
        counts = x._data
        return Tensor(np.repeat(np.arange(counts.shape[0], like=counts), counts))
    if dim is None:
        x, dim = reshape(x, -1), 0
    d = wrap_dim(dim, x._data.ndim)
    counts = repeats._data if isinstance(repeats, Tensor) else int(repeats)
    index = np.repeat(np.arange(x._data.shape[d], like=x._data), counts)
    return getitem(x, (slice(None),) * d + (index,))


@op(method=True, vmap=Dims("dimension"), samples=(Sample(Arg(2, 7), 1, 3, 2), Sample(Arg(5), 0, 2, 1)))
def unfold(x, dimension, size, step):
    """The windows of `size` elements, `step` apart, along `dimension`: that dim
    becomes the window count and the window is a new last dim (a copy; torch
    returns a view).

    >>> import jitgrad
    >>> jitgrad.arange(5).unfold(0, 2, 2)
    tensor([[0, 1],
            [2, 3]])
    """
    d = wrap_dim(dimension, max(x._data.ndim, 1))
    n = x._data.shape[d] if x._data.ndim else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if x._data.ndim == 0:  # torch: the one element, as a window of `size` (0 or 1)
        return getitem(reshape(x, (1,)), slice(0, size))
    windows = (n - size) // step + 1
    starts = np.arange(windows, like=x._data) * step
    index = (starts[:, None] + np.arange(size, like=x._data)).reshape(-1)
    shape = x._data.shape
    picked = reshape(getitem(x, (slice(None),) * d + (index,)),
                     shape[:d] + (windows, size) + shape[d + 1:])
    nd = picked._data.ndim
    return permute(picked, [k for k in range(nd) if k != d + 1] + [d + 1])


@op(export=True, test=lambda *ts, indexing: stack(meshgrid(*ts, indexing=indexing)),
    samples=(Sample(Arg(3), Arg(2), indexing="ij"), Sample(Arg(3), Arg(2), Arg(4), indexing="xy")))
def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-D tensors: the i-th output holds tensors[i] along
    dim i ('ij'), or with the first two dims swapped ('xy', numpy's and
    matplotlib's convention).

    >>> import jitgrad
    >>> xs, ys = jitgrad.meshgrid(jitgrad.tensor([1, 2]), jitgrad.tensor([5, 6, 7]), indexing="ij")
    >>> xs.shape, ys[0]
    (jitgrad.Size([2, 3]), tensor([5, 6, 7]))
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for i, t in enumerate(tensors):
        if t._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: "
                               f"{t._data.ndim}D (tensor {i})")
    sizes = [t.numel() for t in tensors]
    swap = indexing == "xy" and len(tensors) > 1
    if swap:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for i, t in enumerate(tensors):
        axis = {0: 1, 1: 0}.get(i, i) if swap else i
        shape = [1] * len(tensors)
        shape[axis] = -1
        grids.append(reshape(t, shape).expand(*sizes))
    return tuple(grids)
