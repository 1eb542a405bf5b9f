"""ops/out.py: torch's out= keyword on top-level functions, against torch: the
result written into out (views included) and returned, tuples for ops that return
several tensors, resizing with torch's warning, and torch's errors."""
import warnings

import numpy as np
import pytest

import helpers
import jitgrad
from helpers import same_as_torch
from jitgrad.ops.out import TAKES_OUT


def _into(L, fn, out):
    got = fn(L, out)
    return got, out


@pytest.mark.parametrize("call", [
    # "Tensors" tutorial: matmul and mul into a tensor of the right shape
    lambda L: _into(L, lambda L, o: L.matmul(L.ones(4, 3), L.ones(3, 4), out=o), L.zeros(4, 4)),
    lambda L: _into(L, lambda L, o: L.mul(L.arange(4.0), 2, out=o), L.zeros(4)),
    lambda L: _into(L, lambda L, o: L.add(L.ones(2), 1, out=o), L.empty(0)),  # empty: resized
    lambda L: _into(L, lambda L, o: L.sum(L.ones(2, 3), 1, out=o), L.zeros(2, dtype=L.float64)),
    lambda L: _into(L, lambda L, o: L.gt(L.arange(3), 1, out=o), L.zeros(3, dtype=L.bool)),
    lambda L: _into(L, lambda L, o: L.cat([L.ones(2), L.zeros(2)], out=o), L.empty(4)),
    lambda L: _into(L, lambda L, o: L.arange(5, out=o), L.empty(0)),
    lambda L: _into(L, lambda L, o: L.mul(L.ones(2), 2, out=o), L.zeros(2, dtype=L.int64)),
    lambda L: _into(L, lambda L, o: L.eq(L.ones(2), 1, out=o), L.zeros(2, dtype=L.int64)),
    lambda L: _into(L, lambda L, o: L.mul(L.ones(2, requires_grad=True), 2, out=o), L.zeros(2)),
    lambda L: _into(L, lambda L, o: L.mul(L.ones(2), 2, out=o), L.zeros(2, requires_grad=True)),
    lambda L: _into(L, lambda L, o: L.mul(L.ones(2), 2, out=o), [1.0, 2.0]),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_several_results_go_into_a_tuple():
    def call(L):
        values, indices = L.empty(0), L.empty(0, dtype=L.int64)
        got = L.max(L.tensor([[1.0, 3.0], [4.0, 2.0]]), 1, out=(values, indices))
        assert got.values is values and got[1] is indices
        return values, indices
    same_as_torch(call)


def test_out_may_be_a_view_and_its_base_sees_the_write():
    def call(L):
        base = L.zeros(2, 4)
        L.add(L.ones(2, 2), 1, out=base[:, 1:3])
        return base
    same_as_torch(call)


def test_without_grad_mode_inputs_that_require_grad_are_fine():
    def call(L):
        with L.no_grad():
            return L.mul(L.ones(2, requires_grad=True), 3, out=L.zeros(2))
    same_as_torch(call)


def test_a_filled_out_of_another_shape_is_resized_with_a_warning():
    out = jitgrad.zeros(3)
    with pytest.warns(UserWarning, match="resized since it had shape \\[3\\].*zero elements"):
        jitgrad.add(jitgrad.ones(2), 1, out=out)
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jitgrad.add(jitgrad.ones(2), 1, out=jitgrad.empty(0))


def test_the_version_counter_moves():
    out = jitgrad.zeros(2)
    before = out._version
    jitgrad.mul(jitgrad.ones(2), 2, out=out)
    assert out._version > before


def test_only_functions_torch_gives_out_have_it():
    torch = helpers.require_torch()
    for name in TAKES_OUT:
        assert hasattr(jitgrad, name), name
        assert hasattr(torch, name), name
    with pytest.raises(TypeError):
        jitgrad.reshape(jitgrad.ones(4), (2, 2), out=jitgrad.empty(0))
