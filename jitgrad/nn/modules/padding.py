"""torch.nn's padding layers, made from one table: {Zero, Constant, Reflection,
Replication, Circular}Pad{1, 2, 3}d, each nn.functional.pad with its mode over
the last 1, 2 or 3 dims.

>>> import jitgrad
>>> from jitgrad import nn
>>> nn.ReflectionPad1d(2)(jitgrad.arange(4.0).reshape(1, 1, 4))
tensor([[[2., 1., 0., 1., 2., 3., 2., 1.]]])
"""
from .. import functional as F
from .module import Module


class _PadNd(Module):
    """F.pad(input, padding, mode) over the last `dims` dims; `padding` is an int
    (every side) or 2 * dims ints, from the last dim backwards."""
    dims, mode = 1, "constant"

    def __init__(self, padding):
        super().__init__()
        n = 2 * self.dims
        if isinstance(padding, int):
            padding = (padding,) * n
        if not (isinstance(padding, (tuple, list)) and len(padding) == n):
            raise ValueError(f"{type(self).__name__}: padding must be an int or {n} ints (before "
                             f"and after each of the last {self.dims} dims), got {padding!r}")
        self.padding = tuple(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


_KINDS = (("ZeroPad", _PadNd, "constant", "zeros"),
          ("ConstantPad", _ConstantPadNd, "constant", "`value`"),
          ("ReflectionPad", _PadNd, "reflect", "the input's reflection (the edge not repeated)"),
          ("ReplicationPad", _PadNd, "replicate", "copies of the edge"),
          ("CircularPad", _PadNd, "circular", "the input wrapped around"))


def _layers(dims):
    """The five padding layers of `dims` dims, in _KINDS' order."""
    return [type(f"{stem}{dims}d", (base,), {
        "dims": dims, "mode": mode, "__module__": __name__, "__qualname__": f"{stem}{dims}d",
        "__doc__": f"Pads the last {dims} dims with {what} (torch.nn.{stem}{dims}d)."})
        for stem, base, mode, what in _KINDS]


ZeroPad1d, ConstantPad1d, ReflectionPad1d, ReplicationPad1d, CircularPad1d = _layers(1)
ZeroPad2d, ConstantPad2d, ReflectionPad2d, ReplicationPad2d, CircularPad2d = _layers(2)
ZeroPad3d, ConstantPad3d, ReflectionPad3d, ReplicationPad3d, CircularPad3d = _layers(3)

__all__ = ["ZeroPad1d", "ConstantPad1d", "ReflectionPad1d", "ReplicationPad1d", "CircularPad1d",
           "ZeroPad2d", "ConstantPad2d", "ReflectionPad2d", "ReplicationPad2d", "CircularPad2d",
           "ZeroPad3d", "ConstantPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"]
