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
    lambda n: n.Softplus(beta=2.0), lambda n: n.Hardtanh(), lambda n: n.Hardtanh(-0.3, 0.6),
    lambda n: n.ReLU6(), lambda n: n.Hardswish(), lambda n: n.Hardsigmoid(), lambda n: n.Mish(),
    lambda n: n.LogSigmoid(), lambda n: n.Softsign(), lambda n: n.Tanhshrink(),
    lambda n: n.GLU(), lambda n: n.GLU(0), lambda n: n.Softmin(1), lambda n: n.SELU(),
    lambda n: n.CELU(), lambda n: n.CELU(0.7), lambda n: n.Threshold(0.2, -3.0),
    lambda n: n.Hardshrink(), lambda n: n.Softshrink(0.3), lambda n: n.Softmax2d(),
]
IDS = ["silu", "leaky", "leaky0.2", "elu", "elu0.5", "softmax1", "softmax-1", "logsoftmax1",
       "logsoftmax0", "gelu", "tanh", "sigmoid", "relu", "softplus", "hardtanh", "hardtanh2",
       "relu6", "hardswish", "hardsigmoid", "mish", "logsigmoid", "softsign", "tanhshrink", "glu",
       "glu0", "softmin", "selu", "celu", "celu0.7", "threshold", "hardshrink", "softshrink",
       "softmax2d"]


def test_prelu_per_channel_matches_torch():
    x = np.random.default_rng(4).standard_normal((4, 3, 5))
    results = []
    for lib in (jitgrad, torch):
        m = lib.nn.PReLU(3, init=0.1).double()
        xi = lib.tensor(x, requires_grad=True)
        out = m(xi)
        (out * lib.tensor(x)).sum().backward()
        results.append((out.detach().numpy(), xi.grad.numpy(), m.weight.grad.numpy(), repr(m),
                        list(m.state_dict())))
    for a, b in zip(results[0][:3], results[1][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert results[0][3:] == results[1][3:]
    with pytest.raises(RuntimeError, match="prelu: Type promoting not supported"):
        nn.PReLU()(jitgrad.zeros(2, dtype=jitgrad.float64))


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_values_gradients_and_repr_match_torch(make):
    helpers.check_torch(make(nn), make(torch.nn), [(2, 4, 6)], dtype="float64", seed=IDS)
    assert repr(make(nn)) == repr(make(torch.nn))


@pytest.mark.parametrize("name, kwargs", [
    ("SiLU", {}), ("LeakyReLU", dict(negative_slope=0.3)), ("ELU", dict(alpha=2.0)), ("ReLU", {}),
    ("Hardtanh", dict(min_val=-0.5)), ("ReLU6", {}), ("Hardswish", {}), ("Hardsigmoid", {}),
    ("Mish", {}), ("SELU", {}), ("CELU", dict(alpha=0.5)),
    ("Threshold", dict(threshold=0.1, value=-2.0))])
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
