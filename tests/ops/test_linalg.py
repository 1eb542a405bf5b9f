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


@pytest.mark.parametrize("seed, shapes, atol", [
    (2, ((5, 4), (4,)), 0),
    (3, ((5,), (5, 4)), 1e-14),  # (some entries near 1e-8 are sums that nearly cancel)
], ids=["matrix @ vector", "vector @ matrix"])
def test_matrix_vector_products_backward_as_torch(seed, shapes, atol):
    """A matrix and a vector multiplied either way: torch's mv rule (transposed for
    vector @ matrix), differentiable twice; vector @ matrix's backward makes no view
    (unsqueeze, transpose) of either operand."""
    torch = helpers.require_torch()
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s) for s in shapes)
    vec = 1 if len(shapes[1]) == 1 else 0  # which operand is the vector
    v = rng.standard_normal(shapes[vec])
    res = []
    for lib in (jitgrad, torch):
        A, B = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        ga, gb = lib.autograd.grad(lib.tanh(A @ B).sum(), (A, B), create_graph=True)
        g_vec, g_mat = (gb, ga) if vec == 1 else (ga, gb)
        hv = lib.autograd.grad((g_vec * lib.tensor(v)).sum() + (g_mat * g_mat).sum(), (A, B))
        res.append([t.detach().numpy() for t in (ga, gb) + hv])
    for j, t in zip(*res):
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=atol)
    if vec == 0:
        A, B = jitgrad.tensor(a, requires_grad=True), jitgrad.tensor(b, requires_grad=True)
        ga, gb = jitgrad.autograd.grad((A @ B).sum(), (A, B), create_graph=True)
        assert ga.grad_fn.name() == "MvBackward0" and gb.grad_fn.name() == "MulBackward0"
