"""`CosineSimilarity` and `PairwiseDistance`."""
from .. import functional as F
from .module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """Cosine of the angle between x1 and x2 along dim.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> nn.CosineSimilarity(dim=0)(jitgrad.tensor([1.0, 0.0]), jitgrad.tensor([1.0, 1.0]))
    tensor(0.7071)
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The p-norm distance between x1 and x2 (plus eps) over their last dim."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p  # torch's attribute name
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
