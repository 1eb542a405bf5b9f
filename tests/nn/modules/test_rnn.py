"""nn/modules/rnn.py against torch: RNN, LSTM and GRU (layers, directions,
batch_first, unbatched input, initial states) and their cells, with the same
weights: outputs, final states and every gradient; parameter names, init range,
reprs and errors."""
import numpy as np
import pytest

import helpers
import jitgrad
from jitgrad import nn

KINDS = ["RNN", "LSTM", "GRU"]


def _pair(kind, *args, **kwargs):
    """The jitgrad layer and torch's, torch's weights copied into jitgrad's."""
    torch = helpers.require_torch()
    th = getattr(torch.nn, kind)(*args, **kwargs).double()
    jg = getattr(nn, kind)(*args, **kwargs).double()
    jg.load_state_dict({k: jitgrad.tensor(v.detach().numpy()) for k, v in th.state_dict().items()})
    return jg, th


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _check(jg, th, shape, hx_shapes=None, seed=0):
    torch = helpers.require_torch()
    rng = helpers.rng_for("rnn", shape, seed)
    x = rng.standard_normal(shape)
    hx = [rng.standard_normal(s) for s in hx_shapes or ()]
    jx = jitgrad.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    jh = [jitgrad.tensor(h, requires_grad=True) for h in hx]
    th_h = [torch.tensor(h, requires_grad=True) for h in hx]
    pack = (lambda hs: tuple(hs) if len(hs) == 2 else hs[0]) if hx else (lambda hs: None)
    jout, tout = _flat(jg(jx, pack(jh))), _flat(th(tx, pack(th_h)))
    for a, b in zip(jout, tout):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = [np.cos(np.arange(o.numel())).reshape(tuple(o.shape)) for o in tout]
    sum(((o * jitgrad.tensor(w)).sum() for o, w in zip(jout, weights)), jitgrad.tensor(0.0)).backward()
    sum((o * torch.tensor(w)).sum() for o, w in zip(tout, weights)).backward()
    for a, b in [(jx, tx), *zip(jh, th_h), *zip(jg.parameters(), th.parameters())]:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("config", [
    dict(),
    dict(num_layers=2, bidirectional=True),
    dict(batch_first=True, bias=False),
    dict(num_layers=3, batch_first=True),
])
def test_layers_match_torch(kind, config):
    jg, th = _pair(kind, 3, 5, **config)
    shape = (2, 4, 3) if config.get("batch_first") else (4, 2, 3)
    _check(jg, th, shape)
    states = config.get("num_layers", 1) * (2 if config.get("bidirectional") else 1)
    _check(jg, th, shape, [(states, 2, 5)] * (2 if kind == "LSTM" else 1), seed=1)


@pytest.mark.parametrize("kind", KINDS)
def test_unbatched_input_matches_torch(kind):
    jg, th = _pair(kind, 3, 4, num_layers=2)
    _check(jg, th, (5, 3))
    _check(jg, th, (5, 3), [(2, 4)] * (2 if kind == "LSTM" else 1), seed=2)


def test_relu_rnn_matches_torch():
    jg, th = _pair("RNN", 3, 4, nonlinearity="relu", bidirectional=True)
    _check(jg, th, (6, 2, 3))


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(kind):
    jg, th = _pair(kind, 3, 4)
    _check(jg, th, (2, 3))
    _check(jg, th, (2, 3), [(2, 4)] * (2 if kind == "LSTMCell" else 1), seed=3)
    _check(jg, th, (3,))


def test_names_init_and_repr_match_torch():
    torch = helpers.require_torch()
    for args, kwargs in [((2, 3), dict(num_layers=2, bidirectional=True)),
                         ((2, 3), dict(bias=False, batch_first=True, dropout=0.5, num_layers=2))]:
        for kind in KINDS:
            jg, th = getattr(nn, kind)(*args, **kwargs), getattr(torch.nn, kind)(*args, **kwargs)
            assert [n for n, _ in jg.named_parameters()] == [n for n, _ in th.named_parameters()]
            assert [tuple(p.shape) for p in jg.parameters()] == [tuple(p.shape) for p in th.parameters()]
            assert repr(jg) == repr(th)
            assert max(p.abs().max().item() for p in jg.parameters()) <= 1 / np.sqrt(3)
    for kind, kwargs in [("RNNCell", dict(nonlinearity="relu")), ("LSTMCell", dict(bias=False)),
                         ("GRUCell", {})]:
        assert repr(getattr(nn, kind)(2, 3, **kwargs)) == repr(getattr(torch.nn, kind)(2, 3, **kwargs))
    assert len(nn.LSTM(2, 3, num_layers=2).all_weights) == 2


def test_lstm_state_may_be_a_list():
    # yunjey's language model detaches the states into a list
    lstm, x = nn.LSTM(3, 4), jitgrad.ones(2, 5, 3)
    state = [jitgrad.zeros(1, 5, 4), jitgrad.ones(1, 5, 4)]
    assert jitgrad.equal(lstm(x, state)[0], lstm(x, tuple(state))[0])


def test_dropout_between_layers_only_while_training():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5).eval()
    x = jitgrad.ones(5, 2, 3)
    assert jitgrad.equal(lstm(x)[0], lstm(x)[0])


def test_errors_say_what_to_fix():
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 5, 4\), got \[1, 5, 4\]"):
        lstm(jitgrad.ones(2, 5, 3), (jitgrad.zeros(1, 5, 4), jitgrad.zeros(2, 5, 4)))
    with pytest.raises(RuntimeError, match="LSTM expects hx as a tuple"):
        lstm(jitgrad.ones(2, 5, 3), jitgrad.zeros(2, 5, 4))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. "
                                           "Expected 3, got 2"):
        lstm(jitgrad.ones(2, 5, 2))
    with pytest.raises(ValueError, match="does not match weight dtype.*convert model"):
        lstm(jitgrad.ones(2, 5, 3, dtype=jitgrad.float64))
    with pytest.raises(ValueError, match="proj_size is not supported.*nn.Linear"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(TypeError, match="pad the sequences"):
        nn.GRU(3, 4)([jitgrad.ones(2, 3)])
