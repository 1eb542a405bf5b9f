"""`LayerNorm` and `GroupNorm`."""
from ...ops.creation import ones, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["LayerNorm", "GroupNorm"]


def _affine_parameters(module, shape, affine, bias, device, dtype):
    """Register `weight` (ones) and `bias` (zeros) of `shape`, each None where switched off,
    as every normalization layer of torch does (the names exist either way)."""
    where = dict(device=device, dtype=dtype)
    module.register_parameter("weight", Parameter(ones(shape, **where)) if affine else None)
    module.register_parameter("bias", Parameter(zeros(shape, **where)) if affine and bias
                              else None)


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    """Normalise over the trailing `normalized_shape` dims, then scale and shift.

    >>> from jitgrad import nn
    >>> nn.LayerNorm(4)
    LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalize each sample over groups of `num_channels // num_groups` channels, then
    scale and shift per channel.

    >>> from jitgrad import nn
    >>> nn.GroupNorm(2, 4)
    GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None,
                 *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, num_channels, affine, bias, device, dtype)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
