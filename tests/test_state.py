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


def test_unusual_counts_flags_off_their_default_in_any_thread():
    """`unusual` is empty exactly when no thread holds a counted flag (inference,
    anomaly, in-place target) off its default, so the per-op fast paths may skip
    reading those flags."""
    base = len(_state.unusual)
    with jitgrad.inference_mode():
        assert len(_state.unusual) == base + 1
        with jitgrad.inference_mode():  # setting the same value again counts once
            assert len(_state.unusual) == base + 1
        with jitgrad.autograd.set_detect_anomaly(True):
            assert len(_state.unusual) == base + 2
        assert jitgrad.ones(2).is_inference() is True
    assert len(_state.unusual) == base

    entered, leave = threading.Event(), threading.Event()

    def other():
        with jitgrad.inference_mode():
            entered.set()
            leave.wait(5)

    th = threading.Thread(target=other)
    th.start()
    entered.wait(5)
    try:
        assert len(_state.unusual) == base + 1
        # this thread's flags stay default: its tensors are not inference tensors
        t = jitgrad.ones(2) * 2
        assert t.is_inference() is False
    finally:
        leave.set()
        th.join(5)
    assert len(_state.unusual) == base


def test_inplace_target_is_counted_while_an_inplace_op_runs():
    base = len(_state.unusual)
    x = jitgrad.ones(3, requires_grad=True).clone()
    seen = []
    apply_inplace(x, lambda src: seen.append(len(_state.unusual)) or src * 2)
    assert seen == [base + 1] and len(_state.unusual) == base


def test_uncounted_flags_do_not_count():
    base = len(_state.unusual)
    with jitgrad.no_grad():
        _state.local.fusion = False
        try:
            assert len(_state.unusual) == base
        finally:
            _state.local.fusion = True
