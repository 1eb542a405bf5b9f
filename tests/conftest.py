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

import helpers  # noqa: E402


@pytest.fixture(params=["jitgrad", "torch"])
def lib(request):
    """The library under test, or torch as the oracle: a test body written once
    against the shared API runs on both (the torch run skips without torch)."""
    return jitgrad if request.param == "jitgrad" else helpers.require_torch()


@pytest.fixture(autouse=True)
def _fresh_global_state():
    """A failing test must not leave grad mode, inference mode or the default dtype
    changed for the next one."""
    loc = _state.local
    saved = (loc.grad_enabled, loc.inference, jitgrad.get_default_dtype())
    yield
    loc.grad_enabled, loc.inference = saved[:2]
    jitgrad.set_default_dtype(saved[2])
