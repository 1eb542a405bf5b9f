"""A captured program: slots, instructions over them, and how it runs.

A slot is one value of the step: a tensor argument, an external tensor read
by identity (a parameter), or the result of an instruction. An instruction
is one recorded op call, `fn(*args, **kwargs)` with `Ref(slot)` where a
tensor was. The program runs its instructions in order with grad mode off
(the backward pass is instructions too), freeing each slot after its last
reader. Executors (compiler/executors.py) may take over runs of
instructions and run them as compiled code; the rest run here, in Python.
"""
import math
import threading
import time
import warnings

import numpy as np

from .. import _state
from .._node import FREED_MESSAGE
from ..autograd import engine
from ..kernels.cache import background_compilation
from ..kernels import threads
from ..kernels.collector import paused_gc
from ..ops.record import FunctionNode, node_class, record
from ..tensor import Tensor
from .deferred import Deferred
from . import gemm
from .names import PURE


class Ref(int):
    """A slot number standing where the traced call had a tensor."""
    __slots__ = ()

    def __repr__(self):
        return f"%{int(self)}"


class SlotMeta:
    """What the trace saw in a tensor slot: shape, numpy dtype, array type (the
    device), and whether eager mode would have it require grad."""
    __slots__ = ("shape", "dtype", "array_type", "rg", "size")

    def __init__(self, shape, dtype, array_type, rg):
        self.shape, self.dtype, self.array_type, self.rg = shape, dtype, array_type, rg
        self.size = math.prod(shape)  # (asked of every slot by each executor)

    def __repr__(self):
        return f"{self.dtype}{list(self.shape)}"


class Instr:
    """One recorded call. `op`: the ElementwiseOp of an elementwise call (whose
    args then start with the op itself), else None; `name`: the op or method
    name; `outs`: a Ref, a tuple/list of them, or a constant (None); `reads`: what
    reads() returns, where the maker knows it."""
    __slots__ = ("fn", "name", "args", "kwargs", "outs", "inplace", "op", "_reads", "_writes")

    def __init__(self, fn, name, args, kwargs, outs, inplace, op, reads=None):
        self.fn, self.name, self.args, self.kwargs = fn, name, args, kwargs
        self.outs, self.inplace, self.op = outs, inplace, op
        self._reads, self._writes = reads, None

    # An instruction is not changed once made, and building a program's tapes asks
    # each for its slots many times (every executor, the unused and freeing passes).
    def reads(self):
        """The slots the call reads (Refs, in argument order, repeats kept)."""
        found = self._reads
        if found is None:
            found = []
            _collect_refs(self.args, found)
            if self.kwargs:
                _collect_refs(self.kwargs, found)
            found = self._reads = tuple(found)
        return found

    def writes(self):
        """The slots the call writes."""
        found = self._writes
        if found is None:
            outs = self.outs
            found = self._writes = (outs,) if type(outs) is Ref else tuple(iter_refs(outs))
        return found

    def __repr__(self):
        args = ", ".join(repr(a) for a in (self.args[1:] if self.op is not None else self.args))
        kw = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        mark = " (in place)" if self.inplace else ""
        return f"{self.outs!r} = {self.name}({args}{kw}){mark}"


def iter_refs(v):
    """The Refs in `v` and its nested lists, tuples and dict values, in order."""
    found = []
    _collect_refs(v, found)
    return found


def _collect_refs(v, found):
    """iter_refs(v) appended to the list `found` (no generator per level)."""
    t = type(v)
    if t is Ref:
        found.append(v)
    elif t is list or t is tuple:
        for x in v:
            if type(x) is Ref:
                found.append(x)
            elif type(x) in (list, tuple, dict):
                _collect_refs(x, found)
    elif t is dict:
        _collect_refs(tuple(v.values()), found)


def resolve(v, env):
    if type(v) is Ref:
        return env[v]
    if isinstance(v, tuple) and hasattr(v, "_fields"):  # a namedtuple (values, indices)
        return type(v)(*(resolve(x, env) for x in v))
    if type(v) in (list, tuple):
        return type(v)(resolve(x, env) for x in v)
    if type(v) is dict:
        return {k: resolve(x, env) for k, x in v.items()}
    return v


def _store(outs, value, env):
    if type(outs) is Ref:
        env[outs] = value
    elif type(outs) in (list, tuple):
        for o, v in zip(outs, value):
            _store(o, v, env)


def python_step(ins):
    """A callable that runs `ins` on the slot list `env` (the generic, Python way)."""
    # No trace runs during a replay: the op itself, without its recording wrapper.
    fn = getattr(ins.fn, "__wrapped_op__", ins.fn)
    args, kwargs, outs = ins.args, ins.kwargs, ins.outs
    top = [(i, a) for i, a in enumerate(args) if type(a) is Ref]
    flat = len(top) == len(list(iter_refs(args))) and not any(
        True for _ in iter_refs(tuple(kwargs.values())))
    if flat and type(outs) is Ref:
        template = list(args)

        def step(env):
            a = template[:]
            for i, s in top:
                a[i] = env[s]
            env[outs] = fn(*a, **kwargs)
        return step

    def step(env):
        _store(outs, fn(*resolve(args, env), **resolve(kwargs, env)), env)
    return step


_MATMULS = ("matmul", "mm")
_REBINDS = ("set_data",)  # changes which array a tensor holds: its views keep the old one


def _product(a, b, a_t, b_t, ways=None):
    """matmul as a replay runs it: its checks cannot fail (shapes and dtypes are
    guarded), so BLAS on the arrays, read through their transposes where a_t, b_t;
    2-D products the way the tape's `ways` runs them (gemm.Ways; blocks if None)."""
    x, y = a._data, b._data
    x, y = x.T if a_t else x, y.T if b_t else y
    if x.ndim == 2 == y.ndim:
        return Tensor(gemm.matmul(x, y, ways=ways))
    return Tensor(np.matmul(x, y))


def _swaps(ins, meta):
    """Whether `ins` transposes a 2-D tensor (t, or transpose of its two dims)."""
    a = ins.args
    return not ins.kwargs and type(ins.outs) is Ref and a and type(a[0]) is Ref and \
        meta[a[0]] is not None and len(meta[a[0]].shape) == 2 and (
            ins.name == "t" and len(a) == 1 or ins.name == "transpose" and len(a) == 3
            and {a[1] % 2, a[2] % 2} == {0, 1})


def _host_matmul(meta, ins):
    """Whether `ins` is a plain matmul of two CPU tensors (one result, no kwargs)."""
    return ins.name in _MATMULS and not ins.kwargs and len(ins.args) == 2 and \
        type(ins.outs) is Ref and all(type(a) is Ref and meta[a] is not None and
                                      meta[a].array_type is np.ndarray for a in ins.args)


def _large_products(meta, instrs, free):
    """Whether an instruction in `free` is a matmul of two 2-D CPU tensors large
    enough to cut in blocks (where the tape's products have two ways to run)."""
    for i in free:
        ins = instrs[i]
        if _host_matmul(meta, ins) and all(len(meta[a].shape) == 2 for a in ins.args):
            (m, k), (_, n) = meta[ins.args[0]].shape, meta[ins.args[1]].shape
            if gemm.large(m, k, n):
                return True
    return False


def _products(meta, instrs, taken, ways=None):
    """`instrs` with each matmul of two CPU tensors that no executor took made a
    `_product` call that reads, for an operand the Python tier transposed, the
    tensor it transposed: a transpose then read by products only is not run (W5
    made three, W3 five). Each runs its 2-D products the way `ways` says."""
    out, made, rebinds = list(instrs), {}, []
    kwargs = {} if ways is None else {"ways": ways}
    for i, ins in enumerate(instrs):
        if i not in taken and _host_matmul(meta, ins):
            args = []
            for a in ins.args:
                slot, flip = int(a), False
                j = made.get(slot)
                while j is not None and j not in taken and _swaps(instrs[j], meta):
                    src = int(instrs[j].args[0])
                    # src must hold, now, the tensor the transpose viewed
                    if made.get(src, -1) > j or (rebinds and rebinds[-1] > j):
                        break
                    slot, flip = src, not flip
                    j = made.get(slot)
                args += [Ref(slot), flip]
            out[i] = Instr(_product, ins.name, (args[0], args[2], args[1], args[3]), kwargs,
                           ins.outs, False, None)
        if ins.inplace or ins.name in _REBINDS:
            rebinds.append(i)
        for r in ins.writes():
            made[int(r)] = i
    return out


def _gives_back(ins, meta):
    """Whether `ins` is a sum_to_size of a slot to its own shape, into itself (the
    identity the backward of a non-broadcasting op records)."""
    a = ins.args
    return ins.name == "sum_to_size" and type(ins.outs) is Ref and a and ins.outs == a[0] and \
        meta[ins.outs] is not None and \
        tuple(a[1:]) in ((meta[ins.outs].shape,), meta[ins.outs].shape)


def _accumulate_owned(var, g):
    """accumulate_grad of a gradient that nothing but this call holds: eager's own
    accumulation, allowed to make it .grad instead of copying it (torch "steals" a
    gradient no one else holds)."""
    engine._accumulate(var, g.detach(), False, owned=True)


def _owned_gradients(meta, instrs, keep, taken):
    """`instrs` with each accumulate_grad whose gradient is a product's result (or a
    transpose of one) that no other instruction reads and `keep` does not hold made
    an `_accumulate_owned` call: a linear layer's weight gradient becomes .grad as
    the product made it, without a copy (W3: 1.2 MB a step)."""
    writers, readers = {}, {}
    for i, ins in enumerate(instrs):
        for r in dict.fromkeys(int(r) for r in ins.reads()):
            readers.setdefault(r, []).append(i)
        for r in ins.writes():
            writers.setdefault(int(r), []).append(i)

    out = list(instrs)
    for i, ins in enumerate(instrs):
        if ins.name == "accumulate_grad" and i not in taken and len(ins.args) == 2 and \
                not ins.kwargs and type(ins.args[1]) is Ref and \
                _fresh(int(ins.args[1]), i, meta, instrs, keep, taken, writers, readers):
            out[i] = Instr(_accumulate_owned, ins.name, ins.args, {}, ins.outs, ins.inplace, None)
    return out


def _fresh(slot, user, meta, instrs, keep, taken, writers, readers):
    """Whether `slot` is a product's result (or a transpose of one, followed back)
    read by instruction `user` alone. A module function, not a closure calling
    itself: that would be a reference cycle left for a full collection."""
    made = writers.get(slot, ())
    if slot in keep or not made or made[0] in taken or any(
            not _gives_back(instrs[j], meta) for j in made[1:]):
        return False
    if [j for j in readers[slot] if j not in made[1:]] != [user]:
        return False
    first = instrs[made[0]]
    return first.fn is _product or _swaps(first, meta) and _fresh(
        int(first.args[0]), made[0], meta, instrs, keep, taken, writers, readers)


def _read_transposed(meta, ins, readers, keep):
    """Whether the 2-D result of product `ins` (see _products) is only read
    transposed (a linear layer's weight gradient, (x^T g)^T)."""
    out = ins.outs
    if ins.fn is not _product or int(out) in keep:
        return False
    m = meta[out]
    if len(m.shape) != 2 or m.dtype.kind != "f":
        return False
    last = None
    for r in readers.get(int(out), ()):
        if _gives_back(r, meta):
            continue
        if last is not None or not _swaps(r, meta) or r.outs == out:
            return False
        last = r
    return last is not None


def _operands(meta, ins, readers, keep):
    """read(env) -> (a, b, out) for the 2-D product `ins`: its operands, and the
    array to write: the transpose of a new C-ordered buffer where the result is
    only read transposed, so that the transposed result the rest of the program
    reads (and .grad takes, in the weight's C order) is C-ordered, else None."""
    x, y, x_t, y_t = int(ins.args[0]), int(ins.args[1]), ins.args[2], ins.args[3]
    shape, dtype = meta[ins.outs].shape[::-1], meta[ins.outs].dtype
    buffered = _read_transposed(meta, ins, readers, keep)

    def read(env):
        a, b = env[x]._data, env[y]._data
        return (a.T if x_t else a, b.T if y_t else b,
                np.empty(shape, dtype).T if buffered else None)
    return read


def _transposed_product(meta, ins, readers, keep, ways):
    """A step for product `ins` if its 2-D result is only read transposed (see
    _operands), else None: the same product, without a strided copy."""
    if not _read_transposed(meta, ins, readers, keep):
        return None
    read, out = _operands(meta, ins, readers, keep), ins.outs

    def step(env):
        env[out] = Tensor(gemm.matmul(*read(env), ways=ways))
    return step


def _matrix_product(meta, ins):
    """Whether `ins` is a product (see _products) of two 2-D tensors."""
    return ins.fn is _product and len(meta[ins.args[0]].shape) == 2 == len(meta[ins.args[1]].shape)


def _partner(meta, instrs, i, skip, taken):
    """The index of a product that can run beside product i (a layer's two
    gradients, g W and x^T g, as one batch of blocks): the next instruction that
    runs, past sum_to_size calls giving i's result back (they run after the two),
    if it is a 2-D product that does not read i's result; else None."""
    out = instrs[i].outs
    for j in range(i + 1, len(instrs)):
        ins = instrs[j]
        if j in skip:
            continue  # not run
        if j in taken:
            return None
        if _gives_back(ins, meta) and ins.outs == out:
            continue
        return j if _matrix_product(meta, ins) and out not in ins.reads() else None
    return None


def _paired_products(meta, first, second, readers, keep, ways):
    """A step running products `first` and `second` (see _partner) as one call."""
    reads = [_operands(meta, ins, readers, keep) for ins in (first, second)]
    outs = first.outs, second.outs

    def step(env):
        for out, result in zip(outs, gemm.matmul_many([read(env) for read in reads], ways)):
            env[out] = Tensor(result)
    return step


def unused(instrs, keep, runs):
    """Indices of the pure instructions (PURE, or a formula) not in `runs` (those
    run whatever) whose results no instruction that runs reads and `keep` does
    not hold."""
    if len(runs) == len(instrs):
        return set()  # every instruction runs (a step an executor took whole)
    live, dead = set(keep), set()
    for i in range(len(instrs) - 1, -1, -1):
        ins = instrs[i]
        writes = ins.writes()  # Refs: equal to, and hashed as, their slot numbers
        if i not in runs and writes and live.isdisjoint(writes) and not ins.inplace and (
                ins.op is not None or ins.name in PURE):
            dead.add(i)
            continue
        live.difference_update(writes)
        live.update(ins.reads())
    return dead


class Segment:
    """Instructions [start, stop) run as one step by an executor (its name says
    which, for explain()), but for those in `skips` (unused ones it leaves out)."""
    __slots__ = ("start", "stop", "run", "executor", "skips")

    def __init__(self, start, stop, run, executor, skips=()):
        self.start, self.stop, self.run, self.executor = start, stop, run, executor
        self.skips = skips


def deferring_step(ins):
    """python_step for a tape that defers large elementwise results (as a trace does,
    compiler/deferred.py): run as step(env, deferred)."""
    fn = getattr(ins.fn, "__wrapped_op__", ins.fn)
    name, args, kwargs, outs, inplace, op = \
        ins.name, ins.args, ins.kwargs, ins.outs, ins.inplace, ins.op

    def step(env, deferred):
        a, kw = resolve(args, env), resolve(kwargs, env)
        out = deferred.defer_call(name, a, kw, op)
        _store(outs, deferred.run(fn, name, a, kw, inplace, op) if out is None else out, env)
    return step


class Tape:
    """An instruction list made runnable: steps (Python or executor segments) and
    the slots to free after each. Instructions in no segment whose results nothing
    reads (`unused`) are not run. A `deferring` tape (the Python tier that runs while
    the executors' kernels build) defers large elementwise results as a trace does, so
    that those replays, too, hold what the step needs rather than every intermediate."""

    def __init__(self, meta, instrs, keep, executors, deferring=False):
        self.instrs = instrs
        # (a program without large host arrays has nothing to defer)
        self.deferring = deferring = deferring and any(
            m is not None and m.size > SMALL_ELEMENTS and m.array_type is np.ndarray
            for m in meta)
        self.segments = []
        taken = {}
        for ex in executors:
            for seg in ex(meta, instrs, keep, taken):
                self.segments.append(seg)
                for i in range(seg.start, seg.stop):
                    taken[i] = seg
        with paused_gc():
            self._steps(meta, instrs, keep, taken, deferring)

    def _steps(self, meta, instrs, keep, taken, deferring):
        steps, last = [], {}
        # What the passes below change is in no segment: a program the executors took
        # whole (W7's, 8,600 instructions) needs none of them.
        free = [i for i in range(len(instrs)) if i not in taken]
        self.ways = None  # how the products run (gemm.Ways), where they have two ways
        if any(instrs[i].name in _MATMULS for i in free):
            if not deferring and threads.blas_controllable() and \
                    _large_products(meta, instrs, free):
                self.ways = gemm.Ways()
            instrs = _products(meta, instrs, taken, self.ways)
        if any(instrs[i].name == "accumulate_grad" for i in free):
            instrs = _owned_gradients(meta, instrs, keep, taken)
        self.unused = unused(instrs, keep, {i for i, seg in taken.items() if i not in seg.skips}) \
            - set(taken) if free else set()
        # sum_to_size to a tensor's own shape returns the tensor: its slot already holds it
        self.unused |= {i for i in free if _gives_back(instrs[i], meta)}
        readers = {}  # (what _transposed_product asks of the products' results)
        if any(instrs[i].fn is _product for i in free):
            for ins in instrs:
                for r in dict.fromkeys(int(r) for r in ins.reads()):
                    readers.setdefault(r, []).append(ins)
        paired = set()  # products run beside an earlier one
        i = 0
        while i < len(instrs):
            seg = taken.get(i)
            if seg is not None:
                steps.append((seg.run, range(i, seg.stop)))
                i = seg.stop
                continue
            ins = instrs[i]
            j = None if deferring or i in self.unused or i in paired or \
                not _matrix_product(meta, ins) else _partner(meta, instrs, i, self.unused, taken)
            if j is not None:
                paired.add(j)
                steps.append((_paired_products(meta, ins, instrs[j], readers, keep, self.ways),
                              (i, j)))
            elif i not in self.unused and i not in paired:
                steps.append((deferring_step(ins) if deferring else
                              _transposed_product(meta, ins, readers, keep, self.ways)
                              or python_step(ins), (i,)))
            i += 1
        for k, (_, done) in enumerate(steps):
            read = set().union(*[instrs[d].reads() for d in done])
            if done[0] in taken:
                # A slot a segment makes and reads itself never reaches env: nothing to free.
                read.difference_update(*[instrs[d].writes() for d in done])
            for r in read:
                last[int(r)] = k
        free = [[] for _ in steps]
        for s, k in last.items():
            if s not in keep:
                free[k].append(s)
        self.steps = [(run, tuple(f)) for (run, _), f in zip(steps, free)]

    def run(self, env):
        if self.deferring:
            deferred = Deferred(SMALL_ELEMENTS)
            for run, dead in self.steps:
                run(env, deferred)
                for s in dead:
                    env[s] = None
            deferred.fill()  # what the caller reads: results, values the backward saved
            return
        ways = self.ways
        if ways is not None:
            start = time.perf_counter()
        for run, dead in self.steps:
            run(env)
            for s in dead:
                env[s] = None
        if ways is not None:
            ways.record(time.perf_counter() - start)

    def describe(self):
        """Per executor: (segments, instructions)."""
        out = {"python": [0, 0]}
        covered = 0
        for seg in self.segments:
            c = out.setdefault(seg.executor, [0, 0])
            c[0] += 1
            c[1] += seg.stop - seg.start
            covered += seg.stop - seg.start
        python = len(self.instrs) - covered - len(self.unused)
        out["python"] = [len(self.steps) - len(self.segments), python]  # (two products: one step)
        out["unused (not run)"] = [0, len(self.unused)]
        return {k: tuple(v) for k, v in out.items() if v[1]}


# Tensors up to this many elements are "small": the scalar tape executor's; larger
# ones the fused-kernel executor's (the two never claim the same instructions).
SMALL_ELEMENTS = 4096

# Executors that may take runs of instructions: each is called as
# `executor(meta, instrs, keep, taken)` and yields Segments over instructions
# not in `taken`; `keep` is the set of slots that must survive the tape.
EXECUTORS = []


_DONE = threading.Event()
_DONE.set()


def _freed(node, *grads):
    raise RuntimeError(FREED_MESSAGE)


_FreedNode = node_class("CompiledFunctionBackward", FunctionNode)


class Program:
    """The capture of one call signature: forward (and, for a forward-only
    capture, backward) tapes over one slot list."""

    def __init__(self, meta, inputs, externals, instrs, outputs, ran_backward):
        self.meta = meta
        self.inputs = inputs
        self.externals = externals
        self.instrs = instrs
        self.outputs = outputs
        self.ran_backward = ran_backward
        self.backward = None
        self._compiled = None  # (forward, backward) tapes of the executors, once built
        self._python = None    # the Python tier's, built at the first replay that runs it
        self._python_lock = threading.Lock()
        self.ready = _DONE
        self.build_error = None
        self.guards = ()  # callables that must all return True for a replay (trace.py)
        # (position, .grad was None) of the tensor arguments whose .grad the step reads
        self.grad_guards = ()
        # where the function read a batch-dependent size as a Python number (batch.py)
        self.shape_read = None
        self._worker = None  # the thread building the executors' tapes, not started yet

    def set_backward(self, meta, outs, grads_in, sources, instrs, grads_out):
        self.meta = meta
        self.backward = (outs, grads_in, sources, instrs, grads_out)

    def build(self, background=False):
        """Make the tapes runnable. Executors compile kernels (seconds with an empty
        cache): with `background`, the program runs on the Python tier at once and
        switches to the executors' tapes when a worker thread has built them."""
        keep = set(int(r) for r in iter_refs(self.outputs))
        if self.backward is not None:
            _, grads_in, sources, instrs, grads_out = self.backward
            bwd_reads = set()
            for ins in instrs:
                bwd_reads.update(int(r) for r in ins.reads())
            produced = set(int(r) for ins in instrs for r in ins.writes())
            self.saved = sorted(s for s in bwd_reads | {int(r) for r in grads_out if r is not None}
                                if s not in produced and s not in grads_in)
            keep |= set(self.saved) | set(sources)  # sources: the backward node's inputs
        self._keep = keep
        # Outputs that require grad in eager mode, where the step ran its own backward.
        self._freed_outputs = tuple(r for r in dict.fromkeys(iter_refs(self.outputs))
                                    if self.meta[r].rg) if self.ran_backward else ()
        if background and EXECUTORS:
            # The Python tier's tapes are built only if a replay comes before the
            # executors' (a second process loads its kernels from the disk cache in
            # less time than building them takes; Program.wait() needs none).
            self.ready = threading.Event()
            self._worker = threading.Thread(target=self._build_in_background, daemon=True,
                                            name="jitgrad.compile build")
        else:
            self._compiled = self._tapes(EXECUTORS)

    def _start_build(self):
        """Start the worker thread `build` made, at the first replay (or wait): not while
        the call that traced is still running, whose memory then stays its own (Numba's
        start-up alone takes some 80 MB)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.start()

    def _tapes(self, executors, deferring=False):
        """(forward, backward) tapes run by `executors` and the Python tier."""
        backward_tape = None
        if self.backward is not None:
            instrs, grads_out = self.backward[3], self.backward[4]
            backward_tape = Tape(self.meta, instrs, {int(r) for r in grads_out if r is not None},
                                 executors, deferring)
        return Tape(self.meta, self.instrs, self._keep, executors, deferring), backward_tape

    def tapes(self):
        """The (forward, backward) tapes a replay runs now: the executors' once
        built, else the Python tier's (made at their first use)."""
        tapes = self._compiled
        if tapes is not None:
            return tapes
        with self._python_lock:
            if self._python is None:
                python = self._tapes((), deferring=True)
                if self._compiled is not None:  # the worker finished meanwhile
                    return self._compiled
                self._python = python
            return self._python

    @property
    def forward_tape(self):
        return self.tapes()[0]

    @property
    def backward_tape(self):
        return self.tapes()[1]

    def _build_in_background(self):
        try:
            with background_compilation():
                self._compiled = self._tapes(EXECUTORS)
            with self._python_lock:
                self._python = None  # no replay runs it again
        except Exception as e:  # the Python tier stays: correct, only slower
            self.build_error = e
            warnings.warn(f"jitgrad.compile: building compiled kernels failed ({e!r}); the "
                          "program keeps running on its Python tier", RuntimeWarning)
        finally:
            self.ready.set()

    def wait(self, timeout=None):
        """Block until the executors' tapes are built (see `build`)."""
        self._start_build()
        return self.ready.wait(timeout)

    def externals_match(self):
        for slot, t in self.externals:
            m = self.meta[slot]
            d = t._data
            if d.shape != m.shape or d.dtype != m.dtype or type(d) is not m.array_type or \
                    t._rg != m.rg or t._hooks or t._post_hooks:
                return False
        return all(check() for check in self.guards)

    def run(self, flat):
        if self._worker is not None:
            self._start_build()
        env = [None] * len(self.meta)
        for slot, pos in self.inputs:
            env[slot] = flat[pos]
        for slot, t in self.externals:
            env[slot] = t
        loc = _state.local
        prev = loc.grad_enabled
        loc.grad_enabled = False
        try:
            self.tapes()[0].run(env)
        finally:
            loc.grad_enabled = prev
        if self.backward is not None and prev:
            self._attach_backward(env)
        elif self._freed_outputs and prev:
            self._attach_freed(env)
        out = self.outputs
        return env[out] if type(out) is Ref else resolve(out, env)

    def _attach_freed(self, env):
        """Outputs that require grad in a step that ran its own backward: eager mode
        hands them back with their (freed) graph, so a second backward raises."""
        for r in self._freed_outputs:
            t = env[r]
            if not t._rg:
                node = _FreedNode((), (), ())
                node._bwd, node._nout, node._names, node._attrs, node._saved = \
                    _freed, 1, (), (), ()
                t.grad_fn, t.output_nr, t._rg = node, 0, True

    def _attach_backward(self, env):
        """Give the outputs that require grad one node whose backward runs the
        backward tape on the values this forward saved."""
        outs, grads_in, sources, _, grads_out = self.backward
        src = [env[s] for s in sources]
        if not any(t._rg for t in src):
            return
        results = []
        for r in outs:
            t = env[r]
            if t._rg or t.grad_fn is not None:  # an input or external returned as it is
                t = t.detach()
                env[r] = t
            results.append(t)
        saved = [env[s] for s in self.saved]
        prog = self

        def backward(node, *grads):
            if _state.local.grad_enabled:
                raise RuntimeError(
                    "double backward through a jitgrad.compile'd function is not supported "
                    "(its backward runs without a graph); compile the function that calls "
                    "autograd.grad(create_graph=True) instead, or call it uncompiled")
            benv = [None] * len(prog.meta)
            for s, v in zip(prog.saved, node._attrs):
                benv[s] = v
            for s, g, t in zip(grads_in, grads, results):
                benv[s] = g if g is not None else Tensor(t._data * 0)
            prog.backward_tape.run(benv)
            return tuple(None if r is None else benv[r] for r in grads_out)

        record("CompiledFunctionBackward", src, results, backward, attrs=tuple(saved))
        for r, t in zip(outs, results):
            env[r] = t
