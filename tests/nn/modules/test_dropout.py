"""Dropout1d/2d/3d against torch.nn: which elements share a draw (whole channels), the
1/(1-p) scaling, eval mode, gradients, reprs, and torch's warnings and errors. The draws
come from jitgrad's generator, so only their structure is compared with torch."""
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("cls, shape, channel_axes", [
    ("Dropout1d", (4, 6, 5), 2), ("Dropout1d", (6, 5), 1), ("Dropout2d", (4, 6, 3, 3), 2),
    ("Dropout3d", (2, 6, 2, 2, 2), 2), ("Dropout3d", (6, 2, 2, 2), 1)])
def test_whole_channels_are_dropped_and_scaled(cls, shape, channel_axes):
    jitgrad.manual_seed(0)
    x = jitgrad.ones(*shape, dtype=jitgrad.float64, requires_grad=True)
    out = getattr(nn, cls)(0.25)(x)
    values = out.detach().numpy().reshape(shape[:channel_axes] + (-1,))
    per_channel = values.min(-1)
    assert np.array_equal(per_channel, values.max(-1))  # one draw per channel
    assert set(np.unique(per_channel)) <= {0.0, 1 / 0.75} and 0 < (per_channel == 0).mean() < 0.6
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), out.detach().numpy())


def test_eval_p0_p1_and_reprs_match_torch():
    for cls in ("Dropout1d", "Dropout2d", "Dropout3d"):
        for kwargs in (dict(), dict(p=0.2, inplace=True)):
            assert repr(getattr(nn, cls)(**kwargs)) == repr(getattr(torch.nn, cls)(**kwargs))
    x = jitgrad.ones(2, 3, 4, 4)
    assert nn.Dropout2d().eval()(x) is x and nn.Dropout2d(0.0)(x) is x
    assert nn.Dropout2d(1.0)(x).abs().sum().item() == 0.0
    y = x * 1
    assert nn.Dropout2d(0.5, inplace=True)(y) is y


@pytest.mark.parametrize("fn, shape", [("dropout1d", (4,)), ("dropout1d", (2, 3, 4, 5))])
def test_errors_match_torch(fn, shape):
    with pytest.raises(RuntimeError) as e_th:
        getattr(torch.nn.functional, fn)(torch.ones(shape))
    with pytest.raises(RuntimeError) as e_jg:
        getattr(jitgrad.nn.functional, fn)(jitgrad.ones(*shape))
    assert str(e_jg.value) == str(e_th.value)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        jitgrad.nn.functional.dropout2d(jitgrad.ones(2, 2, 2, 2), p=1.5)


@pytest.mark.parametrize("fn, shape", [("dropout2d", (2, 3, 4)), ("dropout2d", (2, 3)),
                                       ("dropout3d", (2, 3))])
def test_warnings_match_torch(fn, shape):
    messages = []
    for lib in (jitgrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(lib.nn.functional, fn)(lib.ones(*shape))
        messages.append([str(w.message) for w in caught])
    assert messages[0] == messages[1] and messages[0]
