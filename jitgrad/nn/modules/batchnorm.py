"""`BatchNorm1d`, `BatchNorm2d`, `BatchNorm3d`: per-channel normalization with running
statistics (buffers `running_mean`, `running_var`, `num_batches_tracked`, as torch)."""
from ...autograd.grad_mode import no_grad
from ...dtypes import int64
from ...ops.creation import ones, tensor, zeros
from .. import functional as F
from .module import Module
from .normalization import _affine_parameters, _reset_affine

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _BatchNorm(Module):
    """Training mode normalizes with the batch's statistics and updates the running ones
    (momentum: exponential average; None: cumulative average over num_batches_tracked);
    eval mode uses the running ones, unless track_running_stats=False."""

    _dims = ()  # the input ranks accepted
    _expected = ""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_parameters(self, num_features, affine, bias, device, dtype)
        where = dict(device=device, dtype=dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, **where))
            self.register_buffer("running_var", ones(num_features, **where))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _state_default(self, name):
        # checkpoints from before torch 0.4 have no num_batches_tracked: torch keeps the
        # module's own count instead of reporting the key missing
        return self.num_batches_tracked if name == "num_batches_tracked" else None

    def forward(self, input):
        if input.ndim not in self._dims:
            raise ValueError(f"expected {self._expected} input (got {input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training:
            # checked before the counter moves, so that a refused batch changes nothing
            F._verify_batch_size(input.shape)
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) inputs.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> bn = nn.BatchNorm1d(3)
    >>> bn
    BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    >>> list(bn.state_dict())
    ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    >>> _ = bn(jitgrad.tensor([[0.0, 1.0, 2.0], [2.0, 3.0, 6.0]]))
    >>> bn.running_mean, bn.num_batches_tracked
    (tensor([0.1000, 0.2000, 0.4000]), tensor(1))
    """
    _dims = (2, 3)
    _expected = "2D or 3D"


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) inputs."""
    _dims = (4,)
    _expected = "4D"


class BatchNorm3d(_BatchNorm):
    """Over (N, C, D, H, W) inputs."""
    _dims = (5,)
    _expected = "5D"
