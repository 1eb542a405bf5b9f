"""jitgrad.compile(dynamic=True): calls that differ only in their batch size share
one program where it allows (traced at two batch sizes, built for the others
without a trace), and are traced per batch size where it does not."""
import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F

from compile_helpers import MODE, assert_close
from test_compile import OPTIMIZERS, _assert_same_training_state, _model, _train_step

import helpers

BATCHES = (8, 16, 5, 8)


def _data(seed, b):
    rng = helpers.rng_for("dynamic", seed, b)
    return (jitgrad.tensor(rng.standard_normal((b, 6)).astype("float32")),
            jitgrad.tensor(rng.integers(0, 3, b)))


def _family(compiled):
    (family,) = compiled._batches.values()
    return family


@pytest.mark.parametrize("opt_name", ["sgd", "adam", "adamw"])
def test_training_step_over_batch_sizes_matches_eager_with_two_traces(opt_name):
    model_c, model_e = _model(0), _model(0)
    opt_c, opt_e = OPTIMIZERS[opt_name](model_c.parameters()), OPTIMIZERS[opt_name](
        model_e.parameters())
    step = jitgrad.compile(_train_step, dynamic=True, mode=MODE)
    for i, b in enumerate(BATCHES + (5, 33)):
        x, y = _data(i, b)
        loss_c = step(model_c, opt_c, x, y)
        loss_e = _train_step(model_e, opt_e, x, y)
        assert_close(loss_c, loss_e, f"step {i} (batch {b}): loss", graph=False)
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"step {i} (batch {b})")
    # 8 and 16 traced; 5 and 33 built from them; the second 8 and 5 replay
    assert step.traces == 2 and step.breaks == [] and step.eager_calls == 0
    family = _family(step)
    assert family.static is None and family.sizes == [5, 33]
    assert "symbolic" in jitgrad.compile.explain(step, model_c, opt_c, *_data(9, 7)).batch_dimension


def test_compiled_module_and_loss_over_batch_sizes_match_eager():
    model_c, model_e = _model(1), _model(1)
    compiled = jitgrad.compile(model_c, dynamic=True, mode=MODE)
    loss_fn = jitgrad.compile(lambda out, y: F.cross_entropy(out, y), dynamic=True, mode=MODE)
    for i, b in enumerate(BATCHES):
        x, y = _data(i, b)
        out_c, out_e = compiled(x), model_e(x)
        assert_close(out_c, out_e, f"call {i} (batch {b}): output")
        loss_c, loss_e = loss_fn(out_c, y), F.cross_entropy(out_e, y)
        assert_close(loss_c, loss_e, f"call {i} (batch {b}): loss")
        loss_c.backward()
        loss_e.backward()
        for pc, pe in zip(model_c.parameters(), model_e.parameters()):
            assert_close(pc.grad, pe.grad, f"call {i} (batch {b}): .grad")
    assert compiled._compiled.traces == 2 and loss_fn.traces == 2
    assert _family(compiled._compiled).sizes == [5]


def _flat_sum(x):
    return (x.reshape(-1).tanh() * 2).sum()  # a slot of 6 * batch elements


def _view_sum(x):
    return x.view(4, -1).tanh().sum(1)  # (4, 1.5 * batch): whole at even batch sizes only


def test_sizes_proportional_to_the_batch_size_are_scaled():
    for fn, sizes, traces in ((_flat_sum, (8, 16, 5, 3), 2), (_view_sum, (8, 16, 6, 2), 2)):
        compiled = jitgrad.compile(fn, dynamic=True, mode=MODE)
        for b in sizes:
            x = jitgrad.tensor(helpers.rng_for("scaled", b).standard_normal((b, 6)),
                               requires_grad=True)
            x_e = x.detach().requires_grad_()
            out, want = compiled(x), fn(x_e)
            assert_close(out, want, f"{fn.__name__} at batch {b}")
            out.sum().backward()
            want.sum().backward()
            assert_close(x.grad, x_e.grad, f"{fn.__name__} at batch {b}: .grad")
        assert compiled.traces == traces, fn.__name__
    # (4, 7.5) is no shape: batch 5 is traced, and raises as eager mode does
    with pytest.raises(RuntimeError) as eager:
        _view_sum(jitgrad.ones(5, 6))
    with pytest.raises(RuntimeError) as got:
        compiled(jitgrad.ones(5, 6))
    assert str(got.value) == str(eager.value) and compiled.traces == 3


def _reads_batch_into_a_view(x):
    return x.view(x.shape[0] * 2, -1).sin().sum()


def _divides_by_len(x):
    return (x * 3).sum() / len(x)


def _branches_on_size(x):
    if x.size(0) > 10:
        return x.sum()
    return x.exp().sum()


@pytest.mark.parametrize("fn", [_reads_batch_into_a_view, _divides_by_len, _branches_on_size])
def test_a_batch_size_read_as_a_number_traces_every_batch_size(fn):
    compiled = jitgrad.compile(fn, dynamic=True, mode=MODE)
    for b in (8, 16, 12, 5):
        x = jitgrad.tensor(np.arange(b * 6.0).reshape(b, 6) / 50)
        assert_close(compiled(x), fn(x), f"batch {b}")
    assert compiled.traces == 4
    reason = _family(compiled).static
    assert "read a batch-dependent size as a Python number" in reason, reason
    assert f"in {fn.__name__}" in reason, reason  # the user's line
    status = jitgrad.compile.explain(compiled, jitgrad.ones(3, 6, dtype=jitgrad.float64))
    status = status.batch_dimension
    assert status.startswith("static") and fn.__name__ in status


def test_sizes_of_parameters_read_as_numbers_keep_the_program_symbolic():
    w = jitgrad.randn(6, 3, requires_grad=True)

    def f(x):
        return (x @ w).sum() / w.shape[0]

    compiled = jitgrad.compile(f, dynamic=True, mode=MODE)
    for b in BATCHES:
        x = jitgrad.ones(b, 6)
        assert_close(compiled(x), f(x), f"batch {b}")
    assert compiled.traces == 2 and _family(compiled).sizes == [5]


@pytest.mark.parametrize("dynamic", [None, False])
def test_without_dynamic_each_batch_size_is_traced(dynamic):
    compiled = jitgrad.compile(_flat_sum, dynamic=dynamic, mode=MODE)
    for b in BATCHES:
        compiled(jitgrad.ones(b, 6))
    assert compiled.traces == 3 and compiled._batches == {}


def test_arguments_with_different_leading_sizes_trace_every_call_signature():
    compiled = jitgrad.compile(lambda a, b: a.sum() + b.sum(), dynamic=True, mode=MODE)
    for n in BATCHES:
        compiled(jitgrad.ones(n, 2), jitgrad.ones(3, 2))
    assert compiled.traces == 3
    status = jitgrad.compile.explain(compiled, jitgrad.ones(4, 2), jitgrad.ones(3, 2))
    assert "share no leading (batch) size" in status.batch_dimension


def test_batch_sizes_that_change_the_executors_match_eager():
    # 3000 rows: slots above the small-tensor size, run by fused kernels instead
    model_c, model_e = _model(2), _model(2)
    opt_c, opt_e = OPTIMIZERS["adam"](model_c.parameters()), OPTIMIZERS["adam"](
        model_e.parameters())
    step = jitgrad.compile(_train_step, dynamic=True, mode=MODE)
    for i, b in enumerate((8, 16, 1, 3000, 5)):
        x, y = _data(i, b)
        assert_close(step(model_c, opt_c, x, y), _train_step(model_e, opt_e, x, y),
                     f"batch {b}: loss", graph=False)
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"batch {b}")
    assert step.traces == 2 and _family(step).sizes == [1, 3000, 5]
    big = [e.program for e in step.entries() if e.program.meta[e.program.inputs[0][0]].shape[0]
           == 3000]
    assert "fused" in big[0].forward_tape.describe()
