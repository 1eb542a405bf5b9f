"""roll, repeat, tile against torch beyond the registry samples: forms,
integer tensors, and the errors for bad input."""
import pytest

import helpers
import jitgrad
from helpers import same_as_torch


@pytest.mark.parametrize("call", [
    lambda L: L.roll(L.arange(6).reshape(2, 3), 1),
    lambda L: L.arange(6).reshape(2, 3).roll(-4),
    lambda L: L.roll(L.arange(6).reshape(2, 3), (1, -1), (0, 1)),
    lambda L: L.roll(L.arange(6).reshape(2, 3), [2], [-1]),
    lambda L: L.arange(6).reshape(2, 3).roll((1, 2), 0),
    lambda L: L.arange(6).reshape(2, 3).roll(1, 5),
    lambda L: L.arange(3).repeat(2, 1, 2),
    lambda L: L.arange(6).reshape(2, 3).repeat((2, 1)),
    lambda L: L.arange(6).reshape(2, 3).repeat(0, 2),
    lambda L: L.arange(6).reshape(2, 3).repeat(2),
    lambda L: L.tile(L.arange(3), (2, 2)),
    lambda L: L.arange(6).reshape(2, 3).tile(2),
    lambda L: L.arange(6).reshape(2, 3).tile((2, 1, 1)),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_gradient_node_names():
    jg, th = helpers.both(lambda L: L.ones(2, 3, requires_grad=True))
    for f in (lambda x: x.roll(1, 0), lambda x: x.repeat(2, 2), lambda x: x.tile(2)):
        assert f(jg).grad_fn.name() == f(th).grad_fn.name()


def test_roll_without_dims_rolls_the_flat_tensor_with_gradients():
    helpers.check_torch(lambda x: x.roll(4) * x, lambda x: x.roll(4) * x, [(3, 4)], dtype="float64")


@pytest.mark.parametrize("call", [
    lambda L: L.arange(6).reshape(2, 3).repeat_interleave(2),
    lambda L: L.repeat_interleave(L.arange(6).reshape(2, 3), 2, dim=0),
    lambda L: L.arange(6).reshape(2, 3).repeat_interleave(L.tensor([1, 0, 2]), dim=1),
    lambda L: L.repeat_interleave(L.tensor([2, 0, 1])),
    lambda L: L.arange(6).reshape(2, 3).view_as(L.zeros(3, 2)),
    lambda L: L.arange(6).reshape(2, 3).reshape_as(L.zeros(6)),
])
def test_repeat_interleave_and_as_forms(call):
    same_as_torch(call)


def test_repeat_interleave_gradient():
    helpers.check_torch(lambda x: x.repeat_interleave(3, dim=1), lambda x: x.repeat_interleave(3, dim=1),
                        [(2, 3)], dtype="float64")


@pytest.mark.parametrize("call", [
    lambda L: L.arange(7.0).reshape(1, 7).unfold(1, 3, 2), lambda L: L.arange(5).unfold(0, 2, 1),
    lambda L: L.arange(24).reshape(2, 3, 4).unfold(1, 2, 1),
    lambda L: L.arange(5).unfold(0, 6, 1), lambda L: L.arange(5).unfold(0, 2, 0),
    lambda L: L.tensor(3.0).unfold(0, 1, 2), lambda L: L.tensor(3.0).unfold(0, 0, 1),
    lambda L: L.arange(5.0).unfold(0, 0, 2),
    lambda L: L.meshgrid(L.tensor([1, 2]), L.tensor([5, 6, 7]), indexing="ij"),
    lambda L: L.meshgrid([L.tensor([1, 2]), L.tensor([5, 6, 7]), L.tensor([0])], indexing="xy"),
    lambda L: L.meshgrid(L.tensor([1, 2]), indexing="xy"),
    lambda L: L.meshgrid(L.ones(2), indexing="yx"),
])
def test_unfold_and_meshgrid_match_torch(call):
    same_as_torch(call)


def test_meshgrid_of_a_matrix_is_refused():
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor in the tensor list but got: 2D"):
        jitgrad.meshgrid(jitgrad.ones(2, 2), indexing="ij")
