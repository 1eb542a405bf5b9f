"""floor, ceil, trunc, round, frac, nan_to_num against torch beyond the
registry samples: halves, integers, infinities and NaN, in-place forms, node
names and the zero gradient of rounding."""
import math

import pytest

import helpers
from helpers import same_as_torch

SPECIAL = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, math.inf, -math.inf, math.nan, 1e30]


@pytest.mark.parametrize("call", [
    lambda L: L.floor(L.tensor(SPECIAL)), lambda L: L.tensor(SPECIAL).ceil(),
    lambda L: L.trunc(L.tensor(SPECIAL)), lambda L: L.tensor(SPECIAL).round(),
    lambda L: L.round(L.tensor([1.2345, -2.5551, 12.5]), decimals=2),
    lambda L: L.tensor(SPECIAL).frac(), lambda L: L.nan_to_num(L.tensor(SPECIAL)),
    lambda L: L.tensor(SPECIAL).nan_to_num(nan=1.0, posinf=2.0, neginf=-2.0),
    lambda L: L.tensor([1, -2]).floor(), lambda L: L.tensor([1, -2]).round(),
    lambda L: L.tensor([3, 4]).nan_to_num(),
    lambda L: L.tensor([1, 2]).frac(),
    lambda L: L.tensor([1.7, -1.7]).floor_(), lambda L: L.tensor([1.7, -1.7]).frac_(),
])
def test_matches_torch(call):
    same_as_torch(call)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "frac", "nan_to_num"])
def test_node_names_and_gradients_match_torch(name):
    helpers.check_torch(lambda x: getattr(x, name)() * x, lambda x: getattr(x, name)() * x,
                        [(3, 4)], dtype="float64")
    jg, th = helpers.both(lambda L: getattr(L.ones(2, requires_grad=True) * 1.5, name)())
    assert jg.grad_fn.name() == th.grad_fn.name()
