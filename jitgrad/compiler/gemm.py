"""Matrix products of a compiled program, cut in blocks on jitgrad's threads.

numpy's BLAS (OpenBLAS in the PyPI wheels) spreads one product over threads of
its own, which meet by spinning several times per product. Where another
process holds a core, each meeting waits until the scheduler gives the
descheduled thread a turn: on 2 cores with one of them busy, W3's five large
products took 44-100 ms (median) on OpenBLAS's two threads against 9-10 ms in
blocks here (on free cores 4.2-4.5 ms against 4.7-5.0). So a large product is
cut into one block of its result's rows (or columns) per thread, each one
single-threaded BLAS call (numpy releases the GIL), taken in turn by the
caller and jitgrad's worker threads (kernels/threads.py), which sleep between
products (docs/performance.md, "Threads", has the measurements). As BLAS's
own results between thread counts, the blocks' may differ from the whole
product's in the last bits (BLAS has kernels of its own for small blocks).

Which of the two is faster depends on the machine and on what else runs on it
(docs/performance.md, "Matrix products in a compiled step"): on free cores
OpenBLAS's threads, which spin between products and share their packed
operands, took W3's step 6.4 ms against 8.1 in blocks on one machine; with
another process busy on one of its two cores, 14.4 ms against 9.1. So each
program tape with large products has a `Ways`, which times whole runs of the
tape on each way in turn and runs the faster one, trying the other again now
and then.
"""
import functools
import os

import numpy as np

from .. import _determinism
from ..kernels import threads

# A block does at least this many multiply-adds (some 80 us on one core): a worker
# thread starts some 50-80 us after the caller hands it a product (W3's last layer,
# two products of 2.6M each, took 0.14 ms as two blocks, 0.10 ms on the caller).
MIN_BLOCK = 1 << 23
# Block edges on multiples of this many rows or columns: whole cache lines of float32,
# and whole register tiles of BLAS's kernels.
ALIGN = 16
BLAS_TYPES = "fdFD"


def matmul(a, b, out=None, ways=None):
    """`a @ b` for 2-D numpy arrays, into `out` (a new C-ordered array if None)."""
    return matmul_many([(a, b, out)], ways)[0]


def matmul_many(products, ways=None):
    """[a @ b for each (a, b, out) of `products`], independent products of 2-D
    arrays, each into its `out` (a new C-ordered array if None): their blocks are
    one batch, shared out by the size of each product. Where `ways` (a Ways, or
    None for blocks) says BLAS's threads, each is one numpy call on those."""
    outs = [np.empty((a.shape[0], b.shape[1]), np.result_type(a, b)) if out is None else out
            for a, b, out in products]
    if ways is not None and not ways.blocks or not threads.blas_controllable() or \
            any(out.dtype.char not in BLAS_TYPES for out in outs):
        for (a, b, _), out in zip(products, outs):
            np.matmul(a, b, out=out)  # BLAS with its own threads (or no BLAS at all)
        return outs
    sizes = [a.shape[0] * a.shape[1] * b.shape[1] for a, b, _ in products]
    # One block per thread: each block packs all of the other operand again (W3's step
    # took 10.9-11.3 ms in halves of its products, 11.4-11.7 ms in quarters).
    blocks = _block_count(sum(sizes))
    with threads.one_blas_thread():
        if blocks < 2:
            for (a, b, _), out in zip(products, outs):
                np.matmul(a, b, out=out)
        else:
            threads.run_tasks([task for (a, b, _), out, size in zip(products, outs, sizes)
                               for task in _blocks(a, b, out, -(-blocks * size // sum(sizes)))])
    return outs


def _blocks(a, b, out, blocks):
    """Tasks computing `out = a @ b` in about `blocks` blocks of the larger of its
    two dimensions (each block reads all of the other operand: the smaller one),
    or one task."""
    m, n = out.shape
    size = max(m, n)
    step = -(-size // blocks)
    step = -(-step // ALIGN) * ALIGN
    mm = np.matmul
    if m >= n:
        return [functools.partial(mm, a[s:s + step], b, out=out[s:s + step])
                for s in range(0, size, step)]
    return [functools.partial(mm, a, b[:, s:s + step], out=out[:, s:s + step])
            for s in range(0, size, step)]


def _block_count(size):
    """How many blocks products of `size` multiply-adds in all are cut into (below 2:
    one call)."""
    return min(threads.get_num_threads(), size // MIN_BLOCK)


def large(m, k, n):
    """Whether an m x k by k x n product is cut in blocks (on two threads or more)."""
    return _block_count(m * k * n) >= 2


# JITGRAD_GEMM=blocks or =blas fixes the way of every compiled program's products
# (read when a program is built); unset or "auto", each program times the two.
_ENV = "JITGRAD_GEMM"
WAYS = ("auto", "blocks", "blas")


class Ways:
    """Which way a program tape's products run: `blocks` (jitgrad's threads) or
    not (BLAS's own threads), chosen by timing whole runs of the tape, since
    each way also slows the kernels around the products in its own manner
    (OpenBLAS's threads spin for a while after a product; jitgrad's sleep).

    A trial times PHASE runs of the current way, then PHASE runs of the other,
    the first run of each not counted (it pays for the switch), and keeps the
    way with the lower median. A trial run slower than ABORT times the current
    way's median ends the trial at once (OpenBLAS's threads, descheduled by
    another process, can make a product 10-40 times slower). The next trial
    comes WAIT runs later, twice as long after each trial that kept the way, up
    to MAX_WAIT: the load of the machine changes, and a trial costs little
    where the two ways are close and ends early where they are far apart. The
    two ways may differ in the last bits of a product (BLAS cuts a product's
    inner dimension in its own way per thread count); set JITGRAD_GEMM to fix
    the way and keep the bits the same from run to run."""
    PHASE = 6
    ABORT = 3.0
    WAIT = 50
    MAX_WAIT = 3200
    __slots__ = ("blocks", "fixed", "times", "trying", "best", "wait", "left", "trials", "by")

    def __init__(self, way=None):
        way = way or os.environ.get(_ENV) or "auto"
        if way not in WAYS:
            raise RuntimeError(f"{_ENV} must be one of {', '.join(WAYS)}, got {way!r}")
        self.fixed = way != "auto"
        self.blocks = way != "blas"
        self.by = _ENV
        if not self.fixed and _determinism.enabled():
            self._deterministic()
        self.times = []      # this phase's run times
        self.trying = False  # whether this phase runs the other way
        self.best = None     # the current way's median in its last phase
        self.wait = self.WAIT
        self.left = 0        # runs before the next trial
        self.trials = 0

    def record(self, seconds):
        """Count one run of the tape, which took `seconds` on way `blocks`."""
        if self.fixed:
            return
        if _determinism.enabled():
            self._deterministic()
            return
        if self.left:
            self.left -= 1
            return
        times = self.times
        times.append(seconds)
        if self.trying and len(times) > 1 and seconds > self.ABORT * self.best:
            self._end_trial(False)
        elif len(times) == self.PHASE:
            counted = sorted(times[1:])
            median = counted[len(counted) // 2]
            if self.trying:
                self._end_trial(median < self.best)
            else:
                self.best, self.trying, self.blocks = median, True, not self.blocks
                times.clear()

    def _deterministic(self):
        """use_deterministic_algorithms: eager mode's way (one numpy call on BLAS's
        threads) from the next run on, for good."""
        self.fixed, self.blocks, self.by = True, False, "use_deterministic_algorithms"

    def _end_trial(self, won):
        """Keep the other way if it `won`; else back to the current one."""
        self.trials += 1
        if won:
            self.wait = self.WAIT
        else:
            self.blocks = not self.blocks
            self.wait = min(2 * self.wait, self.MAX_WAIT)
        self.trying, self.left = False, self.wait
        self.times.clear()

    def describe(self):
        way = "blocks on jitgrad's threads" if self.blocks else "BLAS's own threads"
        if self.fixed:
            return f"{way} (set by {self.by})"
        if not self.trials:
            return ("the faster, timed on the first runs, of blocks on jitgrad's threads and "
                    "BLAS's own threads")
        return f"{way} (the faster by timing; {self.trials} trials so far)"
