"""Pooling over 1 or 2 spatial dims, composed of differentiable ops.

- max pooling finds each window's argmax (numpy, on the input's device) and
  gathers those elements: the backward scatters into them, the double backward
  gathers again (torch's MaxPool2DWithIndicesBackward0 does the same);
- average pooling is a convolution of each channel with a kernel of ones
  (jitgrad/ops/conv.py), divided by torch's count per window;
- adaptive average pooling takes one mean per output window and dim.
"""
import numpy as np

from .. import backend
from ..tensor import Tensor
from .creation import tensor
from .indexing import gather, scatter_add_zeros
from .conv import Geometry, as_tuple, convolution, linked
from .join import cat
from .registry import op


def check_input(x, spatial, name):
    """x must be (C, *spatial) or (N, C, *spatial) with elements."""
    if x.dim() not in (spatial + 1, spatial + 2) or x.numel() == 0:
        raise RuntimeError(f"non-empty {spatial + 1}D or {spatial + 2}D (batch mode) tensor expected "
                           f"for input to {name}, but got input of size: {list(x.shape)}")


def _windows(n, k, s, p, d, ceil_mode):
    """Output size of a pooled dim, with torch's rule that the last window starts
    inside the input or its left padding."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode, spatial, name):
    """(kernel, stride, padding, dilation, output sizes) per spatial dim, checked as torch does."""
    check_input(x, spatial, name)
    k = as_tuple(kernel_size, spatial, "kernel_size", name)
    s = k if stride is None or stride == [] or stride == () else as_tuple(stride, spatial, "stride", name)
    p = as_tuple(padding, spatial, "padding", name)
    d = as_tuple(dilation, spatial, "dilation", name)
    if min(k) <= 0:
        raise RuntimeError(f"{name}: kernel_size must be greater than zero, but got {k}")
    if min(s) <= 0:
        raise RuntimeError("stride should not be zero")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation {d}")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0 or pp > ((kk - 1) * dd + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pp}, kernel_size={kk} and dilation={dd}")
    sizes = tuple(x.shape[-spatial:])
    out = tuple(_windows(n, *a, ceil_mode) for n, *a in zip(sizes, k, s, p, d))
    if min(out) < 1:
        have = "x".join(map(str, (x.shape[-spatial - 1],) + sizes))
        got = "x".join(map(str, (x.shape[-spatial - 1],) + out))
        raise RuntimeError(f"Given input size: ({have}). Calculated output size: ({got}). "
                           f"Output size is too small")
    return k, s, p, d, out


# ---- max pooling ----------------------------------------------------------------------------

def _argmax_indices(x4, k, s, p, d, out):
    """For each window of x4 (N, C, H, W): the flat index (h * W + w) of its maximum,
    chosen as torch does: the last NaN if there is one, else the first maximum among
    the taps inside the input (so a window of -inf points at its first element)."""
    N, C, H, W = x4.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = k, s, p, d, out
    hn, wn = (oh - 1) * sh + dh * (kh - 1) + 1, (ow - 1) * sw + dw * (kw - 1) + 1
    low = -np.inf if x4.dtype.kind == "f" else np.iinfo(x4.dtype).min
    xp = np.full((N, C, max(hn, H + ph), max(wn, W + pw)), low, x4.dtype, like=x4)
    xp[:, :, ph:ph + H, pw:pw + W] = x4
    taps = [(i, j) for i in range(kh) for j in range(kw)]
    windows = np.stack([xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                           j * dw:j * dw + (ow - 1) * sw + 1:sw] for i, j in taps])
    rows = np.arange(oh)[None, :] * sh - ph + np.arange(kh)[:, None] * dh  # (kh, oh)
    cols = np.arange(ow)[None, :] * sw - pw + np.arange(kw)[:, None] * dw  # (kw, ow)
    inside = (((rows >= 0) & (rows < H))[:, None, :, None]
              & ((cols >= 0) & (cols < W))[None, :, None, :]).reshape(len(taps), 1, 1, oh, ow)
    device = backend.of(x4).name
    inside = backend.move(inside, device)
    best = np.argmax(np.logical_and(inside, windows == windows.max(axis=0)), axis=0)
    if x4.dtype.kind == "f":
        nan = np.logical_and(inside, np.isnan(windows))
        last_nan = len(taps) - 1 - np.argmax(np.flip(nan, 0), axis=0)
        best = np.where(nan.any(axis=0), last_nan, best)
    tap_offset = np.array([i * dh * W + j * dw for i, j in taps], np.int64)
    corner = (np.arange(oh) * sh - ph)[:, None] * W + (np.arange(ow) * sw - pw)[None, :]
    return backend.move(tap_offset, device)[best] + backend.move(corner.astype(np.int64), device)


def _flat_planes(t, spatial):
    """t with its spatial dims flattened into one (where the indices count)."""
    return t.reshape(tuple(t.shape[:t.dim() - spatial]) + (-1,))


def _max_pool_backward(node, g):
    xshape, spatial, _ = node._attrs
    flat_indices, x = node.saved()
    planes = len(xshape) - spatial
    flat = scatter_add_zeros(_flat_planes(g, spatial), planes, flat_indices,
                             tuple(xshape[:planes]) + (int(np.prod(xshape[planes:])),))
    # torch's backward reads the input too: with create_graph=True the gradient
    # requires grad as a function of it (derivative 0)
    return (linked(flat.reshape(xshape), x),)


def _max_pool_jvp(b, out, inputs, attrs, tx):
    _, spatial, flat_indices = attrs
    planes = tuple(inputs[0].shape[:-spatial])
    taken = gather(tx.reshape(b.shape(planes) + (-1,)), -1, b.index(flat_indices))
    return taken.reshape(b.shape(tuple(out.shape)))


@op("MaxPool2DWithIndicesBackward0", backward=_max_pool_backward, jvp=_max_pool_jvp,
    saves=("indices", "self"))
def _max_pool_flat(x, geometry, spatial):
    """(values, indices into the flattened planes) of max pooling x; geometry as
    pool_geometry gives it. Both are results, so a compiled step replays them."""
    one, zero = (1,) * (2 - spatial), (0,) * (2 - spatial)
    k, s, p, d, out = geometry
    lead = tuple(x.shape[:-spatial])
    x4 = x._data.reshape((-1, 1) + one + tuple(x.shape[-spatial:]))
    idx = _argmax_indices(x4, one + k, one + s, zero + p, one + d, one + out)
    flat_indices = Tensor(idx.reshape(lead + (-1,)))
    values = Tensor(np.take_along_axis(x._data.reshape(lead + (-1,)), flat_indices._data, axis=-1)
                    .reshape(lead + out))
    _max_pool_flat.op.emit(values, (x,), (tuple(x.shape), spatial, flat_indices),
                           (flat_indices, x))
    return values, flat_indices


def max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, spatial, name):
    geometry = pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode, spatial, name)
    values, flat_indices = _max_pool_flat(x, geometry, spatial)
    if not return_indices:
        return values
    return values, flat_indices.reshape(tuple(values.shape))


# ---- average pooling: a convolution with a kernel of ones, divided ----------------------------

def _divisors(n, k, s, p, out, count_include_pad):
    """Per output index of one dim: the window's element count (torch's divide factor)."""
    counts = []
    for o in range(out):
        start = o * s - p
        end = min(start + k, n + p)
        counts.append(end - start if count_include_pad else min(end, n) - max(start, 0))
    return np.array(counts, np.float64)


def avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
             spatial, name):
    k, s, p, _, out = pool_geometry(x, kernel_size, stride, padding, 1, ceil_mode, spatial, name)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if x._data.dtype.kind != "f":
        raise NotImplementedError(f"\"{name}\" not implemented for '{x.dtype.name}'; convert "
                                  f"the input with .float() first")
    sizes = tuple(x.shape[-spatial:])
    lead = tuple(x.shape[:-spatial])
    # ceil_mode's last window may run past the padding: zeros there, left out of the count
    after = [max((o - 1) * ss + kk - n - pp, pp) for o, ss, kk, n, pp in zip(out, s, k, sizes, p)]
    extra = 2 - spatial
    geom = Geometry((1,) * extra + s, (1, 1), ((0, 0),) * extra + tuple(zip(p, after)), 1, 2)
    ones = tensor(np.ones((1, 1) + (1,) * extra + k), dtype=x.dtype, device=x.device)
    planes = x.reshape((-1, 1) + (1,) * extra + sizes)
    sums = convolution(planes, ones, None, geom).reshape(lead + out)
    if divisor_override is not None:
        return sums / divisor_override
    divisor = np.ones(())
    for axis, args in enumerate(zip(sizes, k, s, p, out)):
        shape = [1] * spatial
        shape[axis] = -1
        divisor = divisor * _divisors(*args, count_include_pad).reshape(shape)
    return sums / tensor(divisor, dtype=x.dtype, device=x.device)


def adaptive_avg_pool(x, output_size, spatial, name):
    if x.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{name}(): Expected {spatial + 1}D or {spatial + 2}D tensor, but got "
                           f"{list(x.shape)}")
    if x._data.dtype.kind != "f":
        raise NotImplementedError(f"\"{name}\" not implemented for '{x.dtype.name}'; convert "
                                  f"the input with .float() first")
    sizes = tuple(x.shape[-spatial:])
    want = output_size if isinstance(output_size, (list, tuple)) else (output_size,) * spatial
    if len(want) != spatial:
        raise ValueError(f"{name}: output_size must be an int or a tuple of {spatial} ints, "
                         f"got {output_size!r}")
    want = tuple(n if o is None else int(o) for n, o in zip(sizes, want))
    if min(want) < 0:
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 0 "
                           f"but received {want}")
    # window o of a dim of n covers [floor(o n / out), ceil((o + 1) n / out)): one mean each
    for axis, (n, o) in enumerate(zip(sizes, want)):
        dim = x.dim() - spatial + axis
        if o and n % o == 0:
            shape = tuple(x.shape[:dim]) + (o, n // o) + tuple(x.shape[dim + 1:])
            x = x.reshape(shape).mean(dim + 1)
            continue
        means = [x.narrow(dim, i * n // o, -(-(i + 1) * n // o) - i * n // o).mean(dim, keepdim=True)
                 for i in range(o)]
        x = cat(means, dim) if means else x.narrow(dim, 0, 0)
    return x
