"""Anomaly mode: forward traces on failure, NaN checks, thread-local switch."""
import threading
import warnings

import pytest

import jitgrad
from jitgrad.autograd import Function


class MyFunc(Function):  # torch's docs example
    @staticmethod
    def forward(ctx, inp):
        return inp.clone()

    @staticmethod
    def backward(ctx, gO):
        raise RuntimeError("Some error in backward")


def run_my_func():
    a = jitgrad.rand(10, requires_grad=True)
    out = MyFunc.apply(a)
    out.sum().backward()


def test_error_in_backward_shows_forward_trace():
    with pytest.raises(RuntimeError, match="Some error in backward"):
        run_my_func()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with jitgrad.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="Some error in backward"):
                run_my_func()
    text = "\n".join(str(w.message) for w in caught)
    assert "Traceback of forward call that caused the error" in text
    assert "run_my_func" in text and "MyFuncBackward" in text
    assert "jitgrad/ops" not in text  # the user's frames, not ours


def test_nan_check_names_the_node_and_can_be_turned_off():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = jitgrad.autograd.detect_anomaly()
    with mode:
        x = jitgrad.tensor([0.0], requires_grad=True)
        y = x.sqrt() * 0
        with pytest.raises(RuntimeError,
                           match=r"Function 'SqrtBackward0' returned nan values in its 0th output."):
            y.sum().backward()
    with jitgrad.autograd.set_detect_anomaly(True, check_nan=False):
        x = jitgrad.tensor([0.0], requires_grad=True)
        (x.sqrt() * 0).sum().backward()  # no error
    assert not jitgrad.autograd.is_anomaly_enabled()


def test_anomaly_nodes_are_not_fused(monkeypatch):
    monkeypatch.setattr(jitgrad.kernels.fuse, "FUSE_MIN_ELEMENTS", 0)
    with jitgrad.autograd.set_detect_anomaly(True):
        x = jitgrad.ones(3, requires_grad=True)
        y = (x.sin() * x).exp().sum()
    assert jitgrad.autograd.fusion.explain(y) == []
    y.backward()


def test_nested_backward_shows_the_parent_trace():
    class Outer(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with jitgrad.enable_grad():
                inner_x = x.detach().requires_grad_()
                inner = MyFunc.apply(inner_x)
                jitgrad.autograd.grad(inner.sum(), inner_x)
            return g

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with jitgrad.autograd.set_detect_anomaly(True):
            x = jitgrad.ones(2, requires_grad=True)
            with pytest.raises(RuntimeError, match="Some error in backward"):
                Outer.apply(x).sum().backward()
    text = "\n".join(str(w.message) for w in caught)
    assert "Previous calculation was induced by OuterBackward" in text


def test_anomaly_mode_is_thread_local():
    seen = []
    with jitgrad.autograd.set_detect_anomaly(True):
        t = threading.Thread(target=lambda: seen.append(jitgrad.autograd.is_anomaly_enabled()))
        t.start()
        t.join()
        assert jitgrad.autograd.is_anomaly_enabled()
    assert seen == [False]
