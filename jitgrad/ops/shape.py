"""Shape, view and indexing ops. Forward with numpy (views share storage and
the version counter with their base); backward written with jitgrad ops, so
everything here is differentiable twice."""
import weakref

import numpy as np

from .. import _state, backend
from .. import dtypes as _dt
from ..tensor import Tensor, asarray, on_device, wrap_dim
from .registry import FW, jvp, nb, record


def _as_shape(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(int(s) for s in args)


def _creation_meta(x):
    """How a view of x is made, when that forbids a later recorded in-place op on
    it (torch's CreationMeta): in inference mode, under no_grad, or by a custom
    Function (set there). A view of such a view keeps the mark, unless it is made
    under a mode that sets its own; inference mode's mark is never replaced."""
    loc = _state.local
    inherited = x._creation_meta
    if x._inference or (loc.grad_enabled and not loc.inference) or inherited == "inference_mode":
        return inherited
    return "inference_mode" if loc.inference else "no_grad"


def make_view(x, arr, fn, args):
    """A Tensor sharing `x`'s storage; remembers how to redo itself from the base
    (so an in-place op through it can update the base's history)."""
    out = Tensor(arr)
    out._vc = x._vc
    base = out._base = x._base if x._base is not None else x
    out._view_chain = (x._view_chain or ()) + ((fn, args),)
    out._inference = x._inference
    out._creation_meta = _creation_meta(x)
    # The base knows its live views, so an in-place change of the base (or of
    # one view) can give the others a grad_fn over the new history.
    views = base._views
    if views is None:
        views = base._views = set()
    views.add(weakref.ref(out, views.discard))
    return out


def _or_zeros(tangent, like, lead=()):
    """A missing tangent of a multi-input op counts as zeros (with the batch dims
    `lead` of the other tangents)."""
    return tangent if tangent is not None else Tensor(np.zeros(lead + like._data.shape,
                                                               like._data.dtype, like=like._data))


# ---- batched tangents (vectorized forward mode) --------------------------------------------
# A tangent may carry leading batch dims over its primal (registry.nb); these
# helpers adjust dims, keys and shapes of the rules below for them.

def _shift(dims, k, prefix=False):
    dims = tuple(d + k for d in dims)
    return tuple(range(k)) + dims if prefix else dims


def _align(t, x, ndim):
    """Insert ones after the batch dims so t's primal part has `ndim` dims."""
    k = nb(t, x)
    pad = ndim - x._data.ndim
    if pad <= 0:
        return t
    shp = t._data.shape
    return reshape(t, shp[:k] + (1,) * pad + shp[k:])


def _batched_key(key, k):
    if not k:
        return key
    return (slice(None),) * k + (key if isinstance(key, tuple) else (key,))


def _batched_sum_to(t, x, shape):
    k = nb(t, x)
    if not k:
        return sum_to_size(t, shape)
    lead = t._data.shape[:k]
    pad = x._data.ndim - len(shape)
    return reshape(sum_to_size(t, lead + (1,) * pad + tuple(shape)), lead + tuple(shape))


def _batched_index(index, t, x):
    k = nb(t, x)
    if not k:
        return index
    return Tensor(np.broadcast_to(index._data, t._data.shape[:k] + index._data.shape).copy())


def _index_put_jvp(x, key, vt, tx, tv):
    lead = (tx if tx is not None else tv)._data.shape[
        :nb(tx, x) if tx is not None else nb(tv, vt)]
    k = len(lead)
    base = _or_zeros(tx, x, lead)
    if vt is None:
        return index_put(base, _batched_key(key, k), 0)
    value = _or_zeros(tv, vt, lead)
    res_ndim = x._data[_norm_key(key, x._data.ndim)[0]].ndim
    return index_put(base, _batched_key(key, k), _align(value, vt, res_ndim))


def _cat_jvp(ts, tensors, d):
    lead = next(u._data.shape[:nb(u, v)] for u, v in zip(ts, tensors) if u is not None)
    return cat([_or_zeros(u, v, lead) for u, v in zip(ts, tensors)], d + len(lead))


def apply_chain(t, chain):
    for fn, args in chain:
        t = fn(t, *args)
    return t


# ---- reshaping -----------------------------------------------------------------------

def _infer_shape(shape, numel, src_shape):
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel} "
                           f"(the tensor has shape {list(src_shape)})")
    return shape


def _reshape_backward(node, g):
    return (g.reshape(node._attrs),)


def view(x, *shape):
    return _view(x, _infer_shape(_as_shape(shape), x._data.size, x._data.shape), "ViewBackward0")


def _view(x, shape, name):
    """A view of x with `shape`, recorded under torch's node name for the op."""
    arr = x._data.view()
    try:
        arr.shape = shape
    except AttributeError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    out = make_view(x, arr, view, (shape,))
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: view(tx, tx.shape[:nb(tx, x)] + shape))
    record(name, (x,), (out,), _reshape_backward, attrs=x._data.shape)
    return out


def reshape(x, *shape):
    shape = _infer_shape(_as_shape(shape), x._data.size, x._data.shape)
    if shape == x._data.shape:
        return view(x, shape)
    arr = x._data.view()
    try:
        arr.shape = shape
        out = make_view(x, arr, reshape, (shape,))
        name = "ViewBackward0"
    except AttributeError:
        out = Tensor(x._data.reshape(shape))
        name = "UnsafeViewBackward0"
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: reshape(tx, tx.shape[:nb(tx, x)] + shape))
    record(name, (x,), (out,), _reshape_backward, attrs=x._data.shape)
    return out


def flatten(x, start_dim=0, end_dim=-1):
    nd = x._data.ndim
    if nd == 0:
        return reshape(x, (1,))
    s, e = wrap_dim(start_dim, nd), wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shp = x._data.shape
    return reshape(x, shp[:s] + (-1 if 0 not in shp else 0,) + shp[e + 1:]) if s != e else x


def squeeze(x, dim=None):
    shp = x._data.shape
    if dim is None:
        dims = {i for i, s in enumerate(shp) if s == 1}
    else:
        dims = {wrap_dim(d, len(shp)) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        dims = {d for d in dims if len(shp) and shp[d] == 1}
    return _view(x, tuple(s for i, s in enumerate(shp) if i not in dims),
                 "SqueezeBackward0" if dim is None else "SqueezeBackward1")


def unsqueeze(x, dim):
    nd = x._data.ndim
    d = wrap_dim(dim, nd + 1)
    shp = x._data.shape
    return _view(x, shp[:d] + (1,) + shp[d:], "UnsqueezeBackward0")


def _expand_backward(node, g):
    return (sum_to_size(g, node._attrs),)


def expand(x, *sizes):
    sizes = _as_shape(sizes)
    shp = x._data.shape
    if len(sizes) < len(shp):
        raise RuntimeError(
            f"expand(jitgrad.{x.dtype.name}{{{list(shp)}}}, size={list(sizes)}): the number of sizes "
            f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in the "
            f"tensor ({len(shp)})")
    lead = len(sizes) - len(shp)
    target = list(sizes)
    for i, s in enumerate(shp):
        want = sizes[lead + i]
        if want == -1:
            target[lead + i] = s
        elif s != 1 and s != want:
            raise RuntimeError(
                f"The expanded size of the tensor ({want}) must match the existing size ({s}) at "
                f"non-singleton dimension {lead + i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                f"{list(shp)}")
    target = tuple(target)
    if target == shp:
        return view(x, shp)
    out = make_view(x, np.broadcast_to(x._data, target), expand, (target,))
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: expand(_align(tx, x, len(target)), tx.shape[:nb(tx, x)] + target))
    record("ExpandBackward0", (x,), (out,), _expand_backward, attrs=shp)
    return out


def expand_as(x, other):
    return expand(x, other._data.shape)


broadcast_to = expand


def _sum_to_backward(node, g):
    return (expand(g, node._attrs),)


def sum_to_size(x, *shape):
    """Sum `x` down to `shape` (the reverse of broadcasting)."""
    shape = _as_shape(shape)
    arr = x._data
    lead = arr.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(shape)
                                      if s == 1 and arr.shape[lead + k] != 1)
    if not axes:
        return x
    out = Tensor(arr.sum(axis=axes).reshape(shape))
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: _batched_sum_to(tx, x, shape))
    record("SumBackward1", (x,), (out,), _sum_to_backward, attrs=arr.shape)
    return out


def _transpose_backward(node, g):
    return (transpose(g, *node._attrs),)


def transpose(x, dim0, dim1):
    nd = x._data.ndim
    a, b = wrap_dim(dim0, nd), wrap_dim(dim1, nd)
    out = make_view(x, np.swapaxes(x._data, a, b), transpose, (a, b))
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: transpose(tx, a + nb(tx, x), b + nb(tx, x)))
    record("TransposeBackward0", (x,), (out,), _transpose_backward, attrs=(a, b))
    return out


swapaxes = transpose


def t(x):
    if x._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x._data.ndim}D")
    if x._data.ndim < 2:
        return view(x, x._data.shape)
    out = make_view(x, x._data.T, t, ())
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: transpose(tx, -1, -2))
    record("TBackward0", (x,), (out,), lambda node, g: (t(g),))
    return out


def _permute_backward(node, g):
    return (permute(g, tuple(np.argsort(node._attrs))),)


def permute(x, *dims):
    dims = _as_shape(dims)
    nd = x._data.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. input."
                           f"dim() = {nd} is not equal to len(dims) = {len(dims)}")
    dims = tuple(wrap_dim(d, nd) for d in dims)
    if len(set(dims)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    out = make_view(x, np.transpose(x._data, dims), permute, (dims,))
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: permute(tx, _shift(dims, nb(tx, x), True)))
    record("PermuteBackward0", (x,), (out,), _permute_backward, attrs=dims)
    return out


def T(x):
    return permute(x, tuple(range(x._data.ndim - 1, -1, -1)))


def flip(x, dims):
    dims = tuple(wrap_dim(d, x._data.ndim) for d in (dims if isinstance(dims, (tuple, list)) else (dims,)))
    out = Tensor(np.flip(x._data, dims).copy())
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: flip(tx, _shift(dims, nb(tx, x))))
    record("FlipBackward0", (x,), (out,), lambda node, g: (flip(g, node._attrs),), attrs=dims)
    return out


def clone(x, memory_format=None):
    out = Tensor(x._data.copy())
    if FW[0] is not None:
        jvp(out, (x,), clone)
    record("CloneBackward0", (x,), (out,), lambda node, g: (g,))
    return out


def contiguous(x, memory_format=None):
    return x if x._data.flags.c_contiguous else clone(x)


def to_dtype(x, dtype):
    np_dt = _dt.to_dtype(dtype).np
    if x._data.dtype == np_dt:
        return x
    out = Tensor(x._data.astype(np_dt))
    if np_dt.kind in "fc":
        if FW[0] is not None:
            jvp(out, (x,), lambda tx: to_dtype(tx, np_dt))
        record("ToCopyBackward0", (x,), (out,), lambda node, g: (to_dtype(g, node._attrs),),
               attrs=x._data.dtype)
    return out


def to_device(x, dev):
    """A copy of x on device `dev` (a checked jitgrad.device); x itself if it is there."""
    if x.device == dev:
        return x
    out = Tensor(on_device(x._data, dev))
    src = x.device
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: to_device(tx, dev))
    if x._data.dtype.kind in "fc":
        record("ToCopyBackward0", (x,), (out,), lambda node, g: (to_device(g, src),))
    return out


# ---- indexing -------------------------------------------------------------------------

def _norm_key(key, ndim):
    """numpy form of a torch index, and whether it has advanced parts."""
    if not isinstance(key, tuple):
        key = (key,)
    out, advanced = [], False
    for k in key:
        if isinstance(k, Tensor):
            k = k._data
        elif isinstance(k, list):
            k = np.asarray(k)
        if backend.is_array(k):
            if k.dtype == np.bool_:
                out.extend(np.nonzero(k)) if k.ndim else out.append(k)
            elif k.dtype.kind in "iu":
                out.append(k.astype(np.intp, copy=False))
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            advanced = True
        elif isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            out.append(k)
        elif k is None or k is Ellipsis or isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            out.append(k)
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"byte Variables are valid indices (got {type(k).__name__})")
    return tuple(out), advanced


def _index_error(e):
    return IndexError(str(e).replace("axis", "dimension"))


def _scatter_backward(node, g):
    return (getitem(g, node._attrs[1]),)


def index_put_zeros(g, shape, key):
    """zeros(shape) with `g` added at `key` (duplicates accumulate): the backward
    of indexing, itself differentiable (its backward is indexing)."""
    arr = np.zeros(shape, g._data.dtype, like=g._data)
    k, advanced = _norm_key(key, len(shape))
    if advanced:
        np.add.at(arr, k, g._data)
    else:
        arr[k] = g._data
    out = Tensor(arr)
    if FW[0] is not None:
        jvp(out, (g,), lambda tg: index_put_zeros(
            tg, tg.shape[:nb(tg, g)] + shape, _batched_key(key, nb(tg, g))))
    record("IndexPutBackward0", (g,), (out,), _scatter_backward, attrs=(shape, key))
    return out


def _getitem_backward(node, g):
    shape, key = node._attrs
    return (index_put_zeros(g, shape, key),)


def getitem(x, key):
    k, advanced = _norm_key(key, x._data.ndim)
    try:
        arr = x._data[k]
    except IndexError as e:
        raise _index_error(e) from None
    if advanced:
        out = Tensor(asarray(arr))
        name = "IndexBackward0"
    else:
        out = make_view(x, arr, getitem, (key,))
        ints = all(isinstance(i, (int, np.integer)) for i in k)
        name = "SelectBackward0" if ints else "SliceBackward0"
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: getitem(tx, _batched_key(key, nb(tx, x))))
    record(name, (x,), (out,), _getitem_backward, attrs=(x._data.shape, key))
    return out


def narrow(x, dim, start, length):
    d = wrap_dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return getitem(x, (slice(None),) * d + (slice(start, start + length),))


def select(x, dim, index):
    d = wrap_dim(dim, x._data.ndim)
    size = x._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x._data.shape)} at dimension {d}")
    return getitem(x, (slice(None),) * d + (index,))


def _put_backward(node, g):
    key, v_shape = node._attrs
    gx = g * Tensor(_zero_mask(g._data.shape, key, g._data))
    gv = getitem(g, key)
    return (gx, sum_to_size(gv, v_shape) if v_shape is not None else None)


def _zero_mask(shape, key, like):
    m = np.ones(shape, np.bool_, like=like)
    m[_norm_key(key, len(shape))[0]] = False
    return m


def index_put(x, key, value):
    """Out-of-place x[key] = value, differentiable in both."""
    arr = x._data.copy()
    k, _ = _norm_key(key, arr.ndim)
    v = value._data if isinstance(value, Tensor) else value
    try:
        arr[k] = v
    except IndexError as e:
        raise _index_error(e) from None
    except ValueError:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(np.shape(v))} cannot be broadcast to "
            f"indexing result of shape {list(x._data[k].shape)}") from None
    out = Tensor(arr)
    vt = value if isinstance(value, Tensor) else None
    if FW[0] is not None:
        jvp(out, (x, vt), lambda tx, tv: _index_put_jvp(x, key, vt, tx, tv))
    record("IndexPutBackward0", (x, vt), (out,), _put_backward,
           attrs=(key, vt._data.shape if vt is not None else None))
    return out


# ---- joining and splitting -----------------------------------------------------------------

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
    for t in tensors[1:]:
        dt = _dt.promote_np(dt, t._data.dtype)
    return dt


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
    if FW[0] is not None:
        jvp(out, tensors, lambda *ts: _cat_jvp(ts, tensors, d))
    record("CatBackward0", tensors, (out,), _cat_backward,
           attrs=(d, [t._data.shape[d] for t in tensors]))
    return out


concat = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    _joined_dtype(tensors, "stack")
    ref = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != ref:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref)} at "
                               f"entry 0 and {list(t._data.shape)} at entry {i}")
    d = wrap_dim(dim, len(ref) + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


def _split_backward(node, *grads):
    dim, sizes, shape, dtype = node._attrs
    parts = []
    for g, s in zip(grads, sizes):
        if g is None:
            shp = list(shape)
            shp[dim] = s
            g = Tensor(np.zeros(shp, dtype, like=_present(grads)))
        parts.append(g)
    return (cat(parts, dim),)


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
    meta = _creation_meta(x)  # of the caller's grad mode, not of the block below
    with _state.grad_disabled():
        for s in sizes:
            o = narrow(x, d, start, s)
            o._creation_meta = meta
            outs.append(o)
            start += s
    if FW[0] is not None:
        jvp(outs, (x,), lambda tx: split(tx, split_size_or_sections, d + nb(tx, x)))
    record(name, (x,), outs, _split_backward, attrs=(d, sizes, x._data.shape, x._data.dtype))
    return tuple(outs)


def chunk(x, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    n = x._data.shape[wrap_dim(dim, x._data.ndim)]
    return split(x, max(1, -(-n // chunks)), dim)


def _unbind_backward(node, *grads):
    dim, shape, dtype = node._attrs
    part_shape = shape[:dim] + shape[dim + 1:]
    ref = _present(grads)
    return (stack([g if g is not None else Tensor(np.zeros(part_shape, dtype, like=ref))
                   for g in grads], dim),)


def _present(grads):
    """The array of a gradient that is there (missing ones become zeros like it)."""
    return next(g._data for g in grads if g is not None)


def unbind(x, dim=0):
    d = wrap_dim(dim, x._data.ndim)
    meta = _creation_meta(x)  # of the caller's grad mode, not of the block below
    with _state.grad_disabled():
        outs = [select(x, d, i) for i in range(x._data.shape[d])]
    for o in outs:
        o._creation_meta = meta
    if FW[0] is not None:
        jvp(outs, (x,), lambda tx: unbind(tx, d + nb(tx, x)))
    record("UnbindBackward0", (x,), outs, _unbind_backward, attrs=(d, x._data.shape, x._data.dtype))
    return tuple(outs)


# ---- gather / index_select -------------------------------------------------------------------

def _check_index(index, who):
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError(f"{who}(): Expected dtype int64 for index")
    return index._data


def _gather_backward(node, g):
    dim, shape = node._attrs
    (index,) = node.saved()
    return (scatter_add_zeros(g, dim, index, shape),)


def gather(x, dim, index):
    idx = _check_index(index, "gather")
    d = wrap_dim(dim, x._data.ndim)
    if idx.ndim != x._data.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for i, (a, b) in enumerate(zip(idx.shape, x._data.shape)):
        if i != d and a > b:
            raise RuntimeError(f"Size does not match at dimension {i} expected index "
                               f"{list(idx.shape)} to be smaller than self {list(x._data.shape)} "
                               f"apart from dimension {d}")
    if idx.size and (idx.min() < -x._data.shape[d] or idx.max() >= x._data.shape[d]):
        raise RuntimeError(f"index {int(idx.max())} is out of bounds for dimension {d} with size "
                           f"{x._data.shape[d]}")
    src = x._data[tuple(slice(0, s) if i != d else slice(None) for i, s in enumerate(idx.shape))]
    out = Tensor(np.take_along_axis(src, idx, axis=d))
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: gather(tx, d + nb(tx, x), _batched_index(index, tx, x)))
    record("GatherBackward0", (x,), (out,), _gather_backward, save=(index,), names=("index",),
           attrs=(d, x._data.shape))
    return out


def _scatter_add_backward(node, g):
    dim, _ = node._attrs
    (index,) = node.saved()
    return (gather(g, dim, index),)


def scatter_add_zeros(src, dim, index, shape):
    """zeros(shape).scatter_add(dim, index, src): the backward of gather."""
    idx = index._data
    arr = np.zeros(shape, src._data.dtype, like=src._data)
    backend.of(arr).scatter_add(arr, dim, idx, src._data)
    out = Tensor(arr)
    if FW[0] is not None:
        jvp(out, (src,), lambda ts: scatter_add_zeros(
            ts, dim + nb(ts, src), _batched_index(index, ts, src), ts.shape[:nb(ts, src)] + shape))
    record("ScatterAddBackward0", (src,), (out,), _scatter_add_backward, save=(index,),
           names=("index",), attrs=(dim, shape))
    return out


def _index_select_backward(node, g):
    dim, shape = node._attrs
    (index,) = node.saved()
    key = (slice(None),) * dim + (index,)
    return (index_put_zeros(g, shape, key),)


def index_select(x, dim, index):
    idx = _check_index(index, "index_select")
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = wrap_dim(dim, x._data.ndim)
    try:
        arr = np.take(x._data, idx.reshape(-1), axis=d)
    except IndexError as e:
        raise IndexError(f"index out of range in self: {_index_error(e)}") from None
    out = Tensor(arr)
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: index_select(tx, d + nb(tx, x), index))
    record("IndexSelectBackward0", (x,), (out,), _index_select_backward, save=(index,),
           names=("index",), attrs=(d, x._data.shape))
    return out


# ---- registry samples ------------------------------------------------------------------------
from .registry import Arg, Sample, register_function  # noqa: E402

register_function("reshape", reshape, Sample(Arg(2, 6), (3, 4)), Sample(Arg(2, 6), (-1,)))
register_function("view", view, Sample(Arg(2, 6), (4, 3)))
register_function("flatten", flatten, Sample(Arg(2, 3, 4)), Sample(Arg(2, 3, 4), 1))
register_function("squeeze", squeeze, Sample(Arg(2, 1, 3)), Sample(Arg(2, 1, 3), 1))
register_function("unsqueeze", unsqueeze, Sample(Arg(2, 3), 1), Sample(Arg(2, 3), -1))
register_function("expand", expand, Sample(Arg(3, 1), (2, 3, 4)))
register_function("broadcast_to", broadcast_to, Sample(Arg(1, 4), (3, 4)))
register_function("transpose", transpose, Sample(Arg(2, 3, 4), 0, 2))
register_function("permute", permute, Sample(Arg(2, 3, 4), (2, 0, 1)))
register_function("t", t, Sample(Arg(2, 3)))
register_function("flip", flip, Sample(Arg(2, 3), (0, 1)))
register_function("clone", clone, Sample(Arg(2, 3)))
register_function("narrow", narrow, Sample(Arg(4, 5), 1, 1, 3))
register_function("select", select, Sample(Arg(4, 5), 0, 2))
register_function("getitem", getitem, Sample(Arg(4, 5), (slice(1, 3), 2)),
                  Sample(Arg(4, 5), (Ellipsis, None, slice(None, None, 2))),
                  Sample(Arg(4, 5), Arg(3, high=4, kind="int")),
                  Sample(Arg(4, 5), Arg(4, 5, kind="bool")))
register_function("cat", lambda *ts, dim=0: cat(ts, dim), Sample(Arg(2, 3), Arg(4, 3)),
                  Sample(Arg(2, 3), Arg(2, 1), dim=1))
register_function("stack", lambda *ts, dim=0: stack(ts, dim), Sample(Arg(2, 3), Arg(2, 3), dim=1))
register_function("split", lambda x, s, dim=0: cat(split(x, s, dim), dim),
                  Sample(Arg(5, 2), 2), Sample(Arg(2, 5), [1, 4], dim=1))
register_function("chunk", lambda x, c, dim=0: cat(chunk(x, c, dim), dim), Sample(Arg(5, 2), 3))
register_function("unbind", lambda x, dim=0: stack(unbind(x, dim), dim), Sample(Arg(3, 2), dim=1))
register_function("gather", gather, Sample(Arg(3, 4), 1, Arg(3, 2, high=4, kind="int")))
register_function("index_select", index_select, Sample(Arg(3, 4), 0, Arg(5, high=3, kind="int")))
register_function("index_put", index_put, Sample(Arg(4, 3), (slice(0, 2),), Arg(2, 3)),
                  Sample(Arg(4, 3), (Arg(2, high=4, kind="int"),), Arg(3)))
register_function("sum_to_size", sum_to_size, Sample(Arg(2, 3, 4), (3, 1)))
register_function("to_dtype", lambda x: to_dtype(x, _dt.float32), Sample(Arg(2, 3)))
