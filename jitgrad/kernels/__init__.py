"""Code generation: formulas -> Numba source -> compiled kernels, and their caches.
The only package (with backend code) that imports numba, and only when compiling."""
import os

from . import threads

# Idle OpenMP workers sleep instead of spinning: on a shared 2-core machine a
# spinning pool makes small parallel kernels ~100x slower. Set before numba
# starts its threads; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
threads.pool_size_from_env()


# torch computes inf/nan quietly; numpy warns after a ufunc loop that raised a
# floating-point flag. Kernel calls run under an "ignore" error state, set
# through numpy's context variable (0.2 us) rather than np.errstate (1 us).
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE
    from numpy._core._ufunc_config import _make_extobj
    _QUIET = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # another numpy layout
    _ERRSTATE = None


def quiet(fn, *args, **kwargs):
    """fn(*args, **kwargs) with numpy's floating-point warnings off."""
    if _ERRSTATE is None:
        import numpy as np
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    token = _ERRSTATE.set(_QUIET)
    try:
        return fn(*args, **kwargs)
    finally:
        _ERRSTATE.reset(token)
