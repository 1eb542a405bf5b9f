"""Pausing the cyclic garbage collector around work that makes many objects
which live on: importing Numba, tracing a compiled step, lowering it."""
import contextlib
import gc
import threading

_gc_pauses = [0, False]  # (threads inside paused_gc, whether they disabled the collector)
_gc_lock = threading.Lock()


@contextlib.contextmanager
def paused_gc():
    """The cyclic garbage collector off inside: importing Numba (some 300,000
    objects), tracing and lowering (tens of thousands: instructions, tensors,
    tape rows) make objects that live on, and each full collection they trigger
    walks every object of the process: a quarter of a second on a 1000-op graph.
    Only reference cycles wait for the collector, and only until the block ends.
    At the end, what the block made joins the oldest generation without a
    collection: those objects live on, and the first young collection would
    otherwise walk them all (25 ms after W7's trace, as long again after its
    lowering); the trace and the lowering leave no reference cycles behind, so
    nothing waits longer for the collector."""
    with _gc_lock:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                if not gc.get_freeze_count():  # (a program's own frozen objects stay so)
                    gc.freeze()  # every tracked object, without a walk...
                    gc.unfreeze()  # ...into the oldest generation
                gc.enable()
