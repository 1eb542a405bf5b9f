"""Pooling layers over nn.functional: `MaxPool1d`/`MaxPool2d`, `AvgPool1d`/`AvgPool2d`,
`AdaptiveAvgPool1d`/`AdaptiveAvgPool2d`, with torch's arguments and repr."""
from ...ops.conv import as_tuple
from .. import functional as F
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d"]


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """The maximum over sliding windows of (N, C, L) or (C, L) inputs.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.MaxPool1d(2)(jitgrad.tensor([[1.0, 3.0, 2.0, 0.0]]))
    tensor([[3., 2.]])
    """

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """The maximum over sliding windows of (N, C, H, W) or (C, H, W) inputs.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> pool = nn.MaxPool2d(2)
    >>> pool
    MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    >>> pool(jitgrad.arange(16.0).reshape(1, 4, 4))
    tensor([[[ 5.,  7.],
             [13., 15.]]])
    """

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """The mean over sliding windows of (N, C, L) or (C, L) inputs.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.AvgPool1d(2)
    AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = as_tuple(kernel_size, 1, "kernel_size", "AvgPool1d")
        self.stride = as_tuple(stride if stride is not None else kernel_size, 1, "stride",
                               "AvgPool1d")
        self.padding = as_tuple(padding, 1, "padding", "AvgPool1d")
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """The mean over sliding windows of (N, C, H, W) or (C, H, W) inputs.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> pool = nn.AvgPool2d(2)
    >>> pool
    AvgPool2d(kernel_size=2, stride=2, padding=0)
    >>> pool(jitgrad.arange(16.0).reshape(1, 4, 4))
    tensor([[[ 2.5000,  4.5000],
             [10.5000, 12.5000]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptiveAvgPoolNd(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """The mean over `output_size` windows that tile (N, C, L) or (C, L) inputs.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.AdaptiveAvgPool1d(2)(jitgrad.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]]))
    tensor([[2.0000, 4.0000]])
    """

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """The mean over output_size windows that tile (N, C, H, W) or (C, H, W) inputs;
    an entry None keeps that size.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> pool = nn.AdaptiveAvgPool2d((1, 1))
    >>> pool
    AdaptiveAvgPool2d(output_size=(1, 1))
    >>> pool(jitgrad.ones(2, 3, 5, 7)).shape
    jitgrad.Size([2, 3, 1, 1])
    """

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)
