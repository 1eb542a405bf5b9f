"""Recurrent layers: `RNN`, `LSTM`, `GRU` and their one-step cells, with torch's
parameter names, shapes, initialisation and gate order, so that checkpoints load
in either library. Each layer projects the whole input sequence at once
(x @ W_ih.T + b_ih) and then steps through time with jitgrad ops, so autograd
differentiates them like any other composition of ops."""
import math

from ...ops.creation import empty, zeros
from ...ops.join import cat, stack
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ---- one time step of each kind: (input projection, hidden projection, state) -> state ----
# The state is h, or (h, c) for the LSTM; gates come in torch's order.

def _tanh_step(xw, hw, state):
    return (xw + hw).tanh()


def _relu_step(xw, hw, state):
    return F.relu(xw + hw)


def _lstm_step(xw, hw, state):
    i, f, g, o = (xw + hw).chunk(4, -1)
    c = f.sigmoid() * state[1] + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(xw, hw, state):
    r_x, z_x, n_x = xw.chunk(3, -1)
    r_h, z_h, n_h = hw.chunk(3, -1)
    r, z = (r_x + r_h).sigmoid(), (z_x + z_h).sigmoid()
    n = (n_x + r * n_h).tanh()
    return n + z * (state - n)


# mode -> (gates per hidden unit, step)
_MODES = {"RNN_TANH": (1, _tanh_step), "RNN_RELU": (1, _relu_step), "LSTM": (4, _lstm_step),
          "GRU": (3, _gru_step)}


def _hidden(state):
    return state[0] if isinstance(state, tuple) else state


def _init_uniform(module):
    """torch's initialisation of every recurrent weight and bias: U(-k, k), k = 1/sqrt(hidden)."""
    bound = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -bound, bound)


def _rnn_mode(nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class RNNBase(Module):
    """The multi-layer, optionally bidirectional recurrence shared by RNN, LSTM and
    GRU. `input` is (L, N, H_in), or (N, L, H_in) with batch_first, or (L, H_in)
    unbatched; returns (output, h_n), with h_n = (h_n, c_n) for the LSTM."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if mode not in _MODES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or \
                not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if proj_size:
            raise ValueError("LSTM proj_size is not supported by jitgrad yet: project the "
                             "output with an nn.Linear after the LSTM instead")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        gates = _MODES[mode][0] * hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for suffix in ("", "_reverse")[:directions]:
                shapes = {"weight_ih": (gates, layer_input), "weight_hh": (gates, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                for kind, shape in shapes.items():
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(empty(shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(name)
        self.reset_parameters()

    def reset_parameters(self):
        _init_uniform(self)

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters grouped per layer and direction, as torch lists them."""
        per = 4 if self.bias else 2
        flat = self._flat_weights
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def flatten_parameters(self):
        """torch packs the weights into one buffer for cuDNN; jitgrad's kernels take
        them as they are, so there is nothing to do (torch also does nothing on the CPU)."""

    def _initial_state(self, input, hx, batch, unbatched):
        directions = 2 if self.bidirectional else 1
        expected = (self.num_layers * directions, batch, self.hidden_size)
        if hx is None:
            h = zeros(expected, dtype=input.dtype, device=input.device)
            return (h, h) if self.mode == "LSTM" else h
        if self.mode == "LSTM" and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise RuntimeError("LSTM expects hx as a tuple (h_0, c_0) of two tensors")
        parts = tuple(hx) if self.mode == "LSTM" else (hx,)
        if unbatched:
            if any(p.dim() != 2 for p in parts):
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                   f"{[p.dim() for p in parts]}-D tensor")
            parts = tuple(p.unsqueeze(1) for p in parts)
        for what, p in zip(("hidden", "cell"), parts):
            if tuple(p.shape) != expected:
                raise RuntimeError(f"Expected {what} size {expected}, got {list(p.shape)}")
        return parts if self.mode == "LSTM" else parts[0]

    def forward(self, input, hx=None):
        if not isinstance(input, Tensor):
            raise TypeError(f"{type(self).__name__} takes a padded Tensor; jitgrad has no "
                            "PackedSequence yet: pad the sequences and mask the outputs instead")
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.dim()}D tensor instead")
        if input.size(-1) != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")
        if input.dtype != self.weight_ih_l0.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({self.weight_ih_l0.dtype}). Convert input: "
                             f"input.to({self.weight_ih_l0.dtype}), or convert model: "
                             f"model.to({input.dtype})")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first
                                                  else input)
        state = self._initial_state(input, hx, x.size(1), unbatched)
        step = _MODES[self.mode][1]
        directions = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                k = layer * directions + d
                s = tuple(part[k] for part in state) if self.mode == "LSTM" else state[k]
                w = [getattr(self, f"{kind}_l{layer}{suffix}", None)
                     for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
                xw = F.linear(x, w[0], w[2])  # every time step's input projection at once
                steps = range(x.size(0) - 1, -1, -1) if d else range(x.size(0))
                hs = [None] * x.size(0)
                for t in steps:
                    s = step(xw[t], F.linear(_hidden(s), w[1], w[3]), s)
                    hs[t] = _hidden(s)
                outputs.append(stack(hs))
                finals.append(s)
            x = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        if self.mode == "LSTM":
            h_n = (stack([s[0] for s in finals]), stack([s[1] for s in finals]))
        else:
            h_n = stack(finals)
        if unbatched:
            return x.squeeze(1), (tuple(h.squeeze(1) for h in h_n) if self.mode == "LSTM"
                                  else h_n.squeeze(1))
        return (x.transpose(0, 1) if self.batch_first else x), h_n

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        for name, default in (("num_layers", 1), ("bias", True), ("batch_first", False),
                              ("dropout", 0), ("bidirectional", False)):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu).

    >>> import jitgrad
    >>> rnn = jitgrad.nn.RNN(4, 8, num_layers=2, batch_first=True)
    >>> output, h_n = rnn(jitgrad.ones(3, 5, 4))
    >>> output.shape, h_n.shape
    (jitgrad.Size([3, 5, 8]), jitgrad.Size([2, 3, 8]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(_rnn_mode(nonlinearity), input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory, gates (input, forget, cell, output) in torch's order;
    returns (output, (h_n, c_n)).

    >>> import jitgrad
    >>> lstm = jitgrad.nn.LSTM(4, 8, bidirectional=True)
    >>> output, (h_n, c_n) = lstm(jitgrad.ones(5, 3, 4))
    >>> output.shape, h_n.shape, c_n.shape
    (jitgrad.Size([5, 3, 16]), jitgrad.Size([2, 3, 8]), jitgrad.Size([2, 3, 8]))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit, gates (reset, update, new) in torch's order."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    """One time step of a recurrence: weight_ih, weight_hh, bias_ih, bias_hh as torch
    names them. `input` is (N, H_in) or unbatched (H_in)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), dtype=dtype,
                                         device=device))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), dtype=dtype,
                                         device=device))
        for name in ("bias_ih", "bias_hh"):
            if bias:
                setattr(self, name, Parameter(empty(num_chunks * hidden_size, dtype=dtype,
                                                    device=device)))
            else:
                self.register_parameter(name, None)
        self.reset_parameters()

    def reset_parameters(self):
        _init_uniform(self)

    def _step(self, input, state, step):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        if state is None:
            h = zeros((x.size(0), self.hidden_size), dtype=x.dtype, device=x.device)
            state = (h, h) if step is _lstm_step else h
        elif unbatched:
            state = tuple(s.unsqueeze(0) for s in state) if isinstance(state, tuple) \
                else state.unsqueeze(0)
        out = step(F.linear(x, self.weight_ih, self.bias_ih),
                   F.linear(_hidden(state), self.weight_hh, self.bias_hh), state)
        if unbatched:
            return tuple(o.squeeze(0) for o in out) if isinstance(out, tuple) else out.squeeze(0)
        return out

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self._kind = _rnn_mode(nonlinearity)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._step(input, hx, _MODES[self._kind][1])


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h_1, c_1) from input and (h_0, c_0)."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, _lstm_step)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, _gru_step)
