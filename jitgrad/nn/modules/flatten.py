"""`Flatten` and `Unflatten`: reshapes as layers, for Sequential models."""
import math

from ...tensor import wrap_dim
from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Dims start_dim..end_dim merged into one (by default all but the batch dim).

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.Flatten()
    Flatten(start_dim=1, end_dim=-1)
    >>> nn.Flatten()(jitgrad.zeros(2, 3, 4)).shape
    jitgrad.Size([2, 12])
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dim `dim` split into `unflattened_size` (one entry may be -1), Flatten's inverse.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.Unflatten(1, (2, -1))(jitgrad.zeros(3, 6)).shape
    jitgrad.Size([3, 2, 3])
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError("invalid argument type for dim parameter: jitgrad has no named "
                            "tensors, give the dim as an int")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for i, size in enumerate(unflattened_size):
            if not isinstance(size, int):
                raise TypeError("unflattened_size must be tuple of ints, but found element of "
                                f"type {type(size).__name__} at pos {i}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        shape = tuple(input.shape)
        d = wrap_dim(self.dim, len(shape))
        sizes = list(self.unflattened_size)
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1 or (-1 not in sizes and known != shape[d]) \
                or (-1 in sizes and (known == 0 or shape[d] % known)):
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size "
                               f"of dim {self.dim} ({shape[d]}) in the input tensor")
        return input.reshape(shape[:d] + tuple(sizes) + shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
