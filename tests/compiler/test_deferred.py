"""A trace defers large elementwise results (compiler/deferred.py): the call that
traces holds what the step needs, not every intermediate, and gives eager mode's
results wherever values are read (an op, a graph break, a repr, the end)."""
import gc
import os
import pickle

import numpy as np
import pytest

import jitgrad
from jitgrad.compiler import Unsupported
from jitgrad.compiler.program import SMALL_ELEMENTS

import helpers

N = 20_000
assert N > SMALL_ELEMENTS  # large enough to be deferred
# float64, so that a wrong value shows beyond rounding: blocks run numpy's exp, sin ...
# where eager mode may run the kernels' (an ulp apart, more after cancellation)
TOL = dict(rtol=1e-11, atol=1e-13)


def w1(x):
    x.grad = None
    y = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * x) + 0.5 * x) * jitgrad.sigmoid(x)).sum()
    y.backward()
    return y


def arrays(key, *shapes, dtype=np.float64):
    rng = helpers.rng_for("deferred", key)
    return [rng.uniform(-2, 2, s).astype(dtype) for s in shapes]


def close(got, want, what):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), err_msg=what, **TOL)


def first_call(fn, values, grad=True):
    """fn's first call eagerly and compiled (the trace) on twin leaves; asserts equal
    results and .grad. Returns (compiled, compiled leaves, compiled result)."""
    eager = [jitgrad.tensor(v, requires_grad=grad) for v in values]
    comp = [jitgrad.tensor(v, requires_grad=grad) for v in values]
    compiled = jitgrad.compile(fn)
    want, got = fn(*eager), compiled(*comp)
    for i, (a, b) in enumerate(zip(jitgrad.testing.outputs_of(got),
                                   jitgrad.testing.outputs_of(want))):
        close(a, b, f"output {i}")
        assert a.requires_grad == b.requires_grad
    for e, c in zip(eager, comp):
        assert (c.grad is None) == (e.grad is None)
        if e.grad is not None:
            close(c.grad, e.grad, "grad")
    return compiled, comp, got


def test_a_training_step_traces_to_eager_results():
    compiled, _, _ = first_call(w1, arrays("w1", N))
    assert compiled.traces == 1 and not compiled.breaks


def test_numbers_zero_dim_and_broadcast_operands_and_returned_intermediates():
    def f(x, s):
        y = x * s + 2.0 - x.exp() / 3   # s: a 0-d tensor
        z = (y * y).sum()
        return z, y, 1 - y              # y and 1 - y are deferred until the end

    x, s = arrays("mixed", N, ())
    first_call(f, [x, s])


def layer_norm_step(x, w, b):
    # centred reads a (rows, 1) mean, the output a weight and a bias along the last
    # dim, the backward the mean's gradient expanded to x's shape (0 strides)
    centred = x - x.mean(-1, keepdim=True)
    var = (centred * centred).mean(-1, keepdim=True)
    y = centred * jitgrad.rsqrt(var + 1e-5) * w + b
    loss = (y * y).sum()
    loss.backward()
    return loss, y


@pytest.mark.parametrize("shape", [(3, 40, 50), (2, 70_000), (N, 1)],
                         ids=["rows of 50", "rows too long to defer", "one column"])
def test_operands_broadcast_by_rows_or_along_the_last_dim(shape):
    x, w, b = arrays("rows", shape, shape[-1:], (1,) * (len(shape) - 1) + shape[-1:])
    first_call(layer_norm_step, [x, w, b])


def test_a_value_expanded_along_the_last_dim_as_the_only_array():
    def f(x):
        m = x.mean(-1, keepdim=True).expand(x.shape)  # 0 strides: one value per row
        return (m * 2.0 + x).sum(), m * 3.0           # m * 3.0: computed at the end

    first_call(f, arrays("expanded", (100, 50)))


def test_a_deferred_value_broadcast_into_a_larger_one():
    def f(a, y):
        return ((a.exp() + y) * 2).sum()  # a.exp(): deferred, (N, 1), then broadcast

    first_call(f, arrays("deferred broadcast", (N, 1), (N, 3)))


def test_forward_only_capture_then_backward_outside():
    def f(x):
        return jitgrad.tanh(x.sin() * x.exp())  # its node saves deferred values

    compiled, (x,), out = first_call(f, arrays("fwd", N))
    out.sum().backward()
    want = jitgrad.tensor(arrays("fwd", N)[0], requires_grad=True)
    f(want).sum().backward()
    close(x.grad, want.grad, "grad after the caller's backward")


def test_a_value_read_after_its_operand_changed_in_place_keeps_the_old_values():
    def f(x, w):
        y = w * 2 + x                    # deferred: reads w
        with jitgrad.no_grad():
            w.add_(1)                    # eager mode computed y before this
        return (y * x).sum(), y

    x, w = arrays("inplace", N, N)
    eager_w, comp_w = jitgrad.tensor(w), jitgrad.tensor(w)
    compiled = jitgrad.compile(f)
    for _ in range(2):  # traced, then replayed
        want = f(jitgrad.tensor(x), eager_w)
        got = compiled(jitgrad.tensor(x), comp_w)
        for a, b in zip(got, want):
            close(a, b, "result")
        close(comp_w, eager_w, "w")


def test_an_existing_grad_is_added_into_in_place():
    def step(x):
        (x.sin() * x).sum().backward()

    x, = arrays("acc", N)
    eager, comp = jitgrad.tensor(x, requires_grad=True), jitgrad.tensor(x, requires_grad=True)
    step(eager)
    step(eager)
    comp.grad = jitgrad.zeros(N, dtype=jitgrad.float64)
    buf = comp.grad
    jitgrad.compile(step)(comp)
    comp.grad.add_(eager.grad / 2)  # eager ran two steps, the compiled one
    assert comp.grad is buf, "eager mode adds into an existing .grad"
    close(comp.grad, eager.grad, "grad")


def test_a_graph_break_reads_values_then_runs_eagerly():
    def f(x):
        y = x.sin() * x
        return y * y.sum().item()  # breaks here

    compiled, _, _ = first_call(f, arrays("break", N))
    (reason, where), = compiled.breaks
    assert "item" in reason and where.endswith(f"{f.__code__.co_firstlineno + 2} in f")


def test_fullgraph_names_the_call_and_the_line():
    @jitgrad.compile(fullgraph=True)
    def f(x):
        y = x.exp() * x
        return y * float(y.sum())  # breaks here

    x = jitgrad.tensor(arrays("fullgraph", N)[0])
    with pytest.raises(Unsupported, match=rf"float.*{os.path.basename(__file__)}:"
                                          rf"{f.__wrapped__.__code__.co_firstlineno + 3}"):
        f(x)


def test_repr_and_pickle_read_the_values():
    seen = []

    def f(x):
        y = x.cos() + 1
        seen.append((repr(y), pickle.loads(pickle.dumps(y)).numpy()))
        return y * 2

    first_call(f, arrays("repr", N), grad=False)
    (got_repr, got), (want_repr, want) = seen
    assert got_repr == want_repr
    np.testing.assert_allclose(got, want, **TOL)


def _peak_rss_above(fn):
    """Bytes of resident memory fn() added at its peak (Linux)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to VmRSS

    def status(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))
    base = status("VmRSS")
    fn()
    return status("VmHWM") - base


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_the_first_call_holds_about_one_array_not_every_intermediate():
    n = 1 << 22  # 16 MiB per float32 array: eager mode's trace held ten or more
    x = jitgrad.tensor(arrays("memory", n, dtype=np.float32)[0], requires_grad=True)
    compiled = jitgrad.compile(w1)
    gc.collect()
    peak = _peak_rss_above(lambda: compiled(x))
    # x.grad (16 MiB), the loss's input while it is summed (16 MiB, freed before .grad
    # exists), blocks of a few hundred KB and bookkeeping
    assert peak < 24 << 20, f"{peak / 2 ** 20:.1f} MiB"


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_a_layer_norm_first_call_defers_its_broadcast_products():
    shape = (1 << 12, 1 << 10)  # 16 MiB per float32 array
    values = arrays("memory rows", shape, shape[-1:], shape[-1:], dtype=np.float32)
    leaves = [jitgrad.tensor(v, requires_grad=True) for v in values]
    compiled = jitgrad.compile(layer_norm_step)
    gc.collect()
    peak = _peak_rss_above(lambda: compiled(*leaves))
    # x.grad, y (returned) and the inputs of the reductions (mean, sum, sum_to_size)
    # while they run: 80 MiB; 127 where products against the (rows, 1) values ran whole
    assert peak < 96 << 20, f"{peak / 2 ** 20:.1f} MiB"


@pytest.fixture
def unbuilt(monkeypatch):
    """Programs whose worker thread never starts: every replay runs on the tier that
    runs while the executors' kernels build (a deferring Python tier)."""
    from jitgrad.compiler.program import Program
    monkeypatch.setattr(Program, "_start_build", lambda self: None)


def replays(step, values, calls=3, grad=True):
    """step eagerly and compiled, `calls` times on twin leaves: equal results and .grad."""
    eager = [jitgrad.tensor(v, requires_grad=grad) for v in values]
    comp = [jitgrad.tensor(v, requires_grad=grad) for v in values]
    compiled = jitgrad.compile(step)
    for _ in range(calls):
        for a, b in zip(jitgrad.testing.outputs_of(compiled(*comp)),
                        jitgrad.testing.outputs_of(step(*eager))):
            close(a, b, "result")
        for e, c in zip(eager, comp):
            close(c.grad, e.grad, "grad") if e.grad is not None else None
    assert compiled.eager_calls == 0
    return compiled, comp


def test_replays_before_the_kernels_are_built_equal_eager(unbuilt):
    def step(x, w):
        y = jitgrad.tanh(x * w + 0.5) * (1 - x)   # a swapped operator, deferred too
        loss = (y * y).sum()
        loss.backward()                            # accumulates into .grad (not zeroed)
        with jitgrad.no_grad():
            w.sub_(0.1 * w.grad)                   # changes w, which deferred values read
        return loss, y

    compiled, _ = replays(step, arrays("replay", N, N))
    assert compiled.traces == 2  # .grad None, then set


def test_a_forward_only_replay_keeps_what_its_backward_reads(unbuilt):
    def f(x):
        return jitgrad.tanh(x.sin() * x.exp())

    eager = jitgrad.tensor(arrays("fwd replay", N)[0], requires_grad=True)
    comp = jitgrad.tensor(arrays("fwd replay", N)[0], requires_grad=True)
    compiled = jitgrad.compile(f)
    for _ in range(3):
        compiled(comp).sum().backward()
        f(eager).sum().backward()
        close(comp.grad, eager.grad, "grad")


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_a_replay_before_the_kernels_are_built_holds_about_one_array(unbuilt):
    n = 1 << 22
    x = jitgrad.tensor(arrays("memory", n, dtype=np.float32)[0], requires_grad=True)
    compiled = jitgrad.compile(w1)
    compiled(x)
    x.grad = None
    gc.collect()
    peak = _peak_rss_above(lambda: compiled(x))
    assert peak < 24 << 20, f"{peak / 2 ** 20:.1f} MiB"


def test_a_training_step_with_an_optimizer_replays_before_the_kernels_are_built(unbuilt):
    def model_and_step():
        jitgrad.manual_seed(0)
        model = jitgrad.nn.Sequential(jitgrad.nn.Linear(64, 96), jitgrad.nn.Tanh(),
                                      jitgrad.nn.Linear(96, 8)).double()
        opt = jitgrad.optim.Adam(model.parameters(), lr=0.01)

        def step(x):
            opt.zero_grad()
            h = model(x)
            loss = (h * h * 0.5 + h.exp()).mean()  # elementwise work on 8192 elements
            loss.backward()
            opt.step()
            return loss, h
        return model, step

    x = jitgrad.tensor(arrays("mlp", (1024, 64))[0])
    (em, eager), (cm, step) = model_and_step(), model_and_step()
    compiled = jitgrad.compile(step)
    for _ in range(4):
        for a, b in zip(compiled(x), eager(x)):
            close(a, b, "result")
    for a, b in zip(cm.parameters(), em.parameters()):
        close(a, b, "parameter")
    assert compiled.eager_calls == 0


def test_save_reads_the_values(tmp_path):
    def f(x):
        y = x.sin() * 3
        jitgrad.save(y, str(tmp_path / "y.pt"))
        return y

    first_call(f, arrays("save", N), grad=False)
    close(jitgrad.load(str(tmp_path / "y.pt")), jitgrad.tensor(arrays("save", N)[0]).sin() * 3,
          "saved")
