"""The fused-kernel executor: elementwise work on large CPU tensors as
generated loop kernels, forward and backward together.

It claims runs of consecutive instructions over CPU float arrays with more
than program.SMALL_ELEMENTS elements: elementwise ops (other operands Python
numbers, size-1 tensors, or values broadcast per row or per column; comparisons
and `where` too, a bool value being 0/1 in the kernel's float dtype), sums and
means (over everything, over the last dim, over all but the last), `accumulate_grad`
into a leaf, and the small glue between them (`ones_like` of the loss,
`reshape`/`expand` of a 0-d gradient, 0-d arithmetic, a small gradient's
accumulation). Inside a run a large value is an expression of the run's
inputs, computed per element in registers and stored only when an instruction
after the run reads it. A value is recomputed wherever it is needed instead of
saved: the forward values that the backward reads cost a few flops per element
again, not an array each. W1's step is one pass that reads x, adds up the loss
and writes x.grad.

A full or column reduction's result is known only after the loop over all
elements, so each value of a run gets a level (such a reduction's is one more
than its input's) and each level is one kernel, run in order; the glue of a
level runs in Python before it (arrays of several shapes: a kernel per shape
and level). A row reduction (the last dim, kept) stays inside the kernel,
which then loops over rows: per row, a loop over its elements per pass, the
per-row values between loops (see Run._plan_rows); a flat kernel is the same
loop nest with blocks of BLOCK elements as its rows. A kernel's ops cost at
most MAX_COST (see op_cost), which bounds its compile time; a larger level is
split in instruction order (over rows: between passes, so one pass over the
bound stays one kernel), and the values a later piece reads are stored in
pooled temporaries. Kernels are serial loops
over blocks that release the GIL; _spread shares the blocks out between
threads.
"""
import ast
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..backend import HOST_ARRAY
from ..kernels import cache, pool
from ..kernels.expr import to_scalar_code
from ..kernels.fuse import PARALLEL_MIN_ELEMENTS, parallel_enabled
from ..kernels.roles import role_formula
from ..kernels.source import NUMBA_TYPE, array_type, decorator, header, length_guard
from ..kernels.threads import get_num_threads
from ..tensor import Tensor
from .names import SWAPPED
from .program import SMALL_ELEMENTS, Ref, Segment, iter_refs, python_step

# Compile time per kernel is bounded through its ops' cost: 1 per op and 3 more per
# math function it calls, which is inlined vectorized code. Measured (2 busy cores):
# 48 multiply/adds compile in 2.0 s, 48 ops of which 12 are sin in 10.5 s, 24 of
# which 6 are sin in 4.6 s. W1's step (31 ops, 8 calls) is one kernel of cost 55.
MAX_COST = 64
MATH_CALL_COST = 3
# Elements per block of a kernel: a reduction adds up each block in float64
# (vectorized loop into a block buffer, then eight running sums), and the blocks
# are what the threads share out.
BLOCK = 4096
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
BOOL = np.dtype(np.bool_)

FILLS = {"ones_like": 1, "zeros_like": 0}
ALIASES = frozenset(("reshape", "view", "expand", "broadcast_to", "squeeze", "unsqueeze",
                     "flatten"))
GLUE = ("fill", "scalar")  # size-1 work: claimed only between large work


def _host_float(m):
    return m is not None and m.array_type is HOST_ARRAY and m.dtype in FLOATS


def row_shape(shape):
    """The shape of one value per row of `shape` (its last dim reduced, kept as 1)."""
    return shape[:-1] + (1,)


def _is_col(shape, full):
    """Whether `shape` broadcasts against `full` as one value per column."""
    stripped = tuple(shape)
    while stripped and stripped[0] == 1:
        stripped = stripped[1:]
    return len(shape) <= len(full) and stripped == full[-1:] and full[-1] > 1


def _elementwise(ins):
    """(op, operands) of an elementwise call, else None."""
    if ins.inplace or ins.kwargs or type(ins.outs) is not Ref:
        return None
    if ins.op is not None:
        return ins.op, ins.args[1:]
    op = SWAPPED.get(ins.name)
    if op is not None and len(ins.args) == 2:
        return op, (ins.args[1], ins.args[0])
    return None


def _reduction(ins, src, m):
    """(the reduced part: "all", "row" (the last dim, kept) or "col" (all but the
    last), mean?) of a sum, mean or sum_to_size call, else None."""
    name, args, kw = ins.name, ins.args, ins.kwargs
    if name == "sum_to_size":
        if kw:
            return None
        if m.size == 1:
            return "all", False
        if len(src.shape) >= 2 and m.shape == row_shape(src.shape):
            return "row", False
        return ("col", False) if len(src.shape) >= 2 and _is_col(m.shape, src.shape) else None
    if name not in ("sum", "mean") or len(args) > 3 or set(kw) - {"dim", "keepdim"}:
        return None
    dim = args[1] if len(args) > 1 else kw.get("dim")
    keepdim = args[2] if len(args) > 2 else kw.get("keepdim", False)
    nd = len(src.shape)
    if dim is None:
        return "all", name == "mean"
    if type(dim) not in (int, tuple, list) or any(type(d) is not int for d in
                                                   (dim if type(dim) is not int else (dim,))):
        return None
    dims = {d % nd if nd else d for d in (dim if type(dim) is not int else (dim,))}
    if m.size == 1:
        return "all", name == "mean"
    if nd >= 2 and dims == {nd - 1} and keepdim is True:
        return "row", name == "mean"
    if nd >= 2 and dims == set(range(nd - 1)):
        return "col", name == "mean"
    return None


def row_groups(instrs, meta):
    """{row shape: the full shape} of the per-row values the run's kernels compute
    in their rows: of the row reductions, and of elementwise operands broadcast
    along the last dim. A row shape of two full shapes is left out (its values are
    then ordinary arrays)."""
    groups = {}
    for ins in instrs:
        refs = list(ins.reads())
        if not refs or type(ins.outs) is not Ref or not _host_float(meta[refs[0]]):
            continue
        src, m = meta[refs[0]], meta[ins.outs]
        full = None
        if _elementwise(ins) is not None and m is not None and len(m.shape) >= 2 and any(
                meta[r] is not None and meta[r].shape == row_shape(m.shape) for r in refs):
            full = m.shape
        elif m is not None and (_reduction(ins, src, m) or ("",))[0] == "row":
            full = src.shape
        if full is not None and full[-1] > 1 and np.prod(full) > SMALL_ELEMENTS:
            rs = row_shape(full)
            groups[rs] = full if groups.get(rs, full) == full else None
    return {rs: full for rs, full in groups.items() if full is not None}


def _kernel_dtype(op, operands, m, meta, bools):
    """The float dtype a kernel computes elementwise `op` in, or None when it cannot:
    the result's, whose large float operands must have it (size-1 ones may have any).
    With `bools` (CPU kernels), a comparison's bool result is a 0/1 value of its
    large operands' dtype, read only where an op takes a bool (where's condition),
    and a bool operand there may be such a value or a bool array (see _array)."""
    large = set()
    for a, name in zip(operands, op.args):
        if type(a) is Ref:
            rm = meta[a]
            if rm is None or rm.array_type is not HOST_ARRAY or (
                    rm.dtype != BOOL if name in op.bool_args else rm.dtype not in FLOATS):
                return None
            if rm.size > 1 and name not in op.bool_args:
                large.add(rm.dtype)
    if op.bool_out:
        kdt = next(iter(large), None) if m.dtype == BOOL and len(large) == 1 else None
    else:
        kdt = m.dtype
    if not (op.plain or bools) or kdt not in FLOATS or m.array_type is not HOST_ARRAY or \
            large - {kdt}:
        return None
    return kdt


def classify(ins, meta, rows=None, bools=False):
    """(kind, (shape, dtype) of the large arrays it works on or None, detail), or None
    when this executor does not run `ins` (`bools`: see _kernel_dtype). Kinds: "ew"
    (elementwise, large result), "rew" (elementwise on per-row values of a row
    group, see row_groups: computed once per row inside the kernel of the full
    shape), "reduce" (a sum or mean of a large array: over all, its rows or its
    columns), "acc" (accumulate_grad of a large gradient), "bcast" (a size-1,
    per-row or per-column value expanded to a large shape), "fill" (ones_like or
    zeros_like, size 1) and "scalar" (other small glue, run in Python)."""
    rows = rows or {}
    ew = _elementwise(ins)
    args, outs = ins.args, ins.outs
    if ew is not None:
        op, operands = ew
        m = meta[outs]
        refs = [a for a in operands if type(a) is Ref]
        if m is not None and m.array_type is HOST_ARRAY and m.size == 1:
            return ("scalar", None, None) if all(
                meta[r] is not None and meta[r].array_type is HOST_ARRAY and meta[r].size == 1
                for r in refs) else None
        if m is None or any(
                type(a) is not Ref and type(a) not in (int, float) for a in operands):
            return None
        kdt = _kernel_dtype(op, operands, m, meta, bools)
        if kdt is None:
            return None
        full = rows.get(m.shape)
        if full is not None:
            if all(meta[r].size == 1 or meta[r].shape == m.shape for r in refs):
                return "rew", (full, kdt), (op, operands)
            return None
        shape = m.shape
        if m.size <= SMALL_ELEMENTS or not any(meta[r].shape == shape for r in refs):
            return None
        for r in refs:
            rm = meta[r]
            if not (rm.size == 1 and len(rm.shape) <= len(shape) or rm.shape == shape or
                    rows.get(rm.shape) == shape or _is_col(rm.shape, shape)):
                return None
        return "ew", (shape, kdt), (op, operands)
    if ins.name == "accumulate_grad":
        return _classify_acc(ins, meta)
    if not args or type(args[0]) is not Ref or type(outs) is not Ref:
        return None
    src, m = meta[args[0]], meta[outs]
    name = ins.name
    if name in ("sum", "mean", "sum_to_size"):
        got = _reduction(ins, src, m) if _host_float(src) and _host_float(m) and \
            m.dtype == src.dtype else None
        if got is not None and src.size > SMALL_ELEMENTS and (
                got[0] != "row" or rows.get(m.shape) == src.shape):
            return "reduce", (src.shape, src.dtype), got
    elif name in FILLS and len(args) == 1 and set(ins.kwargs) <= {"dtype"}:
        if _host_float(m) and m.size == 1 and src is not None:
            return "fill", None, FILLS[name]
    elif name in ALIASES and not ins.kwargs and not any(
            True for a in args[1:] for _ in iter_refs(a)):
        if _host_float(src) and _host_float(m) and m.dtype == src.dtype:
            if m.size == 1 and src.size == 1:
                return "scalar", None, None
            if m.size > SMALL_ELEMENTS and (src.size == 1 or _is_col(src.shape, m.shape) or (
                    name in ("expand", "broadcast_to") and rows.get(src.shape) == m.shape)):
                return "bcast", (m.shape, m.dtype), None
    return None


def _classify_acc(ins, meta):
    if len(ins.args) != 2 or ins.kwargs or any(type(a) is not Ref for a in ins.args):
        return None
    leaf, g = meta[ins.args[0]], meta[ins.args[1]]
    if not _host_float(g) or leaf is None or leaf.array_type is not HOST_ARRAY or \
            leaf.shape != g.shape or leaf.dtype != g.dtype:
        return None
    if g.size <= SMALL_ELEMENTS:  # a small gradient (a bias's): eager mode's accumulation
        return "scalar", None, None
    return "acc", (g.shape, g.dtype), None


def fused_executor(meta, instrs, keep, taken, plan=None, name="fused"):
    """The executor (see program.EXECUTORS): a Segment per run of large elementwise
    work. `plan`, `name`: another device's planner (called as Run is; None declines
    the run) and executor name."""
    if not any(_host_float(m) and m.size > SMALL_ELEMENTS for m in meta):
        return  # nothing large (W7's 7,000 small ops): no instruction to classify
    last = {}  # slot -> index of the last instruction that reads it
    for k, ins in enumerate(instrs):
        for r in ins.reads():
            last[int(r)] = k
    rows = row_groups(instrs, meta)
    kinds = [None if k in taken else classify(ins, meta, rows, bools=plan is None)
             for k, ins in enumerate(instrs)]
    k, n = 0, len(instrs)
    while k < n:
        if kinds[k] is None:
            k += 1
            continue
        leaves, j = set(), k
        while j < n and kinds[j] is not None:
            if instrs[j].name == "accumulate_grad":
                leaf = int(instrs[j].args[0])
                if leaf in leaves:  # a second accumulation into one leaf starts a new run
                    break
                leaves.add(leaf)
            j += 1
        a, b = k, j
        while a < b and kinds[a][0] in GLUE:
            a += 1
        while b > a and kinds[b - 1][0] in GLUE:
            b -= 1
        if any(kinds[i][0] == "ew" for i in range(a, b)):
            run = (plan or Run)(meta, instrs, kinds, a, b, keep, last)
            if run is not None:
                yield Segment(a, b, run, name)
        k = j


class Run:
    """The plan of one run: Python glue steps and kernel launches in order;
    calling it runs them on a slot list. A run may hold large arrays of several
    shapes (a step's parameters): each level has a kernel per (shape, dtype)."""

    def __init__(self, meta, instrs, kinds, start, stop, keep, last):
        nodes = {}    # slot -> (kind, op, operand refs, (shape, dtype)): values a kernel computes
        root = {}     # slot of an expanded value -> the slot expanded
        level = {}
        glue = []     # (level, step)
        targets = []  # (level, (shape, dtype), what, ref, detail): what a kernel must do
        stored = set()
        const = {}    # slot -> the number every element of it is (ones_like's result)

        def outside(s):
            return s in keep or last.get(s, -1) >= stop

        def store(s):
            """Have the kernel computing s store it (read by glue or a kernel of
            another shape); the level from which s is in the slot list."""
            if s not in nodes:
                return level.get(s, 0)
            if s not in stored:
                stored.add(s)
                targets.append((level[s], nodes[s][3], "store", ("r" if nodes[s][0] != "ew"
                                                                 else "v", s), None))
            return level[s] + 1

        def ref(a, key):
            """("k", number), ("s", size-1 slot), ("v", slot of key's shape), ("r", per-row
            slot) or ("c", per-column slot)."""
            if type(a) is not Ref:
                return "k", key[1].type(a)
            s = root.get(int(a), int(a))
            shape = meta[s].shape
            if s in const:  # the loss's gradient of ones: folded into the kernel's code
                return "k", key[1].type(const[s])
            if meta[s].size == 1:
                return "s", s
            return ("v" if shape == key[0] else "r" if shape == row_shape(key[0]) else "c"), s

        def lvl(r, key):
            """The level from which a kernel of `key` can read r."""
            if r[0] == "k":
                return 0
            s = r[1]
            if s in nodes and (nodes[s][3] != key or r[0] == "c"):
                return store(s)
            return level.get(s, 0)

        for k in range(start, stop):
            ins = instrs[k]
            kind, key, detail = kinds[k]
            out = int(ins.outs) if type(ins.outs) is Ref else None
            if kind in ("ew", "rew"):
                refs = tuple(ref(a, key) for a in detail[1])
                level[out] = max(lvl(r, key) for r in refs)
                nodes[out] = (kind, detail[0], refs, key)
                if outside(out):
                    store(out)
            elif kind == "reduce":
                src = ref(ins.args[0], key)
                part, mean = detail
                if part == "row":
                    level[out] = lvl(src, key)
                    nodes[out] = ("rred", mean, (src,), key)
                    if outside(out):
                        store(out)
                else:
                    level[out] = lvl(src, key) + 1
                    targets.append((lvl(src, key), key, "reduce", src,
                                    (out, part, mean, meta[out].shape)))
            elif kind == "fill":
                level[out] = 0
                const[out] = detail
                glue.append((0, self.filler(out, meta[out], detail)))
            elif kind == "scalar":
                level[out] = max([store(int(r)) for r in ins.reads()], default=0)
                if ins.name in ALIASES and int(ins.args[0]) in const:
                    const[out] = const[int(ins.args[0])]
                glue.append((level[out], python_step(ins)))
            elif kind == "bcast":
                src = int(ins.args[0])
                root[out] = root.get(src, src)
                level[out] = level.get(root[out], 0)
                if outside(out):
                    glue.append((store(root[out]), python_step(ins)))
            else:  # acc
                g = ref(ins.args[1], key)
                targets.append((lvl(g, key), key, "sink", g, (ins, int(ins.args[0]))))

        self.order = {s: i for i, s in enumerate(nodes)}
        self.nodes = nodes
        self.bools = {s for s in nodes if meta[s].dtype == BOOL}  # held as 0/1 in kernels
        top = max([t[0] for t in targets] + [g[0] for g in glue], default=0)
        self.made = set()  # slots stored by an earlier kernel (env or temporary)
        self.temps = set()
        self.steps = []
        for L in range(top + 1):
            self.steps += [step for lv, step in glue if lv == L]
            keys = dict.fromkeys(t[1] for t in targets if t[0] == L)
            for key in keys:
                want = [t[2:] for t in targets if t[0] == L and t[1] == key]
                self._plan(key, want, outside)
        # a temporary goes back to the pool after the last launch that reads it
        seen = set()
        for step in reversed(self.steps):
            if isinstance(step, Launch):
                step.drop = [s for s in step.temp_reads if s not in seen]
                seen.update(step.temp_reads)
                # built now (in compile's worker thread), for gradients stored fresh;
                # adding into an existing .grad builds its variant on first use
                step.kernel(("=",) * (len(step.stores) + len(step.sinks)))

    def _needed(self, refs, key, within=None):
        """The slots of `refs`' values this kernel computes (not stored yet), with
        what they are made of, in program order. `within`: only those kinds."""
        need, stack = set(), [r[1] for r in refs if r[0] in "vr"]
        while stack:
            s = stack.pop()
            node = self.nodes.get(s)
            if s in need or s in self.made or node is None or node[3] != key or (
                    within is not None and node[0] not in within):
                continue
            need.add(s)
            stack += [r[1] for r in node[2] if r[0] in "vr"]
        return sorted(need, key=self.order.__getitem__)

    def _plan(self, key, want, outside):
        """The launches of one level's work on arrays of one (shape, dtype)."""
        need = self._needed([w[1] for w in want], key)
        if any(self.nodes[s][0] != "ew" for s in need) or any(
                r[0] in "rc" for s in need for r in self.nodes[s][2]) or any(
                w[1][0] in "rc" or w[0] == "reduce" and w[2][1] == "col" for w in want):
            self._plan_rows(key, want, need)
            return
        # one pass over flat blocks, cut into kernels of bounded cost
        chunks = _pieces(need, [op_cost(self.nodes[s][1]) for s in need])
        for c, chunk in enumerate(chunks):
            later = set(s for piece in chunks[c + 1:] for s in piece)
            reads_later = set(r[1] for s in later for r in self.nodes[s][2] if r[0] == "v")
            launch = self.Launch(key, rows=False)
            work = [("store", ("v", s), "temp") for s in chunk
                    if s in reads_later and not outside(s)]
            work += [w for w in want
                     if ((w[1][1] in chunk) if w[1][0] == "v" and w[1][1] in need else c == 0)]
            launch.loop([(s, self.nodes[s]) for s in chunk], work)
            self._add(launch)

    def _plan_rows(self, key, want, need):
        """Kernels over rows: per row, a loop over its elements for each pass (a row
        reduction's result is known after the loop computing it, and the per-row values
        made from it before the next loop). Values computed in one loop and read in a
        later one are computed again there: a row stays in the cache. A kernel ends
        between passes where the next would take its cost past MAX_COST; the per-row
        values a later kernel reads are stored (one number per row)."""
        nodes = self.nodes
        pas = {}
        for s in need:
            kind, _, refs, _ = nodes[s]
            p = max([pas.get(r[1], 0) for r in refs if r[0] in "vr"], default=0)
            pas[s] = p + 1 if kind == "rred" else p
        loops = {}  # pass -> work in its loop
        rowwork = {}  # slot of a per-row value -> stores of it
        for w in want:
            if w[0] == "store" and w[1][0] == "r":
                rowwork.setdefault(w[1][1], []).append(w)
            else:
                loops.setdefault(pas.get(w[1][1], 0) if w[1][0] in "vr" else 0, []).append(w)
        for s in need:
            if nodes[s][0] == "rred":
                loops.setdefault(pas[s] - 1, []).append(("rred", nodes[s][2][0], s))
        # pass p: its per-row ops, its loop, then the sums of the row reductions it filled
        units = []
        for p in range(max(list(loops) + list(pas.values()), default=0) + 1):
            work = loops.get(p, ())
            full = self._needed([w[1] for w in work], key, within=("ew",)) if work else []
            ops = [s for s in need if pas[s] == p and nodes[s][0] == "rew"]
            sums = [s for s in need if pas[s] == p + 1 and nodes[s][0] == "rred"]
            reads = {r[1] for s in ops + full for r in nodes[s][2] if r[0] == "r"}
            reads |= {w[1][1] for w in work if w[1][0] == "r"}
            cost = sum(op_cost(nodes[s][1]) for s in ops + full)
            units.append((ops, full, work, sums, reads, cost))
        launch = self.Launch(key, rows=True)
        for p, (ops, full, work, sums, _, cost) in enumerate(units):
            spent = sum(op_cost(op) for op in launch.ops)
            if spent and spent + cost > MAX_COST:
                later = set().union(*(u[4] for u in units[p:]))
                for s in sorted(later, key=self.order.__getitem__):
                    if ("r", s) in launch.names and launch.names[("r", s)] == f"w{s}":
                        launch.store_row(s, to_env=False)
                self._add(launch)
                launch = self.Launch(key, rows=True)
            for s in ops:
                launch.row_value(s, nodes[s], rowwork.get(s, ()))
            if work:
                launch.loop([(s, nodes[s]) for s in full], work)
            for s in sums:
                launch.row_value(s, nodes[s], rowwork.get(s, ()))
        self._add(launch)

    def _add(self, launch):
        launch.temp_reads = [s for s in launch.input_slots() if s in self.temps]
        launch.bools = {s for s, _, to_env in launch.stores if to_env and s in self.bools}
        self.made.update(s for s, _, _ in launch.stores)
        self.temps.update(s for s, _, to_env in launch.stores if not to_env)
        self.steps.append(launch)

    def __call__(self, env):
        temps = {}
        for step in self.steps:
            if isinstance(step, Launch):
                step(env, temps)
            else:
                step(env)


def op_cost(op):
    return 1 + MATH_CALL_COST * sum(isinstance(n, ast.Call) for n in ast.walk(op.out_body))


def _pieces(items, costs):
    """`items` cut in order into lists whose costs add up to at most MAX_COST (an
    item costing more stands alone); [[]] for none."""
    pieces, cur, total = [], [], 0
    for item, c in zip(items, costs):
        if cur and total + c > MAX_COST:
            pieces.append(cur)
            cur, total = [], 0
        cur.append(item)
        total += c
    return pieces + [cur] if cur or not pieces else pieces


def _filler(out, m, value):
    """A step storing ones_like/zeros_like's size-1 result: it depends on the input's
    shape only, so the loss's gradient does not wait for the loss."""
    def step(env):
        env[out] = Tensor(np.full(m.shape, value, m.dtype))
    return step


# The rows of a row kernel go in at most this many blocks (a column sum keeps a
# float64 row of partial sums per block), in one block below PARALLEL_MIN_ELEMENTS
# (such a kernel runs on one thread: 64 rows of partial sums to zero and add up
# cost more than its loop). Both follow from the shape alone, so a run gives the
# same bits on any number of threads.
ROW_BLOCKS = 64


class Launch:
    """One kernel: its operands (arrays by slot: full-size, per row or per column;
    scalars), and per row (`rows`) or per flat block of BLOCK elements, the loops
    over the elements with the ops they compute and what they write (stored slots,
    reductions, accumulated gradients), and the per-row values between loops."""

    def __init__(self, key, rows):
        self.shape, self.kdt = key
        self.n = 1
        for d in self.shape:
            self.n *= d
        self.rows = rows
        # a flat kernel is a row kernel whose rows are blocks of BLOCK elements
        self.width = self.shape[-1] if rows else BLOCK
        nrows = -(-self.n // self.width)
        self.per_block = (nrows if self.n < PARALLEL_MIN_ELEMENTS else -(-nrows // ROW_BLOCKS)) \
            if rows else 1
        self.nb = -(-nrows // self.per_block)
        self.arrays = {"v": [], "r": [], "c": []}  # input slots per layout, in parameter order
        self.scalars = []       # ("k", number) or ("s", size-1 slot)
        self.stores = []        # (slot, layout "v" or "r", to env?)
        self.reds = []          # (slot, "all" or "col", mean?, the result's shape)
        self.sinks = []         # (accumulate_grad instruction, leaf slot)
        self.known = []         # reductions of a constant: (as in reds, the constant)
        self.names = {}         # ref -> its name in the kernel
        self.body = []          # lines run per row
        self.nbuf = 0
        self.ops = []           # (op, operand names), for the cost
        self.kernels = {}       # sink modes -> compiled kernel
        self.temp_reads = self.drop = ()
        self.bools = ()         # stored slots the program holds as bool arrays

    def input_slots(self):
        return [s for layout in "vrc" for s in self.arrays[layout]]

    def name(self, r):
        """The name of an operand; a new parameter for an input."""
        got = self.names.get(r)
        if got is None and r[0] == "k" and np.isfinite(r[1]):
            return f"T({float(r[1])!r})"  # a literal: LLVM folds what it can (x * 1)
        if got is None:
            if r[0] in "vrc":
                got = f"{r[0]}{len(self.arrays[r[0]])}"
                self.arrays[r[0]].append(r[1])
            else:
                got = f"k{len(self.scalars)}"
                self.scalars.append(r)
            self.names[r] = got
        return got

    VMATH = True  # jitgrad's vectorizable math functions (CPU code only)

    def _op_line(self, var, op, refs, names):
        args, formula = role_formula(op, ("forward",), self.kdt)[:2]
        code = to_scalar_code(formula, dict(zip(args, [names(r) for r in refs])),
                              dtype=self.kdt.name if self.VMATH else None)
        self.ops.append(op)
        return f"{var} = T({code})"

    def row_value(self, s, node, stores):
        """Compute a per-row value before the next loop: an op on per-row values, or
        the end of a row reduction (its sum is in the buffer the loop filled)."""
        kind, op, refs, _ = node
        var = f"w{s}"
        if kind == "rred":
            self.body += _block_sum(self.names[("buf", s)], "acc")
            self.body.append(f"{var} = T(acc / width)" if op else f"{var} = T(acc)")
        else:
            self.body.append(self._op_line(var, op, refs, self._row_name))
        self.names[("r", s)] = var
        for _ in stores:
            self.store_row(s, to_env=True)

    def store_row(self, s, to_env):
        self.stores.append((s, "r", to_env))
        self.body.append(f"q{len(self.stores) - 1}[row] = w{s}")

    def _row_name(self, r):
        if r[0] == "r" and r not in self.names:  # a per-row input: read once per row
            name = self.name(r)
            self.body.append(f"{name}x = {name}[row]")
            self.names[r] = f"{name}x"
        return self.name(r)

    # the loop over a row's elements, and the element of a full-size array in it (a
    # device's variant loops over all elements)
    LOOP = "for j in range(m):"

    def at(self, array):
        return f"{array}r[j]"

    def loop(self, full, work):
        """A loop over the row's elements computing the full-size values `full` ((slot,
        node) in program order) and doing `work`: (what, ref, detail) with what
        "store", "reduce", "sink" or "rred" (a row reduction filling its buffer)."""
        lines, local = [], {}
        loads, after = [], []

        def names(r):
            if r in local:
                return local[r]
            if r[0] == "r":
                return self._row_name(r)
            name = self.name(r)
            if r[0] in "vc":
                local[r] = f"{name}j"
                loads.append(f"{name}j = {self.at(name) if r[0] == 'v' else name + '[j]'}")
                return local[r]
            return name
        for s, (_, op, refs, _) in full:
            lines.append(self._op_line(f"x{s}", op, refs, names))
            local[("v", s)] = f"x{s}"
        for what, r, detail in work:
            if what == "store":
                self.stores.append((r[1], "v", detail != "temp"))
                lines.append(f"{self.at(f'o{len(self.stores) - 1}')} = {names(r)}")
            elif what == "sink":
                self.sinks.append(detail)
                g = len(self.sinks) - 1
                lines.append(f"{self.at(f'g{g}')} @{g}@ {names(r)}")
            elif r[0] == "k" and what == "reduce":  # a sum of a constant: known
                self.known.append((detail, r[1]))
            else:
                after += self.reduction(what, r, detail, names, r in local, lines)
        if lines:
            self.body += [self.LOOP] + ["    " + x for x in loads + lines]
        self.body += after

    def reduction(self, what, r, detail, names, computed, lines):
        """Add up `r` in the loop (`lines`); the lines after the loop. A column sum adds
        into its float64 row in the loop (measured: 25% faster than a buffer added up
        after it); otherwise the loop fills a buffer, added up after it, and an input
        (not `computed`) is added up where it is."""
        if what == "reduce" and detail[1] == "col":
            self.reds.append(detail)
            lines.append(f"p{len(self.reds) - 1}r[j] += {names(r)}")
            return []
        if r[0] == "v" and not computed:
            buf = self.name(r) + "r"
        else:
            buf = f"b{self.nbuf}"
            self.nbuf += 1
            lines.append(f"{buf}[j] = {names(r)}")
        if what == "rred":
            self.names[("buf", detail)] = buf
            return []
        self.reds.append(detail)
        i = len(self.reds) - 1
        return _block_sum(buf, "acc") + [f"f{i} += acc"]

    def source(self, modes):
        """Numba source of this kernel; `modes`: per stored value and gradient, "=" (store)
        or "+=" (add). It runs the blocks [lo, hi) of its rows (the threads' share, see
        _spread); `width` elements make a row, `per_block` rows a block."""
        kdt = self.kdt.name
        arr, f64 = array_type(kdt), array_type("float64")
        v, r, c = (self.arrays[k] for k in "vrc")
        params = ([f"v{j}" for j in range(len(v))] + [f"r{j}" for j in range(len(r))]
                  + [f"c{j}" for j in range(len(c))] + [f"k{j}" for j in range(len(self.scalars))])
        types = [arr] * (len(v) + len(r) + len(c)) + [NUMBA_TYPE[kdt]] * len(self.scalars)
        outs = [(f"o{j}" if layout == "v" else f"q{j}") for j, (_, layout, _) in
                enumerate(self.stores)]
        # w: the buffers of one call's blocks, nbuf rows of `width` (the caller's: the
        # kernel allocates nothing, so it runs without Numba's runtime and has a
        # native file, see kernels/native.py)
        params += outs + [f"g{j}" for j in range(len(self.sinks))] + \
            [f"p{j}" for j in range(len(self.reds))] + ["w"]
        types += [arr] * (len(outs) + len(self.sinks)) + [f64] * len(self.reds) + [arr]
        full = [f"v{j}" for j in range(len(v))] + [o for o in outs if o[0] == "o"] + \
            [f"g{j}" for j in range(len(self.sinks))]
        cols = [f"p{j}" for j, d in enumerate(self.reds) if d[1] == "col"]
        alls = [f"p{j}" for j, d in enumerate(self.reds) if d[1] != "col"]
        what = "fused kernel"
        lines = [decorator("serial", f"void({', '.join(['int64'] * 5 + types)})", runtime=False),
                 f"def kernel({', '.join(['n', 'width', 'per_block', 'lo', 'hi'] + params)}):",
                 "    nrows = (n + width - 1) // width",
                 "    nb = (nrows + per_block - 1) // per_block"]
        lines += ["    " + g for g in length_guard("n", full, what) + length_guard(
            "nrows", [f"r{j}" for j in range(len(r))] + [o for o in outs if o[0] == "q"], what)
            + length_guard("width", [f"c{j}" for j in range(len(c))], what)
            + length_guard("nb * width", cols, what) + length_guard("nb", alls, what)
            + length_guard(f"{self.nbuf} * width", ["w"], what)]
        lines += ["    if lo < 0 or hi > nb or lo > hi:",
                  f"        raise ValueError({what + ': blocks [lo, hi) out of range'!r})"]
        lines += [f"    b{j} = w[{j} * width:{j + 1} * width]" for j in range(self.nbuf)]
        lines += ["    for blk in range(lo, hi):"]
        block = [f"f{j} = 0.0" for j, d in enumerate(self.reds) if d[1] != "col"]
        block += [f"p{j}r = p{j}[blk * width:(blk + 1) * width]"
                  for j, d in enumerate(self.reds) if d[1] == "col"]
        block += ["for row in range(blk * per_block, min((blk + 1) * per_block, nrows)):",
                  "    base = row * width", "    m = min(width, n - base)"]
        # j counts from 0 in row slices, so LLVM sees j >= 0 and drops the wraparound
        row = [f"{a}r = {a}[base:base + m]" for a in full]
        block += ["    " + x for x in row + self.body]
        block += [f"p{j}[blk] = f{j}" for j, d in enumerate(self.reds) if d[1] != "col"]
        lines += ["        " + x for x in block]
        sums = SUM_SOURCE if any("_sum(" in line for line in self.body) else ""
        text = f"T = np.{kdt}\n{sums}\n\n" + "\n".join(lines) + "\n"
        for j, mode in enumerate(modes):
            text = text.replace(f"@{j}@", mode)
        return header(text) + text

    def kernel(self, modes):
        fn = self.kernels.get(modes)
        if fn is None:
            fn = self.kernels[modes] = cache.load_kernel(f"fused_{self.kdt.name}",
                                                         self.source(modes))
        return fn

    def __call__(self, env, temps):
        shape, kdt, n = self.shape, self.kdt, self.n
        args = []
        size = {"v": n, "r": n // self.shape[-1], "c": self.shape[-1]}
        for layout in "vrc":
            for s in self.arrays[layout]:
                d = temps[s] if s in temps else _array(env[s], size[layout], kdt, s)
                args.append(d.reshape(-1))
        for kind, v in self.scalars:
            args.append(v if kind == "k" else kdt.type(env[v]._data.reshape(-1)[0]))
        stored = []
        for s, layout, _ in self.stores:
            a = pool.empty(shape if layout == "v" else row_shape(shape), kdt)
            stored.append(a)
            args.append(a.reshape(-1))
        # pool.empty: recycled, no page faults on first touch
        modes, bufs, done = self.grad_buffers(env, args, pool.empty)
        args += [b.reshape(-1) for b in bufs]
        nb, width = self.nb, self.width
        parts = [np.zeros(nb * width) if part == "col" else np.empty(nb)
                 for _, part, _, _ in self.reds]
        args += parts
        _spread(self.kernel(tuple(modes)), n, nb, (n, width, self.per_block), args,
                lambda: np.empty(self.nbuf * width, kdt))
        for (s, _, to_env), a in zip(self.stores, stored):
            if to_env:
                env[s] = Tensor(a.astype(BOOL) if s in self.bools else a)
            else:
                temps[s] = a
        for (s, part, mean, out_shape), p in zip(self.reds, parts):
            if part == "col":
                total = p.reshape(nb, width).sum(0)
                count = n // width
            else:
                total, count = p.sum(), n
            env[s] = Tensor(np.asarray(total / count if mean else total).astype(kdt)
                            .reshape(out_shape))
        for (s, part, mean, out_shape), c in self.known:
            count = n // width if part == "col" else n
            env[s] = Tensor(np.full(out_shape, c if mean else c * count, kdt))
        give_grads(done)
        for s in self.drop:
            temps.pop(s, None)

    def grad_buffers(self, env, operands, empty):
        """Per accumulate_grad of this kernel: "=" or "+=", the buffer the kernel
        writes (new from `empty`, or the leaf's .grad to add into in place), and what
        give_grads does with it after the launch."""
        modes, bufs, done = [], [], []
        for ins, leaf in self.sinks:
            var = env[leaf]
            gv = var._grad_value
            if gv is None or not self._adds_into(gv, operands):
                buf = empty(self.shape, self.kdt)
                modes.append("=")
                done.append((ins, var, buf, gv is None and _plain_leaf(var)))
            else:
                buf = gv._data
                modes.append("+=")
                done.append((ins, var, gv, None))
            bufs.append(buf)
        return modes, bufs, done

    def _adds_into(self, gv, args):
        """Whether the kernel may add into the existing gradient gv in place: a plain
        contiguous array of the run's shape and dtype that no operand overlaps."""
        d = gv._data
        if type(d) is not HOST_ARRAY or d.shape != self.shape or d.dtype != self.kdt \
                or not d.flags.c_contiguous or not d.flags.writeable:
            return False
        return not any(type(a) is HOST_ARRAY and np.may_share_memory(a, d) for a in args)


def give_grads(done):
    """Hand the gradients a kernel wrote (see Launch.grad_buffers) to their leaves."""
    for ins, var, buf, fresh in done:
        if fresh is None:   # added in place, as eager mode does with .grad set
            buf._vc[0] += 1
        elif fresh:
            var._grad = Tensor(buf)
        else:               # hooks or an unusual .grad: eager mode's own accumulation
            ins.fn(var, Tensor(buf))


# what Run builds its steps with (a device's variant subclasses both)
Run.Launch, Run.filler = Launch, staticmethod(_filler)

_pool = [None, None, 0]  # [thread pool, the process that made it, its threads]
PIECES_PER_THREAD = 8


def _spread(kernel, n, nb, head, args, scratch):
    """Run kernel(*head, lo, hi, *args, scratch()) over the blocks [0, nb) of a kernel of n
    elements, shared out between jitgrad's threads (the kernels release the GIL)
    from PARALLEL_MIN_ELEMENTS elements on. Threads of our own rather than Numba's
    prange: a parallel kernel compiles 2-3 times slower. The blocks go in
    PIECES_PER_THREAD pieces per thread, each thread taking the next, so a thread
    slowed by other work does not hold up the step."""
    k = min(get_num_threads(), nb) if n >= PARALLEL_MIN_ELEMENTS and parallel_enabled() else 1
    if k <= 1:
        kernel(*head, 0, nb, *args, scratch())
        return
    if _pool[1] != os.getpid() or _pool[2] < k - 1:
        # a pool's threads do not survive fork: a child makes its own
        _pool[:] = [ThreadPoolExecutor(k - 1, thread_name_prefix="jitgrad-fused"), os.getpid(),
                    k - 1]
    m = min(nb, k * PIECES_PER_THREAD)
    pieces = iter([(nb * j // m, nb * (j + 1) // m) for j in range(m)])

    def work():
        own = scratch()  # (a thread's blocks share their buffers)
        for lo, hi in pieces:  # next() on a list iterator is atomic under the GIL
            kernel(*head, lo, hi, *args, own)
    rest = [_pool[0].submit(work) for _ in range(k - 1)]
    work()
    for f in rest:
        f.result()


def _plain_leaf(var):
    """A leaf whose accumulation is just storing the gradient (no hooks to run)."""
    return not (var._hooks or var._post_hooks) and var._data.flags.c_contiguous


def _array(t, size, kdt, slot):
    d = t._data
    if type(d) is not HOST_ARRAY or d.size != size or d.dtype not in (kdt, BOOL):
        raise RuntimeError(f"fused kernel: slot %{slot} holds {type(d).__name__} "
                           f"{getattr(d, 'dtype', '?')}{list(getattr(d, 'shape', ()))}, the "
                           f"capture saw {kdt} of {size} elements: please report this as a "
                           "jitgrad bug")
    if d.dtype == BOOL:  # a mask: 0/1 in the kernel's dtype (see _kernel_dtype)
        return d.astype(kdt)
    if not d.flags.writeable:  # the kernel's signature takes writable arrays
        d = d.copy()
    return d


def _block_sum(buf, target):
    """Lines adding up buf[0:m] in float64 into `target` (see SUM_SOURCE)."""
    return [f"{target} = _sum({buf}, m)"]


# The sum of a row or block, in a kernel's module: the one function compiled with
# reassociation allowed, so that LLVM adds up in vector lanes (float64 partial sums;
# about 3x faster than eight scalar running sums) while every other op of the kernel
# keeps its order.
SUM_SOURCE = """

@numba.njit(fastmath={"reassoc"}, nogil=True, error_model="numpy", _nrt=False)
def _sum(buf, m):
    s = 0.0
    for k in range(m):
        s += buf[k]
    return s
"""
