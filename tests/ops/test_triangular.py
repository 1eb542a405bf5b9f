"""tril, triu, diagonal, diag, trace against torch beyond the registry samples:
offsets, batches, non-square matrices, integer tensors, errors."""
import pytest

import helpers
from helpers import same_as_torch


@pytest.mark.parametrize("call", [
    lambda L: L.arange(12).reshape(3, 4).tril(-1), lambda L: L.arange(12).reshape(3, 4).triu(2),
    lambda L: L.tril(L.arange(24).reshape(2, 3, 4), 1), lambda L: L.ones(2, 2).tril_(),
    lambda L: L.arange(12).reshape(3, 4).diagonal(), lambda L: L.arange(12).reshape(3, 4).diagonal(-2),
    lambda L: L.arange(12).reshape(3, 4).diagonal(5),
    lambda L: L.diagonal(L.arange(24).reshape(2, 3, 4), 1, -1, 0),
    lambda L: L.diag(L.tensor([1, 2, 3]), 1), lambda L: L.diag(L.arange(12).reshape(3, 4), -1),
    lambda L: L.arange(12.0).reshape(3, 4).trace(),
    lambda L: L.tril(L.ones(3)), lambda L: L.diag(L.ones(2, 2, 2)),
    lambda L: L.ones(2, 2).diagonal(0, 1, 1), lambda L: L.ones(2, 2, 2).trace(),
])
def test_matches_torch(call):
    same_as_torch(call)


def test_gradients_match_torch():
    for f in (lambda x: x.tril(-1) * x, lambda x: x.diagonal(1).exp(), lambda x: x.trace() * x,
              lambda x: x.diag()):
        helpers.check_torch(f, f, [(3, 4)], dtype="float64")
    helpers.check_torch(lambda v: v.diag(-1) * 2, lambda v: v.diag(-1) * 2, [(3,)], dtype="float64")


def _write_through_diagonal(L):
    m = L.zeros(3, 4)
    m.diagonal(1).add_(5)  # the diagonal is a view: the write reaches m
    b = L.zeros(2, 3, 3)
    L.diagonal(b, -1, 1, 2).fill_(2.0)
    return m, b


def _diag_copies(L):
    m = L.zeros(3, 3)
    d = L.diag(m)  # diag of a matrix is a new tensor (torch's diagonal_copy)
    d.fill_(1.0)
    return m, d


def _grad_through_a_write_to_the_diagonal(L):
    x = L.arange(9.0, dtype=L.float64).reshape(3, 3).requires_grad_()
    y = x * 2
    y.diagonal().mul_(10)
    y.sum().backward()
    return y.detach(), x.grad


@pytest.mark.parametrize("call", [_write_through_diagonal, _diag_copies,
                                  _grad_through_a_write_to_the_diagonal])
def test_diagonal_is_a_writable_view_and_diag_a_copy(call):
    same_as_torch(call)


def test_diagonal_grad_fn_names_match_torch():
    torch = helpers.require_torch()
    import jitgrad
    for L in (torch, jitgrad):
        m = L.ones(3, 3, requires_grad=True)
        names = (type(m.diagonal().grad_fn).__name__, type(L.diag(m).grad_fn).__name__)
        assert names == ("DiagonalBackward0", "DiagonalBackward0_copy"), (L, names)
    x = jitgrad.ones(3, 3)
    assert x.diagonal()._base is x and jitgrad.diag(x)._base is None
