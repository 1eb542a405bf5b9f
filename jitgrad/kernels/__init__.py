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
# through numpy's context variable (0.2 us) rather than np.errstate (1 us):
# `token = ERRSTATE.set(QUIET)`, the kernel calls, `ERRSTATE.reset(token)`.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as ERRSTATE
    from numpy._core._ufunc_config import _make_extobj
    QUIET = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # another numpy layout
    class _Seterr:
        """The same set/reset through np.seterr."""

        def set(self, quiet):
            import numpy as np
            return np.seterr(**quiet)

        def reset(self, token):
            import numpy as np
            np.seterr(**token)

    ERRSTATE, QUIET = _Seterr(), {"all": "ignore"}


def quiet(fn, *args, **kwargs):
    """fn(*args, **kwargs) with numpy's floating-point warnings off."""
    token = ERRSTATE.set(QUIET)
    try:
        return fn(*args, **kwargs)
    finally:
        ERRSTATE.reset(token)
