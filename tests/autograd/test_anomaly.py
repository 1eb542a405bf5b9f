"""Anomaly mode: forward traces on failure, NaN checks, thread-local switch."""
import threading
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import Function

torch = pytest.importorskip("torch")
LIBS = [jitgrad, torch]
ids = ["jitgrad", "torch"]


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
        with pytest.warns(UserWarning, match="Error detected in SqrtBackward0"):
            with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan "
                                                   r"values in its 0th output.$"):
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


def anomaly_run(fn, *args):
    """fn(*args) with warnings recorded: (its exception's message, the warnings' texts)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError) as err:
            fn(*args)
    texts = [str(w.message) for w in caught
             if "Anomaly Detection has been enabled" not in str(w.message)]
    return str(err.value), texts


def nan_backward(lib, node):
    with lib.autograd.detect_anomaly():
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        y = x.sqrt() * 0 if node == "sqrt" else x / x
        y.sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=ids)
@pytest.mark.parametrize("node, name, output", [("sqrt", "SqrtBackward0", 0),
                                                ("div", "DivBackward0", 1)])
def test_nan_in_backward_raises_torch_s_message(lib, node, name, output):
    text, warned = anomaly_run(nan_backward, lib, node)
    # the forward trace is a warning, not part of the error
    assert text == f"Function '{name}' returned nan values in its {output}th output."
    assert len(warned) == 1 and warned[0].startswith(f"Error detected in {name}.")
    assert "nan_backward" in warned[0] and "Traceback of forward call that caused the error" \
        in warned[0]


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_anomaly_mode_is_what_is_on_while_backward_runs(lib):
    with lib.autograd.set_detect_anomaly(True):
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        y = x.sqrt() * 0
    y.sum().backward()  # recorded under anomaly mode, run without: no check
    assert np.isnan(x.grad.numpy()[0])

    def backward_only():
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        y = x.sqrt() * 0
        with lib.autograd.detect_anomaly():
            y.sum().backward()
    text, warned = anomaly_run(backward_only)
    assert text == "Function 'SqrtBackward0' returned nan values in its 0th output."
    assert warned[0].startswith("Error detected in SqrtBackward0. No forward pass information "
                                "available. Enable detect anomaly during forward pass for more "
                                "information.")


def changed_in_place(lib, anomaly):
    with lib.autograd.set_detect_anomaly(anomaly):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        y.add_(1)
        y.sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_in_place_error_hint_depends_on_anomaly_mode(lib):
    text, warned = anomaly_run(changed_in_place, lib, False)
    assert "modified by an inplace operation" in text and not warned
    assert "Hint: enable anomaly detection to find the operation that failed to compute its " \
           "gradient, with " in text
    text, warned = anomaly_run(changed_in_place, lib, True)
    assert text.endswith("Hint: the backtrace further above shows the operation that failed to "
                         "compute its gradient. The variable in question was changed in there or "
                         "anywhere later. Good luck!")
    assert len(warned) == 1 and warned[0].startswith("Error detected in ExpBackward0")


def nan_in_double_backward(lib):
    with lib.autograd.detect_anomaly():
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        y = x ** 3
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (g2,) = lib.autograd.grad(g.sqrt().sum(), x, create_graph=True)
        (g2 * 0).sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_double_backward_reports_the_nodes_that_induced_the_failing_one(lib):
    text, warned = anomaly_run(nan_in_double_backward, lib)
    assert text == "Function 'PowBackward0' returned nan values in its 0th output."
    # the failing node was made by the first grad(); the report goes on to the forward
    # op whose backward made it, one warning per level, as torch
    assert len(warned) == 2
    assert warned[0].startswith("Error detected in PowBackward0. Traceback of forward call that "
                                "caused the error:")
    assert "lib.autograd.grad(y.sum(), x, create_graph=True)" in warned[0]
    assert warned[1].startswith("\n\nPrevious calculation was induced by PowBackward0. Traceback "
                                "of forward call that induced the previous calculation:")
    assert "y = x ** 3" in warned[1]
    if lib is jitgrad:
        assert "<jitgrad formula" not in warned[0]  # only the user's frames
