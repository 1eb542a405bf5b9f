"""Thread-local flags of the autograd layer (grad mode, inference mode, anomaly,
fusion, saved-tensor hooks). Standard library only: every other module reads
these, so it must stay at the bottom of the import graph."""
import itertools
import threading


# Flags that the per-op fast paths would otherwise read on every op (a thread-local
# read costs about 60 ns): each is a property whose setter keeps `unusual` holding
# one entry per (thread, flag) away from its default, so `if not unusual:` stands for
# those reads while every thread runs with the defaults. A list, as its append and
# pop are atomic: no lock. grad_enabled stays a plain attribute: it is set twice per
# backward pass and read per op anyway.
unusual = []


def _counted(name, is_set):
    slot = "_" + name

    def get(self):
        return getattr(self, slot)

    def set_(self, value):
        now, was = is_set(value), is_set(getattr(self, slot))
        if now and not was:
            unusual.append(name)
        elif was and not now:
            unusual.pop()
        threading.local.__setattr__(self, slot, value)
    return property(get, set_)


class _Local(threading.local):
    # Class attributes are each thread's defaults; assignments are per thread.
    grad_enabled = True
    _inference = False
    _anomaly = False
    anomaly_check_nan = True
    fusion = True
    saved_hooks = ()        # stack of (pack, unpack) pairs; the innermost wins
    hooks_disabled = None   # message while saved-tensor hooks are disabled
    mutation_ctx = None     # the active allow_mutation_on_saved_tensors context
    graph_tasks = ()        # stack of the backward passes running in this thread
    anomaly_parent = None   # the node whose backward runs (anomaly mode's nesting)
    profiler = None         # the active profiler: push(name, kind) / pop() around events
    # the tensor an in-place op is overwriting: saving it snapshots it
    _inplace_target = None
    inference = _counted("inference", bool)
    anomaly = _counted("anomaly", bool)
    inplace_target = _counted("inplace_target", lambda t: t is not None)


local = _Local()

# How many saved-tensor-hook or mutation contexts are open in any thread: lets
# SavedTensor skip two thread-local reads in the common case of none.
saved_hook_users = [0]

# The active forward-AD level (None: forward AD off). Module-level, as torch's:
# dual tensors are visible to every thread. Ops read it before any tangent work.
fw_level = [None]

# The tracer of a running `jitgrad.compile` trace (None: none). Module-level: a
# trace records one thread's calls; the tracer ignores calls from other threads.
trace = [None]

# Sequence numbers order nodes like torch: among ready nodes the newest runs first.
next_seq = itertools.count().__next__


class grad_disabled:
    """`with grad_disabled():` records nothing (the internal no_grad of the lower
    layers, which must not import autograd.grad_mode)."""

    def __enter__(self):
        self.prev = local.grad_enabled
        local.grad_enabled = False

    def __exit__(self, *exc):
        local.grad_enabled = self.prev
