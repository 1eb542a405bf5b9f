"""The seam between eager code and `jitgrad.compile`'s tracer (jitgrad/compiler).

While a compiled function is traced, `TRACE[0]` holds the tracer: the op entry
points below hand it each call, so it can record the call and replay it
later. With no trace running every hook is one list read and a compare, so
eager code pays (almost) nothing. Core layer: standard library and _state only.
"""
import functools

from . import _state

TRACE = _state.trace


def traced(fn, name=None, composite=False, inplace=False):
    """`fn` (a function making or changing tensors) recorded while a trace runs:
    the tracer replays it later with the slots of its tensor arguments.
    `composite`: fn may be made of other recorded calls (see Tracer.call);
    `inplace`: fn(x, ...) writes into its first argument x."""
    label = name or getattr(fn, "__name__", "op")
    options = {"composite": composite} if not inplace else {"inplace": True}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = TRACE[0]
        if t is None or not t.recording():
            return fn(*args, **kwargs)
        return t.call(fn, label, args, kwargs, **options)
    wrapper.__wrapped_op__ = fn
    return wrapper


def traced_inplace(fn, name=None):
    """`fn(x, ...)` writes into its first argument x; recorded as such."""
    return traced(fn, name, inplace=True)


def breaks(fn, reason):
    """`fn` needs a concrete value (or runs user Python the tracer cannot see
    into): a trace stops at it, with `reason`, and the call continues eagerly."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = TRACE[0]
        if t is not None and t.recording():
            t.graph_break(reason)
        return fn(*args, **kwargs)
    return wrapper


def reads(fn):
    """`fn` reads tensors' values outside the op entry points (a repr, pickling): a
    running trace first computes the values it has deferred (compiler/deferred.py)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = TRACE[0]
        if t is not None and t.active() and hasattr(t, "fill"):  # (vmap defers nothing)
            t.fill()
        return fn(*args, **kwargs)
    return wrapper


def guard(owner, make_check):
    """Tell a running trace that its program holds only while `check()` is true, check
    = make_check() made now (e.g. a module called during the trace is still in the same
    mode and has no hooks): a replay checks it first, and traces again where it fails.
    One check per owner."""
    t = TRACE[0]
    if t is not None and t.recording() and id(owner) not in t.guards:
        t.guards[id(owner)] = (owner, make_check())


def graph_break(reason):
    """Tell a running trace that what follows cannot be captured (see `breaks`); also
    from inside a recorded call, whose replay would then be wrong."""
    t = TRACE[0]
    if t is not None and t.active():
        t.graph_break(reason)


def size_read(t):
    """A size of tensor `t` read as a Python number (shape, size(), len(), numel()):
    a compile trace notes it (a batch-dependent size read as a number makes a
    dynamic=True program static, compiler/batch.py). Called only while TRACE[0] is set."""
    tracer = TRACE[0]
    if hasattr(tracer, "read_shape"):  # (vmap's tracer reads no sizes)
        tracer.read_shape(t)
