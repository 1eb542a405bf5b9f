"""`Conv1d`, `Conv2d`, `ConvTranspose1d` and `ConvTranspose2d`: torch's constructor
arguments, parameters, initialisation, state_dict keys and repr, over
nn.functional.conv{1,2}d and conv_transpose{1,2}d."""
import math

from ...ops.conv import as_tuple, padding_pairs
from ...ops.creation import empty
from ...tensor import Size
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    _spatial = 0
    transposed = False

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
        self.output_padding = (0,) * n  # (a transposed convolution's sets its own)
        # a transposed convolution's weight is its adjoint convolution's: (in, out / groups, ...)
        channels = (in_channels, out_channels // groups) if self.transposed else \
            (out_channels, in_channels // groups)
        self.weight = Parameter(empty(channels + self.kernel_size, dtype=dtype, device=device))
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
        widths = tuple(w for pair in reversed(pads) for w in pair)  # F.pad's order: last dim first
        return conv(F.pad(input, widths, self.padding_mode), weight, bias, self.stride, 0,
                    self.dilation, self.groups)

    def forward(self, input):
        return self._conv(input, self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._spatial:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._spatial:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._spatial:
            s += f", output_padding={self.output_padding}"
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


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device, dtype)
        self.output_padding = as_tuple(output_padding, self._spatial, "output_padding",
                                       type(self).__name__)

    def _output_padding(self, input, output_size):
        """The output padding that gives `output_size` (the last dims' sizes), as torch."""
        if output_size is None:
            return self.output_padding
        n = self._spatial
        asked = output_size
        if len(output_size) not in (n, n + 2):
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must have "
                             f"{n} or {n + 2} elements (got {len(output_size)})")
        output_size = list(output_size)[-n:]
        spatial = Size(input.shape[-n:])
        smallest = [(size - 1) * s - 2 * p + d * (k - 1) + 1 for size, s, p, d, k in zip(
            spatial, self.stride, self.padding, self.dilation, self.kernel_size)]
        largest = [m + s - 1 for m, s in zip(smallest, self.stride)]
        if any(not lo <= o <= hi for o, lo, hi in zip(output_size, smallest, largest)):
            raise ValueError(f"requested an output size of {asked}, but valid sizes range from "
                             f"{smallest} to {largest} (for an input of {spatial})")
        return tuple(o - lo for o, lo in zip(output_size, smallest))

    def forward(self, input, output_size=None):
        transpose = F.conv_transpose1d if self._spatial == 1 else F.conv_transpose2d
        return transpose(input, self.weight, self.bias, self.stride, self.padding,
                         self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """The transposed 1-D convolution (the gradient of Conv1d with respect to its
    input), torch's arguments.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.ConvTranspose1d(4, 2, 3, stride=2)(jitgrad.zeros(5, 4, 7)).shape
    jitgrad.Size([5, 2, 15])
    """
    _spatial = 1


class ConvTranspose2d(_ConvTransposeNd):
    """The transposed 2-D convolution (the gradient of Conv2d with respect to its
    input): upsampling by `stride`, torch's arguments.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> up = nn.ConvTranspose2d(8, 3, 3, stride=2, padding=1, output_padding=1)
    >>> up
    ConvTranspose2d(8, 3, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))
    >>> up.weight.shape, up(jitgrad.zeros(4, 8, 16, 16)).shape
    (jitgrad.Size([8, 3, 3, 3]), jitgrad.Size([4, 3, 32, 32]))
    """
    _spatial = 2
