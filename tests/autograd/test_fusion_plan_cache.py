"""The fusion plan cache (autograd/fusion.py): a plan is reused only for a graph
of the same structure, and `compile_stats()` counts plans, not kernel look-ups."""
import numpy as np
import pytest

import jitgrad
from jitgrad.autograd.fusion import set_fusion_enabled


@pytest.fixture(autouse=True)
def fuse_small_tensors(monkeypatch):
    from jitgrad.kernels import fuse
    monkeypatch.setattr(fuse, "FUSE_MIN_ELEMENTS", 0)


def _plans(step):
    """(hits, misses) that one call of step adds."""
    before = jitgrad.compile_stats()
    step()
    after = jitgrad.compile_stats()
    return after["plan_hits"] - before["plan_hits"], after["plan_misses"] - before["plan_misses"]


def _chain(x, second=lambda t: t.cos()):
    return (x.tanh() * second(x) + x).exp().sum()


def test_identical_graph_hits_once_per_backward_different_graph_misses():
    x = jitgrad.randn(64, requires_grad=True)
    _chain(x).backward()
    assert _plans(lambda: _chain(x).backward()) == (1, 0)
    assert _plans(lambda: _chain(x, lambda t: t.sin()).backward()) == (0, 1)
    assert _plans(lambda: _chain(x[:32]).backward()) == (0, 1)  # another shape


def test_graph_without_fusable_nodes_is_not_planned():
    x = jitgrad.randn(64, requires_grad=True)
    assert _plans(lambda: x.sum().backward()) == (0, 0)


def _hooked_step(x):
    """The _chain graph with a tensor hook on its tanh; returns what the hook saw."""
    seen = []
    y = x.tanh()
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    x.grad = None
    (y * x.cos() + x).exp().sum().backward()
    return seen


def test_hook_added_in_a_later_step_is_not_lost_to_the_cached_plan():
    x = jitgrad.randn(64, requires_grad=True)
    _chain(x).backward()  # caches the hookless plan
    seen = []
    assert _plans(lambda: seen.extend(_hooked_step(x))) == (0, 1)
    fused_grad = x.grad.numpy().copy()
    with set_fusion_enabled(False):
        want = _hooked_step(x)
    assert len(seen) == len(want) == 1
    np.testing.assert_allclose(seen[0], want[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(fused_grad, x.grad.numpy(), rtol=2e-5, atol=1e-6)
