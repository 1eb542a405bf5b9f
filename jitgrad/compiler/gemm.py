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
"""
import functools

import numpy as np

from ..kernels import threads

# A block does at least this many multiply-adds (some 80 us on one core): a worker
# thread starts some 50-80 us after the caller hands it a product (W3's last layer,
# two products of 2.6M each, took 0.14 ms as two blocks, 0.10 ms on the caller).
MIN_BLOCK = 1 << 23
# Block edges on multiples of this many rows or columns: whole cache lines of float32,
# and whole register tiles of BLAS's kernels.
ALIGN = 16
BLAS_TYPES = "fdFD"


def matmul(a, b, out=None):
    """`a @ b` for 2-D numpy arrays, into `out` (a new C-ordered array if None)."""
    return matmul_many([(a, b, out)])[0]


def matmul_many(products):
    """[a @ b for each (a, b, out) of `products`], independent products of 2-D
    arrays, each into its `out` (a new C-ordered array if None): their blocks are
    one batch, shared out by the size of each product."""
    outs = [np.empty((a.shape[0], b.shape[1]), np.result_type(a, b)) if out is None else out
            for a, b, out in products]
    if any(out.dtype.char not in BLAS_TYPES for out in outs) or not threads.blas_controllable():
        for (a, b, _), out in zip(products, outs):
            np.matmul(a, b, out=out)  # BLAS with its own threads (or no BLAS at all)
        return outs
    sizes = [a.shape[0] * a.shape[1] * b.shape[1] for a, b, _ in products]
    # One block per thread: each block packs all of the other operand again (W3's step
    # took 10.9-11.3 ms in halves of its products, 11.4-11.7 ms in quarters).
    blocks = min(threads.get_num_threads(), sum(sizes) // MIN_BLOCK)
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
