"""ops/keywords.py: numpy's `axis=` and `keepdims=` wherever torch takes `dim=` and
`keepdim=` (functions and methods), with torch's results."""
import pytest

import jitgrad
from helpers import same_as_torch


@pytest.mark.parametrize("call", [
    # Dive into Deep Learning's softmax from scratch: sums, argmax along an axis
    lambda L: L.arange(6.0).reshape(2, 3).sum(axis=1, keepdims=True),
    lambda L: L.arange(6.0).reshape(2, 3).argmax(axis=1),
    lambda L: L.sum(L.arange(6.0).reshape(2, 3), axis=0),
    lambda L: L.arange(6.0).reshape(2, 3).mean(axis=0, keepdims=True),
    lambda L: L.arange(6.0).reshape(2, 3).max(axis=1),
    lambda L: L.max(L.arange(6.0).reshape(2, 3), axis=1, keepdims=True),
    lambda L: L.cat([L.ones(2), L.zeros(2)], axis=0),
    lambda L: L.stack([L.ones(2), L.zeros(2)], axis=1),
    lambda L: L.arange(6.0).reshape(2, 3).amax(axis=1),
    lambda L: L.arange(6.0).reshape(2, 3).var(axis=1),
    lambda L: L.arange(6.0).reshape(2, 3).cumsum(axis=1),
    lambda L: L.ones(1, 3).squeeze(axis=0),
    lambda L: L.arange(6.0).reshape(2, 3).sort(axis=0, descending=True),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_aliases_keep_gradients_and_plain_calls_unchanged():
    x = jitgrad.arange(6.0).reshape(2, 3).requires_grad_()
    x.sum(axis=1, keepdims=True).pow(2).sum().backward()
    assert x.grad.tolist() == [[6.0, 6.0, 6.0], [24.0, 24.0, 24.0]]
    assert jitgrad.Tensor.add is not None and jitgrad.multiply is jitgrad.mul
    # torch refuses this too, with its own wording
    with pytest.raises(TypeError, match="got both 'dim' and its alias 'axis': pass one"):
        jitgrad.ones(2).sum(dim=0, axis=0)
