"""Convolution (1-D and 2-D): three ops that are each other's gradients.

`convolution(x, w, b)` is bilinear in (x, w): its gradients are
`conv_input_grad(g, w)` (the transposed convolution) and
`conv_weight_grad(x, g)`, which are bilinear too and whose gradients are the
three ops again, so every order of reverse and forward mode closes over them.

Each is one matrix product per block of samples (numpy/BLAS, or the CUDA
matmul kernel on a device) beside a copy between the input and its column
matrix, which holds every kernel tap's view of the input: im2col before the
product for the convolution and the weight gradient, col2im (the columns
added back onto the input positions they came from) after it for the input
gradient. Blocks are sized to stay in cache (`BLOCK_BYTES`) and run on
jitgrad's threads. The copies are Numba kernels, with numpy stand-ins for
the first steps and for devices.
asv_bench/conv_compare.py measures it against torch.
"""
import queue

import numpy as np

from .. import _state, backend
from ..kernels import cache, threads
from ..kernels.cpu import staged
from ..kernels.source import NUMBA_TYPE, header
from ..tensor import Tensor, ascontiguous
from .creation import zeros_like
from .join import stack
from .reduce import sum
from .registry import op


def as_tuple(value, n, what, name):
    """An int or an n-sequence of ints as an n-tuple (torch's `_pair`/`_single`)."""
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return tuple(value) * n
        if len(value) != n:
            raise RuntimeError(f"{name}: {what} must either be a single int, or a tuple of {n} "
                               f"ints, got {tuple(value)}")
        return tuple(int(v) for v in value)
    return (int(value),) * n



class Geometry:
    """A convolution's hyper-parameters, normalised to 2-D (a 1-D convolution is
    a 2-D one of height 1): stride, dilation, (before, after) padding per dim,
    groups, and how many spatial dims the caller's tensors have."""
    __slots__ = ("stride", "dilation", "padding", "groups", "spatial")

    def __init__(self, stride, dilation, padding, groups, spatial):
        self.stride, self.dilation, self.padding = stride, dilation, padding
        self.groups, self.spatial = groups, spatial

    def as4d(self, shape):
        """`shape` (batched or not, 1-D or 2-D) as (N, C, H, W)."""
        shape = tuple(shape)
        if len(shape) == self.spatial + 1:
            shape = (1,) + shape
        return shape[:2] + (1,) * (2 - self.spatial) + shape[2:]

    def out_shape(self, xshape, wshape):
        """The result's shape for an input and a weight of these shapes (caller's rank)."""
        _, _, H, W = self.as4d(xshape)
        oh, ow = (_out_size(n, k, s, d, p) for n, k, s, d, p in zip(
            (H, W), self.as4d(wshape)[2:], self.stride, self.dilation, self.padding))
        spatial = (oh, ow)[2 - self.spatial:]
        return tuple(xshape[:-self.spatial - 1]) + (wshape[0],) + spatial


def _out_size(n, k, stride, dilation, pad):
    return (n + pad[0] + pad[1] - dilation * (k - 1) - 1) // stride + 1


# Samples per block: the block's column matrix stays near this many bytes, so that it
# and the block's output stay in cache between the copies and the product (on 64 x 16
# x 32 x 32 blocks of one sample ran 2x faster than the whole batch at once).
BLOCK_BYTES = 1 << 20


def _reach(n_out, n_in, k, stride, dilation, pad_before):
    """Per kernel tap along one dim: (first output, end output, first input) of the
    output positions whose input element lies inside the input (not in the padding)."""
    taps = []
    for i in range(k):
        start = pad_before - i * dilation  # output o reads input o * stride - start
        lo = min(max(0, -(-start // stride)), n_out)
        hi = max(min(n_out, (n_in - 1 + start) // stride + 1), lo)
        taps.append((lo, hi, lo * stride - start))
    return taps


# ---- the copies between an image and its columns ----------------------------------------------
# im2col: cols[n, c, t, oh * OW + ow] = image[n, c, ih, iw], the element tap t meets at
# output (oh, ow), for the outputs whose tap lies inside the image (the other entries are
# left alone: zero). col2im: image[n, c] = the sum of the columns over the taps that read
# each element, in tap order. taps: (T, 6) int64 rows (output rows lo, hi, output cols lo,
# hi, first input row, first input col); sizes: (OH, OW, stride h, stride w).

def _rectangles(taps, sizes):
    """(tap, output rows, output cols, input rows, input cols) of the taps that meet the
    input, as slices."""
    _, _, sh, sw = (int(v) for v in sizes)
    return [(t, slice(r0, r1), slice(c0, c1), slice(i0, i0 + (r1 - r0 - 1) * sh + 1, sh),
             slice(j0, j0 + (c1 - c0 - 1) * sw + 1, sw))
            for t, (r0, r1, c0, c1, i0, j0) in enumerate(taps.tolist()) if r1 > r0 and c1 > c0]


def _by_tap(cols, sizes):
    oh, ow = int(sizes[0]), int(sizes[1])
    return cols[..., :oh * ow].reshape(cols.shape[:3] + (oh, ow))


def _im2col_numpy(image, cols, taps, sizes):
    by_tap = _by_tap(cols, sizes)
    for t, r_out, c_out, r_in, c_in in _rectangles(taps, sizes):
        by_tap[:, :, t, r_out, c_out] = image[:, :, r_in, c_in]


def _col2im_numpy(image, cols, taps, sizes):
    by_tap = _by_tap(cols, sizes)
    image[...] = 0
    for t, r_out, c_out, r_in, c_in in _rectangles(taps, sizes):
        image[:, :, r_in, c_in] += by_tap[:, :, t, r_out, c_out]


# The same loops compiled: numpy copies row by row (31 or 32 elements here) and its in-place
# adds cost 4x the compiled loop (target case, one thread: im2col 2.5 ms against 1.3,
# col2im 6.3 against 1.6). Indices are unsigned so that Numba adds no wraparound test
# for negative ones, which kept the rows from being vectorized (1.9 ms).
_COPY_SOURCE = """
u = numba.uint64


@numba.njit("void({array}, {array}, int64[:, ::1], int64[::1])", cache=True, nogil=True)
def kernel(image, cols, taps, sizes):
    ow_stride, sh, sw = sizes[1], sizes[2], u(sizes[3])
    N, C, H, W = image.shape
    T, row = cols.shape[2], cols.shape[3]
    pixels, column = image.ravel(), cols.ravel()
    for n in range(N):
        for c in range(C):
            plane = u((n * C + c) * H * W)
{start}
            for t in range(T):
                r0, r1, c0, c1, i0, j0 = taps[t, 0], taps[t, 1], taps[t, 2], taps[t, 3], taps[t, 4], taps[t, 5]
                m = u(c1 - c0)
                for r in range(r0, r1):
                    d = u(((n * C + c) * T + t) * row + r * ow_stride + c0)
                    s = plane + u((i0 + (r - r0) * sh) * W + j0)
                    if sw == 1:  # a contiguous run: vectorized
                        for k in range(m):
                            {move}
                    else:
                        for k in range(m):
                            {move_strided}
"""
_COPIES = {"im2col": (_im2col_numpy, "", "column[d + k] = pixels[s + k]"),
           "col2im": (_col2im_numpy, "            pixels[plane:plane + u(H * W)] = 0",
                      "pixels[s + k] += column[d + k]")}
_chosen = {}  # (copy, dtype name) -> its Numba kernel, once loaded
_staged = {}  # (copy, dtype name) -> kernels/cpu.py's staged numpy version
cache.on_clear(_chosen.clear)
cache.on_clear(_staged.clear)


def _copy(name, like):
    """The im2col or col2im to run on arrays like `like`, chosen on the calling thread (the
    block threads never compile): numpy's on a device, for a dtype without a kernel, and
    until kernels/cpu.py's staging hands over to the Numba kernel."""
    numpy_version, start, move = _COPIES[name]
    dtype = like.dtype.name
    if not backend.is_host(like) or dtype not in ("float32", "float64"):
        return numpy_version
    key = (name, dtype)
    if key in _chosen:
        return _chosen[key]
    source = header() + _COPY_SOURCE.format(array=NUMBA_TYPE[dtype] + "[:, :, :, ::1]",
                                            start=start, move=move,
                                            move_strided=move.replace("s + k", "s + k * sw"))

    def load():
        return _chosen.setdefault(key, cache.load(f"conv_{name}_{dtype}", source))
    if cache.started():  # Numba runs: a kernel costs no more than its (cached) load
        return load()
    if key not in _staged:
        _staged[key] = staged(load, numpy_version)
    # one call on empty operands counts this convolution toward the hand-over (and loads
    # the kernel when it is due)
    nothing = np.empty((0, 1, 1, 1), like.dtype)
    _staged[key](nothing, nothing, np.empty((0, 6), np.int64), np.ones(4, np.int64))
    return _chosen.get(key, numpy_version)


class _Columns:
    """One convolution as matrix products over blocks of samples: torch's im2col done a
    block at a time into a column buffer (b, C, T, row) that holds, for each channel and
    kernel tap, the input element each output position meets.

    An output position whose tap falls in the padding meets a zero, and which positions
    those are depends on the geometry only: the buffer is zeroed once per thread and
    each block copies just the taps' inside rectangles, so there is no padded copy of the
    input and no zero-fill per block. `row` is the output positions plus one cache line:
    rows of a power-of-two length (32 x 32 floats) alias in the cache inside BLAS and
    made the product 1.5x slower."""

    def __init__(self, geom, xshape, wshape, dtype, like):
        self.N, self.C, H, W = geom.as4d(xshape)
        self.O, self.Cg, kh, kw = geom.as4d(wshape)
        self.G, self.Og = geom.groups, self.O // geom.groups
        self.T = kh * kw
        self.OH, self.OW = (_out_size(n, k, s, d, p) for n, k, s, d, p in zip(
            (H, W), (kh, kw), geom.stride, geom.dilation, geom.padding))
        rows = _reach(self.OH, H, kh, geom.stride[0], geom.dilation[0], geom.padding[0][0])
        cols = _reach(self.OW, W, kw, geom.stride[1], geom.dilation[1], geom.padding[1][0])
        self.taps = np.array([(r0, r1, c0, c1, i0, j0) for r0, r1, i0 in rows
                              for c0, c1, j0 in cols], np.int64).reshape(-1, 6)
        self.sizes = np.array((self.OH, self.OW) + tuple(geom.stride), np.int64)
        self.L = self.OH * self.OW
        self.dtype, self.like = dtype, like
        self.host = backend.is_host(like)
        itemsize = np.dtype(dtype).itemsize
        self.row = self.L + 64 // itemsize if self.host else self.L
        per_sample = self.C * self.T * self.row * itemsize
        self.B = max(1, min(self.N, BLOCK_BYTES // max(per_sample, 1))) if self.host else self.N

    def blocks(self):
        return [slice(n, min(n + self.B, self.N)) for n in range(0, self.N, self.B)]

    def buffer(self):
        """A column buffer for one thread's blocks, zero where taps meet the padding."""
        return np.zeros((self.B, self.C, self.T, self.row), self.dtype, like=self.like)

    def matrices(self, buf, b):
        """The first b samples of buf as (b, G, Cg * T, L) matrices."""
        return buf[:b, ..., :self.L].reshape(b, self.G, self.Cg * self.T, self.L)

    def positions(self, a4, blk):
        """Block blk of an (N, O, OH, OW) array as (b, G, Og, L)."""
        return ascontiguous(a4[blk]).reshape(blk.stop - blk.start, self.G, self.Og, self.L)


def _product(a, b, out, host):
    """out[...] = a @ b (numpy writes into out directly; a device copies the result in)."""
    if host:
        np.matmul(a, b, out=out)
    else:
        out[...] = np.matmul(a, b)


# ---- blocks on threads ------------------------------------------------------------------------
# numpy's BLAS splits each product of a block over its own threads, and for products this
# small the threads spend more time meeting than multiplying (measured 2 threads: 10x slower
# than 1). So the blocks go to jitgrad's threads instead, with BLAS at one thread inside.


def _over_blocks(c, scratch, step):
    """[step(buffers, block) for each of c.blocks()], in block order, where each thread
    makes its buffers with scratch() once. On the host the threads take the next block
    when they are free rather than a fixed share, so a thread slowed by another process
    on its core does less of the work; a device runs its one block on the caller's thread."""
    blocks = c.blocks()
    n = min(threads.get_num_threads(), len(blocks)) if c.host else 1
    if n <= 1:
        buffers = scratch()
        return [step(buffers, blk) for blk in blocks]
    todo = queue.SimpleQueue()
    for k, blk in enumerate(blocks):
        todo.put((k, blk))
    results = [None] * len(blocks)

    def worker():
        buffers = scratch()
        while True:
            try:
                k, blk = todo.get_nowait()
            except queue.Empty:
                return
            results[k] = step(buffers, blk)

    with threads.one_blas_thread():
        threads.run_tasks([worker] * n, n)  # one draining worker per thread
    return results


def _conv_array(x, w, bias, geom):
    c = _Columns(geom, x.shape, w.shape, x.dtype, x)
    x4 = ascontiguous(x.reshape(geom.as4d(x.shape)))
    w2 = w.reshape(c.G, c.Og, c.Cg * c.T)
    out = np.empty((c.N, c.O, c.OH, c.OW), x.dtype, like=x)
    bias = None if bias is None else bias.reshape(-1, 1)
    im2col = _copy("im2col", x)

    def step(buf, blk):
        b = blk.stop - blk.start
        im2col(x4[blk], buf[:b], c.taps, c.sizes)
        _product(w2, c.matrices(buf, b), out[blk].reshape(b, c.G, c.Og, c.L), c.host)
        if bias is not None:  # while the block's output is in cache
            block = out[blk].reshape(b, c.O, c.L)
            block += bias

    _over_blocks(c, c.buffer, step)
    return out.reshape(geom.out_shape(x.shape, w.shape))


def _input_grad_array(g, w, geom, xshape):
    """The transposed convolution: columns = weight^T @ gradient, then col2im."""
    c = _Columns(geom, xshape, w.shape, g.dtype, g)
    g4 = g.reshape(geom.as4d(g.shape))
    w2t = ascontiguous(np.swapaxes(w.reshape(c.G, c.Og, c.Cg * c.T), 1, 2))
    gx = np.empty((c.N, c.C) + tuple(geom.as4d(xshape)[2:]), g.dtype, like=g)
    col2im = _copy("col2im", g)

    def step(buf, blk):
        b = blk.stop - blk.start
        _product(w2t, c.positions(g4, blk), c.matrices(buf, b), c.host)
        col2im(gx[blk], buf[:b], c.taps, c.sizes)

    _over_blocks(c, c.buffer, step)
    return gx.reshape(xshape)


def _weight_grad_array(x, g, geom, wshape):
    c = _Columns(geom, x.shape, wshape, x.dtype, x)
    x4 = ascontiguous(x.reshape(geom.as4d(x.shape)))
    g4 = g.reshape(geom.as4d(g.shape))
    im2col = _copy("im2col", x)

    def step(buf, blk):
        b = blk.stop - blk.start
        im2col(x4[blk], buf[:b], c.taps, c.sizes)
        # columns @ gradient^T: BLAS reads the transposed operand faster this way round
        part = np.matmul(c.matrices(buf, b), np.swapaxes(c.positions(g4, blk), -1, -2))
        return part.sum(0)

    # one partial sum per block, added in block order: the same bits whichever thread ran it
    total = np.zeros((c.G, c.Cg * c.T, c.Og), x.dtype, like=x)
    for part in _over_blocks(c, c.buffer, step):
        total += part
    return ascontiguous(np.swapaxes(total, 1, 2)).reshape(wshape)


# ---- forward mode: each op is bilinear, so its tangent is the op on one tangent at a time ----

def _each(batch, fn, tangent):
    """fn(tangent), or over the leading batch dims of a batched tangent, stacked."""
    if not batch.k:
        return fn(tangent)
    flat = tangent.reshape((-1,) + tuple(tangent.shape[batch.k:]))
    out = stack([fn(flat[b]) for b in range(flat.shape[0])])
    return out.reshape(batch.lead + tuple(out.shape[1:]))


def _bilinear_jvp(f_first, f_second):
    """The tangent of op(a, b, ...) from f_first(ta, b) and f_second(a, tb)."""
    def rule(batch, out, inputs, attrs, ta, tb, *rest):
        a, b = inputs[:2]
        terms = []
        if ta is not None:
            terms.append(_each(batch, lambda t: f_first(t, b, attrs), ta))
        if tb is not None:
            terms.append(_each(batch, lambda t: f_second(a, t, attrs), tb))
        if rest and rest[0] is not None:  # the bias: broadcast over batch and positions
            geom = attrs[0]
            shape = (1,) * (len(out.shape) - geom.spatial - 1) + (-1,) + (1,) * geom.spatial
            terms.append(rest[0].reshape(batch.shape(shape)))
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total
    return rule


# ---- the ops ----------------------------------------------------------------------------------

@op("ConvolutionBackwardBackward0", backward=lambda node, gg: (gg, zeros_like(node._attrs[0])))
def linked(grad, x, node=None):
    """grad's values, recorded as a function of grad and (with derivative 0) of x:
    torch's backward nodes that read their input give gradients that require grad
    under create_graph=True even where they do not depend on it. Returns grad
    itself where x does not require grad either."""
    if not (x.requires_grad and _state.local.grad_enabled):
        return grad
    return linked.op.emit(Tensor(grad._data), (grad, x), (x,), node=node)


# ---- convolution and its gradients ----------------------------------------------------------

def _convolution_backward(node, g):
    x, w = node.saved()
    geom, has_bias, transposed = node._attrs
    needs = [m is not None for m in node._in_meta]
    if transposed is None:
        gx = conv_input_grad(g, w, geom, x.shape) if needs[0] else None
        gw = conv_weight_grad(x, g, geom, w.shape) if needs[1] else None
    else:  # a transposed convolution's adjoint is the convolution
        gx = convolution(g, w, None, geom) if needs[0] else None
        gw = conv_weight_grad(g, x, geom, w.shape) if needs[1] else None
    gb = None
    if has_bias and needs[2]:
        dims = tuple(d for d in range(g.dim()) if d != g.dim() - geom.spatial - 1)
        gb = sum(g, dims)
    # torch's backward reads x, w and g for every gradient (see `linked`)
    anchor = x if x.requires_grad else w
    return tuple(t if t is None or t.requires_grad else linked(t, anchor) for t in (gx, gw, gb))


@op("ConvolutionBackward0", backward=_convolution_backward, saves=("input", "weight"),
    jvp=_bilinear_jvp(lambda tx, w, a: convolution(tx, w, None, a[0], a[2]),
                      lambda x, tw, a: convolution(x, tw, None, a[0], a[2])))
def convolution(x, w, bias, geom, transposed=None):
    """The convolution of x (N, C, *spatial) or (C, *spatial) with w (O, C / groups,
    *kernel), plus bias (O,) if given; arguments checked by the caller (nn.functional).
    `transposed`, a shape: the transposed convolution of x into that shape instead (the
    gradient of the convolution of an input of that shape; w is (C, O / groups, *kernel))."""
    b = None if bias is None else bias._data
    if transposed is None:
        arr = _conv_array(x._data, w._data, b, geom)
    else:
        arr = _input_grad_array(x._data, w._data, geom, tuple(transposed))
        if b is not None:
            arr = arr + b.reshape((-1,) + (1,) * geom.spatial)
    out = Tensor(arr)
    return convolution.op.emit(out, (x, w, bias), (geom, bias is not None, transposed), (x, w))


def _input_grad_backward(node, gz):
    g, w = node.saved()
    geom, _ = node._attrs
    needs = [m is not None for m in node._in_meta]
    return (convolution(gz, w, None, geom) if needs[0] else None,
            conv_weight_grad(gz, g, geom, w.shape) if needs[1] else None)


@op("ConvolutionBackwardBackward0", backward=_input_grad_backward, saves=("grad_output", "weight"),
    jvp=_bilinear_jvp(lambda tg, w, a: conv_input_grad(tg, w, a[0], a[1]),
                      lambda g, tw, a: conv_input_grad(g, tw, a[0], a[1])))
def conv_input_grad(g, w, geom, xshape):
    """The gradient of convolution(x, w) with respect to x (of shape `xshape`) for
    the output gradient g: the transposed convolution of g with w."""
    out = Tensor(_input_grad_array(g._data, w._data, geom, tuple(xshape)))
    return conv_input_grad.op.emit(out, (g, w), (geom, tuple(xshape)), (g, w))


def _weight_grad_backward(node, gz):
    x, g = node.saved()
    geom, _ = node._attrs
    needs = [m is not None for m in node._in_meta]
    return (conv_input_grad(g, gz, geom, x.shape) if needs[0] else None,
            convolution(x, gz, None, geom) if needs[1] else None)


@op("ConvolutionBackwardBackward0", backward=_weight_grad_backward, saves=("input", "grad_output"),
    jvp=_bilinear_jvp(lambda tx, g, a: conv_weight_grad(tx, g, a[0], a[1]),
                      lambda x, tg, a: conv_weight_grad(x, tg, a[0], a[1])))
def conv_weight_grad(x, g, geom, wshape):
    """The gradient of convolution(x, w) with respect to w (of shape `wshape`) for
    the output gradient g."""
    out = Tensor(_weight_grad_array(x._data, g._data, geom, tuple(wshape)))
    return conv_weight_grad.op.emit(out, (x, g), (geom, tuple(wshape)), (x, g))


# ---- the public entry: torch's arguments and checks --------------------------------------------

def padding_pairs(padding, weight_shape, stride, dilation, spatial):
    """Padding as (before, after) per dim, from ints, a tuple, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * spatial
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: {padding!r}; use 'same', 'valid', an int "
                               "or a tuple of ints")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        # torch puts the odd element of an even total on the right
        totals = [d * (k - 1) for d, k in zip(dilation, weight_shape[2:])]
        return tuple((t // 2, t - t // 2) for t in totals)
    pads = as_tuple(padding, spatial, "padding", f"conv{spatial}d")
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    return tuple((p, p) for p in pads)


def _checked(name, input, weight, stride, dilation, groups, spatial, weight_dims):
    """(stride, dilation) as tuples, after torch's checks of a convolution's (or a
    transposed one's) ranks and hyper-parameters."""
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input "
                           f"to {name}, but got input of size: {list(input.shape)}")
    if weight.dim() != spatial + 2:
        raise RuntimeError(f"{name}: expected a {spatial + 2}-D weight ({weight_dims}, "
                           f"*kernel_size), but got weight of size {list(weight.shape)}")
    stride = as_tuple(stride, spatial, "stride", name)
    dilation = as_tuple(dilation, spatial, "dilation", name)
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    return stride, dilation


def _check_bias_and_dtypes(name, input, weight, bias, out_channels, given):
    """torch's errors for a bias that is not one value per output channel, and for a
    weight or bias of another dtype than the input."""
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"{given}weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {out_channels} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    for t in (weight, bias):
        if t is not None and t.dtype != input.dtype:
            raise RuntimeError(f"expected scalar type {input.dtype.name} but found {t.dtype.name}: "
                               f"{name} needs input, weight and bias of one dtype; convert with "
                               f".to({input.dtype.name})")


def conv(input, weight, bias, stride, padding, dilation, groups, spatial):
    """torch.nn.functional.conv1d / conv2d (spatial = 1 / 2): checks, then `convolution`."""
    name = f"conv{spatial}d"
    stride, dilation = _checked(name, input, weight, stride, dilation, groups, spatial,
                                "out_channels, in_channels / groups")
    pads = padding_pairs(padding, tuple(weight.shape), stride, dilation, spatial)
    batched = (input.shape if input.dim() == spatial + 2 else (1,) + tuple(input.shape))
    wshape = list(weight.shape)
    if wshape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size [{wshape}] instead")
    if batched[1] != wshape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {wshape}, expected "
                           f"input{list(batched)} to have {wshape[1] * groups} channels, but got "
                           f"{batched[1]} channels instead")
    _check_bias_and_dtypes(name, input, weight, bias, wshape[0], "Given ")
    padded = [n + a + b for n, (a, b) in zip(batched[2:], pads)]
    kernel = [d * (k - 1) + 1 for d, k in zip(dilation, wshape[2:])]
    if any(k > n for k, n in zip(kernel, padded)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))})"
                           f". Kernel size: ({' x '.join(map(str, kernel))}). Kernel size can't be "
                           "greater than actual input size")
    extra = 2 - spatial  # a 1-D convolution runs as a 2-D one of height 1
    geom = Geometry((1,) * extra + stride, (1,) * extra + dilation, ((0, 0),) * extra + pads,
                    groups, spatial)
    return convolution(input, weight, bias, geom)


def conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                   spatial):
    """torch.nn.functional.conv_transpose1d / 2d: the gradient of a convolution with
    respect to its input, whose weight (in_channels, out_channels / groups, *kernel) is
    that convolution's, plus bias (out_channels,): checks, then `convolution`."""
    name = f"conv_transpose{spatial}d"
    stride, dilation = _checked(name, input, weight, stride, dilation, groups, spatial,
                                "in_channels, out_channels / groups")
    pads = as_tuple(padding, spatial, "padding", name)
    extra = as_tuple(output_padding, spatial, "output_padding", name)
    if min(pads) < 0:
        raise RuntimeError("negative padding is not supported")
    if any(e >= max(s, d) for e, s, d in zip(extra, stride, dilation)):
        sides = ("height", "width")[2 - spatial:]
        parts = [f"output_padding_{n}: {e}" for n, e in zip(sides, extra)] + \
            [f"stride_{n}: {s}" for n, s in zip(sides, stride)] + \
            [f"dilation_{n}: {d}" for n, d in zip(sides, dilation)]
        raise RuntimeError("output padding must be smaller than either stride or dilation, but "
                           f"got {' '.join(parts)}")
    batched = input.shape if input.dim() == spatial + 2 else (1,) + tuple(input.shape)
    wshape = list(weight.shape)
    if batched[1] != wshape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {wshape}, expected "
                           f"input{list(batched)} to have {wshape[0]} channels, but got "
                           f"{batched[1]} channels instead")
    if wshape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size [{wshape}] instead")
    out_channels = wshape[1] * groups
    _check_bias_and_dtypes(name, input, weight, bias, out_channels, "Given transposed=1, ")
    sizes = [(n - 1) * s - 2 * p + d * (k - 1) + e + 1 for n, s, p, d, k, e in zip(
        batched[2:], stride, pads, dilation, wshape[2:], extra)]
    if min(sizes) <= 0:
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, batched[2:]))}). "
                           f"Calculated output size per channel: ({' x '.join(map(str, sizes))}). "
                           "Output size is too small")
    pad4 = ((0, 0),) * (2 - spatial) + tuple((p, p) for p in pads)
    geom = Geometry((1,) * (2 - spatial) + stride, (1,) * (2 - spatial) + dilation, pad4, groups,
                    spatial)
    out_shape = tuple(input.shape[:-spatial - 1]) + (out_channels,) + tuple(sizes)
    return convolution(input, weight, bias, geom, out_shape)
