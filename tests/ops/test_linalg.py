"""ops/linalg.py against torch beyond the registry samples: cdist's p and errors."""
import numpy as np
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


def test_matrix_vector_backward_as_torch_mv():
    """x @ v of a matrix and a vector: torch's mv rule, differentiable twice."""
    torch = helpers.require_torch()
    rng = np.random.default_rng(2)
    a, b, v = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal(4)
    res = []
    for lib in (jitgrad, torch):
        A, B = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        ga, gb = lib.autograd.grad(lib.tanh(A @ B).sum(), (A, B), create_graph=True)
        hv = lib.autograd.grad((gb * lib.tensor(v)).sum() + (ga * ga).sum(), (A, B))
        res.append([t.detach().numpy() for t in (ga, gb) + hv])
    for j, t in zip(*res):
        np.testing.assert_allclose(j, t, rtol=1e-10)


def test_vector_matrix_backward_without_views():
    """v @ x of a vector and a matrix: the mv rule transposed, differentiable twice;
    its backward makes no view (unsqueeze, transpose) of either operand."""
    torch = helpers.require_torch()
    rng = np.random.default_rng(3)
    a, b, v = rng.standard_normal(5), rng.standard_normal((5, 4)), rng.standard_normal(5)
    res = []
    for lib in (jitgrad, torch):
        A, B = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        ga, gb = lib.autograd.grad(lib.tanh(A @ B).sum(), (A, B), create_graph=True)
        hv = lib.autograd.grad((ga * lib.tensor(v)).sum() + (gb * gb).sum(), (A, B))
        res.append([t.detach().numpy() for t in (ga, gb) + hv])
    for j, t in zip(*res):  # (some entries near 1e-8 are sums that nearly cancel)
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=1e-14)
    A, B = jitgrad.tensor(a, requires_grad=True), jitgrad.tensor(b, requires_grad=True)
    ga, gb = jitgrad.autograd.grad((A @ B).sum(), (A, B), create_graph=True)
    assert ga.grad_fn.name() == "MvBackward0" and gb.grad_fn.name() == "MulBackward0"
