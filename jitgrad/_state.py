"""Thread-local flags of the autograd layer (grad mode, inference mode, anomaly,
fusion, saved-tensor hooks). Standard library only: every other module reads
these, so it must stay at the bottom of the import graph."""
import itertools
import threading


# The flags the per-op fast paths would otherwise read on every op, with their
# defaults: `unusual[0]` counts the (thread, flag) pairs holding another value, so
# that while it is 0 one read of it stands for four thread-local reads.
_WATCHED = {"grad_enabled": True, "inference": False, "anomaly": False, "inplace_target": None}
unusual = [0]
_unusual_lock = threading.Lock()


def _off_default(value, default):
    return value is not None if default is None else bool(value) != default


class _Local(threading.local):
    # Class attributes are each thread's defaults; assignments are per thread.
    grad_enabled = True
    inference = False
    anomaly = False
    anomaly_check_nan = True
    fusion = True
    saved_hooks = ()        # stack of (pack, unpack) pairs; the innermost wins
    hooks_disabled = None   # message while saved-tensor hooks are disabled
    mutation_ctx = None     # the active allow_mutation_on_saved_tensors context
    graph_tasks = ()        # stack of the backward passes running in this thread
    anomaly_parent = None   # the node whose backward runs (anomaly mode's nesting)
    profiler = None         # the active profiler: push(name, kind) / pop() around events
    inplace_target = None   # the tensor an in-place op is overwriting: saving it snapshots it

    def __setattr__(self, name, value):
        default = _WATCHED.get(name, _WATCHED)
        if default is not _WATCHED:
            change = _off_default(value, default) - _off_default(getattr(self, name), default)
            if change:
                with _unusual_lock:
                    unusual[0] += change
        threading.local.__setattr__(self, name, value)


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
