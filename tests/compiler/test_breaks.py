"""Every graph-break reason: the call runs eagerly (eager's results), explain()
names the break and the user's line, hooks fire on every call (never skipped),
and fullgraph=True raises Unsupported naming the call and the line."""
import inspect
import os
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad import nn
from jitgrad.compiler import Unsupported

from compile_helpers import CALLS, assert_close

FILE = os.path.abspath(__file__)


def _line(fn):
    """'file:line' of the line of fn marked `# breaks here`."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if "# breaks here" in text]
    assert len(hits) == 1, f"{fn.__name__} needs one line marked '# breaks here'"
    return f"{FILE}:{hits[0]}"


def cases(calls):
    """name -> (function of one float32 vector, a word the reason must contain);
    hooks append to `calls`, so eager and compiled runs can count them."""
    jitgrad.manual_seed(0)
    lin = nn.Linear(3, 2)
    lin.register_forward_hook(lambda m, i, o: calls.append("forward hook"))

    class Square(jitgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            calls.append("Square.backward")
            return 2 * x * g

    def item(x):
        y = x.sin()
        return y * y.sum().item()  # breaks here

    def data_dependent_if(x):
        y = x.sin()
        if y.sum() > 0:  # breaks here
            return y * 2
        return y * 3

    def numpy(x):
        y = x.sin()
        return y * float(y.detach().numpy().sum())  # breaks here

    def tolist(x):
        y = x.sin()
        return y * sum(y.tolist())  # breaks here

    def boolean_mask(x):
        return (x[x > 0] * 2).sum()  # breaks here

    def tensor_hook(x):
        y = x.sin()
        y.register_hook(lambda g: calls.append("tensor hook") or g * 2)  # breaks here
        return (y * y).sum()

    def retain_grad(x):
        y = x.sin()
        y.retain_grad()  # breaks here
        return (y * y).sum()

    def post_accumulate_grad_hook(x):
        x.register_post_accumulate_grad_hook(lambda t: calls.append("post hook"))  # breaks here
        return x.sin().sum()

    def module_forward_hook(x):
        return lin(x).sum()  # breaks here

    def saved_tensors_hooks(x):
        def pack(t):
            calls.append("pack")
            return t
        with jitgrad.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            return (x.sin() * x).sum()  # breaks here

    def detect_anomaly(x):
        with jitgrad.autograd.detect_anomaly():
            return (x.sin() * x).sum()  # breaks here

    def set_detect_anomaly(x):
        jitgrad.autograd.set_detect_anomaly(True)
        try:
            return (x.sin() * x).sum()  # breaks here
        finally:
            jitgrad.autograd.set_detect_anomaly(False)

    def custom_function(x):
        return Square.apply(x.sin()).sum()  # breaks here

    return {
        "item": (item, "item()"),
        "bool": (data_dependent_if, "bool()"),
        "numpy": (numpy, "numpy()"),
        "tolist": (tolist, "tolist()"),
        "boolean_mask": (boolean_mask, "boolean mask"),
        "tensor_hook": (tensor_hook, "register_hook"),
        "retain_grad": (retain_grad, "retain_grad"),
        "post_accumulate_grad_hook": (post_accumulate_grad_hook,
                                      "register_post_accumulate_grad_hook"),
        "module_forward_hook": (module_forward_hook, "forward hooks of Linear"),
        "saved_tensors_hooks": (saved_tensors_hooks, "saved_tensors_hooks"),
        "detect_anomaly": (detect_anomaly, "anomaly mode"),
        "set_detect_anomaly": (set_detect_anomaly, "anomaly mode"),
        "custom_function": (custom_function, "custom autograd.Function Square"),
    }


NAMES = sorted(cases([]))
X = np.array([0.5, -1.0, 2.0], dtype=np.float32)


def _run(fn):
    x = jitgrad.tensor(X, requires_grad=True)
    out = fn(x)
    if out.requires_grad:
        out.sum().backward()
    return out, x.grad


@pytest.fixture(autouse=True)
def _quiet_anomaly_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Anomaly Detection has been enabled")
        yield


@pytest.mark.parametrize("name", NAMES)
def test_break_runs_eagerly_with_eager_results_and_hooks(name):
    calls_e, calls_c = [], []
    eager, _ = cases(calls_e)[name]
    fn, word = cases(calls_c)[name]
    compiled = jitgrad.compile(fn)
    for i in range(CALLS):
        got, got_grad = _run(compiled)
        want, want_grad = _run(eager)
        assert_close(got, want, f"call {i}")
        assert_close(got_grad, want_grad, f"call {i}: grad")
        assert calls_c == calls_e, f"call {i}: hooks ran {calls_c}, eager ran {calls_e}"
    assert compiled.traces == 1 and compiled.eager_calls == CALLS - 1
    (reason, where), = compiled.breaks
    assert word in reason and where.startswith(_line(fn) + " "), (reason, where)


@pytest.mark.parametrize("name", NAMES)
def test_explain_names_the_break_and_the_line(name):
    fn, word = cases([])[name]
    report = jitgrad.compile.explain(fn, jitgrad.tensor(X, requires_grad=True))
    assert report.graph_count == 0 and report.graph_break_count == 1
    (reason, where), = report.break_reasons
    assert word in reason and where.startswith(_line(fn) + " ")
    text = str(report)
    assert word in text and _line(fn) in text


@pytest.mark.parametrize("name", NAMES)
def test_fullgraph_raises_naming_the_call_and_the_line(name):
    fn, word = cases([])[name]
    compiled = jitgrad.compile(fn, fullgraph=True)
    with pytest.raises(Unsupported) as e:
        _run(compiled)
    assert word in str(e.value) and _line(fn) in str(e.value)
    assert "fullgraph=False" in str(e.value)  # the fix


def test_a_module_hook_added_after_the_trace_runs():
    calls = []
    lin = nn.Linear(3, 2)
    f = jitgrad.compile(lambda x: lin(x).sum())
    x = jitgrad.ones(2, 3)
    f(x)
    f(x)
    lin.register_forward_pre_hook(lambda m, i: calls.append("pre"))
    lin.register_forward_hook(lambda m, i, o: calls.append("post"))
    for _ in range(2):
        f(x)
    assert calls == ["pre", "post"] * 2
    assert f.traces == 2 and f.breaks[0][0].startswith("forward hooks of Linear")


def test_a_tensor_hook_added_after_the_trace_runs():
    calls = []
    w = jitgrad.ones(3, requires_grad=True)

    @jitgrad.compile
    def step(x):
        (x * w).sum().backward()

    x = jitgrad.tensor([1.0, 2.0, 3.0])
    for _ in range(2):
        w.grad = None
        step(x)
    w.register_hook(lambda g: calls.append("hook") or g * 10)
    w.register_post_accumulate_grad_hook(lambda t: calls.append("post"))
    for _ in range(2):
        w.grad = None
        step(x)
    assert calls == ["hook", "post"] * 2
    np.testing.assert_array_equal(w.grad.numpy(), [10.0, 20.0, 30.0])


def test_a_hook_on_a_parameter_added_after_the_trace_runs_in_the_compiled_backward():
    calls = []
    w = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    f = jitgrad.compile(lambda x: (x * w).sum())
    x = jitgrad.tensor([3.0, 4.0])
    for _ in range(2):
        f(x).backward()
    w.register_hook(lambda g: calls.append("hook"))
    for _ in range(2):
        f(x).backward()
    assert calls == ["hook"] * 2
    np.testing.assert_array_equal(w.grad.numpy(), [12.0, 16.0])
    assert f.traces == 2 and f.breaks[0][0] == "a hook on a leaf tensor"


def test_a_retained_grad_is_stored_on_every_call():
    f = jitgrad.compile(lambda x: (lambda y: (y.retain_grad(), y)[1])(x * 2))
    for _ in range(CALLS):
        y = f(jitgrad.tensor([1.0, 2.0], requires_grad=True))
        (y * y).sum().backward()
        np.testing.assert_array_equal(y.grad.numpy(), [4.0, 8.0])


@pytest.mark.parametrize("mode", ["detect_anomaly", "saved_tensors_hooks"])
def test_a_mode_entered_outside_runs_the_call_eagerly(mode):
    calls = []
    f = jitgrad.compile(lambda x: (x.sin() * x).sum())
    x = jitgrad.tensor(X, requires_grad=True)
    f(x)
    f(x)
    ctx = (jitgrad.autograd.detect_anomaly() if mode == "detect_anomaly" else
           jitgrad.autograd.graph.saved_tensors_hooks(lambda t: calls.append(1) or t, lambda t: t))
    with ctx:
        got = f(x)
    assert f.eager_calls == 1 and f.traces == 1
    assert mode == "detect_anomaly" or calls == [1, 1, 1]  # sin saves x, mul saves both
    assert got.grad_fn.name() == "SumBackward0"  # eager's graph, not the compiled node
    with pytest.raises(Unsupported, match="anomaly mode|saved-tensor hooks"), ctx:
        jitgrad.compile(lambda x: x.sin(), fullgraph=True)(x)
