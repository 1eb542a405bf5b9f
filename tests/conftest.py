"""pytest setup shared by every test folder.

The test folders have no __init__.py; putting this folder on sys.path lets
every test module `import helpers` whatever folder it sits in.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad  # noqa: E402
from jitgrad import _state  # noqa: E402
from jitgrad.ops.registry import REGISTRY  # noqa: E402

import helpers  # noqa: E402


@pytest.fixture(params=["jitgrad", "torch"])
def lib(request):
    """The library under test, or torch as the oracle: a test body written once
    against the shared API runs on both (the torch run skips without torch)."""
    return jitgrad if request.param == "jitgrad" else helpers.require_torch()


@pytest.fixture
def register():
    """jitgrad.ops.elementwise, with every op a test registers removed afterwards
    so that tests iterating REGISTRY do not see it."""
    before = set(REGISTRY)
    yield jitgrad.ops.elementwise
    for name in set(REGISTRY) - before:
        del REGISTRY[name]


@pytest.fixture(autouse=True)
def _fresh_global_state():
    """A failing test must not leave grad mode, inference mode or the default dtype
    changed for the next one."""
    loc = _state.local
    saved = (loc.grad_enabled, loc.inference, jitgrad.get_default_dtype())
    yield
    loc.grad_enabled, loc.inference = saved[:2]
    jitgrad.set_default_dtype(saved[2])


# ---- devices -------------------------------------------------------------------------------
# Tests that take `device` run once per device. A normal run covers "cpu", and
# "cuda" where a GPU is usable; the CUDA simulator run (NUMBA_ENABLE_CUDASIM=1,
# a separate pytest process, see .ci/run) covers "cuda" alone.
SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
if SIMULATOR:
    # Simulated CUDA threads are Python threads that meet at barriers: with the
    # default 5 ms GIL switch interval each barrier waits for time slices, and
    # the simulated kernels run 15-20x slower.
    sys.setswitchinterval(1e-5)

    def _serialize_shared_arrays():
        """The simulator creates a block's shared array in whichever thread asks
        first, with an unlocked check-then-set: with fast thread switching two
        threads can each get their own array. Serialize that step."""
        import threading

        import numpy as np
        from numba.core import types as numba_types
        from numba.cuda.simulator import kernelapi
        from numba.np import numpy_support
        make, lock = kernelapi.FakeCUDAShared.array, threading.Lock()

        def array(self, shape, dtype, alignment=None):
            if shape == 0 or alignment is not None:  # dynamic shared memory: no race
                return make(self, shape, dtype, alignment)
            if isinstance(dtype, numba_types.Type):
                dtype = numpy_support.as_dtype(dtype)
            site = (sys._getframe(1).f_code.co_filename, sys._getframe(1).f_lineno)
            with lock:  # one array per call site and block, as the simulator intends
                res = self._allocations.get(site)
                if res is None:
                    res = self._allocations[site] = np.empty(shape, dtype)
            return res
        kernelapi.FakeCUDAShared.array = array

    _serialize_shared_arrays()


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", ["cuda"] if SIMULATOR else ["cpu", "cuda"], indirect=True)


@pytest.fixture
def device(request):
    if request.param == "cuda" and not jitgrad.cuda.is_available():
        pytest.skip("no usable CUDA here (numba-cuda or a GPU missing): the simulator run "
                    "covers this case (NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda)")
    return request.param
