"""Views and reshapes: forward with numpy (a view shares storage and the version
counter with its base); backward written with jitgrad ops, so everything here
is differentiable twice."""
import weakref

import numpy as np

from .. import _state
from ..backend import HOST_ARRAY
from ..tensor import Tensor, result_tensor, wrap_dim
from .registry import SAME, Arg, Dims, Sample, op


def _as_shape(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(int(s) for s in args)


def creation_meta(x):
    """How a view of x is made, when that forbids a later recorded in-place op on
    it (torch's CreationMeta): in inference mode, under no_grad, or by a custom
    Function (set there). A view of such a view keeps the mark, unless it is made
    under a mode that sets its own; inference mode's mark is never replaced."""
    loc = _state.local
    inherited = x._creation_meta
    if x._inference or (loc.grad_enabled and not loc.inference) or inherited == "inference_mode":
        return inherited
    return "inference_mode" if loc.inference else "no_grad"


class _Views(list):
    """A base's views, as weak references: the dead ones are dropped when the list
    has doubled since the last sweep (no callback object per base or view). Made
    and appended to in make_view, without a Python-level __init__ or add: every
    view of a fresh tensor (`softmax(s)[0]`) paid for both."""
    __slots__ = ("limit",)

    def sweep(self):
        self[:] = [r for r in self if r() is not None]
        self.limit = max(_SWEEP_MIN, 2 * len(self))


_SWEEP_MIN = 16


_UNUSUAL = _state.unusual


def make_view(x, arr, fn, args):
    """A Tensor sharing `x`'s storage; remembers how to redo itself from the base
    (so an in-place op through it can update the base's history)."""
    out = result_tensor(arr)
    out._vc = x._vc
    base = out._base = x._base if x._base is not None else x
    # linked to x's chain, not a copy of it: one tuple per view
    out._view_chain = (x._view_chain, fn, args)
    out._inference = x._inference
    # creation_meta(x) inline where it is None: grad mode on, no inference anywhere
    out._creation_meta = None if (
        x._creation_meta is None and not _UNUSUAL and not x._inference
        and _state.local.grad_enabled) else creation_meta(x)
    # The base knows its live views, so an in-place change of the base (or of
    # one view) can give the others a grad_fn over the new history.
    views = base._views
    if views is None:
        views = base._views = _Views((weakref.ref(out),))
        views.limit = _SWEEP_MIN
    else:
        views.append(weakref.ref(out))
        if len(views) >= views.limit:
            views.sweep()
    return out


def apply_chain(t, chain):
    """Redo on `t` the views of a chain (a view's `_view_chain`, None for no view)."""
    links = []
    while chain is not None:  # innermost view first: reversed below
        chain, fn, args = chain
        links.append((fn, args))
    for fn, args in reversed(links):
        t = fn(t, *args)
    return t


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
    return (g.reshape(node._attrs[1]),)


def _view_linear(b, shape, _):
    return (b.shape(shape),)


# vmap: a view of the batched layout may not exist; reshape copies only then
def _reshape_batched(b, x, *shape):
    return reshape(x, (b.size,) + _as_shape(shape))


@op("ViewBackward0", backward=_reshape_backward, linear=_view_linear, method=True,
    vmap=_reshape_batched, samples=(Sample(Arg(2, 6), (4, 3)),))
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
    return view.op.emit(make_view(x, arr, view, (shape,)), (x,), (shape, x._data.shape), node=name)


@op("ViewBackward0", backward=_reshape_backward, linear=_view_linear, method=True, export=True,
    vmap=_reshape_batched, samples=(Sample(Arg(2, 6), (3, 4)), Sample(Arg(2, 6), (-1,))))
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
    return reshape.op.emit(out, (x,), (shape, x._data.shape), node=name)


@op(method=True, export=True, samples=(Sample(Arg(2, 3, 4)), Sample(Arg(2, 3, 4), 1)))
def flatten(x, start_dim=0, end_dim=-1):
    nd = x._data.ndim
    if nd == 0:
        return reshape(x, (1,))
    s, e = wrap_dim(start_dim, nd), wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shp = x._data.shape
    return reshape(x, shp[:s] + (-1 if 0 not in shp else 0,) + shp[e + 1:]) if s != e else x


@op(method=True, export=True, samples=(Sample(Arg(2, 12), 1, (3, 4)), Sample(Arg(6, 2), 0, (2, -1))))
def unflatten(x, dim, sizes):
    """Dim `dim` split into dims of `sizes` (one of them may be -1), as a view."""
    shp = x._data.shape
    d = wrap_dim(dim, len(shp))
    sizes = given = tuple(int(v) for v in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1:
        raise RuntimeError("unflatten: only one dimension can be inferred")
    known = int(np.prod([v for v in sizes if v != -1]))
    if -1 in sizes:
        if known == 0 and shp[d] == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {list(sizes)} "
                               "because the unspecified dimension size -1 can be any value and "
                               "is ambiguous")
        sizes = tuple(shp[d] // max(known, 1) if v == -1 else v for v in sizes)
    if int(np.prod(sizes)) != shp[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(given)} don't multiply up to the "
                           f"size of dim {d} ({shp[d]}) in the input tensor")
    return view(x, shp[:d] + sizes + shp[d + 1:])


def _squeeze_batched(b, x, dim=None):
    if x.ndim == 1:
        return x
    if dim is None:
        dims = tuple(i + 1 for i, s in enumerate(x._data.shape[1:]) if s == 1)
    else:
        dims = tuple(b.dim(d, x) for d in (dim if isinstance(dim, (tuple, list)) else (dim,)))
    return squeeze(x, dims) if dims else x


@op(method=True, export=True, vmap=_squeeze_batched,
    samples=(Sample(Arg(2, 1, 3)), Sample(Arg(2, 1, 3), 1)))
def squeeze(x, dim=None):
    shp = x._data.shape
    if dim is None:
        dims = {i for i, s in enumerate(shp) if s == 1}
    else:
        dims = {wrap_dim(d, len(shp)) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        dims = {d for d in dims if len(shp) and shp[d] == 1}
    return _view(x, tuple(s for i, s in enumerate(shp) if i not in dims),
                 "SqueezeBackward0" if dim is None else "SqueezeBackward1")


@op(method=True, export=True, vmap=lambda b, x, dim: unsqueeze(x, wrap_dim(dim, x.ndim) + 1),
    samples=(Sample(Arg(2, 3), 1), Sample(Arg(2, 3), -1)))
def unsqueeze(x, dim):
    nd = x._data.ndim
    d = wrap_dim(dim, nd + 1)
    shp = x._data.shape
    return _view(x, shp[:d] + (1,) + shp[d:], "UnsqueezeBackward0")


def _expand_jvp(b, out, inputs, attrs, tx):
    target, _ = attrs
    return expand(b.align(tx, inputs[0], len(target)), b.shape(target))


@op("ExpandBackward0", backward=lambda node, g: (sum_to_size(g, node._attrs[1]),),
    jvp=_expand_jvp, method=True, export=True,
    vmap=lambda b, x, *sizes: expand(b.pad(x, len(_as_shape(sizes))), (b.size,) + _as_shape(sizes)),
    samples=(Sample(Arg(3, 1), (2, 3, 4)),))
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
    return expand.op.emit(make_view(x, broadcast(x._data, target), expand, (target,)), (x,),
                          (target, shp))


def broadcast(arr, shape):
    """np.broadcast_to(arr, shape): read-only, sharing arr's memory. A single value on
    the host (a full reduction's gradient) is made stride-0 directly, in a tenth of
    broadcast_to's time; it is contiguous, so it is its own buffer in any shape."""
    if type(arr) is HOST_ARRAY and arr.size == 1 and arr.flags.c_contiguous:
        out = np.ndarray(shape, arr.dtype, arr, 0, (0,) * len(shape))
        out.flags.writeable = False  # as broadcast_to's (each element is the same memory)
        return out
    return np.broadcast_to(arr, shape)


@op(method=True)
def expand_as(x, other):
    return expand(x, other._data.shape)


@op(method=True, export=True, samples=(Sample(Arg(2, 3, 4), 0, 2), Sample(Arg(2, 3, 4), (0, 1), (2, 0))))
def movedim(x, source, destination):
    """x with dims `source` moved to positions `destination`, the others in order."""
    nd = x._data.ndim
    src = [wrap_dim(d, nd) for d in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [wrap_dim(d, nd) for d in (destination if isinstance(destination, (tuple, list))
                                     else (destination,))]
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should "
                           f"contain the same number of dims as destination ({dst} dims)")
    order = [None] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(nd) if d not in src)
    return permute(x, [o if o is not None else next(rest) for o in order])


@op(method=True, export=True)
def ravel(x):
    return reshape(x, -1)


@op(method=True)
def view_as(x, other):
    return view(x, other._data.shape)


@op(method=True)
def reshape_as(x, other):
    return reshape(x, other._data.shape)


@op(method=True, export=True, samples=(Sample(Arg(1, 4), (3, 4)),))
def broadcast_to(x, *sizes):
    return expand(x, *sizes)


def _sum_to_jvp(b, out, inputs, attrs, tx):
    shape, (x,) = attrs[0], inputs
    if not b.k:
        return sum_to_size(tx, shape)
    pad = x._data.ndim - len(shape)
    return reshape(sum_to_size(tx, b.shape((1,) * pad + tuple(shape))), b.shape(shape))


def _sum_to_size_batched(b, x, *shape):
    shape = _as_shape(shape)
    out = sum_to_size(x, (b.size,) + (1,) * (x.ndim - 1 - len(shape)) + shape)
    return reshape(out, (b.size,) + shape)


@op("SumBackward1", backward=lambda node, g: (expand(g, node._attrs[1]),), jvp=_sum_to_jvp,
    method=True, vmap=_sum_to_size_batched, samples=(Sample(Arg(2, 3, 4), (3, 1)),))
def sum_to_size(x, *shape):
    """Sum `x` down to `shape` (the reverse of broadcasting)."""
    shape = _as_shape(shape)
    arr = x._data
    lead = arr.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(shape)
                                      if s == 1 and arr.shape[lead + k] != 1)
    if not axes:
        return x
    return sum_to_size.op.emit(Tensor(arr.sum(axis=axes).reshape(shape)), (x,), (shape, arr.shape))


@op("TransposeBackward0", backward=lambda node, g: (transpose(g, *node._attrs),),
    linear=lambda b, d0, d1: (b.dim(d0), b.dim(d1)), method=("transpose", "swapaxes"),
    export=True, vmap=Dims("dim0", "dim1"), samples=(Sample(Arg(2, 3, 4), 0, 2),))
def transpose(x, dim0, dim1):
    nd = x._data.ndim
    a, b = wrap_dim(dim0, nd), wrap_dim(dim1, nd)
    return transpose.op.emit(make_view(x, np.swapaxes(x._data, a, b), transpose, (a, b)), (x,),
                             (a, b))


swapaxes = transpose


def _t_jvp(b, out, inputs, attrs, tx):
    return transpose(tx, -1, -2)


@op("TBackward0", backward=lambda node, g: (t(g),), jvp=_t_jvp, method=True, export=True,
    vmap=lambda b, x: x if x.ndim < 3 else transpose(x, 1, 2),
    samples=(Sample(Arg(2, 3)),))
def t(x):
    if x._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x._data.ndim}D")
    if x._data.ndim < 2:
        return view(x, x._data.shape)
    return t.op.emit(make_view(x, x._data.T, t, ()), (x,))


@op("PermuteBackward0", backward=lambda node, g: (permute(g, tuple(np.argsort(node._attrs[0]))),),
    linear=lambda b, dims: (b.perm(dims),), method=True, export=True,
    vmap=lambda b, x, *dims: permute(x, (0,) + tuple(b.dim(d, x) for d in _as_shape(dims))),
    samples=(Sample(Arg(2, 3, 4), (2, 0, 1)),))
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
    return permute.op.emit(make_view(x, np.transpose(x._data, dims), permute, (dims,)), (x,),
                           (dims,))


def T(x):
    return permute(x, tuple(range(x._data.ndim - 1, -1, -1)))


@op("FlipBackward0", backward=lambda node, g: (flip(g, node._attrs[0]),),
    linear=lambda b, dims: (b.dims(dims),), method=True, export=True, vmap=Dims("dims"),
    samples=(Sample(Arg(2, 3), (0, 1)),))
def flip(x, dims):
    dims = tuple(wrap_dim(d, x._data.ndim) for d in (dims if isinstance(dims, (tuple, list)) else (dims,)))
    return flip.op.emit(Tensor(np.flip(x._data, dims).copy()), (x,), (dims,))


@op("CloneBackward0", backward=lambda node, g: (g,), linear=lambda b: (), method=True, export=True,
    vmap=SAME,
    samples=(Sample(Arg(2, 3)),))
def clone(x, memory_format=None):
    return clone.op.emit(Tensor(x._data.copy()), (x,), ())


@op(method=True, vmap=SAME)
def contiguous(x, memory_format=None):
    return x if x._data.flags.c_contiguous else clone(x)
