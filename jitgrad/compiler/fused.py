"""The fused-kernel executor: elementwise work on large CPU tensors as
generated loop kernels, forward and backward together.

It claims runs of consecutive instructions over CPU float arrays with more
than program.SMALL_ELEMENTS elements: elementwise ops (other operands Python
numbers or size-1 tensors), full reductions, `accumulate_grad` into a leaf,
and the size-1 glue between them (`ones_like` of the loss, `reshape`/`expand`
of a 0-d gradient, 0-d arithmetic). Inside a run a large value is an
expression of the run's inputs, computed per element in registers and stored
only when an instruction after the run reads it. A value is recomputed
wherever it is needed instead of saved: the forward values that the backward
reads cost a few flops per element again, not an array each. W1's step is
one pass that reads x, adds up the loss and writes x.grad.

A reduction's result is known only after the loop that computes it, so each
value of a run gets a level (a reduction's is one more than its input's)
and each level is one kernel, run in order; the size-1 glue of a level runs
in Python before it (arrays of several shapes: a kernel per shape and level).
A kernel's ops cost at most MAX_COST (see op_cost), which bounds its compile
time; a larger level is split in instruction order, and the values a later
piece reads are stored in pooled temporaries. Kernels are serial loops over
blocks of elements that release the GIL; _spread shares the blocks out
between threads.
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
from ..ops import formulas as E
from ..tensor import Tensor
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

# Tensor methods recorded as themselves, not as the elementwise call they make:
# the op they run, operands swapped.
SWAPPED = {"__rsub__": E.sub.op, "__rtruediv__": E.div.op, "__rpow__": E.pow.op}
FILLS = {"ones_like": 1, "zeros_like": 0}
ALIASES = frozenset(("reshape", "view", "expand", "broadcast_to", "squeeze", "unsqueeze",
                     "flatten"))
GLUE = ("fill", "scalar")  # size-1 work: claimed only between large work


def _host_float(m):
    return m is not None and m.array_type is HOST_ARRAY and m.dtype in FLOATS


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


def classify(ins, meta):
    """(kind, (shape, dtype) of the large arrays it works on or None, detail), or None
    when this executor does not run `ins`. Kinds: "ew" (elementwise, large result),
    "reduce" (full sum or mean of a large array), "acc" (accumulate_grad of a large
    gradient), "bcast" (a size-1 value expanded to a large shape), "fill" (ones_like
    or zeros_like, size 1) and "scalar" (other size-1 glue, run in Python)."""
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
        if not op.plain or not _host_float(m) or not all(_host_float(meta[r]) for r in refs) \
                or any(type(a) is not Ref and type(a) not in (int, float) for a in operands):
            return None
        shape = m.shape
        if m.size <= SMALL_ELEMENTS or not any(meta[r].shape == shape for r in refs):
            return None
        for r in refs:
            rm = meta[r]
            if not ((rm.shape == shape and rm.dtype == m.dtype)
                    or (rm.size == 1 and len(rm.shape) <= len(shape))):
                return None
        return "ew", (shape, m.dtype), (op, operands)
    if ins.name == "accumulate_grad":
        return _classify_acc(ins, meta)
    if not args or type(args[0]) is not Ref or type(outs) is not Ref:
        return None
    src, m = meta[args[0]], meta[outs]
    name = ins.name
    if (name in ("sum", "mean") and len(args) == 1 or name == "sum_to_size") and not ins.kwargs:
        if _host_float(src) and src.size > SMALL_ELEMENTS and m is not None and \
                m.size == 1 and m.dtype == src.dtype:
            return "reduce", (src.shape, src.dtype), name == "mean"
    elif name in FILLS and len(args) == 1 and set(ins.kwargs) <= {"dtype"}:
        if _host_float(m) and m.size == 1 and src is not None:
            return "fill", None, FILLS[name]
    elif name in ALIASES and not ins.kwargs and not any(
            True for a in args[1:] for _ in iter_refs(a)):
        if _host_float(src) and src.size == 1 and _host_float(m) and m.dtype == src.dtype:
            if m.size == 1:
                return "scalar", None, None
            if m.size > SMALL_ELEMENTS:
                return "bcast", (m.shape, m.dtype), None
    return None


def _classify_acc(ins, meta):
    if len(ins.args) != 2 or ins.kwargs or any(type(a) is not Ref for a in ins.args):
        return None
    leaf, g = meta[ins.args[0]], meta[ins.args[1]]
    if not _host_float(g) or leaf is None or leaf.array_type is not HOST_ARRAY or \
            leaf.shape != g.shape or leaf.dtype != g.dtype:
        return None
    if g.size == 1:  # a 0-d parameter's gradient: eager mode's accumulation, in order
        return "scalar", None, None
    return ("acc", (g.shape, g.dtype), None) if g.size > SMALL_ELEMENTS else None


def fused_executor(meta, instrs, keep, taken, plan=None, name="fused"):
    """The executor (see program.EXECUTORS): a Segment per run of large elementwise
    work. `plan`, `name`: the Run class and executor name of another device's variant."""
    last = {}  # slot -> index of the last instruction that reads it
    for k, ins in enumerate(instrs):
        for r in ins.reads():
            last[int(r)] = k
    kinds = [None if k in taken else classify(ins, meta) for k, ins in enumerate(instrs)]
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
            yield Segment(a, b, (plan or Run)(meta, instrs, kinds, a, b, keep, last), name)
        k = j


class Run:
    """The plan of one run: Python glue steps and kernel launches in order;
    calling it runs them on a slot list. A run may hold large arrays of several
    shapes (a step's parameters): each level has a kernel per (shape, dtype)."""

    def __init__(self, meta, instrs, kinds, start, stop, keep, last):
        def outside(s):
            return s in keep or last.get(s, -1) >= stop

        nodes = {}    # slot -> (op, operand refs, (shape, dtype)): large values of the run
        root = {}     # slot of an expanded size-1 value -> the size-1 slot
        level = {}
        glue = []     # (level, step)
        targets = []  # (level, (shape, dtype), what, ref, detail): what a kernel must do

        def ref(a, kdt):
            """("k", number), ("s", size-1 slot) or ("v", large slot)."""
            if type(a) is not Ref:
                return "k", kdt.type(a)
            s = root.get(int(a), int(a))
            return ("s" if meta[s].size == 1 else "v"), s

        def lvl(r):
            return 0 if r[0] == "k" else level.get(r[1], 0)

        for k in range(start, stop):
            ins = instrs[k]
            kind, key, detail = kinds[k]
            out = int(ins.outs) if type(ins.outs) is Ref else None
            if kind == "ew":
                refs = tuple(ref(a, key[1]) for a in detail[1])
                level[out] = max(lvl(r) for r in refs)
                nodes[out] = (detail[0], refs, key)
                if outside(out):
                    targets.append((level[out], key, "store", ("v", out), None))
            elif kind == "reduce":
                src = ref(ins.args[0], key[1])
                level[out] = lvl(src) + 1
                targets.append((lvl(src), key, "reduce", src, (out, detail, meta[out].shape)))
            elif kind == "fill":
                level[out] = 0
                glue.append((0, self.filler(out, meta[out], detail)))
            elif kind == "scalar":
                level[out] = max([lvl(("s", int(r))) for r in ins.reads()], default=0)
                glue.append((level[out], python_step(ins)))
            elif kind == "bcast":
                src = int(ins.args[0])
                root[out] = root.get(src, src)
                level[out] = level.get(root[out], 0)
                if outside(out):
                    glue.append((level[out], python_step(ins)))
            else:  # acc
                g = ref(ins.args[1], key[1])
                targets.append((lvl(g), key, "sink", g, (ins, int(ins.args[0]))))

        order = {s: i for i, s in enumerate(nodes)}
        top = max([t[0] for t in targets] + [g[0] for g in glue], default=0)
        made = set()  # large slots stored by an earlier kernel (env or temporary)
        temps = set()
        self.steps = []
        for L in range(top + 1):
            self.steps += [step for lv, step in glue if lv == L]
            keys = dict.fromkeys(t[1] for t in targets if t[0] == L)
            for key in keys:
                want = [t for t in targets if t[0] == L and t[1] == key]
                need = set()
                stack = [t[3][1] for t in want if t[3][0] == "v"]
                while stack:
                    s = stack.pop()
                    if s in need or s in made or s not in nodes:
                        continue
                    need.add(s)
                    stack += [r[1] for r in nodes[s][1] if r[0] == "v"]
                ordered = sorted(need, key=order.__getitem__)
                chunks = _pieces(ordered, [op_cost(nodes[s][0]) for s in ordered])
                for c, chunk in enumerate(chunks):
                    later = set(s for piece in chunks[c + 1:] for s in piece)
                    reads_later = set(r[1] for s in later for r in nodes[s][1] if r[0] == "v")
                    launch = self.Launch(key, [nodes[s][:2] for s in chunk], chunk)
                    for s in chunk:
                        if s in reads_later and not outside(s):
                            launch.store(s, to_env=False)
                    for _, _, what, r, detail in want:
                        if (r[1] in chunk) if r[0] == "v" and r[1] in need else c == 0:
                            launch.add(what, r, detail)
                    launch.temp_reads = [s for s in launch.array_slots if s in temps]
                    made.update(s for s, _ in launch.stores)
                    temps.update(s for s, to_env in launch.stores if not to_env)
                    self.steps.append(launch)
        # a temporary goes back to the pool after the last launch that reads it
        seen = set()
        for step in reversed(self.steps):
            if isinstance(step, Launch):
                step.drop = [s for s in step.temp_reads if s not in seen]
                seen.update(step.temp_reads)
                # built now (in compile's worker thread), for gradients stored fresh;
                # adding into an existing .grad builds its variant on first use
                step.kernel(("=",) * (len(step.outs) + len(step.sinks)))

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


class Launch:
    """One kernel of a run: its operands (large arrays by slot, scalars), the ops,
    and what it writes (stored slots, reductions, accumulated gradients)."""

    def __init__(self, key, ops, slots):
        self.shape, self.kdt = key
        self.n = 1
        for d in self.shape:
            self.n *= d
        self.array_slots = []   # large input slots, in parameter order
        self.scalars = []       # ("k", number) or ("s", size-1 slot)
        self.local = {}         # ref -> the name of its value inside the kernel
        self.ops = []           # (op, operand names)
        self.stores = []        # (slot, to env?)
        self.reds = []          # (slot, mean?, the result's shape)
        self.sinks = []         # (accumulate_grad instruction, leaf slot)
        self.outs = []          # names of the stored values
        self.red_names = []
        self.kernels = {}       # sink modes -> compiled kernel
        self.temp_reads = self.drop = ()
        for k, ((op, refs), s) in enumerate(zip(ops, slots)):
            self.ops.append((op, tuple(self.name(r) for r in refs)))
            self.local[("v", s)] = f"v{k}"
        self.sink_names = []

    def name(self, r):
        got = self.local.get(r)
        if got is None:
            if r[0] == "v":
                got = f"x{len(self.array_slots)}"
                self.array_slots.append(r[1])
            else:
                got = f"c{len(self.scalars)}"
                self.scalars.append(r)
            self.local[r] = got
        return got

    def store(self, slot, to_env):
        self.stores.append((slot, to_env))
        self.outs.append(self.name(("v", slot)))

    def add(self, what, r, detail):
        """Take on a target of the run: store value r, reduce it (detail: the result's
        slot, whether a mean, its shape) or accumulate it into a leaf's .grad (detail: the
        accumulate_grad instruction, the leaf's slot)."""
        if what == "store":
            self.store(r[1], to_env=True)
        elif what == "reduce":
            self.reds.append(detail)
            self.red_names.append(self.name(r))
        else:
            self.sinks.append(detail)
            self.sink_names.append(self.name(r))

    def source(self, modes):
        """Numba source of this kernel; `modes`: per output, "=" (store) or "+=" (add).
        It runs the blocks [lo, hi) of n elements (the threads' share, see _spread)."""
        kdt = self.kdt.name
        outs = self.outs + self.sink_names
        arrays = [f"a{j}" for j in range(len(self.array_slots))]
        scalars = [f"c{j}" for j in range(len(self.scalars))]
        stored = [f"o{j}" for j in range(len(outs))]
        parts = [f"r{j}" for j in range(len(self.reds))]
        arr = array_type(kdt)
        types = ["int64"] * 3 + [arr] * len(arrays) + [NUMBA_TYPE[kdt]] * len(scalars) + \
            [arr] * len(stored) + [array_type("float64")] * len(parts)
        body = [f"x{j} = a{j}[i]" for j in range(len(arrays))]
        for k, (op, names) in enumerate(self.ops):
            args, formula = role_formula(op, ("forward",), self.kdt)[:2]
            code = to_scalar_code(formula, dict(zip(args, names)), dtype=kdt)
            body.append(f"v{k} = T({code})")
        body += [f"o{j}[i] {mode} {v}" for j, (v, mode) in enumerate(zip(outs, modes))]
        body += [f"b{j}[j] = {v}" for j, v in enumerate(self.red_names)]
        what = "fused kernel"
        lines = [decorator("serial", f"void({', '.join(types)})"),
                 f"def kernel({', '.join(['n', 'lo', 'hi'] + arrays + scalars + stored + parts)}):",
                 f"    nb = (n + {BLOCK - 1}) // {BLOCK}"]
        lines += ["    " + g for g in length_guard("n", arrays + stored, what)
                  + length_guard("nb", parts, what)]
        lines += ["    if lo < 0 or hi > nb or lo > hi:",
                  f"        raise ValueError({what + ': blocks [lo, hi) out of range'!r})",
                  "    for blk in range(lo, hi):",
                  f"        start = blk * {BLOCK}",
                  f"        stop = min(start + {BLOCK}, n)"]
        lines += [f"        b{j} = np.empty({BLOCK}, T)" for j in range(len(parts))]
        # j counts from 0, so LLVM sees i >= 0 and drops the negative-index wraparound
        lines += ["        for j in range(stop - start):", "            i = start + j"]
        lines += ["            " + line for line in body]
        for j in range(len(parts)):
            lines += ["        " + line for line in _block_sum(f"b{j}", f"r{j}[blk]")]
        text = f"T = np.{kdt}\n\n\n" + "\n".join(lines) + "\n"
        return header(text) + text

    def kernel(self, modes):
        fn = self.kernels.get(modes)
        if fn is None:
            fn = self.kernels[modes] = cache.load(f"fused_{self.kdt.name}", self.source(modes))
        return fn

    def __call__(self, env, temps):
        shape, kdt, n = self.shape, self.kdt, self.n
        args = []
        for s in self.array_slots:
            d = temps[s] if s in temps else _array(env[s], shape, kdt, s)
            args.append(d.reshape(-1))
        for kind, v in self.scalars:
            args.append(v if kind == "k" else kdt.type(env[v]._data.reshape(-1)[0]))
        stored = []
        for s, to_env in self.stores:
            a = pool.empty(shape, kdt)
            stored.append(a)
            args.append(a.reshape(-1))
        # pool.empty: recycled, no page faults on first touch
        sink_modes, bufs, done = self.grad_buffers(env, args, pool.empty)
        modes = ["="] * len(self.stores) + sink_modes
        args += [b.reshape(-1) for b in bufs]
        nb = (n + BLOCK - 1) // BLOCK
        parts = [np.empty(nb, np.float64) for _ in self.reds]
        args += parts
        _spread(self.kernel(tuple(modes)), n, args)
        for (s, to_env), a in zip(self.stores, stored):
            if to_env:
                env[s] = Tensor(a)
            else:
                temps[s] = a
        for (s, mean, out_shape), p in zip(self.reds, parts):
            total = p.sum()
            env[s] = Tensor(np.array(total / n if mean else total, kdt).reshape(out_shape))
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


def _spread(kernel, n, args):
    """Run kernel(n, lo, hi, *args) over all blocks, shared out between jitgrad's
    threads (the kernels release the GIL) from PARALLEL_MIN_ELEMENTS elements on.
    Threads of our own rather than Numba's prange: a parallel kernel compiles 2-3
    times slower. The blocks go in PIECES_PER_THREAD pieces per thread, each thread
    taking the next, so a thread slowed by other work does not hold up the step."""
    nb = (n + BLOCK - 1) // BLOCK
    k = min(get_num_threads(), nb) if n >= PARALLEL_MIN_ELEMENTS and parallel_enabled() else 1
    if k <= 1:
        kernel(n, 0, nb, *args)
        return
    if _pool[1] != os.getpid() or _pool[2] < k - 1:
        # a pool's threads do not survive fork: a child makes its own
        _pool[:] = [ThreadPoolExecutor(k - 1, thread_name_prefix="jitgrad-fused"), os.getpid(),
                    k - 1]
    m = min(nb, k * PIECES_PER_THREAD)
    pieces = iter([(nb * j // m, nb * (j + 1) // m) for j in range(m)])

    def work():
        for lo, hi in pieces:  # next() on a list iterator is atomic under the GIL
            kernel(n, lo, hi, *args)
    rest = [_pool[0].submit(work) for _ in range(k - 1)]
    work()
    for f in rest:
        f.result()


def _plain_leaf(var):
    """A leaf whose accumulation is just storing the gradient (no hooks to run)."""
    return not (var._hooks or var._post_hooks) and var._data.flags.c_contiguous


def _array(t, shape, kdt, slot):
    d = t._data
    if type(d) is not HOST_ARRAY or d.shape != shape or d.dtype != kdt:
        raise RuntimeError(f"fused kernel: slot %{slot} holds {type(d).__name__} "
                           f"{getattr(d, 'dtype', '?')}{list(getattr(d, 'shape', ()))}, the "
                           f"capture saw {kdt}{list(shape)}: please report this as a jitgrad bug")
    if not d.flags.writeable:  # the kernel's signature takes writable arrays
        d = d.copy()
    return d


def _block_sum(buf, target):
    """Lines adding up buf[0:stop - start] in float64 into `target`: eight running
    sums, so the adds do not wait for each other."""
    sums = [f"s{k}" for k in range(8)]
    return ([f"{s} = 0.0" for s in sums] + ["m = stop - start", "k = 0",
                                           "while k + 8 <= m:"]
            + [f"    {s} += {buf}[k + {k}]" for k, s in enumerate(sums)]
            + ["    k += 8", "while k < m:", f"    s0 += {buf}[k]", "    k += 1",
               f"{target} = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))"])
