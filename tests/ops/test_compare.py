"""all, any, isclose, allclose, equal against torch: values, dims and keepdim,
the function and method forms, and the errors for bad input."""
import math

import pytest

from helpers import same_as_torch

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("call", [
    lambda L, x: L.all(x), lambda L, x: x.all(1), lambda L, x: L.all(x, dim=0, keepdim=True),
    lambda L, x: L.all(x, dim=(0, 1)), lambda L, x: x.any(), lambda L, x: L.any(x, -1),
    lambda L, x: x.any(dim=(0,), keepdim=True)])
@pytest.mark.parametrize("data", [[[1, 0, 2], [3, 4, 5]], [[0.0, 0.0, 1.5], [2.0, NAN, 0.0]],
                                  [[True, True, False], [True, True, True]]])
def test_all_any(call, data):
    same_as_torch(lambda L: call(L, L.tensor(data)))


@pytest.mark.parametrize("call", [
    lambda L: L.isclose(L.tensor([1.0, 2.0, INF, -INF, NAN]), L.tensor([1.0 + 1e-7, 2.1, INF, INF, NAN])),
    lambda L: L.isclose(L.tensor([NAN, 1.0]), L.tensor([NAN, 1.0]), equal_nan=True),
    lambda L: L.tensor([[1.0], [2.0]]).isclose(L.tensor([1.0, 1.5]), rtol=0.3),
    lambda L: L.isclose(L.tensor([1, 2]), L.tensor([1, 3]), atol=1),
    lambda L: L.allclose(L.ones(3), L.ones(3) + 1e-6),
    lambda L: L.ones(3).allclose(L.ones(3) + 1e-3),
    lambda L: L.allclose(L.tensor([NAN]), L.tensor([NAN]), equal_nan=True),
    lambda L: L.equal(L.tensor([1.0, 2.0]), L.tensor([1.0, 2.0])),
    lambda L: L.tensor([1.0, NAN]).equal(L.tensor([1.0, NAN])),
    lambda L: L.equal(L.tensor([1.0, 2.0]), L.tensor([1.0, 2.0, 3.0])),
    lambda L: L.tensor([1.0, 2.0]).equal(L.tensor([1, 2])),
    lambda L: L.equal(L.ones(2, 1), L.ones(2)),
])
def test_closeness_matches_torch(call):
    same_as_torch(call)


@pytest.mark.parametrize("call", [
    lambda L: L.isclose(L.tensor([1.0, 2.0]), L.tensor([1, 2])),
    lambda L: L.allclose(L.ones(2), L.ones(3)),
    lambda L: L.allclose(L.ones(2), L.ones(2), rtol=-1),
    lambda L: L.isclose(L.ones(2), L.ones(2), atol=-0.5),
    lambda L: L.isclose(L.ones(2), 1.0),
    lambda L: L.equal(L.ones(2), [1.0, 1.0]),
])
def test_closeness_errors_match_torch(call):
    same_as_torch(call)


def test_dtype_error_says_how_to_fix():
    import jitgrad
    with pytest.raises(RuntimeError, match=r"Float did not match Long: .*\.to\(other\.dtype\)"):
        jitgrad.allclose(jitgrad.ones(2), jitgrad.ones(2, dtype=jitgrad.int64))


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit"])
@pytest.mark.parametrize("data", [[1.0, -0.0, NAN, INF, -INF, -2.0], [1, -2, 0], [True, False]])
def test_elementwise_tests(name, data):
    same_as_torch(lambda L: getattr(L, name)(L.tensor(data)))
    same_as_torch(lambda L: getattr(L.tensor(data), name)())


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops(name):
    same_as_torch(lambda L: getattr(L, name)(L.tensor([[0.0, 1.5, NAN]]), L.tensor([[1], [0]])))
    same_as_torch(lambda L: getattr(L.tensor([True, False]), name)(L.tensor([True, True])))
    same_as_torch(lambda L: getattr(L, name)(L.ones(2), L.ones(3)))


ALIAS_CALLS = {
    "arccos": lambda L: L.arccos(L.tensor([0.5, -0.2])), "arcsin": lambda L: L.tensor([0.5]).arcsin_(),
    "arctan2": lambda L: L.arctan2(L.tensor([1.0]), L.tensor([-1.0])),
    "greater_equal": lambda L: L.tensor([1.0, 2.0]).greater_equal(1.5),
    "less_equal": lambda L: L.less_equal(L.tensor([1, 2]), 1), "not_equal": lambda L: L.not_equal(L.tensor([1, 2]), 1),
    "fix": lambda L: L.fix(L.tensor([-1.5, 1.5])), "concatenate": lambda L: L.concatenate([L.ones(1), L.zeros(2)]),
    "clamp_min": lambda L: L.clamp_min(L.tensor([-1.0, 2.0]), 0.0),
    "clamp_max_": lambda L: L.tensor([-1.0, 2.0]).clamp_max_(0.0),
    "positive": lambda L: L.positive(L.tensor([-1.0])),
}


@pytest.mark.parametrize("name", sorted(ALIAS_CALLS))
def test_aliases_match_torch(name):
    same_as_torch(ALIAS_CALLS[name])


def test_every_alias_is_its_op():
    import jitgrad
    from jitgrad.ops.methods import ALIASES
    def unwrapped(fn):  # the function a jitgrad.compile trace wrapper records
        return getattr(fn, "__wrapped_op__", fn)
    for alias, name in ALIASES.items():
        if hasattr(jitgrad.Tensor, name):
            assert unwrapped(getattr(jitgrad.Tensor, alias)) is unwrapped(getattr(jitgrad.Tensor, name))
        if hasattr(jitgrad, name):
            assert getattr(jitgrad, alias) is getattr(jitgrad, name) and alias in jitgrad.__all__
