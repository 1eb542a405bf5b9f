"""torch.nn's Upsample layers: nn.functional.interpolate with fixed settings."""
from .. import functional as F
from .module import Module


class Upsample(Module):
    """Resizes the spatial dims (after batch and channel) to `size` or by
    `scale_factor` (nearest, linear, bilinear or trilinear; see F.interpolate).

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.Upsample(scale_factor=2)(jitgrad.tensor([[[1.0, 2.0]]]))
    tensor([[[1., 1., 2., 2.]]])
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        shown = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else \
            f"size={self.size!r}"
        return f"{shown}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest" (torch's older name)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True (torch's older name)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
