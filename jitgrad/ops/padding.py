"""Padding (nn.functional.pad). Constant padding is one op whose backward is
the opposite padding, as torch's (a negative width crops). Reflect, replicate
and circular padding pick, along each padded dim, the source position of
every output position: one index_select per dim, whose gradient adds up
where a position was copied more than once."""
import numpy as np

from ..dtypes import int64
from ..tensor import Tensor
from . import creation
from .indexing import index_select
from .registry import Arg, Sample, op

MODES = ("constant", "reflect", "replicate", "circular")


def _widths(pad, ndim):
    """Per dim of an `ndim`-dim tensor, its (before, after) widths: torch's `pad`
    lists them from the last dim backwards."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{ndim}")
    k = len(pad) // 2
    return [(0, 0)] * (ndim - k) + [(pad[2 * (k - 1 - j)], pad[2 * (k - 1 - j) + 1])
                                    for j in range(k)]


def _constant_pad_backward(node, g):
    pad, _ = node._attrs
    return (constant_pad_nd(g, [-w for w in pad]),)


@op("ConstantPadNdBackward0", backward=_constant_pad_backward,
    linear=lambda batch, pad, value: (pad, 0), export=True,
    samples=(Sample(Arg(3, 4), (1, 2)), Sample(Arg(2, 3, 4), (-1, 2, 1, 0), 1.5)))
def constant_pad_nd(x, pad, value=0):
    """x with `value` added around it: pad = (before, after) widths from the last
    dim backwards; a negative width removes that many elements instead."""
    d = x._data
    widths = _widths(pad, d.ndim)
    keep, shape = [], []
    for dim, (n, (before, after)) in enumerate(zip(d.shape, widths)):
        size = n + before + after
        if size < 0:
            raise RuntimeError(f"narrow(): length must be non-negative. The input size {n}, plus "
                               f"negative padding {before} and {after}, would leave a negative "
                               f"size at dimension {dim} of the input.")
        keep.append(slice(max(-before, 0), max(n - max(-after, 0), max(-before, 0))))
        shape.append(size)
    out = np.full(shape, value, d.dtype, like=d)
    inner = tuple(slice(max(before, 0), max(before, 0) + s.stop - s.start)
                  for (before, _), s in zip(widths, keep))
    out[inner] = d[tuple(keep)]
    return constant_pad_nd.op.emit(Tensor(out), (x,), (tuple(pad), value))


def _source_positions(mode, n, before, after, dim, shape):
    """For each output position along a dim of size n padded by (before, after),
    the input position it copies."""
    i = np.arange(-before, n + after)
    if mode == "reflect":
        if before >= n or after >= n:
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({before}, {after}) at "
                               f"dimension {dim} of input {list(shape)}")
        return np.abs(n - 1 - np.abs(n - 1 - np.abs(i)))
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if before > n or after > n:
        raise RuntimeError("Padding value causes wrapping around more than once.")
    return i % n


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: `pad` holds (before, after) widths from the last dim
    backwards. "constant" fills with `value` (0 by default; negative widths crop);
    "reflect" mirrors without repeating the edge, "replicate" repeats the edge,
    "circular" wraps around; those three pad the last 1, 2 or 3 dims of a tensor
    with one or no batch dim before its channel dim.

    >>> import jitgrad
    >>> jitgrad.nn.functional.pad(jitgrad.arange(4.0).reshape(1, 4), (2, 1), mode="reflect")
    tensor([[2., 1., 0., 1., 2., 3., 2.]])
    """
    pad = tuple(pad)
    for at, w in enumerate(pad):
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
            raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, but found "
                            f"element of type {type(w).__name__} at pos {at}")
    if mode not in MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode == "constant":
        return constant_pad_nd(input, pad, 0 if value is None else value)
    if value is not None:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    shape = input.shape
    if len(pad) not in (2, 4, 6) or input.ndim not in (len(pad) // 2 + 1, len(pad) // 2 + 2):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {input.ndim}D "
                                  f"input tensor.")
    out = input
    for dim, (before, after) in enumerate(_widths(pad, input.ndim)):
        if before or after:
            index = _source_positions(mode, shape[dim], before, after, dim, shape)
            # (a recorded creation: a jitgrad.compile trace replays it)
            out = index_select(out, dim, creation.tensor(index, dtype=int64, device=input.device))
    return out
