"""ops/linalg.py against torch beyond the registry samples: cdist's p and errors."""
import pytest

import helpers
import jitgrad
from helpers import same_as_torch


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, float("inf")])
def test_cdist_matches_torch(p):
    helpers.check_torch(lambda a, b: jitgrad.cdist(a, b, p),
                        lambda a, b: helpers.require_torch().cdist(a, b, p), [(2, 3, 4), (2, 5, 4)],
                        dtype="float64")


def test_cdist_needs_the_same_columns():
    same_as_torch(lambda L: L.cdist(L.ones(2, 3), L.ones(2, 4)))


@pytest.mark.parametrize("call", [
    lambda L: L.addmm(L.ones(3, 2), L.ones(3, 4), L.ones(4, 2), beta=0.5, alpha=2),
    lambda L: L.tensor([float("nan")]).addmv(L.ones(1, 2), L.ones(2), beta=0),
    lambda L: L.zeros(3, 2).addmm_(L.ones(3, 4), L.ones(4, 2)),
    lambda L: L.addr(L.zeros(2, 2), L.ones(2), L.arange(2.0)),
    lambda L: L.baddbmm(L.zeros(2, 1, 1), L.ones(2, 1, 3), L.ones(2, 3, 1), alpha=0.5),
    lambda L: L.ones(2).addcmul(L.ones(2), L.full((2,), 3.0), value=2),
    lambda L: L.addcdiv(L.ones(2), L.ones(2), L.full((2,), 4.0)),
    lambda L: L.ones(2).addcdiv_(L.ones(2), L.full((2,), 4.0), value=-1),
    lambda L: L.addmm(L.ones(3, 2), L.ones(3, 4), L.ones(3, 2)),
])
def test_scaled_products_match_torch(call):
    same_as_torch(call)
