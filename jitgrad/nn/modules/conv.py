"""`Conv1d` and `Conv2d`: torch's constructor arguments, parameters, initialisation,
state_dict keys and repr, over nn.functional.conv1d / conv2d."""
import math

import numpy as np

from ...ops.conv import as_tuple, padding_pairs
from ...ops.creation import empty, tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d"]

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _border_indices(n, before, after, mode):
    """Indices into a dim of n that pad it by (before, after) in `mode`."""
    i = np.arange(-before, n + after)
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i >= n, 2 * (n - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    return i % n  # circular


class _ConvNd(Module):
    _spatial = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        n, name = self._spatial, type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {set(PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.kernel_size = as_tuple(kernel_size, n, "kernel_size", name)
        self.stride = as_tuple(stride, n, "stride", name)
        self.dilation = as_tuple(dilation, n, "dilation", name)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = as_tuple(padding, n, "padding", name)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding_mode = padding_mode
        self.output_padding, self.transposed = (0,) * n, False
        self.weight = Parameter(empty((out_channels, in_channels // groups) + self.kernel_size,
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # torch's: weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)) through kaiming_uniform_, bias alike
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv(self, input, weight, bias):
        conv = F.conv1d if self._spatial == 1 else F.conv2d
        if self.padding_mode == "zeros":
            return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        pads = padding_pairs(self.padding, tuple(weight.shape), self.stride, self.dilation,
                             self._spatial)
        for axis, (before, after) in enumerate(pads):
            dim = input.dim() - self._spatial + axis
            index = _border_indices(input.shape[dim], before, after, self.padding_mode)
            input = input.index_select(dim, tensor(index, device=input.device))
        return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)

    def forward(self, input):
        return self._conv(input, self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._spatial:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._spatial:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """A 1-D convolution over (N, C, L) or (C, L) inputs, torch's arguments.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.Conv1d(2, 4, 3, padding="same")
    Conv1d(2, 4, kernel_size=(3,), stride=(1,), padding=same)
    >>> nn.Conv1d(2, 4, 3, padding="same")(jitgrad.zeros(5, 2, 7)).shape
    jitgrad.Size([5, 4, 7])
    """
    _spatial = 1


class Conv2d(_ConvNd):
    """A 2-D convolution over (N, C, H, W) or (C, H, W) inputs, torch's arguments:
    stride, padding (ints, a pair, 'same' or 'valid'), dilation, groups, bias and
    padding_mode ('zeros', 'reflect', 'replicate', 'circular').

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    >>> conv
    Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
    >>> conv.weight.shape, conv.bias.shape
    (jitgrad.Size([8, 3, 3, 3]), jitgrad.Size([8]))
    >>> conv(jitgrad.zeros(4, 3, 32, 32)).shape
    jitgrad.Size([4, 8, 16, 16])
    """
    _spatial = 2
