"""Every registry op and sample, compiled == eager over several calls: as a
loss function (the result's backward runs the captured backward) and as a
whole step (backward() inside the compiled function)."""
import pytest

import jitgrad
from jitgrad.ops.registry import FUNCTIONS, OPS, REGISTRY, Arg, Sample, call

from compile_helpers import CALLS, MODE, assert_grads, assert_same_results, loss_of, twins
from registry_cases import PUBLIC, function_samples, op_sample

# Samples whose capture must break, with (a part of) the reason: they still give
# eager's results, run eagerly.
BREAKS = {
    # the result's shape depends on values: no fixed program fits every call
    ("getitem", 3): "indexing with a boolean mask",
    ("masked_select", 0): "indexing with a boolean mask",
    ("masked_select", 1): "indexing with a boolean mask",
    ("masked_scatter", 0): "indexing with a boolean mask",
    ("nonzero", "mask"): "nonzero (argwhere, where(condition)): the result's shape depends",
    ("unique", "counts"): "unique: the result's shape depends",
    ("bincount", "ints"): "bincount: the result's length depends",
    ("repeat_interleave", "tensor repeats"): "repeat_interleave with a tensor of repeats",
    # a Python bool that the function may branch on
    ("equal", "floats"): "equal() hands a comparison of tensors' values to Python",
    ("allclose", "floats"): "allclose() hands a comparison of tensors' values to Python",
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


# Calls beyond the registry samples whose capture is asked for (or whose break is)
EXTRA_SAMPLES = {
    ("nn.functional.embedding", "padding_idx"): Sample(
        Arg(2, 3, high=6, kind="int"), Arg(6, 4), padding_idx=2),
    ("nn.functional.embedding", "scale_grad_by_freq"): Sample(
        Arg(3, 4, high=3, kind="int"), Arg(5, 2), padding_idx=0, scale_grad_by_freq=True),
    ("repeat_interleave", "tensor repeats"): Sample(Arg(2, 3), Arg(3, high=3, kind="int"), dim=1),
    ("nonzero", "mask"): Sample(Arg(3, 4, kind="bool")),
    ("unique", "counts"): Sample(Arg(6, high=3, kind="int"), return_counts=True),
    ("bincount", "ints"): Sample(Arg(6, high=4, kind="int")),
    ("equal", "floats"): Sample(Arg(3), Arg(3)),
    ("allclose", "floats"): Sample(Arg(3), Arg(3)),
    ("unfold", "0-d"): Sample(Arg(), 0, 1, 1),
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("key", list(EXTRA_SAMPLES), ids=str)
def test_more_calls_compiled_match_eager(key, mode):
    MODES[mode](OPS[key[0]].function, EXTRA_SAMPLES[key], key)


@pytest.mark.parametrize("fn", [
    lambda x: (x.nonzero().double() * 2).sum() + x.sum(),
    lambda x: (jitgrad.where(x > 0.5)[0] * x.sum()).sum(),
    lambda x: x.long().bincount().double() * 2,
    lambda x: x.unique() * 2 + 1,
    lambda x: (x.repeat_interleave(x.long()) * 2).sum(),
    lambda x: x * 2 if jitgrad.equal(x, x.round()) else x * 3,
    lambda x: x * 2 if x.allclose(x.round()) else x * 3,
], ids=["nonzero", "where", "bincount", "unique", "repeat_interleave", "equal", "allclose"])
def test_calls_that_depend_on_values_follow_them(fn):
    """Later calls with other values (other result shapes, other branches) give
    eager's results."""
    compiled = jitgrad.compile(fn, mode=MODE)
    for values in ([1.0, 0.0, 2.0], [1.0, 0.0, 2.0], [0.0, 0.25, 1.0], [3.0, 3.0, 3.0]):
        x = jitgrad.tensor(values)
        assert_same_results(compiled(x), fn(x), str(values))


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
