"""parameters_to_vector and vector_to_parameters against torch.nn.utils."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


def test_round_trip_matches_torch():
    results = []
    for lib in (jitgrad, torch):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 2, bias=False))
        vec = lib.nn.utils.parameters_to_vector(model.parameters())
        assert vec.shape == (3 * 4 + 4 + 4 * 2,) and vec.grad_fn is not None
        new = lib.arange(float(vec.numel()))
        lib.nn.utils.vector_to_parameters(new, model.parameters())
        new.mul_(2)  # the parameters share the vector's memory
        results.append([p.detach().numpy().copy() for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_vector_is_differentiable():
    w = nn.Parameter(jitgrad.ones(2, 2))
    b = nn.Parameter(jitgrad.zeros(3))
    v = nn.utils.parameters_to_vector([w, b])
    (v * jitgrad.arange(7.0)).sum().backward()
    assert w.grad.tolist() == [[0.0, 1.0], [2.0, 3.0]] and b.grad.tolist() == [4.0, 5.0, 6.0]


def test_errors():
    with pytest.raises(TypeError, match="expected jitgrad.Tensor, but got: list"):
        nn.utils.vector_to_parameters([1.0], [nn.Parameter(jitgrad.ones(1))])
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        torch.nn.utils.vector_to_parameters([1.0], [torch.nn.Parameter(torch.ones(1))])
