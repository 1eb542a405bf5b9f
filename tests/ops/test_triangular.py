"""tril, triu, diagonal, diag, trace against torch beyond the registry samples:
offsets, batches, non-square matrices, integer tensors, errors."""
import pytest

import helpers
from helpers import same_as_torch


@pytest.mark.parametrize("call", [
    lambda L: L.arange(12).reshape(3, 4).tril(-1), lambda L: L.arange(12).reshape(3, 4).triu(2),
    lambda L: L.tril(L.arange(24).reshape(2, 3, 4), 1), lambda L: L.ones(2, 2).tril_(),
    lambda L: L.arange(12).reshape(3, 4).diagonal(), lambda L: L.arange(12).reshape(3, 4).diagonal(-2),
    lambda L: L.arange(12).reshape(3, 4).diagonal(5),
    lambda L: L.diagonal(L.arange(24).reshape(2, 3, 4), 1, -1, 0),
    lambda L: L.diag(L.tensor([1, 2, 3]), 1), lambda L: L.diag(L.arange(12).reshape(3, 4), -1),
    lambda L: L.arange(12.0).reshape(3, 4).trace(),
    lambda L: L.tril(L.ones(3)), lambda L: L.diag(L.ones(2, 2, 2)),
    lambda L: L.ones(2, 2).diagonal(0, 1, 1), lambda L: L.ones(2, 2, 2).trace(),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_gradients_match_torch():
    for f in (lambda x: x.tril(-1) * x, lambda x: x.diagonal(1).exp(), lambda x: x.trace() * x,
              lambda x: x.diag()):
        helpers.check_torch(f, f, [(3, 4)], dtype="float64")
    helpers.check_torch(lambda v: v.diag(-1) * 2, lambda v: v.diag(-1) * 2, [(3,)], dtype="float64")
