"""`jitgrad.use_deterministic_algorithms`, as torch's: a process-wide switch
(training scripts set it with their seeds) after which every op gives the
same bits from run to run.

Where jitgrad could differ from run to run, the switch changes what runs:
- a compiled program times two ways of running its matrix products and keeps
  the faster (compiler/gemm.py `Ways`); the two can differ in the last bits,
  so with the switch on, its products run as eager mode's do (one numpy call
  on BLAS's threads), whenever its next run starts;
- on CUDA, float scatter-adds (the backward of indexing and of gather) add
  with atomics, in whatever order the threads arrive; with the switch on they
  run on the host (numpy's `add.at`, in index order).
Everything else already repeats bit for bit: column sums split over threads
are cut by shape alone (compiler/fused.py), and the random generators are
seeded. So no op raises for want of a deterministic implementation, and
`warn_only` has nothing to warn about; it is kept and reported as torch does.
"""
_mode = [False, False]  # (enabled, warn_only)


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Make every op repeat its results bit for bit (see this module's docstring)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be "
                        f"bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError("use_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _mode[:] = [mode, warn_only]


def are_deterministic_algorithms_enabled():
    return _mode[0]


def is_deterministic_algorithms_warn_only_enabled():
    return _mode[1]


def enabled():
    """Whether the switch is on (for the code that changes what runs)."""
    return _mode[0]
