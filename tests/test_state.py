"""Thread-local autograd state: an in-place op running in one thread does not
change what another thread's saved tensors keep."""
import threading

import jitgrad
from jitgrad import _state
from jitgrad.ops.inplace import apply_inplace


def test_inplace_target_is_set_in_its_own_thread_only():
    seen = {}
    started, release = threading.Event(), threading.Event()

    def other():
        started.set()
        release.wait(5)
        seen["other"] = _state.local.inplace_target

    th = threading.Thread(target=other)
    th.start()
    started.wait(5)
    x = jitgrad.ones(3, requires_grad=True).clone()

    def compute(src):
        seen["main"] = _state.local.inplace_target
        release.set()
        th.join(5)
        return src * 2

    apply_inplace(x, compute)
    assert seen["main"] is x and seen["other"] is None
    assert _state.local.inplace_target is None


def test_saving_the_target_in_another_thread_does_not_snapshot():
    """While thread A overwrites `x`, thread B saving `x` keeps the live tensor
    (so a later in-place change is caught by the version check, as without A)."""
    x = jitgrad.ones(3, requires_grad=True).clone()
    out = {}
    in_compute, done = threading.Event(), threading.Event()

    def other():
        in_compute.wait(5)
        out["y"] = x * x  # saves x
        done.set()

    th = threading.Thread(target=other)
    th.start()

    def compute(src):
        in_compute.set()
        done.wait(5)
        return src * 2

    apply_inplace(x, compute)
    th.join(5)
    try:
        out["y"].sum().backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
    else:
        raise AssertionError("x was changed in place after being saved: backward must refuse")
