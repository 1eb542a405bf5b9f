"""torch.nn.init on jitgrad's default generator (seed it with `jitgrad.manual_seed`),
or on the `generator=` given.

Every function fills its tensor in place without recording autograd history
(as under `no_grad`), bumps its version once and returns it.

>>> import jitgrad
>>> from jitgrad.nn import init
>>> w = init.constant_(jitgrad.empty(2, 3), 0.5)
>>> w
tensor([[0.5000, 0.5000, 0.5000],
        [0.5000, 0.5000, 0.5000]])
>>> init.calculate_gain("relu")
1.4142135623730951
>>> init._calculate_fan_in_and_fan_out(w)
(3, 2)
"""
import math
import warnings

import numpy as np

from .. import _state
from ..ops.creation import rng_of
from ..ops.inplace import check_writable
from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
           "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_", "uniform", "normal", "constant", "eye",
           "dirac", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal",
           "orthogonal"]

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
               "conv_transpose3d")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch's table)."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.size(1) * receptive, tensor.size(0) * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _rng(tensor, generator, fn):
    """What `fn` draws from, once the tensor is known to be writable (a failed call
    leaves the generator where it was)."""
    _check_tensor(tensor)
    _check_writable(tensor)
    return rng_of(generator, tensor.device, fn)


def _fill(tensor, values):
    """Write `values` (an array or a scalar) into tensor's storage: no graph, one version bump."""
    _check_tensor(tensor)
    _check_writable(tensor)
    np.copyto(tensor._data, values, casting="unsafe")
    tensor._vc[0] += 1
    return tensor


def _check_tensor(tensor):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"expected a jitgrad.Tensor to initialise, got {type(tensor).__name__}")


def _check_writable(tensor):
    loc = _state.local
    prev, loc.grad_enabled = loc.grad_enabled, False
    try:
        check_writable(tensor)
    finally:
        loc.grad_enabled = prev


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with values drawn from U(a, b)."""
    return _fill(tensor, _rng(tensor, generator, "uniform_").uniform(a, b, tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with values drawn from N(mean, std**2)."""
    return _fill(tensor, _rng(tensor, generator, "normal_").normal(mean, std, tensor.shape))


def constant_(tensor, val):
    return _fill(tensor, val)


def ones_(tensor):
    return _fill(tensor, 1)


def zeros_(tensor):
    return _fill(tensor, 0)


def _empty(tensor):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015)."""
    if _empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std**2) with std = gain / sqrt(fan)."""
    if _empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std**2) with the values outside [a, b] redrawn until they fall inside."""
    rng = _rng(tensor, generator, "trunc_normal_")
    values = rng.normal(mean, std, tensor.shape)
    outside = (values < a) | (values > b)
    while outside.any():
        values[outside] = rng.normal(mean, std, int(outside.sum()))
        outside = (values < a) | (values > b)
    return _fill(tensor, values)


def eye_(tensor):
    """The identity matrix (a 2-D tensor), as in Linear layers that start as identities."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """A convolution weight (3-5 dims) that passes its input through: a 1 at the kernel
    centre of each (out, in) channel pair of each group."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = tensor.shape[0] // groups
    values = np.zeros(tuple(tensor.shape))
    centre = tuple(n // 2 for n in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, tensor.shape[1])):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, values)


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal draw (Saxe et al.,
    2013); dims past the first are flattened, the result is scaled by `gain`."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _rng(tensor, generator, "orthogonal_").normal(0.0, 1.0, (rows, cols))
    q, r = np.linalg.qr(flat.T if rows < cols else flat)
    q *= np.sign(np.diag(r))  # makes the decomposition unique, hence the draw uniform
    return _fill(tensor, (gain * (q.T if rows < cols else q)).reshape(tuple(tensor.shape)))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """N(0, std**2) in a 2-D tensor, then ceil(sparsity * rows) random rows of each
    column set to zero (Martens, 2010)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    rng = _rng(tensor, generator, "sparse_")
    values = rng.normal(0.0, std, (rows, cols))
    for col in range(cols):
        values[rng.permutation(rows)[:math.ceil(sparsity * rows)], col] = 0
    return _fill(tensor, values)


def _deprecated(new):
    """torch's pre-0.4 name of an initializer (no trailing underscore): warns, then calls it."""
    old = new.__name__[:-1]

    def initializer(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.",
                      FutureWarning, stacklevel=2)
        return new(*args, **kwargs)
    initializer.__name__ = initializer.__qualname__ = old
    initializer.__doc__ = f"Deprecated: use `{new.__name__}`."
    return initializer


uniform, normal, constant, eye, dirac, xavier_uniform, xavier_normal, kaiming_uniform, \
    kaiming_normal, orthogonal = map(_deprecated, (
        uniform_, normal_, constant_, eye_, dirac_, xavier_uniform_, xavier_normal_,
        kaiming_uniform_, kaiming_normal_, orthogonal_))
