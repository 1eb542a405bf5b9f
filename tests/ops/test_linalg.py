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
