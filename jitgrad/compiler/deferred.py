"""Deferred elementwise values: how a trace keeps its first call's memory small.

A trace runs the step once for real, so without care it holds what eager mode
holds: every large intermediate of the forward pass, saved for the backward,
then the backward's own. Instead, an elementwise op on large host arrays whose
other operands are numbers, size-1 tensors, arrays of its result's shape, or
arrays broadcast along its last dim (a row's value, such as a mean kept with
keepdim) or its other dims (a vector along the last dim, such as a weight)
is only recorded: its result gets an array from `np.empty` that nothing writes
yet (virtual memory: no page of it is resident), and a `Recipe` saying how to
compute it from real arrays and other recipes. The first call that needs the
values (any op other than such an elementwise one, a graph break, a repr, the
end of the trace) fills the array: the recipes it depends on are computed
again in blocks of about BLOCK elements (whole rows where an operand is
broadcast) with the numpy stand-ins of their kernels,
so no intermediate exists whole and no Numba starts. A gradient bound for a
leaf's `.grad` is computed block by block straight into the buffer that becomes
`.grad`. Values nothing reads (the forward intermediates only the backward
formulas read, the backward's own) are never stored. The Python tier that
replays a program while its kernels build defers the same way (program.Tape).
"""
import weakref

import numpy as np

from .. import _state
from ..kernels.cpu import numpy_ufunc
from ..kernels.roles import role_formula
from ..ops import pointwise
from ..tensor import Tensor
from .names import PURE, SWAPPED

# Elements per block: numpy's cost per call is paid once per BLOCK elements, and a
# block's few live values (128 KB each in float32) stay in the core's cache. Measured
# on W4's traced call: 0.08-0.1 s with 32768, 0.13-0.15 s with 8192, 0.1-0.11 with
# 65536. (Below fuse.PARALLEL_MIN_ELEMENTS: an op numpy cannot run takes eager
# mode's call, which then starts no threads.)
BLOCK = 32768
# The longest last dim a broadcast operand may have: a block of whole rows holds at
# least one row and at most BLOCK elements.
MAX_ROW = BLOCK


class Recipe:
    """How to compute one deferred value of `shape`: `op` on `operands` (Python
    numbers; real arrays: flat views of the result's length, size-1 arrays, and where
    `by_rows`, (rows, 1) views of a row-broadcast operand or 1-d views of one along
    the last dim; other Recipes, of the same shape)."""
    __slots__ = ("op", "operands", "kdt", "seq", "shape", "by_rows")

    def __init__(self, op, operands, kdt, seq, shape, by_rows):
        self.op, self.operands, self.kdt, self.seq = op, operands, kdt, seq
        self.shape, self.by_rows = shape, by_rows


class Deferred:
    """The deferred values of one trace (or replay), by the id of the unfilled array
    each has."""

    def __init__(self, min_elements):
        self.min_elements = min_elements
        self.recipes = {}  # id(array) -> (weak ref to the array, Recipe)
        self.seq = 0

    def of(self, t):
        """The Recipe of tensor t's values if they are not computed yet, else None."""
        entry = self.recipes.get(id(t._data))
        return None if entry is None else entry[1]

    def defer(self, op, operands):
        """A Tensor whose values are `op(*operands)`, not computed yet, or None where
        the call is not one to defer (see the module docstring): float operands of one
        dtype, Python numbers, host arrays of the result's shape (contiguous, or a
        broadcast single value), of size 1 or broadcast by rows or along the last dim
        (see _broadcast_view), deferred values of the result's shape, more than
        `min_elements` results."""
        # the cheap test first: most calls (small tensors) stop here
        for v in operands:
            if type(v) is Tensor and v._data.size > self.min_elements:
                break
        else:
            return None
        if not op.plain:
            return None
        kdt = pointwise._fast_dtype(op, operands)
        if kdt is None:
            return None
        try:
            shape = np.broadcast_shapes(*(v._data.shape for v in operands if type(v) is Tensor))
        except ValueError:
            return None  # eager mode raises its own error
        parts, by_rows = [], False
        for v in operands:
            if type(v) is not Tensor:
                parts.append(v)
                continue
            d = v._data
            entry = self.recipes.get(id(d))
            if entry is not None:
                if entry[1].shape != shape:
                    return None  # broadcast: it is filled, and eager mode runs the call
                parts.append(entry[1])
            elif type(d) is not np.ndarray:
                return None
            elif d.size == 1:
                parts.append(d if d.ndim == 0 else d.reshape(1))
            elif d.shape == shape and (d.flags.c_contiguous or not any(d.strides)):
                parts.append(d.reshape(-1))  # a view: a broadcast value keeps its 0 strides
            else:
                view = _broadcast_view(d, shape)
                if view is None:
                    return None
                parts.append(view)
                by_rows = True
        self.seq += 1
        arr = np.empty(shape, kdt)
        key = id(arr)
        self.recipes[key] = (weakref.ref(arr, lambda _: self.recipes.pop(key, None)),
                             Recipe(op, tuple(parts), kdt, self.seq, shape, by_rows))
        out = Tensor(arr)
        # the node eager mode's call records (pointwise.call's last lines)
        if op.differentiable and _state.local.grad_enabled and any(
                type(v) is Tensor and v._rg for v in operands):
            pointwise._record_elementwise(op, operands, out, kdt)
        return out

    def defer_call(self, name, args, kwargs, op):
        """`defer` for a recorded call (an elementwise op, whose args start with the op,
        or a swapped operator such as x.__rsub__(o)), else None."""
        if op is not None and not kwargs:
            return self.defer(op, args[1:])
        if name in SWAPPED and len(args) == 2 and not kwargs:
            return self.defer(SWAPPED[name], args[::-1])  # x.__rsub__(o) is o - x
        return None

    def run(self, fn, name, args, kwargs, inplace, op):
        """fn(*args, **kwargs), a call about to run now, after computing the deferred
        values it reads: all of them before a call that may change arrays in place
        (deferred values may read them). A gradient's accumulation into a leaf takes
        its blocks as they are computed (see accumulate); one that stores a leaf's
        first .grad changes no array, so other gradients may stay deferred."""
        if self.recipes:
            if name == "accumulate_grad":
                if self.accumulate(*args):
                    return None
                changes = args[0]._grad_value is not None  # adds into the .grad there
            else:
                changes = inplace or (op is None and name not in PURE)
            if changes:
                self.fill()
            else:
                self.fill_tensors((args, kwargs))
        return fn(*args, **kwargs)

    def fill(self, arrays=None):
        """Compute the values of the deferred arrays in `arrays` (ids; None: every
        array still alive), in one pass, after which they are plain arrays."""
        targets = []
        for key, (ref, recipe) in list(self.recipes.items()):
            if arrays is None or key in arrays:
                a = ref()
                if a is not None:
                    targets.append((recipe, a.reshape(-1)))
                self.recipes.pop(key, None)
        if targets:
            evaluate(targets, _store)

    def fill_tensors(self, v):
        """Fill the deferred arrays of the tensors in v (nested lists, tuples, dicts)."""
        keys = set()
        _collect(v, keys)
        keys &= self.recipes.keys()
        if keys:
            self.fill(keys)

    def accumulate(self, var, g):
        """eager `_accumulate(var, g)` without create_graph, for a deferred g: g's blocks
        go straight into var's gradient buffer (a new one, or the .grad there, added
        into in place), so g never exists whole. False where the leaf or g is unusual
        (hooks, another shape, dtype or layout): the caller fills g and accumulates."""
        recipe = self.of(g)
        d = var._data
        if recipe is None or var._post_hooks or type(d) is not np.ndarray or \
                d.shape != g._data.shape or d.dtype != g._data.dtype or not d.flags.c_contiguous:
            return False
        gv = var._grad_value
        if gv is None:
            buf = np.empty_like(d)
            evaluate([(recipe, buf.reshape(-1))], _store)
            var._grad = Tensor(buf)
            return True
        gd = gv._data
        if type(gd) is not np.ndarray or gd.shape != d.shape or gd.dtype != d.dtype or \
                not gd.flags.c_contiguous or not gd.flags.writeable:
            return False
        # Other deferred values may read this .grad: computed before it changes. g's own
        # blocks read it where they write it, block by block, so it may stay deferred.
        self.fill(set(self.recipes) - {id(g._data)})
        evaluate([(recipe, gd.reshape(-1))], _add)
        gv._vc[0] += 1
        return True


def _broadcast_view(d, shape):
    """d as an operand of a deferred value of `shape` evaluated by rows (rows: the
    leading dims flattened): a (rows, 1) view where d holds one value per row, a
    1-d view of the last dim where d is one vector along it (also where d is
    expanded to `shape`: 0 strides); else None."""
    cols = shape[-1] if shape else 1
    if not 1 < cols <= MAX_ROW:
        return None
    if 0 in d.strides:  # expanded (a mean's gradient): its values, once each
        d = d[tuple(slice(0, 1) if s == 0 else slice(None) for s in d.strides)]
    padded = (1,) * (len(shape) - d.ndim) + d.shape
    if padded[:-1] == shape[:-1] and padded[-1] == 1:
        return d.reshape(-1, 1)
    if padded[-1] == cols and all(k == 1 for k in padded[:-1]):
        return d.reshape(-1)
    return None


def _collect(v, keys):
    if isinstance(v, Tensor):
        keys.add(id(v._data))
    elif isinstance(v, (list, tuple)):
        for x in v:
            _collect(x, keys)
    elif isinstance(v, dict):
        for x in v.values():
            _collect(x, keys)


def _store(dest, block):
    dest[...] = block


def _add(dest, block):
    np.add(dest, block, out=dest)


def evaluate(targets, sink):
    """For each block of the targets' shape: compute every recipe the targets need
    on it (see block_kernel), and sink(dest's block, values) per (recipe, dest)
    target, dest flat. A tracer must not record these calls (Tracer.fill)."""
    shapes = {r.shape for r, _ in targets}
    if len(shapes) > 1:  # unrelated values: recipes of one value share its shape
        for shape in shapes:
            evaluate([t for t in targets if t[0].shape == shape], sink)
        return
    order, seen, stack = [], set(), [r for r, _ in targets]
    while stack:
        r = stack.pop()
        if id(r) not in seen:
            seen.add(id(r))
            order.append(r)
            stack.extend(x for x in r.operands if type(x) is Recipe)
    order.sort(key=lambda r: r.seq)  # made in order: operands first
    index = {id(r): i for i, r in enumerate(order)}
    wanted = {index[id(r)] for r, _ in targets}
    last = {}  # recipe -> its last reader, after which its block is freed
    for i, r in enumerate(order):
        for x in r.operands:
            if type(x) is Recipe:
                last[index[id(x)]] = i
    n = targets[0][1].size
    # Blocks are whole rows, as (rows, cols) arrays, where an operand is broadcast
    # (cols: the last dim), else flat (cols 1). Each operand of a recipe is computed
    # in the block (a Recipe), sliced by the block's rows, or whole (numbers, size-1
    # arrays, vectors along the last dim).
    cols = order[0].shape[-1] if any(r.by_rows for r in order) else 1
    plans = []
    for i, r in enumerate(order):
        operands = []
        for x in r.operands:
            if type(x) is Recipe:
                operands.append((_COMPUTED, index[id(x)]))
            elif type(x) is not np.ndarray or x.size == 1:
                operands.append((_WHOLE, x))
            elif x.ndim == 2:  # one value per row
                operands.append((_SLICED, x))
            elif x.size == n:
                operands.append((_SLICED, x.reshape(-1, cols)))
            else:  # a vector along the last dim
                operands.append((_WHOLE, x))
        frees = [j for j, reader in last.items() if reader == i and j not in wanted]
        plans.append((block_kernel(r.op, r.kdt), operands, frees))
    sinks = [(index[id(r)], dest) for r, dest in targets]
    rows, step = n // cols, max(1, BLOCK // cols)
    for r0 in range(0, rows, step):
        r1 = min(r0 + step, rows)
        values = [None] * len(plans)
        for i, (kernel, operands, frees) in enumerate(plans):
            values[i] = kernel(*[values[x] if kind is _COMPUTED else
                                 x[r0:r1] if kind is _SLICED else x for kind, x in operands])
            for j in frees:
                values[j] = None
        for i, dest in sinks:  # (a value may be one per row: it broadcasts)
            sink(dest[r0 * cols:r1 * cols].reshape(-1, cols), values[i])


_COMPUTED, _SLICED, _WHOLE = "computed", "sliced", "whole"


_STAND_INS = {}  # (op, dtype) -> numpy function, or None where numpy lacks one


def block_kernel(op, kdt):
    """What computes op on blocks (arrays and numbers) of its operands: the numpy
    stand-in of op's kernel, which needs no Numba (a first call pays for no start of
    it, in time and in some 80 MB of memory, and a replay while a worker thread
    compiles waits for no compiler); numpy's exp, sin ... may differ from the
    kernels' in the last bit. Eager mode's call where numpy lacks a function."""
    key = (op, kdt)
    if key not in _STAND_INS:
        names, body, prefix, dts, out_dt, _ = role_formula(op, ("forward",), kdt)
        _STAND_INS[key] = numpy_ufunc(names, body, prefix, dts, kdt, out_dt, op.name)
    if _STAND_INS[key] is not None:
        return _STAND_INS[key]

    def eager(*blocks):
        return pointwise.call(op, *(Tensor(b) if type(b) is np.ndarray else b
                                    for b in blocks))._data
    return eager
