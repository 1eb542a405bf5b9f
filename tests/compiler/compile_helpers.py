"""Shared by the jitgrad.compile tests: run a function eagerly and compiled on
twin inputs over several calls (the first traces, the later ones replay) and
compare results and gradients."""
import numpy as np

import jitgrad
from jitgrad.testing import outputs_of

import helpers

CALLS = 3
# Replay runs the same kernels as eager mode on the same values; executors that
# fuse or reorder may round differently, so allow a few ulps.
TOL = {"float64": dict(rtol=1e-9, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}


def assert_close(got, want, what, graph=True):
    """Compiled result == eager result: type, shape, dtype, values, and (graph=True)
    requires_grad."""
    if not isinstance(want, jitgrad.Tensor):
        assert got == want, f"{what}: {got!r} != {want!r}"
        return
    assert isinstance(got, jitgrad.Tensor), f"{what}: {type(got).__name__}, not a Tensor"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert not graph or got.requires_grad == want.requires_grad, (
        f"{what}: requires_grad {got.requires_grad} != {want.requires_grad}")
    a, b = helpers.to_numpy(got), helpers.to_numpy(want)
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, equal_nan=True, err_msg=what, **TOL.get(str(a.dtype),
                                                                                TOL["float32"]))
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


def assert_same_results(got, want, what="result", graph=True):
    """Two results of one function (tensors, or tuples/lists of them). graph=False:
    requires_grad is not compared (a replayed step that ran backward() returns
    results without a graph: the backward they would need has run)."""
    g, w = outputs_of(got), outputs_of(want)
    assert len(g) == len(w), f"{what}: {len(g)} outputs, eager gives {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        assert_close(a, b, f"{what} {i}", graph)


def loss_of(out):
    """The sum of every output that requires grad (None if none does)."""
    parts = [o.sum() for o in outputs_of(out)
             if isinstance(o, jitgrad.Tensor) and o.requires_grad]
    return sum(parts[1:], parts[0]) if parts else None


def assert_grads(got_leaves, want_leaves, what):
    for i, (a, b) in enumerate(zip(got_leaves, want_leaves)):
        if b.grad is None:
            assert a.grad is None, f"{what}: grad of input {i} is set, eager leaves it None"
        else:
            assert a.grad is not None, f"{what}: grad of input {i} is None, eager sets it"
            assert_close(a.grad, b.grad, f"{what}: grad of input {i}")


def twins(sample, key, dtype="float64"):
    """Two materializations of `sample` with the same values (compiled, eager)."""
    return (helpers.materialize(sample, helpers.rng_for(*key), dtype),
            helpers.materialize(sample, helpers.rng_for(*key), dtype))
