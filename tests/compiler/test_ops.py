"""Every registry op and sample, compiled == eager over several calls: as a
loss function (the result's backward runs the captured backward) and as a
whole step (backward() inside the compiled function)."""
import pytest

import jitgrad
from jitgrad.ops.registry import FUNCTIONS, REGISTRY, call

from compile_helpers import CALLS, MODE, assert_grads, assert_same_results, loss_of, twins
from registry_cases import PUBLIC, function_samples, op_sample

# Samples whose capture must break, with (a part of) the reason: they still give
# eager's results, run eagerly.
UNRECORDED = "made by a call the tracer does not record"
BREAKS = {
    # the result's shape depends on the mask's values: no fixed program fits every call
    ("getitem", 3): "indexing with a boolean mask",
    ("masked_select", 0): "indexing with a boolean mask",
    ("masked_select", 1): "indexing with a boolean mask",
    ("masked_scatter", 0): "indexing with a boolean mask",
    # Known gaps: these ops build index or mask tensors from numpy arrays rather than
    # with recorded calls, so a trace cannot replay them (a break: eager results).
    **{key: UNRECORDED for key in (
        ("diag", 0), ("diag", 1), ("diag", 2), ("diagonal", 0), ("diagonal", 1),
        ("einsum", 2), ("nn.functional.embedding", 0),
        ("nn.functional.scaled_dot_product_attention", 1), ("repeat_interleave", 0),
        ("repeat_interleave", 1), ("trace", 0), ("unfold", 0), ("unfold", 1))},
}


def _check_capture(compiled, key, traces=1):
    """No graph break (or the expected one: then every call but the traces ran
    eagerly), and `traces` traces: a step that runs backward() sets .grad, and a
    leaf's .grad (None or set) is part of the signature."""
    assert compiled.traces == traces, f"{key}: traced {compiled.traces} times, not {traces}"
    if key in BREAKS:
        assert compiled.breaks and BREAKS[key] in compiled.breaks[0][0], compiled.breaks
        assert compiled.eager_calls == CALLS - traces
    else:
        assert compiled.breaks == [], f"{key}: the capture broke: {compiled.breaks}"
        assert compiled.eager_calls == 0


def _loss_mode(fn, sample, key):
    comp, eager = twins(sample, ("compile",) + key)
    compiled = jitgrad.compile(lambda *a, **k: fn(*a, **k), mode=MODE)
    for step in range(CALLS):
        for leaf in comp.jg_leaves + eager.jg_leaves:
            leaf.grad = None
        got = compiled(*comp.jg_args, **comp.jg_kwargs)
        want = fn(*eager.jg_args, **eager.jg_kwargs)
        assert_same_results(got, want, f"{key} call {step}")
        lg, lw = loss_of(got), loss_of(want)
        assert (lg is None) == (lw is None)
        if lw is not None:
            lg.backward()
            lw.backward()
        assert_grads(comp.jg_leaves, eager.jg_leaves, f"{key} call {step}")
    _check_capture(compiled, key)


def _step_mode(fn, sample, key):
    """The backward inside the compiled function; gradients accumulate over calls."""
    def step(*a, **k):
        out = fn(*a, **k)
        loss = loss_of(out)
        if loss is not None:
            loss.backward()
        return out

    comp, eager = twins(sample, ("compile",) + key)
    compiled = jitgrad.compile(step, mode=MODE)
    for i in range(CALLS):
        got = compiled(*comp.jg_args, **comp.jg_kwargs)
        want = step(*eager.jg_args, **eager.jg_kwargs)
        assert_same_results(got, want, f"{key} call {i}", graph=False)
        assert_grads(comp.jg_leaves, eager.jg_leaves, f"{key} call {i}")
    _check_capture(compiled, key, traces=2 if any(t.grad is not None for t in eager.jg_leaves)
                   else 1)


MODES = {"loss": _loss_mode, "step": _step_mode}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", ["row", "0d"])
@pytest.mark.parametrize("name", PUBLIC)
def test_elementwise_op_compiled_matches_eager(name, case, mode):
    op = REGISTRY[name]
    MODES[mode](lambda *a: call(op, *a), op_sample(op, case), (name, case))


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name, i", function_samples())
def test_function_sample_compiled_matches_eager(name, i, mode):
    fn, samples = FUNCTIONS[name]
    MODES[mode](fn, samples[i], (name, i))


def test_compiled_result_keeps_the_eager_graph_shape():
    """A loss-function capture's result has a grad_fn (the compiled backward node)
    whose backward gives eager's gradients, and no graph when grad mode is off."""
    x = jitgrad.tensor([0.25, -0.5, 2.0], requires_grad=True)
    f = jitgrad.compile(lambda t: (t.exp() * t).sum())
    f(x)
    y = f(x)
    assert y.requires_grad and y.grad_fn is not None
    with jitgrad.no_grad():
        z = f(x)
    assert not z.requires_grad and z.grad_fn is None
    assert f.traces == 2  # grad mode is part of the signature
