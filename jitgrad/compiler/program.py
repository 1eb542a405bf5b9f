"""A captured program: slots, instructions over them, and how it runs.

A slot is one value of the step: a tensor argument, an external tensor read
by identity (a parameter), or the result of an instruction. An instruction
is one recorded op call, `fn(*args, **kwargs)` with `Ref(slot)` where a
tensor was. The program runs its instructions in order with grad mode off
(the backward pass is instructions too), freeing each slot after its last
reader. Executors (compiler/executors.py) may take over runs of
instructions and run them as compiled code; the rest run here, in Python.
"""
import threading
import warnings

from .. import _state
from .._node import FREED_MESSAGE
from ..kernels.cache import background_compilation
from ..ops.record import FunctionNode, node_class, record
from ..tensor import Tensor


class Ref(int):
    """A slot number standing where the traced call had a tensor."""
    __slots__ = ()

    def __repr__(self):
        return f"%{int(self)}"


class SlotMeta:
    """What the trace saw in a tensor slot: shape, numpy dtype, array type (the
    device), and whether eager mode would have it require grad."""
    __slots__ = ("shape", "dtype", "array_type", "rg")

    def __init__(self, shape, dtype, array_type, rg):
        self.shape, self.dtype, self.array_type, self.rg = shape, dtype, array_type, rg

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self):
        return f"{self.dtype}{list(self.shape)}"


class Instr:
    """One recorded call. `op`: the ElementwiseOp of an elementwise call (whose
    args then start with the op itself), else None; `name`: the op or method
    name; `outs`: a Ref, a tuple/list of them, or a constant (None)."""
    __slots__ = ("fn", "name", "args", "kwargs", "outs", "inplace", "op")

    def __init__(self, fn, name, args, kwargs, outs, inplace, op):
        self.fn, self.name, self.args, self.kwargs = fn, name, args, kwargs
        self.outs, self.inplace, self.op = outs, inplace, op

    def reads(self):
        return list(iter_refs(self.args)) + list(iter_refs(tuple(self.kwargs.values())))

    def writes(self):
        return list(iter_refs(self.outs))

    def __repr__(self):
        args = ", ".join(repr(a) for a in (self.args[1:] if self.op is not None else self.args))
        kw = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        mark = " (in place)" if self.inplace else ""
        return f"{self.outs!r} = {self.name}({args}{kw}){mark}"


def iter_refs(v):
    if type(v) is Ref:
        yield v
    elif type(v) in (list, tuple):
        for x in v:
            yield from iter_refs(x)
    elif type(v) is dict:
        for x in v.values():
            yield from iter_refs(x)


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
    fn, args, kwargs, outs = ins.fn, ins.args, ins.kwargs, ins.outs
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


class Segment:
    """Instructions [start, stop) run as one step by an executor (its name says
    which, for explain())."""
    __slots__ = ("start", "stop", "run", "executor")

    def __init__(self, start, stop, run, executor):
        self.start, self.stop, self.run, self.executor = start, stop, run, executor


class Tape:
    """An instruction list made runnable: steps (Python or executor segments) and
    the slots to free after each."""

    def __init__(self, meta, instrs, keep, executors):
        self.instrs = instrs
        self.segments = []
        taken = {}
        for ex in executors:
            for seg in ex(meta, instrs, keep, taken):
                self.segments.append(seg)
                for i in range(seg.start, seg.stop):
                    taken[i] = seg
        steps, last = [], {}
        i = 0
        while i < len(instrs):
            seg = taken.get(i)
            if seg is not None:
                steps.append((seg.run, i, seg.stop))
                i = seg.stop
            else:
                steps.append((python_step(instrs[i]), i, i + 1))
                i += 1
        for k, (_, a, b) in enumerate(steps):
            # A slot a segment makes and reads itself never reaches env: nothing to free.
            inner = {int(r) for ins in instrs[a:b] for r in ins.writes()} if a in taken else ()
            for ins in instrs[a:b]:
                for r in ins.reads():
                    if int(r) not in inner:
                        last[int(r)] = k
        free = [[] for _ in steps]
        for s, k in last.items():
            if s not in keep:
                free[k].append(s)
        self.steps = [(run, tuple(f)) for (run, _, _), f in zip(steps, free)]

    def run(self, env):
        for run, dead in self.steps:
            run(env)
            for s in dead:
                env[s] = None

    def describe(self):
        """Per executor: (segments, instructions)."""
        out = {"python": [0, 0]}
        covered = 0
        for seg in self.segments:
            c = out.setdefault(seg.executor, [0, 0])
            c[0] += 1
            c[1] += seg.stop - seg.start
            covered += seg.stop - seg.start
        out["python"] = [len(self.instrs) - covered, len(self.instrs) - covered]
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
        self.forward_tape = self.backward_tape = None
        self.ready = _DONE
        self.build_error = None
        self.guards = ()  # callables that must all return True for a replay (trace.py)

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
        if background and EXECUTORS:
            self._tapes(())
            self.ready = threading.Event()
            threading.Thread(target=self._build_in_background, daemon=True,
                             name="jitgrad.compile build").start()
        else:
            self._tapes(EXECUTORS)

    def _tapes(self, executors):
        backward_tape = None
        if self.backward is not None:
            instrs, grads_out = self.backward[3], self.backward[4]
            backward_tape = Tape(self.meta, instrs, {int(r) for r in grads_out if r is not None},
                                 executors)
        forward_tape = Tape(self.meta, self.instrs, self._keep, executors)
        self.forward_tape, self.backward_tape = forward_tape, backward_tape

    def _build_in_background(self):
        try:
            with background_compilation():
                self._tapes(EXECUTORS)
        except Exception as e:  # the Python tier stays: correct, only slower
            self.build_error = e
            warnings.warn(f"jitgrad.compile: building compiled kernels failed ({e!r}); the "
                          "program keeps running on its Python tier", RuntimeWarning)
        finally:
            self.ready.set()

    def wait(self, timeout=None):
        """Block until the executors' tapes are built (see `build`)."""
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
        if self.forward_tape is None:
            self.build()
        env = [None] * len(self.meta)
        for slot, pos in self.inputs:
            env[slot] = flat[pos]
        for slot, t in self.externals:
            env[slot] = t
        loc = _state.local
        prev = loc.grad_enabled
        loc.grad_enabled = False
        try:
            self.forward_tape.run(env)
        finally:
            loc.grad_enabled = prev
        if self.backward is not None and prev:
            self._attach_backward(env)
        elif self.ran_backward and prev:
            self._attach_freed(env)
        return resolve(self.outputs, env)

    def _attach_freed(self, env):
        """Outputs that require grad in a step that ran its own backward: eager mode
        hands them back with their (freed) graph, so a second backward raises."""
        for r in dict.fromkeys(iter_refs(self.outputs)):
            t = env[r]
            if self.meta[r].rg and not t._rg:
                node = node_class("CompiledFunctionBackward", FunctionNode)((), ())
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
