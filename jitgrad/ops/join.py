"""Joining and splitting: cat, stack, split, chunk, unbind."""

import numpy as np

from .. import _state
from .. import dtypes as _dt
from .._trace import TRACE
from ..backend import HOST_ARRAY
from ..tensor import Tensor, result_tensor, wrap_dim
from .creation import zeros_as
from .record import FW, records_nothing, shared
from .registry import Arg, Dims, Sample, op
from .indexing import getitem, narrow, select
from .views import creation_meta, make_view


def _cat_jvp(b, out, inputs, attrs, *ts):
    return cat([b.zeros(u, v) for u, v in zip(ts, inputs)], b.dim(attrs[0]))


def _cat_backward(node, g):
    dim, sizes = node._attrs
    outs, start = [], 0
    for s in sizes:
        outs.append(narrow(g, dim, start, s))
        start += s
    return tuple(outs)


def _joined_dtype(tensors, who):
    if not tensors:
        raise RuntimeError(f"{who}(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{who}(): expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    dt = tensors[0]._data.dtype
    for t in tensors:
        if t._data.dtype != dt:
            dt = _dt.promote_np(dt, t._data.dtype)
    return dt


def _cat_batched(b, tensors, dim=0):
    tensors = [b.expand(t) for t in tensors]
    return cat(tensors, b.dim(dim, tensors[0]))


@op("CatBackward0", backward=_cat_backward, jvp=_cat_jvp, export=("cat", "concat"), vmap=_cat_batched,
    test=lambda *ts, dim=0: cat(ts, dim),
    samples=(Sample(Arg(2, 3), Arg(4, 3)), Sample(Arg(2, 3), Arg(2, 1), dim=1)))
def cat(tensors, dim=0):
    tensors = list(tensors)
    dt = _joined_dtype(tensors, "cat")
    nd = tensors[0]._data.ndim
    if nd == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    d = wrap_dim(dim, nd)
    ref = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        s = t._data.shape
        if len(s) != nd or any(a != b for j, (a, b) in enumerate(zip(s, ref)) if j != d):
            raise RuntimeError(
                f"Sizes of tensors must match except in dimension {d}. Expected size "
                f"{ref[0 if d else min(1, nd - 1)] if nd > 1 else ref[0]} but got size "
                f"{s[0 if d else min(1, nd - 1)] if len(s) > 1 else (s[0] if s else 0)} for tensor "
                f"number {i} in the list (shapes {[list(x._data.shape) for x in tensors]}).")
    out = Tensor(np.concatenate([t._data.astype(dt, copy=False) for t in tensors], axis=d))
    return cat.op.emit(out, tensors, (d, [t._data.shape[d] for t in tensors]))


concat = cat


def _stack_backward(node, g):
    d, n = node._attrs
    arr = g._data
    if records_nothing() and type(arr) is HOST_ARRAY:  # the views unbind makes, unrecorded
        # the Ellipsis keeps a 0-d part an array (a view), not a numpy scalar to convert
        if d == 0:
            return [result_tensor(arr[i, ...]) for i in range(n)]
        lead = (slice(None),) * d
        return [result_tensor(arr[lead + (i, Ellipsis)]) for i in range(n)]
    return unbind(g, d)


def _stack_jvp(b, out, inputs, attrs, *ts):
    return stack([b.zeros(u, v) for u, v in zip(ts, inputs)], b.dim(attrs[0]))


def _stack_batched(b, tensors, dim=0):
    tensors = [b.expand(t) for t in tensors]
    return stack(tensors, wrap_dim(dim, tensors[0].ndim) + 1)  # one sample has ndim - 1 dims


# One node, as torch's (not an unsqueeze per input and a cat): a stack of small
# tensors is common (W7 in asv_bench/workloads.py) and each node costs a backward step.
@op("StackBackward0", backward=_stack_backward, jvp=_stack_jvp, export=True, vmap=_stack_batched,
    test=lambda *ts, dim=0: stack(ts, dim),
    samples=(Sample(Arg(2, 3), Arg(2, 3), dim=1), Sample(Arg(3), Arg(3), Arg(3)),
             Sample(Arg(), Arg(), dim=-1)))
def stack(tensors, dim=0):
    tensors = list(tensors)
    arrays = _same_host_arrays(tensors)
    if arrays is None:
        return _stack_checked(tensors, dim)
    ref, dt = arrays[0].shape, arrays[0].dtype
    d = 0 if dim == 0 and type(dim) is int else wrap_dim(dim, len(ref) + 1)
    if d == 0:
        out = Tensor(np.array(arrays, dtype=dt))  # one copy, 5x faster for small tensors
    else:
        shape = ref[:d] + (1,) + ref[d:]
        out = Tensor(np.concatenate([a.reshape(shape) for a in arrays], axis=d))
    return stack.op.emit(out, tensors, shared((d, len(tensors))))


def _same_host_arrays(tensors):
    """The arrays of `tensors` if all are host arrays of one shape and dtype (the
    common call, checked in one pass), else None."""
    arrays = []
    shape = dtype = None
    for t in tensors:
        if type(t) is not Tensor:
            return None
        a = t._data
        if type(a) is not HOST_ARRAY:
            return None
        if dtype is None:
            shape, dtype = a.shape, a.dtype
        elif a.dtype is not dtype and a.dtype != dtype or a.shape != shape:
            return None
        arrays.append(a)
    return arrays or None


def _stack_checked(tensors, dim):
    """stack of any tensors: checked, promoted to one dtype, on any device."""
    dt = _joined_dtype(tensors, "stack")
    ref = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != ref:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref)} at "
                               f"entry 0 and {list(t._data.shape)} at entry {i}")
    d = wrap_dim(dim, len(ref) + 1)
    shape = ref[:d] + (1,) + ref[d:]
    out = Tensor(np.concatenate([t._data.astype(dt, copy=False).reshape(shape) for t in tensors],
                                axis=d))
    return stack.op.emit(out, tensors, shared((d, len(tensors))))


def _split_backward(node, *grads):
    dim, sizes, shape, dtype, _ = node._attrs
    parts = []
    for g, s in zip(grads, sizes):
        if g is None:
            shp = list(shape)
            shp[dim] = s
            g = zeros_as(shp, dtype, _present(grads))
        parts.append(g)
    return (cat(parts, dim),)


@op("SplitBackward0", backward=_split_backward,
    linear=lambda b, dim, sizes, shape, dtype, sections: (sections, b.dim(dim)),
    method=True, export=True, test=lambda x, s, dim=0: cat(split(x, s, dim), dim), vmap=Dims("dim"),
    samples=(Sample(Arg(5, 2), 2), Sample(Arg(2, 5), [1, 4], dim=1)))
def split(x, split_size_or_sections, dim=0):
    d = wrap_dim(dim, x._data.ndim)
    n = x._data.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension "
                               f"size of {n}")
        sizes = [min(step, n - i) for i in range(0, n, step)] if n else [0]
        name = "SplitBackward0"
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got split_sizes={sizes}")
        name = "SplitWithSizesBackward0"
    outs, start = [], 0
    meta = creation_meta(x)  # of the caller's grad mode, not of the block below
    with _state.grad_disabled():
        for s in sizes:
            o = narrow(x, d, start, s)
            o._creation_meta = meta
            outs.append(o)
            start += s
    split.op.emit(outs, (x,), (d, sizes, x._data.shape, x._data.dtype, split_size_or_sections),
                  node=name)
    return tuple(outs)


@op(method=True, export=True, test=lambda x, c, dim=0: cat(chunk(x, c, dim), dim),
    samples=(Sample(Arg(5, 2), 3),))
def chunk(x, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    n = x._data.shape[wrap_dim(dim, x._data.ndim)]
    return split(x, max(1, -(-n // chunks)), dim)


def _unbind_backward(node, *grads):
    dim, shape, dtype = node._attrs
    part_shape = shape[:dim] + shape[dim + 1:]
    ref = _present(grads)
    return (stack([g if g is not None else zeros_as(part_shape, dtype, ref)
                   for g in grads], dim),)


def _present(grads):
    """A gradient that is there (missing ones become zeros on its device)."""
    return next(g for g in grads if g is not None)


@op("UnbindBackward0", backward=_unbind_backward, linear=lambda b, dim, shape, dtype: (b.dim(dim),),
    method=True, export=True, test=lambda x, dim=0: stack(unbind(x, dim), dim), vmap=Dims("dim"),
    samples=(Sample(Arg(3, 2), dim=1),))
def unbind(x, dim=0):
    d = wrap_dim(dim, x._data.ndim)
    n = x._data.shape[d]
    if FW[0] is None and TRACE[0] is None:
        # select's views, made here: iterating a tensor (`list(x)`) unbinds it, and
        # select's dispatch per element cost more than the views themselves
        arr, lead = x._data, (slice(None),) * d
        outs = []
        for i in range(n):
            key = lead + (i, Ellipsis)  # a 0-d view, not numpy's scalar copy (as getitem)
            outs.append(make_view(x, arr[key], getitem, (key,)))
    else:
        meta = creation_meta(x)  # of the caller's grad mode, not of the block below
        with _state.grad_disabled():
            outs = [select(x, d, i) for i in range(n)]
        for o in outs:
            o._creation_meta = meta
    unbind.op.emit(outs, (x,), (d, x._data.shape, x._data.dtype))
    return tuple(outs)
