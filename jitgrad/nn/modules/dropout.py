"""`Dropout`, and `Dropout1d`/`Dropout2d`/`Dropout3d`, which zero whole channels."""
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class Dropout(Module):
    """Zero each element with probability p in training mode (scaling the rest
    by 1/(1-p)); the identity in eval mode. Draws from jitgrad's generator."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Zero whole channels of (N, C, L) or (C, L) inputs with probability p."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) inputs with probability p.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> out = nn.Dropout2d(0.5)(jitgrad.ones(2, 8, 3, 3))
    >>> sorted(set(out.sum((2, 3)).flatten().tolist())) in ([0.0, 18.0], [18.0], [0.0])
    True
    """

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs with probability p."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)
