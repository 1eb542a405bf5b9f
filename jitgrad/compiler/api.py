"""`jitgrad.compile`: guards, the program cache, recompiles and graph breaks.

Each call computes a guard key from its arguments (tensor shapes, dtypes,
devices and requires_grad; Python values by value; other objects by
identity) and the grad mode. A known key runs its program; a new key traces
the function (that call runs eagerly, recording) and keeps the program.
Whether an argument's .grad is None is checked per program, only where the
step reads it before assigning it (Tracer.grad_guards): a step that starts
with `x.grad = None` replays whatever the previous call left there. A
function whose trace broke runs eagerly for that key and the .grad states
(None or set) of its tensor arguments. After
`RECOMPILE_LIMIT` traces of one function, new keys run eagerly with one
warning, as torch.compile does. With `dynamic=True`, calls that differ only
in their batch size share one program where it allows (compiler/batch.py).
"""
import time
import warnings

import numpy as np

from .. import _state
from ..kernels.collector import paused_gc
from ..nn.modules.module import Module
from ..tensor import Tensor
from .batch import Static, Template, batch_size, check_sizes_unread, unbatched
from .trace import Tracer, Unsupported, active_mode

RECOMPILE_LIMIT = 8
# torch.compile's modes, accepted for drop-in use: jitgrad runs every one the same way.
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _key(v, flat, objs):
    """The guard key of one argument; tensors and arrays go into `flat` (the
    program's inputs), other objects into `objs` (checked by identity)."""
    t = type(v)
    if isinstance(v, Tensor):
        flat.append(v)
        d = v._data
        return ("T", d.shape, d.dtype, type(d), v._rg, v.grad_fn is None,
                bool(v._hooks or v._post_hooks))
    if t is np.ndarray:
        flat.append(v)
        return ("A", v.shape, v.dtype)
    if v is None or t in (int, float, bool, str, complex, type(Ellipsis)):
        return (t, v)
    if t is slice:  # unhashable before Python 3.12
        return (t, tuple(_key(x, flat, objs) for x in (v.start, v.stop, v.step)))
    if t in (list, tuple):
        return (t, tuple(_key(x, flat, objs) for x in v))
    if t is dict:
        return (t, tuple((k, _key(x, flat, objs)) for k, x in v.items()))
    objs.append(v)
    return ("O", id(v))


def tensors_key(args):
    """The guard key of a call whose arguments are all tensors, passed by position
    (a training step's usual call): what signature's key says of them, built in one
    pass, or None for any other call (signature's key then)."""
    parts = [_state.local.grad_enabled]
    for a in args:
        if not isinstance(a, Tensor):
            return None
        d = a._data
        parts.append((d.shape, d.dtype, type(d), a._rg, a.grad_fn is None,
                      not (a._hooks or a._post_hooks)))
    if len(args) > 1 and len({id(a) for a in args}) < len(args):
        return None
    return tuple(parts)


def signature(args, kwargs):
    """(the guard key of a call, its tensors and arrays, its other objects): see _key;
    where one tensor is passed twice, which arguments are the same one (a program
    traced with one tensor in two places reads it from one slot)."""
    flat, objs = [], []
    key = (_key(args, flat, objs), _key(kwargs, flat, objs), _state.local.grad_enabled)
    if len(flat) > 1 and len({id(t) for t in flat}) < len(flat):
        first = {}
        key += (tuple(first.setdefault(id(t), i) for i, t in enumerate(flat)),)
    return key, flat, objs


def grad_state(flat):
    """(position, .grad is None) of each tensor argument: the grad guards of a trace
    that broke (what the step would have read of them is not known)."""
    return tuple((i, t._grad_value is None) for i, t in enumerate(flat) if isinstance(t, Tensor))


def grads_match(guards, flat):
    """Whether the arguments' .grad is None where it was at the trace, for the
    positions in `guards` ((position, .grad was None): Tracer.grad_guards)."""
    return all((flat[pos]._grad_value is None) is none for pos, none in guards)


class Entry:
    __slots__ = ("program", "objs", "grad_guards", "reason", "compile_s")

    def __init__(self, program, objs, grad_guards, reason, compile_s):
        self.program, self.objs, self.grad_guards = program, objs, grad_guards
        self.reason, self.compile_s = reason, compile_s


class Batches:
    """dynamic=True: the calls whose guard keys differ only in their batch size.
    `first`: (batch, program, objects) of the first trace; `template`: the
    batch.Template once a second batch size traced alike, or `static`: why not;
    `sizes`: the batch sizes built from the template."""
    __slots__ = ("first", "template", "static", "sizes")

    def __init__(self):
        self.first = self.template = self.static = None
        self.sizes = []


class CompiledFunction:
    """What `jitgrad.compile(fn)` returns: call it as you would call fn."""

    def __init__(self, fn, fullgraph=False, dynamic=None, mode=None):
        if not callable(fn):
            raise TypeError(f"jitgrad.compile expects a callable, got {type(fn).__name__}")
        if mode not in MODES:
            raise RuntimeError(f"Unrecognized mode={mode!r}: use one of "
                               f"{', '.join(repr(m) for m in MODES)}")
        self._fn = fn
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.mode = mode
        self._cache = {}        # guard key -> [Entry]
        self._by_tensors = {}   # tensors_key -> the same lists, for calls of tensors only
        self._batches = {}      # dynamic=True: unbatched guard key -> Batches
        self.traces = 0
        self.breaks = []       # (reason, user line) of each broken trace
        self.eager_calls = 0   # calls that ran eagerly (a break, a state, the limit)
        self._warned = False
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __repr__(self):
        return f"<jitgrad.compile of {self._fn!r}>"

    def __get__(self, obj, objtype=None):  # a compiled method binds as the method does
        if obj is None:
            return self
        return _BoundCompiled(self, obj)

    def __call__(self, *args, **kwargs):
        why = _eager_state()
        if why is not None:
            if self.fullgraph:
                raise Unsupported(f"jitgrad.compile(fullgraph=True) cannot capture a call made "
                                  f"while {why}; leave that mode before calling it")
            self.eager_calls += 1
            return self._fn(*args, **kwargs)
        # A call of tensors only finds its programs by the cheaper tensors_key.
        fast = None if kwargs else tensors_key(args)
        entries = None if fast is None else self._by_tensors.get(fast)
        if entries is None:
            key, flat, objs = signature(args, kwargs)
            entries = self._cache.setdefault(key, [])
            if fast is not None:
                self._by_tensors[fast] = entries  # the same list: later traces appear in both
        else:
            key, flat, objs = None, args, ()
        # Programs of one key differ in what the key does not show (a parameter's shape,
        # a module's train/eval mode): the first whose guards hold runs.
        for entry in entries:
            if not all(a is b for a, b in zip(entry.objs, objs)) or \
                    not grads_match(entry.grad_guards, flat):
                continue
            prog = entry.program
            if prog is None:
                self.eager_calls += 1
                return self._fn(*args, **kwargs)
            if prog.externals_match():
                return prog.run(flat)
        if key is None:
            key, flat, objs = signature(args, kwargs)
        if self.dynamic:
            prog = self._resized(key, flat, objs)
            if prog is not None:
                return prog.run(flat)
        if self.traces >= RECOMPILE_LIMIT:
            if not self._warned:
                self._warned = True
                warnings.warn(f"jitgrad.compile: {self.__name__} was traced {RECOMPILE_LIMIT} "
                              "times (its guards keep failing: new shapes, dtypes, Python values "
                              "or objects); new signatures now run eagerly. See "
                              "jitgrad.compile.explain(fn, *args) for the guards.", UserWarning,
                              stacklevel=2)
            self.eager_calls += 1
            return self._fn(*args, **kwargs)
        return self._trace(key, flat, objs, args, kwargs)

    def _trace(self, key, flat, objs, args, kwargs):
        self.traces += 1
        t0 = time.perf_counter()
        grads = grad_state(flat)
        prog, result = trace_call(self._fn, args, kwargs, flat, self.fullgraph,
                                  background=self.mode != "max-autotune")
        if prog is None:
            self.breaks.append(result[1])
            result = result[0]
        self._cache[key].append(
            Entry(prog, objs, grads if prog is None else prog.grad_guards,
                  None if prog is not None else self.breaks[-1], time.perf_counter() - t0))
        if self.dynamic and prog is not None:
            self._compare(key, flat, objs, prog)
        return result

    def _batch_family(self, key, flat):
        """(the call's batch size, the Batches of its unbatched key), or (None, None)."""
        b = batch_size(flat)
        if b is None:
            return None, None
        return b, self._batches.setdefault(unbatched(key), Batches())

    def _compare(self, key, flat, objs, prog):
        """After a trace: the first program of a batch family is kept; the first at
        another batch size decides whether the family has one program for all."""
        b, family = self._batch_family(key, flat)
        if family is None or family.template is not None or family.static is not None:
            return
        try:
            if family.first is None:
                family.first = (b, prog, objs)
                check_sizes_unread(prog)
                return
            b1, p1, objs1 = family.first
            if b != b1 and len(objs) == len(objs1) and all(
                    x is y for x, y in zip(objs, objs1)):
                family.template = Template(p1, b1, prog, b)
        except Static as e:
            family.static = str(e)

    def _resized(self, key, flat, objs):
        """dynamic=True: the family's program built for this call's batch size (no
        trace), kept under the call's key; None where there is none to build."""
        b, family = self._batch_family(key, flat)
        if family is None or family.template is None:
            return None
        objs1 = family.first[2]
        first = family.template.first
        if len(objs) != len(objs1) or any(x is not y for x, y in zip(objs, objs1)) or \
                not first.externals_match() or not grads_match(first.grad_guards, flat):
            return None
        t0 = time.perf_counter()
        try:
            prog = family.template.program(b, background=self.mode != "max-autotune")
        except Static:  # a scaled size is not whole at this batch size: trace it
            return None
        self._cache[key].append(Entry(prog, objs, prog.grad_guards, None,
                                      time.perf_counter() - t0))
        family.sizes.append(b)
        return prog

    def _batch_status(self, args, kwargs):
        """explain()'s line on the batch dimension of a call, or None without dynamic."""
        if not self.dynamic:
            return None
        key, flat, _ = signature(args, kwargs)
        b = batch_size(flat)
        if b is None:
            return "static: the tensor arguments share no leading (batch) size"
        family = self._batches.get(unbatched(key))
        if family is None or family.first is None:
            return "not known yet: the first batch size traced is kept, a second decides"
        if family.static is not None:
            return f"static (each batch size is traced): {family.static}"
        if family.template is None:
            return (f"not known yet: traced at batch {family.first[0]}; a second batch "
                    "size decides")
        sizes = ", ".join(str(s) for s in family.sizes) or "none yet"
        return (f"symbolic: traced at two batch sizes; programs built without a trace "
                f"for {sizes}")

    def _reset(self):
        """Forget every program (a compiled module's parameter was rebound)."""
        self._cache.clear()
        self._by_tensors.clear()
        self._batches.clear()

    def entries(self):
        return [e for entries in self._cache.values() for e in entries]

    def wait(self, timeout=None):
        """Block until every captured program's kernels are built (they build in a
        worker thread while the first replays run on the Python tier; see
        docs/compile.md). True when all are ready."""
        return all(e.program.wait(timeout) for e in self.entries() if e.program is not None)


class _BoundCompiled:
    __slots__ = ("_compiled", "_obj")

    def __init__(self, compiled, obj):
        self._compiled, self._obj = compiled, obj

    def __call__(self, *args, **kwargs):
        return self._compiled(self._obj, *args, **kwargs)


def _eager_state():
    """Why a call cannot be captured right now (a mode that makes every op run
    user Python or record extra state), or None."""
    loc = _state.local
    if _state.trace[0] is not None:
        return "another jitgrad.compile trace is running"
    mode = active_mode()  # the modes a trace also stops at when entered inside
    if mode is not None:
        return mode
    if loc.hooks_disabled is not None:
        return "saved-tensor hooks are disabled (autograd.graph.disable_saved_tensors_hooks)"
    if loc.inference:
        return "inference mode is enabled"
    if loc.profiler is not None:
        return "the autograd profiler is recording"
    return None


def trace_call(fn, args, kwargs, flat, fullgraph, background=False):
    """Run fn(*args, **kwargs) under a tracer. Returns (program, result), or
    (None, (result, (reason, user line))) after a graph break. `background`:
    compile the program's kernels in a worker thread (see Program.build)."""
    tracer = Tracer(fullgraph)
    for i, v in enumerate(flat):
        tracer.add_input(v, i)
    _state.trace[0] = tracer
    try:
        with paused_gc():
            result = fn(*args, **kwargs)
            prog, result = tracer.finish(result)
            if prog is not None and not prog.ran_backward:
                tracer.trace_backward(prog)
    finally:
        tracer.fill()  # deferred values still alive (results, saved tensors): computed now
        _state.trace[0] = None
        tracer.close()
    if prog is None or tracer.broken is not None:
        return None, (result, tracer.broken)
    prog.build(background)
    return prog, result


class CompiledModule:
    """`jitgrad.compile(module)`: calls run the module's `__call__` compiled;
    everything else (parameters(), train(), state_dict(), ...) is the module's."""

    def __init__(self, module, **options):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled", CompiledFunction(module.__call__, **options))
        object.__setattr__(self, "_tensors", ())

    def __call__(self, *args, **kwargs):
        # Programs read parameters and buffers by identity: one rebound to a new
        # tensor (model.weight = Parameter(...)) invalidates them.
        m = self._orig_mod
        tensors = tuple(m.parameters()) + tuple(m.buffers())
        if len(tensors) != len(self._tensors) or any(
                a is not b for a, b in zip(tensors, self._tensors)):
            self._compiled._reset()
            object.__setattr__(self, "_tensors", tensors)
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"


def compile(model=None, *, fullgraph=False, dynamic=None, mode=None):
    """Capture `model` (a function or an nn.Module) once per call signature and
    replay it as a program: torch.compile's signature. Use as `compile(fn)`,
    `@compile` or `@compile(fullgraph=True)`.

    The function may be a forward or loss function (its result has a
    `grad_fn`; `backward()` runs the captured backward), or a whole training
    step that calls `backward()`, `autograd.grad()` and an optimizer's
    `step()`/`zero_grad()`. What cannot be captured (`.item()`, `bool(t)`,
    `.numpy()`, hooks, a custom autograd.Function, anomaly mode, saved-tensor
    hooks) runs eagerly; with `fullgraph=True` it raises
    `jitgrad.compiler.Unsupported` naming the call and the line.
    docs/compile.md has the details; `compile.explain(fn, *args)` the report.

    >>> import jitgrad
    >>> @jitgrad.compile
    ... def f(x):
    ...     return (x.sin() * x).sum()
    >>> x = jitgrad.tensor([0.5, 1.0], requires_grad=True)
    >>> f(x).backward()   # traced (this call runs eagerly, recording)
    >>> x.grad = None
    >>> f(x).backward()   # replayed
    >>> x.grad
    tensor([0.9182, 1.3818])
    """
    options = dict(fullgraph=fullgraph, dynamic=dynamic, mode=mode)
    if model is None:
        return lambda m: compile(m, **options)
    if isinstance(model, Module):
        return CompiledModule(model, **options)
    return CompiledFunction(model, **options)
