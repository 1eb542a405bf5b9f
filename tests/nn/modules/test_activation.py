"""Activation modules against torch.nn: values, gradients, in-place forms, reprs and the
implicit softmax dim."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

import helpers

torch = pytest.importorskip("torch")

MAKERS = [
    lambda n: n.SiLU(), lambda n: n.LeakyReLU(), lambda n: n.LeakyReLU(0.2),
    lambda n: n.ELU(), lambda n: n.ELU(alpha=0.5), lambda n: n.Softmax(dim=1),
    lambda n: n.Softmax(dim=-1), lambda n: n.LogSoftmax(dim=1), lambda n: n.LogSoftmax(0),
    lambda n: n.GELU(), lambda n: n.Tanh(), lambda n: n.Sigmoid(), lambda n: n.ReLU(),
    lambda n: n.Softplus(beta=2.0),
]
IDS = ["silu", "leaky", "leaky0.2", "elu", "elu0.5", "softmax1", "softmax-1", "logsoftmax1",
       "logsoftmax0", "gelu", "tanh", "sigmoid", "relu", "softplus"]


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_values_gradients_and_repr_match_torch(make):
    helpers.check_torch(make(nn), make(torch.nn), [(4, 5)], dtype="float64", seed=IDS)
    assert repr(make(nn)) == repr(make(torch.nn))


@pytest.mark.parametrize("name, kwargs", [("SiLU", {}), ("LeakyReLU", dict(negative_slope=0.3)),
                                          ("ELU", dict(alpha=2.0)), ("ReLU", {})])
def test_inplace_forms_match_torch(name, kwargs):
    x = np.random.default_rng(1).standard_normal((3, 4))
    outs = []
    for lib in (jitgrad, torch):
        leaf = lib.tensor(x, requires_grad=True)
        y = leaf * 1
        m = getattr(lib.nn, name)(inplace=True, **kwargs)
        out = m(y)
        assert out is y
        (out * lib.tensor(x)).sum().backward()
        outs.append((out.detach().numpy(), leaf.grad.numpy(), repr(m)))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-12)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-12)
    assert outs[0][2] == outs[1][2]


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 3, 4), (2, 3, 4, 5)])
def test_softmax_without_dim_picks_torchs_dim_and_warns(shape):
    x = np.random.default_rng(2).standard_normal(shape)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        a = nn.Softmax()(jitgrad.tensor(x))
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        b = nn.LogSoftmax()(jitgrad.tensor(x))
    with pytest.warns(UserWarning):
        ta, tb = torch.nn.Softmax()(torch.tensor(x)), torch.nn.LogSoftmax()(torch.tensor(x))
    np.testing.assert_allclose(a.numpy(), ta.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.numpy(), tb.numpy(), rtol=1e-12)
    assert repr(nn.Softmax()) == repr(torch.nn.Softmax()) == "Softmax(dim=None)"
