"""Thread-local flags of the autograd layer (grad mode, inference mode, anomaly,
fusion, saved-tensor hooks). Standard library only: every other module reads
these, so it must stay at the bottom of the import graph."""
import itertools
import threading


class _Local(threading.local):
    # Class attributes are each thread's defaults; assignments are per thread.
    grad_enabled = True
    inference = False
    anomaly = False
    anomaly_check_nan = True
    fusion = True


local = _Local()

# Sequence numbers order nodes like torch: among ready nodes the newest runs first.
next_seq = itertools.count().__next__
