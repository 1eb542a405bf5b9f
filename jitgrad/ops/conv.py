"""Convolution (1-D and 2-D): three ops that are each other's gradients.

`convolution(x, w, b)` is bilinear in (x, w): its gradients are
`conv_input_grad(g, w)` (the transposed convolution) and
`conv_weight_grad(x, g)`, which are bilinear too and whose gradients are the
three ops again, so every order of reverse and forward mode closes over them.

Each is im2col + one matrix product per block of samples (numpy/BLAS, or the
CUDA matmul kernel on a device): the block's column matrix stacks every
kernel tap's view of the zero-padded input, and blocks are sized to stay in
cache (`BLOCK_BYTES`), which made the (64, 16, 32, 32) x 32 3x3 case 2x
faster than one product over the whole batch. With stride 1 an output row
keeps the padded input's row length, so a tap's view is one slice of the
flattened padded input (the kw - 1 extra columns per row are computed and
dropped), and the input gradient is the forward convolution of the output
gradient with the flipped kernel, without a col2im pass.
asv_bench/conv_compare.py measures it against torch.
"""
import os

import numpy as np

from .. import _state, backend
from ..kernels import threads
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


class _Columns:
    """One convolution as matrix products over blocks of samples: the block's zero-padded
    input (flattened per channel), its column matrix (each tap's view of it, stacked),
    and the output positions, torch's im2col done a block at a time."""

    def __init__(self, geom, xshape, wshape, dtype, like):
        self.N, self.C, H, W = geom.as4d(xshape)
        self.O, self.Cg, self.kh, self.kw = geom.as4d(wshape)
        self.G, self.Og = geom.groups, self.O // geom.groups
        self.T = self.kh * self.kw
        (self.sh, self.sw), (self.dh, self.dw) = geom.stride, geom.dilation
        (pt, pb), (pl, pr) = geom.padding
        self.H, self.W, self.pt, self.pl = H, W, pt, pl
        self.Hp, self.Wp = H + pt + pb, W + pl + pr
        self.OH = _out_size(H, self.kh, self.sh, self.dh, (pt, pb))
        self.OW = _out_size(W, self.kw, self.sw, self.dw, (pl, pr))
        # Stride 1: an output row keeps the padded row's length, so a tap's view is one
        # slice of the flattened input; the kw - 1 extra columns per row are dropped.
        self.flat = self.sh == self.sw == 1
        self.row = self.Wp if self.flat else self.OW
        self.L = self.OH * self.row
        self.size = self.Hp * self.Wp + (self.kw - 1) * self.dw  # room for the last slices
        self.dtype, self.like = dtype, like
        self.host = backend.is_host(like)
        per_sample = self.C * self.T * self.L * np.dtype(dtype).itemsize
        self.B = max(1, min(self.N, BLOCK_BYTES // max(per_sample, 1))) if self.host else self.N

    def blocks(self):
        return [slice(n, min(n + self.B, self.N)) for n in range(0, self.N, self.B)]

    def zeros(self, shape):
        return np.zeros(shape, self.dtype, like=self.like)

    def padded(self, b):
        """A zero-padded input buffer for a block of b samples, (b, C, size)."""
        return self.zeros((b, self.C, self.size))

    def interior(self, xp):
        img = xp[..., :self.Hp * self.Wp].reshape(xp.shape[:2] + (self.Hp, self.Wp))
        return img[:, :, self.pt:self.pt + self.H, self.pl:self.pl + self.W]

    def view(self, xp, t):
        """The elements of padded `xp` that tap t meets, one per output position."""
        i, j = divmod(t, self.kw)
        if self.flat:
            off = i * self.dh * self.Wp + j * self.dw
            return xp[..., off:off + self.L]
        img = xp[..., :self.Hp * self.Wp].reshape(xp.shape[:2] + (self.Hp, self.Wp))
        h, w = i * self.dh, j * self.dw
        return img[:, :, h:h + self.sh * (self.OH - 1) + 1:self.sh,
                   w:w + self.sw * (self.OW - 1) + 1:self.sw]

    def columns(self, xp, cols):
        """cols (b, C, T, L) filled with each tap's view of xp; as (b, G, Cg * T, L)."""
        b = xp.shape[0]
        by_tap = cols.reshape((b, self.C, self.T) + self.view(xp, 0).shape[2:])
        for t in range(self.T):
            by_tap[:, :, t] = self.view(xp, t)
        return cols.reshape(b, self.G, self.Cg * self.T, self.L)

    def positions(self, g4, blk, buffer):
        """Block blk of an output gradient g4 (N, O, OH, OW) as (b, G, Og, L) in `buffer`
        (b, O, OH, row), whose dropped columns stay zero."""
        b = blk.stop - blk.start
        if self.row == self.OW:
            return ascontiguous(g4[blk]).reshape(b, self.G, self.Og, self.L)
        buffer[:b, ..., :self.OW] = g4[blk]
        return buffer[:b].reshape(b, self.G, self.Og, self.L)

    def gradient_buffer(self):
        return self.zeros((self.B, self.O, self.OH, self.row))


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

_POOL = []  # [ThreadPoolExecutor, ThreadpoolController or None, pid], made on first use


def _pool():
    # a forked child (a DataLoader worker) has the parent's pool object but not its threads
    if not _POOL or _POOL[2] != os.getpid():
        # imported here, not with the package: they cost `import jitgrad` 7 ms
        from concurrent.futures import ThreadPoolExecutor
        try:
            from threadpoolctl import ThreadpoolController
            controller = ThreadpoolController()
        except ImportError:  # optional: without it the blocks run on one thread
            controller = None
        _POOL[:] = [ThreadPoolExecutor(max(threads.get_num_threads(), 1),
                                       thread_name_prefix="jitgrad-conv"), controller, os.getpid()]
    return _POOL[:2]


def _over_blocks(c, work):
    """[work(blocks) for each thread's share of c.blocks()]: one share per thread on the
    host (the products on one BLAS thread each), everything in one call on a device."""
    blocks = c.blocks()
    n = min(threads.get_num_threads(), len(blocks)) if c.host else 1
    if n <= 1:
        return [work(blocks)]
    pool, controller = _pool()
    shares = [blocks[k * len(blocks) // n:(k + 1) * len(blocks) // n] for k in range(n)]
    if controller is None:
        return list(pool.map(work, shares))
    with controller.limit(limits=1, user_api="blas"):
        return list(pool.map(work, shares))


def _conv_array(x, w, bias, geom):
    c = _Columns(geom, x.shape, w.shape, x.dtype, x)
    x4 = x.reshape(geom.as4d(x.shape))
    w2 = w.reshape(c.G, c.Og, c.Cg * c.T)
    out = np.empty((c.N, c.O, c.OH, c.OW), x.dtype, like=x)
    bias = 0 if bias is None else bias.reshape(-1, 1, 1)

    def work(blocks):
        xp, cols = c.padded(c.B), np.empty((c.B, c.C, c.T, c.L), x.dtype, like=x)
        prod = np.empty((c.B, c.G, c.Og, c.L), x.dtype, like=x)
        for blk in blocks:
            b = blk.stop - blk.start
            c.interior(xp[:b])[...] = x4[blk]  # the borders stay zero from block to block
            _product(w2, c.columns(xp[:b], cols[:b]), prod[:b], c.host)
            # drops the extra columns and adds the bias in one pass over the block
            np.add(prod[:b].reshape(b, c.O, c.OH, c.row)[..., :c.OW], bias, out=out[blk])

    _over_blocks(c, work)
    return out.reshape(geom.out_shape(x.shape, w.shape))


def _transposed_as_forward(w, geom):
    """(weight, geometry) with which the forward convolution of the output gradient is the
    gradient of the input (the kernel flipped, its channel dims swapped per group, the
    padding complemented), or None where that does not hold (strides, or padding wider
    than the kernel's reach)."""
    kernel = geom.as4d(w.shape)[2:]
    reach = [d * (k - 1) for d, k in zip(geom.dilation, kernel)]
    pads = tuple((r - a, r - b) for r, (a, b) in zip(reach, geom.padding))
    if geom.stride != (1, 1) or min(min(p) for p in pads) < 0:
        return None
    w4 = w.reshape(geom.as4d(w.shape))
    O, Cg, kh, kw = w4.shape
    G = geom.groups
    flipped = np.flip(w4, (2, 3)).reshape(G, O // G, Cg, kh, kw)
    wt = ascontiguous(np.swapaxes(flipped, 1, 2)).reshape(G * Cg, O // G, kh, kw)
    return wt, Geometry((1, 1), geom.dilation, pads, G, 2)


def _input_grad_array(g, w, geom, xshape):
    as_forward = _transposed_as_forward(w, geom)
    if as_forward is not None:  # no col2im: measured 25% faster for stride 1
        wt, forward_geom = as_forward
        return _conv_array(g.reshape(geom.as4d(g.shape)), wt, None, forward_geom).reshape(xshape)
    c = _Columns(geom, xshape, w.shape, g.dtype, g)
    g4 = g.reshape(geom.as4d(g.shape))
    w2t = ascontiguous(np.swapaxes(w.reshape(c.G, c.Og, c.Cg * c.T), 1, 2))
    gx = np.empty((c.N, c.C, c.H, c.W), g.dtype, like=g)

    def work(blocks):
        gxp, cols = c.padded(c.B), np.empty((c.B, c.G, c.Cg * c.T, c.L), g.dtype, like=g)
        gq = c.gradient_buffer()
        for blk in blocks:
            b = blk.stop - blk.start
            _product(w2t, c.positions(g4, blk, gq), cols[:b], c.host)
            by_tap = cols[:b].reshape((b, c.C, c.T) + c.view(gxp, 0).shape[2:])
            gxp[:b] = 0
            for t in range(c.T):  # col2im: each tap's column adds into the positions it read
                v = c.view(gxp[:b], t)
                v += by_tap[:, :, t]
            gx[blk] = c.interior(gxp[:b])

    _over_blocks(c, work)
    return gx.reshape(xshape)


def _weight_grad_array(x, g, geom, wshape):
    c = _Columns(geom, x.shape, wshape, x.dtype, x)
    x4 = x.reshape(geom.as4d(x.shape))
    g4 = g.reshape(geom.as4d(g.shape))

    def work(blocks):
        gq = c.gradient_buffer()
        gw = np.zeros((c.G, c.Cg * c.T, c.Og), x.dtype, like=x)
        part = np.empty((c.B, c.G, c.Cg * c.T, c.Og), x.dtype, like=x)
        xp, cols = c.padded(c.B), np.empty((c.B, c.C, c.T, c.L), x.dtype, like=x)
        for blk in blocks:
            b = blk.stop - blk.start
            c.interior(xp[:b])[...] = x4[blk]
            # columns @ gradient^T: BLAS reads the transposed operand faster this way round
            _product(c.columns(xp[:b], cols[:b]), np.swapaxes(c.positions(g4, blk, gq), -1, -2),
                     part[:b], c.host)
            gw += part[:b].sum(0)
        return gw

    parts = _over_blocks(c, work)
    total = parts[0]
    for p in parts[1:]:
        total += p
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
    geom, has_bias = node._attrs
    needs = [m is not None for m in node._in_meta]
    gx = conv_input_grad(g, w, geom, x.shape) if needs[0] else None
    gw = conv_weight_grad(x, g, geom, w.shape) if needs[1] else None
    gb = None
    if has_bias and needs[2]:
        dims = tuple(d for d in range(g.dim()) if d != g.dim() - geom.spatial - 1)
        gb = sum(g, dims)
    # torch's backward reads x, w and g for every gradient (see `linked`)
    anchor = x if x.requires_grad else w
    return tuple(t if t is None or t.requires_grad else linked(t, anchor) for t in (gx, gw, gb))


@op("ConvolutionBackward0", backward=_convolution_backward, saves=("input", "weight"),
    jvp=_bilinear_jvp(lambda tx, w, a: convolution(tx, w, None, a[0]),
                      lambda x, tw, a: convolution(x, tw, None, a[0])))
def convolution(x, w, bias, geom):
    """The convolution of x (N, C, *spatial) or (C, *spatial) with w (O, C / groups,
    *kernel), plus bias (O,) if given; arguments checked by the caller (nn.functional)."""
    out = Tensor(_conv_array(x._data, w._data, None if bias is None else bias._data, geom))
    return convolution.op.emit(out, (x, w, bias), (geom, bias is not None), (x, w))


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


def conv(input, weight, bias, stride, padding, dilation, groups, spatial):
    """torch.nn.functional.conv1d / conv2d (spatial = 1 / 2): checks, then `convolution`."""
    name = f"conv{spatial}d"
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input "
                           f"to {name}, but got input of size: {list(input.shape)}")
    if weight.dim() != spatial + 2:
        raise RuntimeError(f"{name}: expected a {spatial + 2}-D weight (out_channels, in_channels "
                           f"/ groups, *kernel_size), but got weight of size {list(weight.shape)}")
    stride = as_tuple(stride, spatial, "stride", name)
    dilation = as_tuple(dilation, spatial, "dilation", name)
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
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
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != wshape[0]):
        raise RuntimeError(f"Given weight of size {wshape}, expected bias to be 1-dimensional with "
                           f"{wshape[0]} elements, but got bias of size {list(bias.shape)} instead")
    for t in (weight, bias):
        if t is not None and t.dtype != input.dtype:
            raise RuntimeError(f"expected scalar type {input.dtype.name} but found {t.dtype.name}: "
                               f"{name} needs input, weight and bias of one dtype; convert with "
                               f".to({input.dtype.name})")
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
