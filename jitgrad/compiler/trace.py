"""Capture: run the user's function once, eagerly, and record every op call.

The trace is a real run (its results are the first call's results), during
which jitgrad's op entry points (jitgrad/_trace.py) hand each call to the
`Tracer`. It gives every tensor a slot, records the call with slot references
in place of tensors, and records the backward pass as ops too: a `backward()`
or `autograd.grad()` inside the function runs with create_graph=True, so the
engine evaluates each derivative with Tensor ops, which the tracer sees. What
the tracer cannot see into (a value handed to Python, a hook, a custom
Function) is a graph break: from there on the call runs eagerly, and the
function is not captured (see compiler/api.py for what happens next). Large
elementwise results are deferred (compiler/deferred.py): recorded, and computed
in blocks only when something reads their values, so that the traced call does
not hold every intermediate.
"""
import sys
import threading
import weakref

import numpy as np

from .. import _state
from .._node import AccumulateGrad
from ..autograd import engine
from ..dtypes import dtype
from ..ops.creation import ones_like
from ..tensor import Tensor, device
from .deferred import Deferred
from .program import SMALL_ELEMENTS, Instr, Program, Ref, SlotMeta, iter_refs

_PACKAGE = __file__.rsplit("compiler", 1)[0]


class Unsupported(RuntimeError):
    """What `fullgraph=True` raises at a graph break: the call and the user's line."""


def _ours(f):
    return f.f_code.co_filename.startswith(_PACKAGE) or f.f_code.co_filename.startswith("<jitgrad ")


def _line(f):
    return f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"


def user_frame():
    """'file:line in function' of the innermost frame outside jitgrad."""
    f = sys._getframe(1)
    while f is not None and _ours(f):
        f = f.f_back
    return "<unknown>" if f is None else _line(f)


# The files between a size read and its reader: Tensor's methods and the hook.
_SIZE_READS = (_PACKAGE + "tensor.py", _PACKAGE + "_trace.py", __file__)


def _accumulate_grad(var, g):
    """What eager `backward()` does with a leaf's gradient: store a copy, or add
    into the one already there (in place)."""
    prev = _state.local.grad_enabled
    _state.local.grad_enabled = False
    try:
        engine._accumulate(var, g.detach(), False)  # eager's own accumulation
    finally:
        _state.local.grad_enabled = prev


class Tracer:
    def __init__(self, fullgraph):
        self.thread = threading.get_ident()
        self.fullgraph = fullgraph
        self.depth = 0          # > 0 inside a recorded call: its inner calls are part of it
        self.in_engine = 0      # > 0 while the tracer itself runs the engine
        self.nograd_region = False  # the derivatives a create_graph=False call asked for
        self.broken = None      # (reason, user line) at the first graph break
        self.ran_backward = False
        # Tensors made during the trace are held weakly, so that the trace frees what
        # eager mode frees. Objects are found by id, and ids are reused: an entry of
        # these tables holds a weak reference that must still give the object (see
        # _find; no callback to run at each death), or None for an object held.
        self.made = {}          # id(tensor made during the trace) -> weak ref
        self.slot_of = {}       # id(object) -> (weak ref or None, its slot)
        self.by_array = {}      # id(array) -> (weak ref or None, first slot holding it)
        self.held = []          # arrays without weak references
        self.meta = []          # per slot: SlotMeta (None for a non-tensor input)
        self.refs = []          # per slot: its Ref (made once: instructions name slots often)
        self.metas = {}         # one SlotMeta per (shape, dtype, array type, rg): shared
        self.versions = []      # per slot: the tensor's version when last recorded
        self.counters = []      # per slot: the tensor's version counter (views share one)
        self.tensors = []       # per slot: the traced object, or a weak ref (see obj)
        self.inputs = []        # (slot, position in the flattened arguments)
        self.grad_was_none = {}  # tensor argument slot -> whether its .grad was None
        self.externals = []     # (slot, tensor) read by identity: parameters, constants
        self.instrs = []
        self.guards = {}        # id(owner) -> (owner, check): see _trace.guard
        self.deferred = Deferred(SMALL_ELEMENTS)
        self.shape_read = None  # see read_shape

    # ---- what the hooks ask -----------------------------------------------------------
    def recording(self):
        return (self.depth == 0 and self.broken is None
                and threading.get_ident() == self.thread)

    def active(self):
        """Recording, or inside a call being recorded (in this thread, unbroken)."""
        return self.broken is None and threading.get_ident() == self.thread

    def takes_autograd(self):
        return self.recording() and not self.in_engine

    def born(self, t):
        """Tensor.__init__ reports each tensor made while the trace runs."""
        self.made[id(t)] = _Weak(t)

    def _made_here(self, t):
        """Whether tensor `t` was made during the trace."""
        ref = self.made.get(id(t))
        return ref is not None and ref() is t

    def read_shape(self, t):
        """A size of `t` read as a Python number: where user code first read one of a
        tensor made from the arguments (it may depend on the batch size, compiler/batch.py)."""
        if self.shape_read is None and self.active() and (
                self._made_here(t) or _find(self.slot_of, t) in {s for s, _ in self.inputs}):
            f = sys._getframe(1)
            while f is not None and f.f_code.co_filename in _SIZE_READS:
                f = f.f_back
            if f is not None and not _ours(f):  # read by the user's code, not jitgrad's
                self.shape_read = _line(f)

    def close(self):
        """Drop what the trace held once it is over."""
        self.made.clear()
        self.tensors.clear()

    def obj(self, slot):
        """The object of a slot, or None if it was made during the trace and is gone."""
        t = self.tensors[slot]
        return t() if type(t) is _Weak else t

    # ---- slots ------------------------------------------------------------------------
    def _new_slot(self, obj, rg):
        """The slot made for `obj`, as its Ref."""
        slot = len(self.meta)
        self.refs.append(Ref(slot))
        ref = self.made.get(id(obj))
        if ref is not None and ref() is not obj:
            ref = None
        self.slot_of[id(obj)] = (ref, slot)
        self.tensors.append(obj if ref is None else ref)
        if isinstance(obj, Tensor):
            d = obj._data
            if _find(self.by_array, d) is None:
                try:
                    ref = weakref.ref(d)
                except TypeError:
                    self.held.append(d)
                    ref = None
                self.by_array[id(d)] = (ref, slot)
            key = (d.shape, d.dtype, type(d), rg)
            m = self.metas.get(key)
            if m is None:
                m = self.metas[key] = SlotMeta(*key)
            self.meta.append(m)
            self.versions.append(obj._vc[0])
            self.counters.append(obj._vc)
        else:
            self.meta.append(None)
            self.versions.append(None)
            self.counters.append(None)
        return self.refs[slot]

    def add_input(self, obj, position):
        slot = int(self._new_slot(obj, isinstance(obj, Tensor) and obj._rg))
        self.inputs.append((slot, position))
        if isinstance(obj, Tensor):
            self.grad_was_none[slot] = obj._grad_value is None

    def grad_guards(self):
        """(position, whether its .grad was None) of each tensor argument whose incoming
        .grad the step observes: it reads it, or a backward accumulates into it, before
        the step assigns it (a step that sets `x.grad = None` first runs the same way
        whatever the caller left there, so its guard key leaves the .grad out)."""
        pending, observed = set(self.grad_was_none), set()
        for ins in self.instrs:
            if not pending:
                break
            if ins.name in _GRAD_EFFECTS:
                slot = ins.args[0]
                if type(slot) is Ref and slot in pending:
                    pending.discard(slot)
                    if ins.name != "set_grad":
                        observed.add(slot)
            elif _reaches_tensors(ins.args[1:] if ins.op is not None else ins.args) or \
                    _reaches_tensors(ins.kwargs):
                observed |= pending  # an optimizer's step() reads the .grad it holds
                pending.clear()
        was_none = self.grad_was_none
        return tuple(sorted((pos, was_none[s]) for s, pos in self.inputs if s in observed))

    def _ref(self, t):
        slot = _find(self.slot_of, t)
        if slot is None and self._made_here(t):
            # A new Tensor over a traced tensor's very array (a saved tensor unpacked for
            # the backward pass) is that tensor's value: same slot.
            slot = _find(self.by_array, t._data)
            if slot is not None and self.counters[slot][0] == t._vc[0]:
                self.slot_of[id(t)] = (self.made[id(t)], slot)
            else:
                slot = None
        if slot is None:
            if self._made_here(t):
                raise _Untraceable("a tensor made by a call the tracer does not record "
                                   f"(grad_fn={type(t.grad_fn).__name__ if t.grad_fn else None})")
            ref = self._new_slot(t, t._rg)
            self.externals.append((int(ref), t))
            return ref
        v = self.versions[slot]
        if v is not None and v != t._vc[0]:
            raise _Untraceable("a tensor changed in place by a call the tracer does not record")
        return self.refs[slot]

    def _refs(self, v, found):
        """`v` with a Ref in place of each tensor (and traced array), in nested lists and
        tuples; the Refs are appended to `found` in the order iter_refs gives them."""
        if isinstance(v, Tensor):
            r = self._ref(v)
            found.append(r)
            return r
        if type(v) is np.ndarray:
            slot = _find(self.slot_of, v)
            if slot is None:
                return v
            found.append(self.refs[slot])
            return found[-1]
        if isinstance(v, (list, tuple)):
            # (an op's arguments: most items are tensors or plain values, done here)
            items, nested = [], False
            for x in v:
                if isinstance(x, Tensor):
                    x = self._ref(x)
                    found.append(x)
                    nested = True
                elif isinstance(x, (list, tuple, np.ndarray)):
                    x = self._refs(x, found)
                    nested = nested or type(x) is Ref or type(x) is list or type(x) is tuple
                items.append(x)
            if nested:
                return items if type(v) is list else tuple(items)  # a namedtuple: plain
            return v
        return v

    def _outputs(self, out, rg):
        if isinstance(out, Tensor):
            slot = _find(self.slot_of, out)
            if slot is not None and self.obj(slot) is out:
                return self.refs[slot]  # an input returned as it is
            return self._new_slot(out, out._rg and rg)
        if isinstance(out, (list, tuple)):  # (a namedtuple's items are stored by position)
            return (list if type(out) is list else tuple)(self._outputs(o, rg) for o in out)
        return out

    # ---- recording ----------------------------------------------------------------------
    def call(self, fn, name, args, kwargs, inplace=False, op=None, composite=False):
        """Record fn(*args, **kwargs) as one instruction (its inner calls are part of
        it). A `composite` op (a declared op without a backward node of its own) runs with
        its inner calls recorded instead, since their nodes, and the tensors they save,
        make its backward; if it recorded none (it made its result itself), the call is
        recorded as one instruction after all. A large elementwise result is deferred
        (compiler/deferred.py): recorded, its values computed when something reads them."""
        mode = active_mode()
        if mode is not None:
            self.graph_break(mode)
            return fn(*args, **kwargs)
        try:
            reads = []  # (the instruction's reads(), known now)
            rargs = self._refs(args, reads)
            rkw = {k: self._refs(v, reads) for k, v in kwargs.items()} if kwargs else {}
        except _Untraceable as e:
            self.graph_break(f"{name}: reads {e}")
            return fn(*args, **kwargs)
        if composite:
            # its inner calls fill what they read; one that made its result itself reads
            # its arguments' values
            self._quietly(self.deferred.fill_tensors, (args, kwargs))
            n = len(self.instrs)
            out = fn(*args, **kwargs)
            if len(self.instrs) > n + 1 or not self.recording():
                return out
            if len(self.instrs) == n + 1:
                self._name_single_call(fn, name, rargs, rkw, reads, out)
                return out
        else:
            out = self._run(fn, name, args, kwargs, inplace, op)
        if inplace and isinstance(args[0], Tensor):
            target = args[0]
            vc = target._vc
            for s, c in enumerate(self.counters):  # views share the version counter
                if c is vc:
                    self.versions[s] = vc[0]
            outs = rargs[0] if out is target else self._outputs(out, True)
            self.instrs.append(Instr(fn, name, tuple(rargs), rkw, outs, True, op, tuple(reads)))
            return out
        return self._made(fn, name, args, rargs, rkw, reads, out, op)

    def _run(self, fn, name, args, kwargs, inplace, op):
        """fn(*args, **kwargs) run for real, or deferred; its inner calls not recorded."""
        self.depth += 1
        try:
            out = self.deferred.defer_call(name, args, kwargs, op)
            return out if out is not None else \
                self.deferred.run(fn, name, args, kwargs, inplace, op)
        finally:
            self.depth -= 1

    def _made(self, fn, name, args, rargs, rkw, reads, out, op):
        """Record the call fn(*args, **kwargs) that made `out` (not in place)."""
        outs = self._outputs(out, self._rg_of(reads))
        if self.nograd_region and self.in_engine:
            _drop_graph(out, args)
        self.instrs.append(Instr(fn, name, tuple(rargs), rkw, outs, False, op, tuple(reads)))
        return out

    def _elementwise(self, call, op, operands):
        """call(op, *operands) recorded: call()'s work for the operands of most
        elementwise calls (tensors and Python numbers, 7,000 calls in W7's trace)
        without its general walk through arguments."""
        args = (op,) + operands
        if active_mode() is not None:
            return self.call(call, op.name, args, {}, op=op)
        reads, rargs = [], [op]
        try:
            for v in operands:
                if isinstance(v, Tensor):
                    v = self._ref(v)
                    reads.append(v)
                elif isinstance(v, (list, tuple, np.ndarray)):  # (the slots found stay)
                    return self.call(call, op.name, args, {}, op=op)
                rargs.append(v)
        except _Untraceable as e:
            self.graph_break(f"{op.name}: reads {e}")
            return call(op, *operands)
        out = self._run(call, op.name, args, {}, False, op)
        return self._made(call, op.name, args, rargs, {}, reads, out, op)

    def _quietly(self, fn, *args):
        """fn(*args) with the tracer not recording (the eager calls computing deferred
        values are no part of the program)."""
        self.depth += 1
        try:
            return fn(*args)
        finally:
            self.depth -= 1

    def fill(self):
        """Compute every deferred value still alive (before eager code may read it)."""
        if self.deferred.recipes:
            self._quietly(self.deferred.fill)

    def _name_single_call(self, fn, name, rargs, rkw, reads, out):
        """A composite op that made its whole result with one other declared op
        (amax -> _extreme, mm -> matmul) is recorded as itself, the name executors know;
        an elementwise op stays as it is (executors fuse it by its formula)."""
        ins = self.instrs[-1]
        if ins.op is not None or ins.inplace:
            return
        made = [_find(self.slot_of, t) if isinstance(t, Tensor) else t
                for t in _flat_outputs(out)]
        if made != [int(r) for r in iter_refs(ins.outs)]:
            return
        self.instrs[-1] = Instr(fn, name, tuple(rargs), rkw, ins.outs, False, None, tuple(reads))

    def elementwise(self, call, op, operands, out_arr):
        if out_arr is not None:
            self.graph_break(f"{op.name}: writes into a raw array")
            return call(op, *operands, out_arr=out_arr)
        operands = tuple(operands)
        if not (self.nograd_region and self.in_engine):
            return self._elementwise(call, op, operands)
        # A derivative of a backward without create_graph: its result would lose the
        # node eager mode makes for it (_drop_graph), so none is made (a new tensor,
        # never a view: nothing else differs; W7's backward, 3,250 nodes).
        loc = _state.local
        prev = loc.grad_enabled
        loc.grad_enabled = False
        try:
            return self._elementwise(call, op, operands)
        finally:
            loc.grad_enabled = prev

    def _rg_of(self, refs):
        """Whether the results of an op reading slots `refs` require grad in eager mode:
        some tensor input does (or it has none: a factory's requires_grad= says), and we
        are not computing the derivatives of a create_graph=False call."""
        if self.nograd_region:
            return False
        meta = self.meta
        for r in refs:
            m = meta[r]
            if m is not None and m.rg:
                return True
        return not refs

    def graph_break(self, reason):
        where = user_frame()
        self.fill()  # what follows runs eagerly, reading values
        if self.fullgraph:
            raise Unsupported(f"jitgrad.compile(fullgraph=True) cannot capture {reason}, at "
                              f"{where}. Remove the call from the compiled function, or "
                              "compile with fullgraph=False to run that call eagerly.")
        if self.broken is None:
            self.broken = (reason, where)
        _state.trace[0] = None  # the rest of the call runs eagerly, unhooked

    # ---- the backward pass ------------------------------------------------------------
    def backward(self, tensors, grad_tensors, retain_graph, create_graph, inputs):
        roots = _as_tuple(tensors)
        if create_graph:
            self.graph_break("backward(create_graph=True): leaves get differentiable "
                             "gradients")
            return engine.backward(tensors, grad_tensors, retain_graph, create_graph,
                                   inputs=inputs)
        reason = _hooked(roots)
        if reason is None and grad_tensors is None and any(r._data.size != 1 for r in roots):
            reason = "backward() of a non-scalar without a gradient"
        if reason is not None:
            self.graph_break(reason)
            return engine.backward(tensors, grad_tensors, retain_graph, create_graph,
                                   inputs=inputs)
        leaves = _as_tuple(inputs) if inputs is not None else _leaves(roots)
        if not leaves:
            return engine.backward(tensors, grad_tensors, retain_graph, create_graph,
                                   inputs=inputs)
        grads = self._run_grad(roots, leaves, grad_tensors, True, False, retain_graph)
        self.ran_backward = True
        for leaf, g in zip(leaves, grads):
            if g is not None:
                self.call(_accumulate_grad, "accumulate_grad", (leaf, g), {})

    def grad(self, outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
             is_grads_batched, materialize_grads):
        outs = _as_tuple(outputs)
        reason = _hooked(outs)
        if reason is None and (is_grads_batched or materialize_grads):
            reason = "autograd.grad(is_grads_batched=/materialize_grads=)"
        if reason is None and grad_outputs is None and any(o._data.size != 1 for o in outs):
            reason = "autograd.grad() of a non-scalar without grad_outputs"
        if reason is not None:
            self.graph_break(reason)
            return engine.grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                               allow_unused=allow_unused, is_grads_batched=is_grads_batched,
                               materialize_grads=materialize_grads)
        # A grad(create_graph=True) leaves the graph alive (its results have one, as in
        # eager mode): only a graph-consuming call makes the capture a step without a
        # backward of its own.
        self.ran_backward = self.ran_backward or not create_graph
        return self._run_grad(outs, _as_tuple(inputs), grad_outputs, allow_unused,
                              create_graph, retain_graph)

    def _run_grad(self, outs, inputs, grad_outputs, allow_unused, create_graph, retain_graph):
        """The derivatives, by the engine with create_graph=True (each one is evaluated
        with Tensor ops, which are recorded); without the caller's create_graph, they
        carry no graph (see _drop_graph), and the graph is freed as eager mode frees it."""
        if grad_outputs is None:
            grad_outputs = tuple(ones_like(o) for o in outs)  # recorded: a replay makes them
        self.in_engine += 1
        prev, self.nograd_region = self.nograd_region, self.nograd_region or not create_graph
        try:
            return engine.grad(outs, inputs, grad_outputs, create_graph=True,
                               retain_graph=create_graph if retain_graph is None else retain_graph,
                               allow_unused=allow_unused)
        finally:
            self.in_engine -= 1
            self.nograd_region = prev

    # ---- the end ----------------------------------------------------------------------
    def finish(self, result):
        """(the program, or None after a graph break; the call's result as eager
        mode gives it)."""
        if self.broken is not None:
            return None, result
        try:
            outs = self._final(result)
        except _Untraceable as e:
            self.graph_break(f"the result: {e}")
            return None, result
        prog = Program(self.meta, self.inputs, self.externals, self.instrs, outs,
                       self.ran_backward)
        prog.guards = tuple(check for _, check in self.guards.values())
        prog.grad_guards = self.grad_guards()
        prog.shape_read = self.shape_read
        return prog, _eager_view(result, self)

    def _final(self, v):
        if isinstance(v, Tensor):
            return self._ref(v)
        if type(v) in (list, tuple):
            return type(v)(self._final(x) for x in v)
        if isinstance(v, tuple) and hasattr(v, "_fields"):  # a namedtuple (values, indices)
            return type(v)(*(self._final(x) for x in v))
        if type(v) is dict:
            return {k: self._final(x) for k, x in v.items()}
        if v is None or type(v) in (int, float, bool, str, complex):
            return v
        raise _Untraceable(f"a {type(v).__name__} (return tensors, numbers, or tuples, lists "
                           "and dicts of them)")

    def trace_backward(self, prog):
        """Record the backward program of a forward-only capture: the derivatives of
        the outputs that require grad w.r.t. the inputs and externals that do."""
        outs = [r for r in iter_refs(prog.outputs) if self.meta[r].rg]
        sources = [s for s, _ in self.inputs + self.externals
                   if self.meta[s] is not None and self.meta[s].rg]
        if not outs or not sources:
            return
        outs = list(dict.fromkeys(outs))
        reason = _hooked(tuple(self.obj(r) for r in outs))
        if reason is not None:  # the caller's backward must run it; recording it would too
            self.graph_break(reason)
            return
        self.instrs = []
        self.depth += 1  # placeholders for the incoming gradients, not ops
        try:
            ones = [ones_like(self.obj(r)) for r in outs]
        finally:
            self.depth -= 1
        grads_in = [int(self._new_slot(g, False)) for g in ones]
        self.in_engine += 1
        self.nograd_region = True
        try:
            grads = engine.grad(tuple(self.obj(r) for r in outs),
                                tuple(self.obj(s) for s in sources), tuple(ones),
                                retain_graph=True, create_graph=True, allow_unused=True)
            res = tuple(None if g is None else self._ref(g) for g in grads)
        finally:
            self.in_engine -= 1
            self.nograd_region = False
        if self.broken is not None:
            return
        prog.set_backward(self.meta, outs, grads_in, sources, self.instrs, res)


def active_mode():
    """Why ops cannot be recorded now (a mode entered inside the function that runs
    Python at each op or saved tensor), or None."""
    loc = _state.local
    if loc.saved_hooks:
        return "saved-tensor hooks (autograd.graph.saved_tensors_hooks) run Python on each " \
               "saved tensor"
    if loc.anomaly:
        return "anomaly mode (autograd.detect_anomaly / set_detect_anomaly) checks each op " \
               "in Python"
    if _state.fw_level[0] is not None:
        return "forward-mode AD (autograd.forward_ad.dual_level) is active"
    return None


class _Untraceable(Exception):
    pass


class _Weak(weakref.ref):
    """A weak reference to a tensor made during the trace (a slot's, see Tracer.obj:
    its own type, since a traced call may take a weakref.ref as an argument)."""
    __slots__ = ()


def _find(table, obj):
    """The slot of `obj` in `table` (id -> (weak ref, or None for an object the
    tracer holds; slot)), or None: an entry whose object died may have passed its
    id on to `obj`."""
    entry = table.get(id(obj))
    if entry is None or entry[0] is not None and entry[0]() is not obj:
        return None
    return entry[1]


# The recorded calls on a tensor's .grad: the getter, backward()'s accumulation (both
# depend on what is there) and the setter (after which nothing does).
_GRAD_EFFECTS = ("grad", "accumulate_grad", "set_grad")
# Instruction arguments that hold no tensor but through a slot (Ref is an int).
_PLAIN = (int, float, complex, str, bytes, slice, type(None), type(Ellipsis), np.dtype,
          np.generic, type, dtype, device)


def _reaches_tensors(v):
    """Whether instruction arguments hold an object through which the call may reach
    tensors other than its arguments (an optimizer, a module: their step() and
    zero_grad() read and clear the .grad of the parameters they hold)."""
    if type(v) in (list, tuple) or isinstance(v, tuple):
        return any(_reaches_tensors(x) for x in v)
    if type(v) is dict:
        return any(_reaches_tensors(x) for x in v.values())
    return not isinstance(v, _PLAIN)


def _as_tuple(v):
    return (v,) if isinstance(v, Tensor) else tuple(v)


def _drop_graph(out, args):
    """Cut the graph off a derivative computed for a backward without create_graph:
    the engine evaluates it with Tensor ops (so that they are recorded), but nothing
    differentiates it again, and its nodes would keep every intermediate of the
    backward pass alive until the trace ends."""
    old = None  # (the ids of the arguments, made only for a result with a graph)
    for t in (out,) if isinstance(out, Tensor) else _flat_outputs(out):
        if isinstance(t, Tensor) and t.grad_fn is not None and t._base is None:
            if old is None:
                old = {id(a) for a in _flat_outputs(args)}
            if id(t) not in old:
                t.grad_fn, t._rg = None, False


def _flat_outputs(v):
    """The items of nested lists and tuples `v`, in order (a list: no generator
    per level, called for each op of a traced backward)."""
    if not isinstance(v, (list, tuple)):
        return [v]
    out = []
    for x in v:
        if isinstance(x, (list, tuple)):
            out += _flat_outputs(x)
        else:
            out.append(x)
    return out


def _nodes(roots):
    seen, stack = set(), [r.grad_fn for r in roots if r.grad_fn is not None]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(n._next)


def _hooked(roots):
    """Why the backward from `roots` runs user Python (a hook, a retained grad), or None."""
    for n in _nodes(roots):
        if n._pre_hooks or n._hooks or n._tensor_hooks or n._retain:
            return f"a hook (or retain_grad) on {n.name()}"
        if type(n) is AccumulateGrad:
            v = n.variable
            if v._hooks or v._post_hooks:
                return "a hook on a leaf tensor"
    return None


def _leaves(roots):
    return tuple(n.variable for n in _nodes(roots) if type(n) is AccumulateGrad)


def _eager_view(v, tracer):
    """The result as eager mode gives it: a derivative asked for without
    create_graph carries no graph (the trace recorded it with one)."""
    if isinstance(v, Tensor):
        slot = _find(tracer.slot_of, v)
        if slot is not None and v._rg and not tracer.meta[slot].rg:
            return v.detach()
        return v
    if type(v) in (list, tuple):
        return type(v)(_eager_view(x, tracer) for x in v)
    if type(v) is dict:
        return {k: _eager_view(x, tracer) for k, x in v.items()}
    return v
