"""Deferred elementwise values: how a trace keeps its first call's memory small.

A trace runs the step once for real, so without care it holds what eager mode
holds: every large intermediate of the forward pass, saved for the backward,
then the backward's own. Instead, an elementwise op on large host arrays whose
other operands are numbers, size-1 tensors or arrays of its result's shape
is only recorded: its result gets an array from `np.empty` that nothing writes
yet (virtual memory: no page of it is resident), and a `Recipe` saying how to
compute it from real arrays and other recipes. The first call that needs the
values (any op other than such an elementwise one, a graph break, a repr, the
end of the trace) fills the array: the recipes it depends on are computed
again in blocks of BLOCK elements with the numpy stand-ins of their kernels,
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
from ..kernels.fuse import LOOP_MIN_ELEMENTS
from ..kernels.roles import role_formula
from ..ops import pointwise
from ..tensor import Tensor
from .names import PURE, SWAPPED

# Elements per block: a block's few live values take some 100 KB, and numpy's cost
# per call is paid once per BLOCK elements (below LOOP_MIN_ELEMENTS: an op numpy
# cannot run takes eager mode's small-op call, one ufunc).
BLOCK = LOOP_MIN_ELEMENTS // 2


class Recipe:
    """How to compute one deferred value: `op` on `operands` (Python numbers, real
    arrays: flat views of the result's length or size-1 arrays, other Recipes)."""
    __slots__ = ("op", "operands", "kdt", "seq")

    def __init__(self, op, operands, kdt, seq):
        self.op, self.operands, self.kdt, self.seq = op, operands, kdt, seq


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
        broadcast single value) or of size 1, more than `min_elements` results."""
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
        parts = []
        for v in operands:
            if type(v) is not Tensor:
                parts.append(v)
                continue
            d = v._data
            entry = self.recipes.get(id(d))
            if entry is not None:
                parts.append(entry[1])
            elif type(d) is not np.ndarray:
                return None
            elif d.size == 1:
                parts.append(d if d.ndim == 0 else d.reshape(1))
            elif d.shape == shape and (d.flags.c_contiguous or not any(d.strides)):
                parts.append(d.reshape(-1))  # a view: a broadcast value keeps its 0 strides
            else:
                return None
        self.seq += 1
        arr = np.empty(shape, kdt)
        key = id(arr)
        self.recipes[key] = (weakref.ref(arr, lambda _: self.recipes.pop(key, None)),
                             Recipe(op, tuple(parts), kdt, self.seq))
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
        its blocks as they are computed (see accumulate)."""
        if self.recipes:
            if name == "accumulate_grad" and self.accumulate(*args):
                return None
            if inplace or (op is None and name not in PURE):
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


def _collect(v, keys):
    if isinstance(v, Tensor):
        keys.add(id(v._data))
    elif isinstance(v, (list, tuple)):
        for x in v:
            _collect(x, keys)
    elif isinstance(v, dict):
        for x in v.values():
            _collect(x, keys)


def _store(dest, lo, hi, block):
    dest[lo:hi] = block


def _add(dest, lo, hi, block):
    np.add(dest[lo:hi], block, out=dest[lo:hi])


def evaluate(targets, sink):
    """For each block of the targets' length: compute every recipe the targets need
    on it (see block_kernel), and sink(dest, lo, hi, values) per (recipe, dest)
    target. A tracer must not record these calls (Tracer.fill)."""
    sizes = {dest.size for _, dest in targets}
    if len(sizes) > 1:  # unrelated values: recipes of one value share its length
        for n in sizes:
            evaluate([t for t in targets if t[1].size == n], sink)
        return
    order, seen, stack = [], set(), [r for r, _ in targets]
    while stack:
        r = stack.pop()
        if id(r) not in seen:
            seen.add(id(r))
            order.append(r)
            stack.extend(x for x in r.operands if type(x) is Recipe)
    order.sort(key=lambda r: r.seq)  # made in order: operands first
    last = {}
    for i, r in enumerate(order):
        for x in r.operands:
            if type(x) is Recipe:
                last[id(x)] = i
    wanted = {id(r) for r, _ in targets}
    kernels = {id(r): block_kernel(r.op, r.kdt) for r in order}
    n = targets[0][1].size
    for lo in range(0, n, BLOCK):
        hi = min(lo + BLOCK, n)
        values = {}
        for i, r in enumerate(order):
            args = []
            for x in r.operands:
                if type(x) is Recipe:
                    args.append(values[id(x)])
                elif type(x) is np.ndarray:
                    args.append(x[lo:hi] if x.size == n else x)
                else:
                    args.append(x)
            values[id(r)] = kernels[id(r)](*args)
            for x in r.operands:  # free a block's value after its last reader
                if type(x) is Recipe and last[id(x)] == i and id(x) not in wanted:
                    values.pop(id(x), None)
        for r, dest in targets:
            sink(dest, lo, hi, values[id(r)].reshape(-1))


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
