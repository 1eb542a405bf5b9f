"""Activations as modules, each calling the function of the same name in
`jitgrad.nn.functional`."""
from ...ops.creation import full
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["ReLU", "Tanh", "Sigmoid", "GELU", "Softplus", "SiLU", "LeakyReLU", "ELU", "SELU",
           "CELU", "Threshold", "Hardshrink", "Softshrink", "Hardtanh", "ReLU6", "Hardswish",
           "Hardsigmoid", "Mish", "LogSigmoid", "Softsign", "Tanhshrink", "GLU", "PReLU",
           "Softmax", "Softmax2d", "Softmin", "LogSoftmax"]


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else F.relu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class _Inplace(Module):
    """An activation with torch's `inplace` flag (printed only when set)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def _inplace_repr(self):
        return ", inplace=True" if self.inplace else ""


class SiLU(_Inplace):
    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(SiLU):
    def forward(self, input):
        return F.mish(input, inplace=self.inplace)


class Hardswish(_Inplace):  # torch prints no options
    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Hardsigmoid(_Inplace):
    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Threshold(_Inplace):
    def __init__(self, threshold, value, inplace=False):
        super().__init__(inplace)
        self.threshold = threshold
        self.value = value

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{self._inplace_repr()}"


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Hardtanh(_Inplace):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__(inplace)
        if max_val < min_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{self._inplace_repr()}"


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """LeakyReLU with a learned slope: one for all channels, or one per channel (dim 1).

    >>> from jitgrad import nn
    >>> nn.PReLU(3)
    PReLU(num_parameters=3)
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype, device=device))

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class LeakyReLU(_Inplace):
    """max(0, x) + negative_slope * min(0, x).

    >>> from jitgrad import nn
    >>> nn.LeakyReLU(0.2)
    LeakyReLU(negative_slope=0.2)
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{self._inplace_repr()}"


class ELU(_Inplace):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{self._inplace_repr()}"


class SELU(SiLU):
    def forward(self, input):
        return F.selu(input, self.inplace)


class CELU(ELU):
    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class Softmax(Module):
    """softmax along `dim` (None: torch's legacy choice, with its deprecation warning).

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.Softmax(dim=1)(jitgrad.zeros(1, 4))
    tensor([[0.2500, 0.2500, 0.2500, 0.2500]])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Softmax):
    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W) inputs."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise AssertionError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                                 "instead")
        return F.softmax(input, -3, _stacklevel=5)


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)
