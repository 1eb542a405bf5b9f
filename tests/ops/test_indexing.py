"""ops/indexing.py against torch beyond the registry samples: scatter and
scatter_add (the value form, in-place variants, repeated indices, errors; and
where jitgrad differs: a src larger than the index gets its gradient), nonzero
and where(condition)."""
import numpy as np
import pytest

import helpers
import jitgrad
from helpers import same_as_torch


@pytest.mark.parametrize("call", [
    lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0, 1]]), 2.0),
    lambda L: L.scatter(L.zeros(2, 3), 0, L.tensor([[1, 0, 1]]), L.arange(6.0).reshape(2, 3)),
    lambda L: L.zeros(2, 3).scatter(1, L.tensor([[2], [0]]), value=7.0),
    lambda L: L.zeros(2, 3, dtype=L.int64).scatter(1, L.tensor([[2], [0]]), 4),
    lambda L: L.zeros(2, 3).scatter_(1, L.tensor([[0, 1]]), 2.0),
    lambda L: L.zeros(3).scatter_add(0, L.tensor([0, 0, 2]), L.ones(3)),
    lambda L: L.scatter_add(L.ones(2, 3), 1, L.tensor([[0, 0], [2, 2]]), L.ones(2, 2)),
    lambda L: L.zeros(3).scatter_add_(0, L.tensor([0, 0, 2]), L.ones(3)),
    lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0.0, 1.0]]), 2.0),
    lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0, 5]]), 2.0),
    lambda L: L.zeros(2, 3).scatter(1, L.tensor([0, 1]), 2.0),
    lambda L: L.zeros(2, 3).scatter(1, L.tensor([[0, 1]]), L.ones(2, 3, dtype=L.float64)),
    lambda L: L.zeros(2, 3).scatter_add(1, L.tensor([[0, 1]]), 1.0),
    # a 0-d index into a 1-d tensor: the one-hot idiom of torch's data tutorial
    lambda L: L.zeros(10, dtype=L.float).scatter_(0, L.tensor(3), value=1),
    lambda L: L.zeros(4).scatter(0, L.tensor(1), L.tensor(2.0)),
    lambda L: L.zeros(4).scatter_add(0, L.tensor(3), L.tensor(2.0)),
    lambda L: L.zeros(2, 3).scatter(1, L.tensor(1), 5.0),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_node_names_match_torch():
    jg, th = helpers.both(lambda L: (L.ones(3, 4, requires_grad=True), L.ones(1, 4, requires_grad=True),
                                     L.tensor([[0, 1, 2, 0]])))
    for f in (lambda x, s, i: x.scatter(0, i, s), lambda x, s, i: x.scatter(0, i, 2.0),
              lambda x, s, i: x.scatter_add(0, i, s)):
        assert f(*jg).grad_fn.name() == f(*th).grad_fn.name()


def test_repeated_indices_add_up_with_gradients():
    index = [[0, 0, 2, 0], [1, 0, 0, 2]]
    helpers.check_torch(lambda x, s: x.scatter_add(0, jitgrad.tensor(index), s),
                        lambda x, s: x.scatter_add(0, helpers.require_torch().tensor(index), s),
                        [(3, 4), (2, 4)], dtype="float64")


def test_src_larger_than_the_index_gets_zeros_past_it():
    # torch raises "invalid gradient at index 1" here; the part of src that is not
    # scattered simply gets no gradient
    src = jitgrad.ones(2, 4, requires_grad=True)
    x = jitgrad.zeros(3, 4, requires_grad=True)
    out = x.scatter(0, jitgrad.tensor([[0, 1, 2, 0]]), src)
    (out * jitgrad.arange(12.0).reshape(3, 4)).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [[0, 5, 10, 3], [0, 0, 0, 0]])
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 2, 0], [4, 0, 6, 7], [8, 9, 0, 11]])


def test_needs_src_or_value_once():
    with pytest.raises(TypeError, match="give the values as src"):
        jitgrad.zeros(2).scatter(0, jitgrad.tensor([0]))


@pytest.mark.parametrize("call", [
    lambda L: L.tensor([[0, 1], [2, 0]]).nonzero(),
    lambda L: L.nonzero(L.tensor([[0.0, 1.5], [2.0, 0.0]]), as_tuple=True),
    lambda L: L.tensor(5).nonzero(), lambda L: L.tensor(0).nonzero(as_tuple=True),
    lambda L: L.zeros(2, 0).nonzero(), lambda L: L.argwhere(L.tensor([True, False, True])),
    lambda L: L.where(L.tensor([[1, 0], [1, 1]]) > 0),
    lambda L: L.where(L.tensor([1.0, -1.0]) > 0, L.tensor([1.0, 2.0]), 0.0),
    lambda L: L.where(L.tensor([1.0, -1.0]) > 0, L.tensor([1.0, 2.0])),
])
def test_nonzero_and_where_match_torch(call):
    same_as_torch(call)


@pytest.mark.parametrize("call", [
    lambda L: L.arange(6).reshape(2, 3).masked_select(L.tensor([True, False, True])),
    lambda L: L.masked_select(L.arange(3.0), L.tensor([[True], [False]])),
    lambda L: L.arange(6).masked_select(L.arange(6)),
])
def test_masked_select_matches_torch(call):
    same_as_torch(call)


def test_masked_select_gradient():
    mask = [[True, False, True, False]] * 3
    helpers.check_torch(lambda x: x.masked_select(jitgrad.tensor(mask)) * 2,
                        lambda x: x.masked_select(helpers.require_torch().tensor(mask)) * 2,
                        [(3, 4)], dtype="float64")


@pytest.mark.parametrize("call", [
    lambda L: L.zeros(3, 4).index_add(0, L.tensor([0, 0, 2]), L.ones(3, 4), alpha=2),
    lambda L: L.zeros(2, 2).index_add_(1, L.tensor([1]), L.ones(2, 1)),
    lambda L: L.zeros(3, 4).index_fill(1, L.tensor([1, 3]), 5.0),
    lambda L: L.zeros(3, 4).index_fill_(0, L.tensor([2]), -1.0),
    lambda L: L.zeros(3, 4).index_add(0, L.tensor([[0]]), L.ones(1, 4)),
    lambda L: L.zeros(3, 4).masked_scatter(L.tensor([True, False, True, False]),
                                           L.arange(12.0).reshape(3, 4)),
    lambda L: L.zeros(2, 2).masked_scatter_(L.tensor([[True, False], [True, True]]), L.arange(5.0)),
    lambda L: L.zeros(2, 2).masked_scatter(L.ones(2, 2, dtype=L.bool), L.arange(3.0)),
    lambda L: L.zeros(5, 3).fill_diagonal_(1.0, wrap=True), lambda L: L.zeros(5, 3).fill_diagonal_(2.0),
    lambda L: L.zeros(2, 4).fill_diagonal_(1.0, wrap=True), lambda L: L.zeros(3, 3, 3).fill_diagonal_(2.0),
    lambda L: L.zeros(2, 3, 3).fill_diagonal_(2.0),
])
def test_index_add_fill_and_masked_scatter_match_torch(call):
    same_as_torch(call)


@pytest.mark.parametrize("key", [
    lambda L: (range(3), L.tensor([2, 0, 1])),  # "What is torch.nn really?"'s nll
    lambda L: range(1, 3),
    lambda L: (slice(None), range(0, 4, 2)),
    lambda L: [],
])
def test_any_sequence_of_ints_indexes(key):
    """torch takes a range (or an empty list) as an index, as it takes a list."""
    same_as_torch(lambda L: L.arange(12.0).reshape(3, 4)[key(L)])
    helpers.check_torch(lambda x: x[key(jitgrad)], lambda x: x[key(helpers.require_torch())],
                        [(3, 4)], dtype="float64")
