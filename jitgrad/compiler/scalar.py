"""The scalar tape executor: runs of instructions on small CPU tensors, run as
one call of a precompiled interpreter (kernels/interp.py).

A run of supported instructions is lowered once, when the program is built,
to a scalar tape over one float64 arena. Every element of every tensor slot
is an arena cell, so what moves data without computing (reshape, views,
indexing with constant keys, stack, unbind, expand, broadcasting, zeros)
becomes a remapping of cell numbers at lowering time and costs nothing when
the program runs; what computes (elementwise ops, reductions, softmax)
becomes one tape row per scalar result. Float32 rows compute in float32
with the formulas of the eager kernels, and reductions add in numpy's order,
so results match eager mode to an ulp or two (the math functions are the C
library's, see kernels/interp.py). A run costs one copy per input tensor,
one interpreter call, and one Tensor per result that the rest of the
program reads. Setting .grad to None and accumulating gradients into leaves
(_EFFECTS) are part of a run, so a whole small training step is one call.

Views become copies: a view of a tensor that the program changes in place
is left to the Python tier (there it stays a view), and so is a view the
program returns of a tensor the caller also sees, and anything not in the
tables below (it is never approximated).
"""
import functools
import math

import numpy as np

from .. import dtypes as _dt
from ..autograd import engine
from ..kernels import cache, interp
from ..kernels.collector import paused_gc
from ..ops import indexing
from ..ops.reduce import _axes
from ..ops.registry import REGISTRY
from ..tensor import Tensor
from .program import SMALL_ELEMENTS, Ref, Segment, iter_refs, unused

NAME = "scalar tape"
F32, F64, BOOL, I64 = (np.dtype(t) for t in (np.float32, np.float64, np.bool_, np.int64))
# Held exactly by a float64 cell; int64 only as made by a run (see _SELECTIONS).
_ARENA_DTYPES = (F32, F64, BOOL, I64)
# Formulas that only pick one of their operands: on integers they run as float64
# rows, exact for integers of magnitude up to 2**53 (the backward pass makes 0/1
# masks with them, e.g. where(c, 1, 0)).
_SELECTIONS = frozenset(("where", "masked_fill"))
_EXACT_INT = 2 ** 53
# Runs shorter than this stay in Python: a segment's own cost (input copies, a
# call, result Tensors) is about that of one eager op.
MIN_RUN = 2
# A run ends once its arena has this many cells (32 MiB): long runs of tensors
# near SMALL_ELEMENTS would otherwise keep every intermediate alive at once.
MAX_CELLS = 1 << 22

# The formula table as jitgrad defines it: the interpreter has one branch per
# op and float dtype. (Ops registered later by a user run in the Python tier;
# adding them would change, and recompile, the interpreter.)
_TABLE_OPS = tuple(REGISTRY[k] for k in sorted(REGISTRY))
_interp = []  # the interpreter once loaded
cache.on_clear(_interp.clear)
_made = []  # (its opcode table, its source) once made


def _opcodes():
    """The interpreter's opcode table and source: made from the formula table alone
    (2 ms, once), so a program lowers without loading the interpreter, which only a
    segment needs (0.04 s from the disk cache, the first kernel also starting Numba)."""
    if not _made:
        _made.append(interp.opcodes(_TABLE_OPS))
    return _made[0]


def _interpreter():
    """The interpreter as a function binding it to (tape, arena, float32, float64,
    bool and int64 output buffers): it returns a call of no arguments that runs
    the tape on them. Its native file (kernels/native.py) where there is one, or
    once Numba has compiled it here and written that file: every process then
    runs the same machine code, and a process whose programs need nothing else
    never imports Numba."""
    if not _interp:
        kernel = cache.load_kernel(_KERNEL, _opcodes()[1])
        _interp.append(kernel.bind if hasattr(kernel, "bind") else _numba_binding(kernel))
    return _interp[0]


_KERNEL = "scalar_tape"


def _numba_binding(kernel):
    """Entry.bind's form for the interpreter as Numba loaded it (where there is no
    native file: another system, a Numba whose calling convention changed): the
    compiled function of its one signature, called without the dispatcher, which
    types the six arguments of each call (the first call of a process: 10 ms)."""
    overloads = getattr(kernel, "overloads", {})  # (not a dispatcher: without Numba's JIT)
    fn = next(iter(overloads.values())).entry_point if len(overloads) == 1 else kernel
    return functools.partial(functools.partial, fn)


class _Unsupported(Exception):
    """An instruction this executor does not lower: the Python tier runs it."""


# ---- what the lowering reads from instructions ---------------------------------------

def _changed_in_place(instrs, reads):
    """Slots that share storage, eagerly, with a tensor an in-place instruction
    changes: its views (by the view ops below), their views, and what they view.
    Made here, such a view would be a copy the change does not reach; reading
    them is fine (a run copies its inputs when it starts, in program order)."""
    root = {}
    for ins, src in zip(instrs, reads):
        if ins.name in _VIEWS:
            for r in iter_refs(ins.outs):
                root[int(r)] = root.get(src[0], src[0]) if src else int(r)
    hit = {root.get(int(ins.args[0]), int(ins.args[0])) for ins in instrs
           if ins.inplace and ins.args and type(ins.args[0]) is Ref}
    return {s for s, r in root.items() if r in hit} | hit


class _Lowering:
    """One run of instructions lowered to a scalar tape."""

    def __init__(self, meta, table):
        self.meta, self.table = meta, table
        self.loc = {}       # slot -> int64 array of its cells, of the slot's shape (or,
                            # made by an elementwise row, the cell of a 0-d slot: an int)
        self.inputs = []    # (slot, first cell): read from the slot list when run
        self.n = 0          # cells so far
        self.consts = {}    # float64 bits -> cell
        self.rows = []      # tape rows (opcode, out, a, b, c): tuples, or arrays of them
        self.root = {}      # slot made by a view op -> the slot it views (eagerly)
        self.kept_roots = set()
        self.made = set()   # slots made by this run's instructions
        self.effects = []   # (leaf slot, gradient cells or None): see _EFFECTS
        self.promoted = {}  # kernel_dtypes' answers, by op and operand kinds (see formula)
        self.kinds = {}     # slot -> (dtype, whether it has dims), once asked by formula
        self.const_of = {}  # (op, operand, dtype, Python number) -> its constant's cell
        self.arena = {}     # slot -> its SlotMeta, once checked by arena_meta

    # -- cells --
    def arena_meta(self, s):
        """The SlotMeta of slot `s` if its tensor can live in the arena, else
        unsupported (asked once per slot: operands are read many times)."""
        m = self.arena.get(s)
        if m is None:
            m = self.arena[s] = _check_meta(self.meta[s])
        return m

    def alloc(self, shape):
        if not shape:  # the cells of most graphs of small tensors
            self.n += 1
            return np.array(self.n - 1, dtype=np.int64)
        size = math.prod(shape)
        cells = np.arange(self.n, self.n + size, dtype=np.int64).reshape(shape)
        self.n += size
        return cells

    def const_cell(self, value):
        """The cell holding constant `value` (one per float64 bit pattern)."""
        key = np.float64(value).tobytes()
        cell = self.consts.get(key)
        if cell is None:
            cell = self.consts[key] = self.n
            self.n += 1
        return cell

    def const(self, value, shape=()):
        cell = self.const_cell(value)
        return np.array(cell, dtype=np.int64) if not shape else \
            np.full(shape, cell, dtype=np.int64)

    def cells(self, ref):
        """The cells of slot `ref`: an input of the run (copied in) when no
        instruction of the run made it."""
        s = int(ref)
        got = self.loc.get(s)
        if type(got) is int:
            got = self.loc[s] = np.array(got, dtype=np.int64)
        elif got is None:
            m = self.arena_meta(s)
            if m.dtype == I64:
                raise _Unsupported("int64 values from outside the run may not fit a float64")
            got = self.loc[s] = self.alloc(m.shape)
            self.inputs.append((s, int(got.reshape(-1)[0]) if got.size else 0))
        return got

    def apply(self, opcode, shape, *cols):
        """New cells of `shape` holding the opcode's function of `cols` (cell
        arrays broadcast to `shape`), one tape row per cell."""
        if not shape:  # most rows of graphs of 0-d tensors: no arrays
            n = self.n
            self.n += 1
            self.rows.append((opcode, n, *[c.item() for c in cols]))
            return np.array(n, dtype=np.int64)
        out = self.alloc(shape)
        if out.size == 1:
            self.rows.append((opcode, out.item(), *[c.item() for c in cols]))
        elif out.size:
            rows = np.zeros((out.size, 5), dtype=np.int64)
            rows[:, 0] = opcode
            rows[:, 1] = out.reshape(-1)
            for j, c in enumerate(cols):
                if c.shape == shape:
                    rows[:, 2 + j] = c.reshape(-1)
                elif c.size == 1:  # (a reduction's result against its input)
                    rows[:, 2 + j] = c.item()
                else:
                    rows[:, 2 + j] = np.broadcast_to(c, shape).reshape(-1)
            self.rows.append(rows)
        return out

    def tape(self):
        """The rows so far as one (n, 5) int64 array."""
        parts, single = [], []
        for r in self.rows:
            if type(r) is tuple:
                single.append(r + (0,) * (5 - len(r)))
            else:
                if single:
                    parts.append(np.array(single, dtype=np.int64))
                    single = []
                parts.append(r)
        if single:
            parts.append(np.array(single, dtype=np.int64))
        return np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)

    def opcode(self, name, dtype):
        try:
            return self.table[name, dtype]
        except KeyError:
            raise _Unsupported(f"no {dtype} branch for {name}") from None

    # -- instructions --
    def try_lower(self, ins, reads, keep):
        """Lower `ins`, or leave the run as it was and return False. An op that
        refuses cell numbers (moved()) or arguments the rules did not foresee are
        the Python tier's too."""
        n_inputs = len(self.inputs)
        try:
            self.lower(ins, reads, keep)
            return True
        except (_Unsupported, TypeError, ValueError, IndexError, RuntimeError):
            for s, _ in self.inputs[n_inputs:]:
                del self.loc[s]
            del self.inputs[n_inputs:]
            return False

    def lower(self, ins, reads, keep):
        """Lower `ins`, which reads the slots `reads` (Refs)."""
        op = ins.op
        if op is not None and type(ins.outs) is Ref and not ins.kwargs and not ins.inplace:
            # an elementwise call making one tensor (most instructions): the checks
            # below, in the same order, without their general cases
            out = int(ins.outs)
            if out in reads:
                self.cells(ins.outs)  # it gave back its input
                return
            m = self.arena_meta(out)
            if out in self.loc:
                raise _Unsupported("gives back one of its inputs")
            if len(ins.args) != op.n_args + 1:
                raise _Unsupported("elementwise call form")
            self.out_meta = m
            cells = self.formula(op, ins.args[1:], m, cell=True)
            if type(cells) is not int and cells.shape != m.shape:
                raise _Unsupported("result shape")
            self.loc[out] = cells
            self.kinds[out] = (m.dtype, m.shape != ())
            self.made.add(out)
            return
        if ins.name in _EFFECTS:
            self.effects.append(_EFFECTS[ins.name](self, *ins.args, **ins.kwargs))
            return
        outs = ins.writes()
        if not outs or type(ins.outs) not in (Ref, tuple, list) or ins.inplace:
            raise _Unsupported("no new tensor result")
        if type(ins.outs) is Ref and int(ins.outs) in reads and (
                ins.op is not None or ins.name in _RULES or ins.name in _MOVES):
            self.cells(ins.outs)  # an op that gave back its input (sum_to_size to its shape)
            return
        for r in outs:
            self.arena_meta(r)
            if int(r) in reads or int(r) in self.loc:
                raise _Unsupported("gives back one of its inputs")
        self.out_meta = self.meta[outs[0]]
        if ins.op is not None:
            if ins.kwargs or len(ins.args) != ins.op.n_args + 1:
                raise _Unsupported("elementwise call form")
            results = self.formula(ins.op, ins.args[1:], self.out_meta)
        elif ins.name in _MOVES:
            results = self.moved(ins, reads, keep)
        elif ins.name in _RULES:
            results = _RULES[ins.name](self, *ins.args, **ins.kwargs)
        else:
            raise _Unsupported(ins.name)
        if type(ins.outs) is Ref:
            results = (results,)
        if len(results) != len(outs):
            raise _Unsupported("result count")
        for r, cells in zip(outs, results):
            if cells.shape != self.meta[r].shape:
                raise _Unsupported("result shape")
        for r, cells in zip(outs, results):
            self.loc[int(r)] = cells
            self.made.add(int(r))

    def moved(self, ins, src, keep):
        """Cells of an op that only moves data: the op run on cell numbers. A view
        returned from the program, of a tensor the caller also sees, stays in the
        Python tier: there it is a view, here it would be a copy."""
        dtypes = {self.meta[r].dtype for r in src}
        if len(dtypes) != 1 or self.out_meta.dtype not in dtypes:
            raise _Unsupported("mixed dtypes")
        if ins.name in _VIEWS:
            root = self.root.get(src[0], src[0])
            for r in iter_refs(ins.outs):
                self.root[int(r)] = root
                if int(r) in keep and (root in keep or root in self.kept_roots or
                                       root not in self.made):
                    raise _Unsupported("a returned view")
            self.kept_roots.update(root for r in iter_refs(ins.outs) if int(r) in keep)
        out = ins.fn(*_index_tensors(self, ins.args), **_index_tensors(self, ins.kwargs))
        if isinstance(out, Tensor):
            return out._data
        return tuple(t._data for t in out)

    def formula(self, op, operands, m, cell=False):
        """Cells of `op` applied to operands (Refs or Python numbers), whose eager
        result has SlotMeta `m`; with `cell`, a 0-d result of 0-d operands as its
        cell number (an int, as the slots made by lower() are kept)."""
        kinds = self.kinds
        key = [op]  # then per operand: (dtype, whether it has dims), or the scalar's type
        for v in operands:
            t = type(v)
            if t is Ref:
                k = kinds.get(v)
                if k is None:
                    vm = self.arena_meta(v)
                    k = kinds[v] = (vm.dtype, vm.shape != ())
                key.append(k)
            elif t is float or t is int or t is bool:
                key.append(t)
            else:
                raise _Unsupported("operand type")
        key = tuple(key)
        got = self.promoted.get(key)
        if got is None:  # the promotion depends on the scalars' types, not values
            got = self.promoted[key] = self._promotion(op, operands, key[1:])
        if not got:
            raise _Unsupported("dtype")
        kdt, result_dtype, code, picks, dimless = got
        if m.dtype != result_dtype:
            raise _Unsupported("dtype")
        if picks and all(abs(v) <= _EXACT_INT for a, v in zip(op.args, operands)
                         if type(v) is not Ref and a not in op.bool_args):
            kdt = F64
            code = None
        if code is None:
            code = self.opcode(op.name, kdt)
        if dimless and not m.shape:  # 0-d operands and result (most rows of graphs of 0-d tensors)
            row = [code, 0]
            loc = self.loc
            consts = self.const_of
            for a, v in zip(op.args, operands):
                if type(v) is Ref:
                    c = loc.get(v)
                    row.append(c if type(c) is int else (self.cells(v) if c is None else c).item())
                else:
                    ckey = (op, a, kdt, type(v), v if v else repr(v))  # (0.0 and -0.0 apart)
                    c = consts.get(ckey)
                    if c is None:
                        c = consts[ckey] = self.const_cell(self._constant(op, a, v, kdt))
                    row.append(c)
            n = row[1] = self.n  # (after any new input or constant cell, as apply numbers them)
            self.n = n + 1
            self.rows.append(tuple(row))
            return n if cell else np.array(n, dtype=np.int64)
        cols = []
        for a, v in zip(op.args, operands):
            if type(v) is Ref:
                cols.append(self.cells(v))
            else:
                cols.append(self.const(self._constant(op, a, v, kdt)))
        for c in cols:
            if c.shape != m.shape:  # (rarely: a loop, not a generator)
                try:
                    if np.broadcast_shapes(*(c.shape for c in cols)) != m.shape:
                        raise _Unsupported("broadcast shape")
                except ValueError:
                    raise _Unsupported("broadcast") from None
                break
        return self.apply(code, m.shape, *cols)

    def _promotion(self, op, operands, kinds):
        """What formula() needs to know of `op` on operands of these kinds: (compute
        dtype, the result's dtype, opcode or None where the table has no branch for
        it, whether integer operands may run as float64 rows (_SELECTIONS), whether
        no tensor operand has dims), or () where kernel_dtypes refuses them."""
        got = _promotion(op, operands, kinds)
        if not got:
            return ()
        kdt, res = got
        return (kdt, BOOL if op.bool_out else res, self.table.get((op.name, kdt)),
                kdt == I64 and op.name in _SELECTIONS,
                all(type(k) is not tuple or not k[1] for k in kinds))

    @staticmethod
    def _constant(op, a, v, kdt):
        """Python number `v`, operand `a` of `op`, as the float64 its cell holds."""
        try:
            return float(bool(v)) if a in op.bool_args else float(kdt.type(v))
        except OverflowError:
            raise _Unsupported("constant out of range") from None

    # -- composite rows --
    def binary(self, name, dtype, a, b):
        return self.apply(self.opcode(name, dtype), _broadcast(a.shape, b.shape), a, b)

    def unary(self, name, dtype, a):
        return self.apply(self.opcode(name, dtype), a.shape, a)

    def reduce(self, cells, axes, name, dtype):
        """`cells` reduced over `axes` (kept as size-1 dims) by binary op `name`,
        adding in numpy's order for the contiguous arrays eager mode reduces:
        pairwise along trailing axes, one after another along others."""
        nd = cells.ndim
        kept = [d for d in range(nd) if d not in axes]
        shape = tuple(1 if d in axes else s for d, s in enumerate(cells.shape))
        n = math.prod(cells.shape[d] for d in axes)
        if n == 0:
            return self.const(0.0, shape)  # the sum of nothing (other reductions refuse it)
        table = np.transpose(cells, kept + list(axes)).reshape(-1, n)
        # (one result, most often: its rows are made from 0-d cells, without arrays)
        cols = list(table[0]) if len(table) == 1 else [table[:, j] for j in range(n)]
        code = self.opcode(name, dtype)

        def add(a, b):
            return self.apply(code, a.shape, a, b)

        if tuple(axes) == tuple(range(nd - len(axes), nd)):
            acc = _pairwise(cols, add)
        else:
            acc = cols[0]
            for c in cols[1:]:
                acc = add(acc, c)
        return acc.reshape(shape)


def _broadcast(a, b):
    """np.broadcast_shapes(a, b) (ValueError where they do not broadcast), for the
    short shapes of small tensors without numpy's general machinery."""
    if a == b:
        return a
    if len(a) < len(b):
        a, b = b, a
    b = (1,) * (len(a) - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and y != 1 and x != 1:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _pairwise(cs, add):
    """numpy's pairwise_sum (loops_utils.h) of the cell arrays `cs` with rows made by
    add(a, b). (A function of the module: a nested one that calls itself is a
    reference cycle, which would keep the whole lowering for the garbage collector.)"""
    if len(cs) < 8:
        acc = cs[0]
        for c in cs[1:]:
            acc = add(acc, c)
        return acc
    if len(cs) <= 128:
        r = list(cs[:8])
        i = 8
        while i < len(cs) - len(cs) % 8:
            r = [add(r[j], cs[i + j]) for j in range(8)]
            i += 8
        acc = add(add(add(r[0], r[1]), add(r[2], r[3])),
                  add(add(r[4], r[5]), add(r[6], r[7])))
        for c in cs[i:]:
            acc = add(acc, c)
        return acc
    h = len(cs) // 2
    h -= h % 8
    return add(_pairwise(cs[:h], add), _pairwise(cs[h:], add))


def _promotion(op, operands, kinds):
    """kernel_dtypes' (compute dtype, result dtype) of `op` on operands of these
    kinds (see formula), or () where it refuses them."""
    dims, zero, scalars = [], [], []
    for a, v, kind in zip(op.args, operands, kinds):
        if a in op.bool_args:
            continue
        if type(kind) is tuple:
            (dims if kind[1] else zero).append(kind[0])
        else:
            scalars.append(v)
    try:
        return _dt.kernel_dtypes(op.name, dims, zero, scalars, op.floating, op.bool_promotes)
    except TypeError:
        return ()


def _check_meta(m):
    """The slot's SlotMeta if its tensor can live in the arena, else unsupported."""
    if m is None or m.array_type is not np.ndarray or m.dtype not in _ARENA_DTYPES or \
            m.size > SMALL_ELEMENTS:
        raise _Unsupported("slot")
    return m


def _float(m):
    if m.dtype not in (F32, F64):
        raise _Unsupported("not a float tensor")
    return m.dtype


# ---- rules of the non-elementwise instructions: (lowering, *args) -> cells -----------

def _index_tensors(low, v):
    """Arguments with each tensor slot replaced by a Tensor of its cell numbers."""
    if type(v) is Ref:
        return Tensor(np.array(low.cells(v)))
    if type(v) in (list, tuple):
        return type(v)(_index_tensors(low, x) for x in v)
    return v


def _filled(value):
    """zeros_like/ones_like(x, dtype=None, device=None, requires_grad=False), and
    zeros_as(shape, dtype, like): cells of one constant (a requires_grad=True
    factory makes a leaf: the Python tier's)."""
    def rule(low, x, dtype=None, device=None, requires_grad=False):
        if requires_grad:
            raise _Unsupported("a leaf that requires grad")
        m = low.out_meta
        return low.const(float(m.dtype.type(value)), m.shape)
    return rule


def _sum(low, x, dim=None, keepdim=False, dtype=None):
    m = low.meta[x]
    if dtype is not None:
        raise _Unsupported("sum(dtype=)")
    # Counts (a bool or int64 tensor made by the run) add exactly as float64 rows.
    kdt = F64 if m.dtype in (BOOL, I64) and low.out_meta.dtype == I64 else _float(m)
    cells = low.cells(x)
    axes = _axes(dim, cells.ndim)
    out = low.reduce(cells, axes, "add", kdt)
    return out if keepdim else _squeeze(out, axes)


def _extreme(name):
    """amax/amin: picks, so any order gives eager's value (NaN wins, as numpy's)."""
    def rule(low, x, dim=(), keepdim=False):
        kdt = _float(low.meta[x])
        cells = low.cells(x)
        axes = _axes(None if dim == () else dim, cells.ndim)
        if not cells.size:
            raise _Unsupported("empty")
        out = low.reduce(cells, axes, name, kdt)
        return out if keepdim else _squeeze(out, axes)
    return rule


def _extreme_op(low, x, dim, keepdim, fn, name):
    """The op that amax, amin, max and min (without indices) record: `name` says which."""
    pick = "maximum" if name in ("amax", "max") else "minimum"
    return _extreme(pick)(low, x, () if dim is None else dim, keepdim)


def _squeeze(cells, axes):
    return cells.reshape(tuple(s for d, s in enumerate(cells.shape) if d not in axes))


def _mean(low, x, dim=None, keepdim=False, dtype=None):
    m = low.meta[x]
    kdt = _float(m)
    cells = low.cells(x)
    axes = _axes(dim, cells.ndim)
    if dtype is not None or not cells.size:
        raise _Unsupported("mean form")
    count = math.prod(cells.shape[a] for a in axes)
    total = low.reduce(cells, axes, "add", kdt)
    out = low.binary("div", kdt, total, low.const(float(kdt.type(count))))
    return out if keepdim else _squeeze(out, axes)


def _sum_to_size(low, x, *shape):
    cells = low.cells(x)
    _float(low.meta[x])
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    lead = cells.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(shape)
                                      if s == 1 and cells.shape[lead + k] != 1)
    if not axes:
        raise _Unsupported("returns its input")
    return low.reduce(cells, axes, "add", low.meta[x].dtype).reshape(shape)


def _softmax(log):
    def rule(low, x, dim, dtype=None):
        kdt = _float(low.meta[x])
        cells = low.cells(x)
        if dtype is not None or not cells.size:
            raise _Unsupported("softmax form")
        if cells.ndim == 0:
            # eager mode: softmax of a 0-d tensor is 1, log_softmax x - x (NaN at inf)
            return low.binary("sub", kdt, cells, cells) if log else low.const(1.0)
        ax = (dim + cells.ndim if dim < 0 else dim,)
        z = low.binary("sub", kdt, cells, low.reduce(cells, ax, "maximum", kdt))
        e = low.unary("exp", kdt, z)
        s = low.reduce(e, ax, "add", kdt)
        if log:
            return low.binary("sub", kdt, z, low.unary("log", kdt, s))
        return low.binary("div", kdt, e, s)
    return rule


def _index_put_zeros(low, g, shape, key):
    cells = low.cells(g)
    if any(True for _ in iter_refs(key)):
        raise _Unsupported("tensor key")
    k, advanced = indexing._norm_key(key, len(shape))
    out = low.const(0.0, tuple(shape)).copy()
    if not advanced:
        out[k] = cells
        return out
    # np.add.at: each element added into zeros, repeated indices in order
    kdt = _float(low.meta[g])
    add = low.opcode("add", kdt)
    flat = out.reshape(-1)
    where = np.arange(flat.size).reshape(shape)[k]
    for pos, cell in zip(where.reshape(-1).tolist(),
                         np.broadcast_to(cells, where.shape).reshape(-1).tolist()):
        flat[pos] = low.apply(add, (), np.array(flat[pos]), np.array(cell))
    return out


def _index_put(low, x, key, value):
    """Out-of-place x[key] = value: numpy's assignment, of cell numbers (with
    repeated indices the last value wins, as in eager mode)."""
    m = low.meta[x]
    if any(True for _ in iter_refs(key)):
        raise _Unsupported("tensor key")
    if type(value) is Ref:
        if low.meta[value].dtype != m.dtype:
            raise _Unsupported("index_put value dtype")
        cells = low.cells(value)
    elif type(value) in (float, int, bool) and m.dtype in (F32, F64):
        cells = low.const(float(m.dtype.type(value)))
    else:
        raise _Unsupported("index_put value")
    out = low.cells(x).copy()
    out[indexing._norm_key(key, out.ndim)[0]] = cells
    return out


def _to_dtype(low, x, dtype):
    src = low.meta[x].dtype
    dst = _dt.to_dtype(dtype).np
    if src == dst or dst not in (F32, F64) or src not in _ARENA_DTYPES:
        raise _Unsupported("conversion")
    cells = low.cells(x)
    if dst == F32 and src == F64:
        return low.apply(interp.ROUND32, cells.shape, cells)
    return cells  # exact: float32 and bool values are float64 values


# Above this many products a matmul is BLAS's (the Python tier's): as tape rows
# (a multiply and an add each) it would cost more than the call it saves.
MATMUL_PRODUCTS = 1 << 14


def _matmul_cells(low, a, b):
    """Cells of np.matmul(a, b) (cell arrays of one float dtype `kdt`): the
    products, then their sums in order along the inner dimension."""
    kdt = low.out_meta.dtype
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    n, k, m = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    if math.prod(batch) * n * k * m > MATMUL_PRODUCTS or not k:
        raise _Unsupported("matmul size")
    shape = batch + (n, k, m)
    prod = low.apply(low.opcode("mul", kdt), shape, a2[..., :, :, None], b2[..., None, :, :])
    out = low.reduce(prod, (len(shape) - 2,), "add", kdt).reshape(batch + (n, m))
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def _matmul(low, a, b):
    ma, mb = low.meta[a], low.meta[b]
    if ma.dtype != mb.dtype or low.out_meta.dtype != _float(ma):
        raise _Unsupported("matmul dtypes")
    return _matmul_cells(low, low.cells(a), low.cells(b))


def _converts_to(dtype):
    """The methods x.float() and x.double()."""
    def rule(low, x, memory_format=None):
        return _to_dtype(low, x, dtype)
    return rule


def _elementwise_alias(name, order):
    """A rule running formula `name` on the operands in `order` (a method such as
    __rsub__ computes sub(other, self))."""
    def rule(low, *args, **kwargs):
        if kwargs:
            raise _Unsupported("keywords")
        return low.formula(REGISTRY[name], tuple(args[i] for i in order), low.out_meta)
    return rule


def _softplus(low, x, beta=1.0, threshold=20.0):
    return low.formula(REGISTRY["softplus"], (x, beta, threshold), low.out_meta)


def _gelu(low, x, approximate="none"):
    name = {"none": "gelu", "tanh": "gelu_tanh"}.get(approximate)
    if name is None:
        raise _Unsupported("gelu approximation")
    return low.formula(REGISTRY[name], (x,), low.out_meta)


# The ops that only move data: each gives the cell numbers its eager
# counterpart would give the values of.
_VIEWS = frozenset((
    "reshape", "view", "narrow", "select", "getitem", "expand", "expand_as", "broadcast_to",
    "unbind", "squeeze", "unsqueeze", "transpose", "permute", "t", "flatten", "contiguous",
    "split", "chunk", "diagonal"))
_MOVES = _VIEWS | {"stack", "cat", "flip", "clone"}

_RULES = {
    "sum": _sum, "mean": _mean, "sum_to_size": _sum_to_size,
    "amax": _extreme("maximum"), "amin": _extreme("minimum"), "_extreme": _extreme_op,
    "softmax": _softmax(False), "log_softmax": _softmax(True),
    "index_put_zeros": _index_put_zeros, "index_put": _index_put, "to_dtype": _to_dtype,
    "float": _converts_to(F32), "double": _converts_to(F64),
    "zeros_as": _filled(0.0), "zeros_like": _filled(0.0), "ones_like": _filled(1.0),
    "nn.functional.softplus": _softplus, "nn.functional.gelu": _gelu,
    "__rsub__": _elementwise_alias("sub", (1, 0)),
    "__rtruediv__": _elementwise_alias("div", (1, 0)),
    "__rpow__": _elementwise_alias("pow", (1, 0)),
    "where": _elementwise_alias("where", (1, 0, 2)),  # the method: x.where(condition, y)
    "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "dot": _matmul,
}


# ---- what a run does to .grad: (lowering, *args) -> (leaf slot, gradient cells or None) --
# Done in program order after the run's kernel: nothing a run computes reads .grad.

def _leaf_slot(low, var):
    if type(var) is not Ref or int(var) in low.made:  # made here: not in the slot list
        raise _Unsupported("not a tensor from outside the run")
    return int(var)


def _set_grad(low, var, value):
    """x.grad = None (zero_grad's set_to_none, a step's `x.grad = None`)."""
    if value is not None:
        raise _Unsupported("a .grad other than None")
    return _leaf_slot(low, var), None


def _accumulate_grad(low, var, g):
    """backward()'s accumulation of gradient g into a leaf's .grad (see _accumulate)."""
    slot = _leaf_slot(low, var)
    vm, gm = low.meta[slot], low.arena_meta(g)
    if vm is None or vm.array_type is not np.ndarray or (vm.dtype, vm.shape) != (
            gm.dtype, gm.shape):
        raise _Unsupported("a gradient of another dtype or shape")
    return slot, low.cells(g)


_EFFECTS = {"set_grad": _set_grad, "accumulate_grad": _accumulate_grad}


def _accumulate(var, g):
    """What eager backward() does with the gradient g (an array) of leaf var, except
    that a leaf without .grad takes g itself: the run made g for this alone, so no
    one else can see it (eager mode copies it into a buffer of the leaf's layout)."""
    d = var._data
    if var._grad_value is None and not var._post_hooks and type(d) is np.ndarray and \
            d.flags.c_contiguous:
        var._grad_value = Tensor(g)
    else:
        engine._accumulate(var, Tensor(g), False)


# ---- the executor ----------------------------------------------------------------------

def scalar_tape(meta, instrs, keep, taken):
    """Segments over the maximal runs of instructions this executor lowers (with
    the unused ones inside them, which it leaves out)."""
    with paused_gc():
        skip = unused(instrs, keep, taken)
        if all(i in taken or i in skip for i in range(len(instrs))):
            return []
    with paused_gc():
        reads = [ins.reads() for ins in instrs]  # (Refs: equal to, hashed as, their slots)
        runs = list(_runs(meta, instrs, keep, taken, reads, skip, _opcodes()[0]))
    if runs:
        _interpreter()  # (loaded, or compiled, with the collector on)
    with paused_gc():
        return [Segment(start, stop, _Compiled(low, stop, last, keep).run, NAME,
                        skips=skip.intersection(range(start, stop)))
                for low, start, stop, last in runs]


def _runs(meta, instrs, keep, taken, reads, skip, table):
    """(lowering, start, stop, last reader of each slot) of each maximal run of
    instructions that lowers."""
    changed = _changed_in_place(instrs, reads)
    last = {}
    for i, rs in enumerate(reads):
        if i not in skip:
            for r in rs:
                last[r] = i
    i, n = 0, len(instrs)
    while i < n:
        start = i
        low = None
        while i < n and i not in taken:
            ins = instrs[i]
            if i in skip:
                i += 1
                continue
            if ins.name in _VIEWS and any(int(r) in changed for r in ins.writes()):
                break
            low = low or _Lowering(meta, table)
            if low.n > MAX_CELLS or not low.try_lower(ins, reads[i], keep):
                break
            i += 1
        if low is not None and i - start >= MIN_RUN:
            yield low, start, i, last
        i = max(i, start + 1)


_STORES = {F32: interp.STORE_F32, F64: interp.STORE_F64, BOOL: interp.STORE_BOOL,
           I64: interp.STORE_I64}


class _Compiled:
    """A lowered run made runnable: the tape (dead rows dropped), the arena with
    its constants, where inputs go and where results come from."""

    def __init__(self, low, stop, last, keep):
        sizes = dict.fromkeys(_STORES, 0)
        stores = []

        def place(cells, dtype, shape):
            """Where in the output buffers `cells` are stored: (buffer, index, shape), the
            value being buffer[index] reshaped to shape (None: it has that shape)."""
            cells = cells.reshape(-1)
            at = sizes[dtype]
            sizes[dtype] += cells.size
            stores.append(np.column_stack([
                np.full(cells.size, _STORES[dtype]), np.arange(at, at + cells.size), cells,
                np.zeros((cells.size, 2), dtype=np.int64)]))
            k = list(_STORES).index(dtype)
            if not shape:
                return k, (at, Ellipsis), None  # a 0-d view: cheaper than slice and reshape
            return k, slice(at, at + cells.size), None if len(shape) == 1 else shape

        self.outs = [(s,) + place(low.cells(s), low.meta[s].dtype, low.meta[s].shape)
                     for s in sorted(s for s in low.made if last.get(s, -1) >= stop or s in keep)]
        self.effects = [(s, None) if cells is None else
                        (s, place(cells, low.meta[s].dtype, low.meta[s].shape))
                        for s, cells in low.effects]
        self.sizes = list(sizes.items())
        self.filled = [k for k, (_, n) in enumerate(self.sizes) if n]
        self.code = _optimize(np.concatenate([low.tape()] + stores), low.n)
        self.arena = np.zeros(low.n)
        for key, cell in low.consts.items():
            self.arena[cell] = np.frombuffer(key, dtype=np.float64)[0]
        self.inputs = [(s, first, low.meta[s].shape) for s, first in low.inputs]
        _interpreter()  # (loaded while the program is built, not at its first run)
        self.pool = []

    def _state(self):
        """One run's arrays: the arena, the views of it that inputs are copied to,
        the output buffers, and the interpreter bound to them."""
        arena = self.arena.copy()
        views = [(s, arena[first:first + math.prod(shape)].reshape(shape))
                 for s, first, shape in self.inputs]
        outs = [np.empty(n, dt) for dt, n in self.sizes]
        return views, outs, _interpreter()(self.code, arena, *outs)

    def run(self, env):
        try:
            state = self.pool.pop()  # one state per concurrent run
        except IndexError:
            state = self._state()
        views, outs, interpret = state
        for s, v in views:
            v[...] = env[s]._data  # cast to float64 (bool: 0 or 1)
        interpret()
        bufs = outs[:]  # (an empty buffer stays as it is: nothing reads it)
        for k in self.filled:
            bufs[k] = outs[k].copy()  # (results outlive the run: the buffers are reused)
        self.pool.append(state)
        for s, k, index, shape in self.outs:
            v = bufs[k][index]
            env[s] = Tensor(v if shape is None else v.reshape(shape))
        for s, place in self.effects:
            if place is None:
                env[s]._grad_value = None
            else:
                k, index, shape = place
                v = bufs[k][index]
                _accumulate(env[s], v if shape is None else v.reshape(shape))


# Rounds of whole-tape merging of repeated rows before the row-by-row pass finishes
# the job: each round merges the rows whose operands an earlier round merged, and
# taped graphs need one to three.
_MERGE_ROUNDS = 4
_STORE_CODES = np.array(sorted(_STORES.values()))


def _optimize(code, n_cells):
    """The tape without repeated rows (a row computing what an earlier one did
    reads that one's cell instead) and without rows no store depends on;
    checked to stay inside the arena (the interpreter indexes without bounds
    checks)."""
    computed = ~np.isin(code[:, 0], _STORE_CODES)
    if len(code) and (code[:, 2:].max() >= n_cells or code[computed, 1].max(initial=0)
                      >= n_cells or code.min() < 0):
        raise AssertionError("scalar tape: a cell index outside the arena (a jitgrad bug)")
    alias = np.arange(n_cells)
    for _ in range(_MERGE_ROUNDS):
        if not _merge_round(code[computed], alias):
            break
    else:
        _merge_rows(code, computed, alias)
    first = np.ones(len(code), dtype=bool)  # a computed row is kept if it is its cell's first
    first[computed] = alias[code[computed, 1]] == code[computed, 1]
    code = code[first]
    code[:, 2:] = alias[code[:, 2:]]
    return _repeats(code[_live(code, n_cells)]).astype(np.uint32)


def _merge_round(rows, alias):
    """Point the out cell of each computed row in `rows` at the out cell of the first
    row with its opcode and operands (read through `alias`, updated in place).
    Whether any cell changed."""
    key = np.column_stack([rows[:, 0], alias[rows[:, 2:]]])
    order = np.lexsort(key.T[::-1])  # stable: a group starts with its earliest row
    key = key[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = (key[1:] != key[:-1]).any(axis=1)
    outs = rows[order, 1]
    to = outs[starts][np.cumsum(starts) - 1]
    changed = bool((alias[outs] != to).any())
    alias[outs] = to
    return changed


def _merge_rows(code, computed, alias):
    """_merge_round's result, row by row in tape order (a row's operands are final
    when it is reached): for tapes whose repeats stack deeper than _MERGE_ROUNDS."""
    seen = {}
    for k, o, a, b, c in code[computed].tolist():
        seen.setdefault((k, int(alias[a]), int(alias[b]), int(alias[c])), o)
        alias[o] = seen[k, int(alias[a]), int(alias[b]), int(alias[c])]


def _live(code, n_cells):
    """Which rows a store depends on."""
    ks, os_, as_, bs, cs = code.T.tolist()
    stores = set(_STORES.values())
    need = bytearray(n_cells)
    live = bytearray(len(ks))
    for i in range(len(ks) - 1, -1, -1):
        if ks[i] in stores or need[os_[i]]:
            live[i] = 1
            need[as_[i]] = need[bs[i]] = need[cs[i]] = 1
    return np.frombuffer(bytes(live), dtype=bool)


def _repeats(code):
    """`code` with each stretch of one opcode whose out advances by 1 and whose
    operands each advance by one non-negative step (an op over a tensor's cells)
    written as a REPEAT row and its first row; the interpreter runs them in the
    same order. Stretches are taken first come: the row that ends one does not
    start the next."""
    step = code[1:, 1:] - code[:-1, 1:]
    pairs = np.flatnonzero((code[1:, 0] == code[:-1, 0]) & (step[:, 0] == 1) &
                           (step[:, 1:] >= 0).all(axis=1))  # row i and i + 1 continue
    if not len(pairs):
        return code
    new = np.ones(len(pairs), dtype=bool)
    new[1:] = (pairs[1:] != pairs[:-1] + 1) | (step[pairs[1:]] != step[pairs[:-1]]).any(axis=1)
    firsts, lengths, end = [], [], -1
    for s, e in zip(pairs[new].tolist(), pairs[np.append(new[1:], True)].tolist()):
        s = max(s, end + 1)  # pairs s..e join rows s..e + 1
        if s <= e:
            firsts.append(s)
            lengths.append(e + 2 - s)
            end = e + 1
    if not firsts:
        return code
    firsts, lengths = np.array(firsts), np.array(lengths)
    inside = np.zeros(len(code) + 1, dtype=np.int64)
    np.add.at(inside, firsts + 1, 1)
    np.add.at(inside, firsts + lengths, -1)
    rest = np.cumsum(inside[:-1]) == 0
    rows = np.column_stack([np.full(len(firsts), interp.REPEAT), lengths, step[firsts, 1:]])
    at = np.cumsum(rest)[firsts] - 1  # where each stretch's first row is among those kept
    return np.insert(code[rest], at, rows, axis=0)
