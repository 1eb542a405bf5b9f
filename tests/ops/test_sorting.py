"""sort, argsort, topk against torch beyond the registry samples (which check
values and gradients): ties, NaN, descending order, 0-d tensors, errors."""
import math

import pytest

import helpers
from helpers import same_as_torch

TIES = [2.0, math.nan, 1.0, 2.0, -math.inf, 1.0]


@pytest.mark.parametrize("call", [
    lambda L: tuple(L.tensor(TIES).sort(stable=True)),
    lambda L: tuple(L.sort(L.tensor(TIES), descending=True, stable=True)),
    lambda L: L.argsort(L.tensor([[3, 1, 3], [1, 1, 0]]), dim=1, stable=True),
    lambda L: L.tensor([[3, 1, 3], [1, 1, 0]]).argsort(dim=0, descending=True, stable=True),
    lambda L: L.tensor([[3, 1, 3], [1, 1, 0]]).argsort(0, True),
    lambda L: tuple(L.tensor(3.0).sort()),
    lambda L: tuple(L.tensor([True, False, True]).sort(stable=True)),
    lambda L: tuple(L.topk(L.tensor([[1.0, 5.0, 3.0], [4.0, 0.0, 2.0]]), 2)),
    lambda L: tuple(L.tensor([[1.0, 5.0, 3.0], [4.0, 0.0, 2.0]]).topk(1, dim=0, largest=False)),
    lambda L: tuple(L.topk(L.arange(5.0), 0)),
    lambda L: L.topk(L.arange(5.0), 6),
    lambda L: L.topk(L.arange(5.0), -1),
    lambda L: L.sort(L.ones(2, 3), dim=2),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_results_have_named_fields_and_gradient_names():
    jg, th = helpers.both(lambda L: L.tensor([3.0, 1.0, 2.0], requires_grad=True))
    for a, b in ((jg.sort(), th.sort()), (jg.topk(2), th.topk(2))):
        assert a.values.grad_fn.name() == b.values.grad_fn.name()
        assert not a.indices.requires_grad and a.indices.dtype.name == "int64"


def test_gradient_goes_back_to_the_sorted_positions():
    helpers.check_torch(lambda x: x.sort(0, descending=True).values * 2,
                        lambda x: x.sort(0, descending=True).values * 2, [(4, 3)])
    helpers.check_torch(lambda x: x.topk(2, 0).values.exp(), lambda x: x.topk(2, 0).values.exp(),
                        [(4, 3)], dtype="float64")


@pytest.mark.parametrize("call", [
    lambda L: L.unique(L.tensor([3, 1, 2, 3, 1])),
    lambda L: L.tensor([3, 1, 2, 3, 1]).unique(return_inverse=True, return_counts=True),
    lambda L: L.unique(L.tensor([[1, 2], [1, 2], [0, 1]]), dim=0, return_inverse=True),
    lambda L: L.unique(L.tensor([2.0, 1.0, 2.0]), return_counts=True),
    lambda L: L.bincount(L.tensor([3, 1, 1])), lambda L: L.tensor([0, 2]).bincount(minlength=4),
    lambda L: L.bincount(L.tensor([0, 2, 2]), weights=L.tensor([0.5, 1.0, 2.0])),
    lambda L: L.bincount(L.tensor([-1])), lambda L: L.bincount(L.tensor([[1]])),
    lambda L: L.bincount(L.tensor([1.0])),
    lambda L: L.searchsorted(L.tensor([1, 3, 5]), L.tensor([0, 1, 4, 6])),
    lambda L: L.searchsorted(L.tensor([1, 3, 5]), L.tensor([[0, 1], [4, 6]]), right=True),
    lambda L: L.searchsorted(L.tensor([[1, 3], [2, 4]]), L.tensor([[2], [3]])),
    lambda L: L.searchsorted(L.tensor([1.0, 3.0]), L.tensor([3.0]), side="right", out_int32=True),
    lambda L: L.bucketize(L.tensor([0, 1, 4, 6]), L.tensor([1, 3, 5])),
    lambda L: L.bucketize(L.tensor([[0.5, 3.0]]), L.tensor([1.0, 3.0]), right=True),
])
def test_searching_and_counting_match_torch(call):
    same_as_torch(call)
