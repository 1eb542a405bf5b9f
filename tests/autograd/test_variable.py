"""autograd.Variable, torch's deprecated alias, against torch."""
import pytest

import jitgrad
from helpers import same_as_torch


@pytest.mark.parametrize("call", [
    lambda L: L.autograd.Variable(L.ones(2), requires_grad=True),
    lambda L: L.autograd.Variable(L.ones(2)),
    lambda L: L.autograd.Variable(),
    lambda L: L.autograd.Variable([1, 2]),
    lambda L: L.autograd.Variable(L.ones(2, dtype=L.int64), requires_grad=True),
    lambda L: isinstance(L.ones(2), L.autograd.Variable),
    lambda L: isinstance(2.0, L.autograd.Variable),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_a_new_leaf_that_shares_storage():
    x = jitgrad.ones(2, requires_grad=True) * 2
    v = jitgrad.autograd.Variable(x, requires_grad=True)
    assert v.is_leaf and v.grad_fn is None and v is not x
    (v * v).sum().backward()
    assert v.grad.tolist() == [4.0, 4.0]
    v.data[0] = 7.0
    assert x.tolist() == [7.0, 2.0]


def test_volatile_warns_that_it_has_no_effect():
    with pytest.warns(UserWarning, match="volatile was removed"):
        jitgrad.autograd.Variable(jitgrad.ones(2), volatile=True)
