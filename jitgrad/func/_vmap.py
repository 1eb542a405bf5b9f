"""`vmap`: a function of one sample run on a batch at once (torch.func.vmap).

The inputs' mapped dims become batched tensors of a new level (see _batched.py),
the function runs once, and each output's batch dim is moved to its out_dim.
"""
import functools
import threading

from ..ops.join import cat
from ..ops.indexing import narrow
from ..ops.views import expand, movedim, unsqueeze
from ..tensor import Tensor, wrap_dim
from . import _batched
from ._batched import TRACE, BatchedTensor, Interpreter, Level
from ._pytree import broadcast_prefix, tree_flatten, tree_unflatten

RANDOMNESS = ("error", "different", "same")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """`func` mapped over dim `in_dims` of its inputs, stacking the results along
    `out_dims`: as torch.func.vmap.

    in_dims / out_dims: an int (or None: not mapped) for every input / output, or a
    tuple (nested like the inputs / outputs: tuples, lists, dicts) of them.
    randomness: 'error' (a random op raises), 'different' (each sample draws its
    own) or 'same' (one draw for the batch). chunk_size: at most this many samples
    at once.

    >>> import jitgrad
    >>> from jitgrad.func import vmap
    >>> x = jitgrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> vmap(jitgrad.dot)(x, x)                     # one dot product per row
    tensor([ 5., 25.])
    >>> vmap(lambda row, w: row * w, in_dims=(1, None))(x, 10.0)
    tensor([[10., 30.],
            [20., 40.]])
    """
    if randomness not in RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)
    return wrapped


def _name(func):
    return getattr(func, "__name__", None) or repr(func)


def _flat_in_dims(func, in_dims, args):
    """(leaves of args, their in_dims, batch size), checked as torch checks them."""
    where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) tuple "
                         f"matching the structure of inputs, got: {type(in_dims)}.")
    leaves, spec = tree_flatten(args)
    dims = [in_dims] * len(leaves) if isinstance(in_dims, int) else broadcast_prefix(in_dims, args)
    if dims is None:
        raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`. "
                         f"in_dims has structure {tree_flatten(in_dims)[1]} but inputs has "
                         f"structure {spec}.")
    sizes = []
    for leaf, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(d, int):
            raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) "
                             f"tuple matching the structure of inputs, got: {type(d)}.")
        if not isinstance(leaf, Tensor):
            raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type "
                             f"{type(leaf)}. We cannot vmap over non-Tensor arguments, please use "
                             "None as the respective in_dim")
        n = leaf.ndim
        if not -n <= d < n:
            raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a Tensor "
                             f"of dimensionality {n} so expected in_dim to satisfy -{n} <= in_dim "
                             f"< {n}.")
        sizes.append(leaf.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return leaves, spec, [None if d is None else d % leaf.ndim for leaf, d in zip(leaves, dims)], \
        sizes[0]


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    leaves, spec, dims, size = _flat_in_dims(func, in_dims, args)
    if chunk_size is not None and chunk_size < size:
        return _chunked(func, in_dims, out_dims, randomness, chunk_size, args, kwargs, leaves,
                        spec, dims, size)
    interp = _enter()
    level = Level(next(_batched._level_ids), size, randomness)
    interp.levels.append(level)
    try:
        batched = [v if d is None else BatchedTensor(v, d, level.id) for v, d in zip(leaves, dims)]
        out = func(*tree_unflatten(batched, spec), **kwargs)
    finally:
        interp.levels.pop()
        if not interp.levels:
            TRACE[0] = interp.previous
    try:
        return _unbatch(func, out, out_dims, level)
    finally:
        level.close()


def _enter():
    """The interpreter of this thread's vmaps, installed at the op seam. A running
    jitgrad.compile trace stops first (the vmap runs eagerly)."""
    t = TRACE[0]
    if isinstance(t, Interpreter):
        if t.thread != threading.get_ident():
            raise RuntimeError("jitgrad.func.vmap is running in another thread; jitgrad runs "
                               "vmaps in one thread at a time (run them one after the other)")
        return t
    if t is not None and t.active():
        t.graph_break("jitgrad.func.vmap runs its function eagerly")
    interp = Interpreter(TRACE[0])
    TRACE[0] = interp
    return interp


def _unbatch(func, out, out_dims, level):
    leaves, spec = tree_flatten(out)
    if isinstance(out_dims, int):
        dims = [out_dims] * len(leaves)
    else:
        dims = broadcast_prefix(out_dims, out)
        if dims is None:
            raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is "
                             "not compatible with the structure of `outputs`. out_dims has "
                             f"structure {tree_flatten(out_dims)[1]} but outputs has structure "
                             f"{spec}.")
    return tree_unflatten([_unbatch_one(func, v, d, level) for v, d in zip(leaves, dims)], spec)


def _unbatch_one(func, v, d, level):
    batched = type(v) is BatchedTensor and v._level == level.id
    if d is None:
        if batched:
            raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` can not return a "
                             "BatchedTensor when out_dim is None")
        return v
    if not isinstance(v, Tensor):
        raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, got "
                         f"type {type(v)}. Did you mean to set out_dims= to None for output?")
    d = wrap_dim(d, v.ndim + 1)
    if batched:
        return movedim(v._value, v._bdim, d) if v._bdim != d else v._value
    return expand(unsqueeze(v, d), tuple(v.shape[:d]) + (level.size,) + tuple(v.shape[d:]))


def _chunked(func, in_dims, out_dims, randomness, chunk_size, args, kwargs, leaves, spec, dims,
             size):
    """The batch in chunks of `chunk_size` samples, the outputs joined along out_dims."""
    outs = []
    for start in range(0, size, chunk_size):
        n = min(chunk_size, size - start)
        part = [v if d is None else narrow(v, d, start, n) for v, d in zip(leaves, dims)]
        outs.append(_vmap_call(func, in_dims, out_dims, randomness, None,
                               tree_unflatten(part, spec), kwargs))
    flat = [tree_flatten(o)[0] for o in outs]
    out_spec = tree_flatten(outs[0])[1]
    dims = [out_dims] * len(flat[0]) if isinstance(out_dims, int) else \
        broadcast_prefix(out_dims, outs[0])
    joined = [parts[0] if d is None else cat(list(parts), d)
              for d, parts in zip(dims, zip(*flat))]
    return tree_unflatten(joined, out_spec)
