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


_WELL = [[4.0, 1.0, -2.0], [1.0, 3.0, 0.5], [-1.0, 0.5, 5.0]]


@pytest.mark.parametrize("call", [
    lambda L: L.inverse(L.tensor(_WELL, dtype=L.float64)),
    lambda L: L.linalg.inv(L.tensor([_WELL, _WELL[::-1]])),
    lambda L: L.det(L.tensor([_WELL, _WELL[::-1]], dtype=L.float64)),
    lambda L: L.linalg.det(L.tensor([[1.0, 2.0], [2.0, 4.0]])),
    lambda L: L.tensor(_WELL).inverse().det(),
    lambda L: L.det(L.zeros(0, 0)), lambda L: L.inverse(L.zeros(2, 0, 0)),
])
def test_inverse_and_det_match_torch(call):
    """LAPACK's results, through numpy here and torch's own there: to the last bits."""
    torch = helpers.require_torch()
    want, got = call(torch), call(jitgrad)
    assert got.shape == want.shape and got.dtype.name == str(want.dtype).split(".")[-1]
    helpers.assert_same(got, want, rtol=1e-6 if want.dtype == torch.float32 else 1e-13,
                        atol=0)


@pytest.mark.parametrize("call", [
    lambda L: L.inverse(L.ones(2, 3)), lambda L: L.inverse(L.ones(3)),
    lambda L: L.det(L.ones(2, 3)), lambda L: L.inverse(L.arange(4).reshape(2, 2)),
    lambda L: L.det(L.arange(4).reshape(2, 2)),
])
def test_inverse_and_det_errors_match_torch(call):
    same_as_torch(call)


@pytest.mark.parametrize("matrices", [
    [[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [0.0, 2.0]], [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]],
    [[[1.0, 2.0], [3.0, 4.0]], [[2.0, 4.0], [1.0, 2.0]]],
])
def test_a_singular_matrix_raises_torchs_linalg_error(matrices):
    torch = helpers.require_torch()
    with pytest.raises(torch.linalg.LinAlgError) as want:
        torch.linalg.inv(torch.tensor(matrices, dtype=torch.float64))
    with pytest.raises(jitgrad.linalg.LinAlgError) as got:
        jitgrad.linalg.inv(jitgrad.tensor(matrices, dtype=jitgrad.float64))
    assert str(got.value) == str(want.value)
    assert isinstance(got.value, RuntimeError)


def _det_grad(L):
    """det's gradient at a singular and a regular matrix: torch's is 0 at the
    singular one (not its cofactors)."""
    a = L.tensor([[[1.0, 2.0], [2.0, 4.0]], [[4.0, 1.0], [1.0, 3.0]]], dtype=L.float64,
                 requires_grad=True)
    L.det(a).sum().backward()
    return a.grad.abs()  # (torch's zeros there carry signs)


def test_inverse_and_det_gradients_match_torch():
    torch = helpers.require_torch()
    for f in (lambda L: lambda a: L.inverse(a) * a, lambda L: lambda a: L.det(a) * a,
              lambda L: lambda a: L.inverse(a).det() + L.det(a.inverse() @ a)):
        helpers.check_torch(lambda a: f(jitgrad)(a + jitgrad.tensor(_WELL, dtype=a.dtype)),
                            lambda a: f(torch)(a + torch.tensor(_WELL, dtype=a.dtype)),
                            [(3, 3)], dtype="float64")
    helpers.assert_same(_det_grad(jitgrad), _det_grad(torch), rtol=1e-13, atol=0)
