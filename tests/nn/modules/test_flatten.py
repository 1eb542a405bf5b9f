"""Flatten and Unflatten against torch.nn: shapes, gradients, reprs and errors."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("make, shape", [
    (lambda n: n.Flatten(), (2, 3, 4)),
    (lambda n: n.Flatten(0), (2, 3, 4)),
    (lambda n: n.Flatten(1, 2), (2, 3, 4, 5)),
    (lambda n: n.Flatten(-3, -2), (2, 3, 4, 5)),
    (lambda n: n.Unflatten(1, (2, 3)), (4, 6)),
    (lambda n: n.Unflatten(-1, [3, -1]), (4, 2, 6)),
    (lambda n: n.Unflatten(0, (1, 4)), (4, 6)),
])
def test_shapes_values_and_gradients_match_torch(make, shape):
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    xj, xt = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oj, ot = make(nn)(xj), make(torch.nn)(xt)
    assert tuple(oj.shape) == tuple(ot.shape)
    np.testing.assert_array_equal(oj.detach().numpy(), ot.detach().numpy())
    w = np.random.default_rng(0).standard_normal(tuple(ot.shape))
    (oj * jitgrad.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(xj.grad.numpy(), xt.grad.numpy())
    assert repr(make(nn)) == repr(make(torch.nn))


def test_in_a_sequential_model():
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 2), nn.Unflatten(1, (2, 1)))
    assert model(jitgrad.ones(5, 3, 4)).shape == (5, 2, 1)


@pytest.mark.parametrize("build, call", [
    (lambda n: n.Unflatten(1, (2, 2)), (3, 6)),
    (lambda n: n.Unflatten(1, (4, -1)), (3, 6)),
    (lambda n: n.Unflatten(3, (2, 3)), (3, 6)),
    (lambda n: n.Flatten(), (3,)),
    (lambda n: n.Unflatten(1, [2.0, 3]), None),
    (lambda n: n.Unflatten(1, 5), None),
])
def test_errors_match_torch(build, call):
    def run(lib):
        with pytest.raises(Exception) as info:
            m = build(lib.nn)
            m(lib.zeros(call))
        return info.value
    e_jg, e_th = run(jitgrad), run(torch)
    assert type(e_jg) is type(e_th)
    assert str(e_jg) == str(e_th)
