"""torch.nn.functional's core on jitgrad ops. Losses and layer_norm are
compositions of differentiable ops, so they are differentiable twice."""
import numpy as np

from .. import _state, dtypes as _dt
from .._trace import traced
from ..ops import formulas as E
from ..ops import indexing, linalg, reduce, views
from ..ops.creation import rand, zeros_like
from ..ops.nn import log_softmax, softmax
from ..ops.registry import Arg, Sample, op
from ..tensor import Tensor

relu = E.relu
sigmoid = E.sigmoid
tanh = E.tanh

__all__ = ["relu", "sigmoid", "tanh", "softplus", "gelu", "softmax", "log_softmax", "linear",
           "mse_loss", "cross_entropy", "nll_loss", "dropout", "layer_norm"]


@op(name="nn.functional.softplus", samples=(Sample(Arg(3, 4), 2.0),))
def softplus(input, beta=1.0, threshold=20.0):
    return E._softplus(input, beta, threshold)


@op(name="nn.functional.gelu", samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), approximate="tanh")))
def gelu(input, approximate="none"):
    if approximate == "none":
        return E._gelu(input)
    if approximate == "tanh":
        return E._gelu_tanh(input)
    raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")


@op(name="nn.functional.linear",
    samples=(Sample(Arg(3, 4), Arg(2, 4), Arg(2)), Sample(Arg(5, 3, 4), Arg(2, 4))))
def linear(input, weight, bias=None):
    out = linalg.matmul(input, views.t(weight) if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


def _reduce(loss, reduction):
    if reduction == "mean":
        return reduce.mean(loss)
    if reduction == "sum":
        return reduce.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


@op(name="nn.functional.mse_loss",
    samples=(Sample(Arg(3, 4), Arg(3, 4)), Sample(Arg(3, 4), Arg(3, 4), reduction="sum")))
def mse_loss(input, target, reduction="mean"):
    if input.shape != target.shape:
        import warnings
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=2)
    d = input - target
    return _reduce(d * d, reduction)


def _nll_loss_backward(node, g):
    class_dim, index, w, reduction = node._attrs
    (x,) = node.saved()
    if reduction == "mean":
        g = g / reduce.sum(w)
    src = views.unsqueeze(-w * g, class_dim)
    grad = indexing.scatter_add_zeros(src, class_dim, views.unsqueeze(index, class_dim), x.shape)
    # torch's nll_loss backward is a function of the input too, with derivative 0
    # (NllLossBackwardBackward0): with create_graph=True the gradient is linked to
    # it, so a gradient penalty through nll_loss differentiates to 0, not an error.
    linked = _linked(grad, x)
    return (linked if linked.requires_grad else grad,)


@op("NllLossBackwardBackward0", backward=lambda node, gg: (gg, zeros_like(node._attrs[0])))
def _linked(grad, x):
    """grad's values, recorded as a function of grad and (with derivative 0) of x."""
    return _linked.op.emit(Tensor(grad._data), (grad, x), (x,))


@traced  # a jitgrad.compile replay checks each call's targets too
def _check_targets(target, n_classes, ignore_index):
    t = target._data
    if np.logical_and(t != ignore_index, np.logical_or(t < 0, t >= n_classes)).any():
        host = target.cpu()._data
        bad = host[(host != ignore_index) & ((host < 0) | (host >= n_classes))]
        raise IndexError(f"Target {int(bad[0])} is out of bounds (number of classes "
                         f"{n_classes}).")


@op(name="nn.functional.nll_loss", samples=(Sample(Arg(4, 5), Arg(4, high=5, kind="int")),))
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    if not isinstance(target, Tensor) or target._data.dtype.kind not in "iu":
        raise RuntimeError("expected scalar type Long but found "
                           f"{target.dtype.name if isinstance(target, Tensor) else type(target).__name__}"
                           " for the target of nll_loss")
    if input.ndim < 1 or input.ndim - 1 != target.ndim and not (input.ndim == 1 and target.ndim == 0):
        raise ValueError(f"Expected input batch_size ({input.shape[0] if input.ndim else 1}) to "
                         f"match target batch_size ({target.shape[0] if target.ndim else 1}).")
    class_dim = 1 if input.ndim > 1 else 0
    _check_targets(target, input.shape[class_dim], ignore_index)
    if weight is not None and weight.requires_grad:
        raise RuntimeError("The function 'nll_loss_forward' is not differentiable with respect to "
                           "argument 'weight'. This input cannot have requires_grad True. Pass "
                           "weight.detach() instead.")
    # Tensor ops (not numpy), so that a jitgrad.compile trace records how safe and w
    # come from the target: the backward reads them.
    valid = E.ne(target, ignore_index)
    safe = target * valid  # ignored entries gather class 0, then get weight 0
    w = valid.to(input.dtype)
    if weight is not None:
        w = w * indexing.index_select(weight, 0, safe.reshape(-1)).reshape(safe.shape)
    return _nll_loss(input, safe, w, class_dim, reduction)


# One NllLossBackward0 node, as torch, so that its gradient can be linked to the input (see
# _nll_loss_backward); forward AD runs through the ops of the forward (no rule here).
@op("NllLossBackward0", backward=_nll_loss_backward, saves=("self",))
def _nll_loss(input, safe, w, class_dim, reduction):
    with _state.grad_disabled():
        picked = views.squeeze(indexing.gather(input, class_dim, views.unsqueeze(safe, class_dim)),
                               class_dim)
        loss = -picked * w
        out = reduce.sum(loss) / reduce.sum(w) if reduction == "mean" else _reduce(loss, reduction)
    return _nll_loss.op.emit(out, (input,), (class_dim, safe, w, reduction), (input,))


@op(name="nn.functional.cross_entropy",
    samples=(Sample(Arg(4, 5), Arg(4, high=5, kind="int")),
             Sample(Arg(4, 5), Arg(4, high=5, kind="int"), label_smoothing=0.1),
             Sample(Arg(4, 5), Arg(4, 5, low=0.0, high=1.0, kind="const")),
             Sample(Arg(4, 5, 2), Arg(4, 2, high=5, kind="int"), reduction="sum")))
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    class_dim = 1 if input.ndim > 1 else 0
    logp = log_softmax(input, class_dim)
    if target._data.dtype.kind == "f":  # class probabilities
        if weight is not None:
            logp = logp * views.reshape(weight, [-1] + [1] * (input.ndim - class_dim - 1))
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / input.shape[class_dim]
        return _reduce(-reduce.sum(logp * target, class_dim), reduction)
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
    if not label_smoothing:
        return nll
    if weight is not None:
        raise NotImplementedError("label_smoothing together with weight is not supported; "
                                  "apply one of them")
    valid = E.ne(target, ignore_index).to(input.dtype)
    smooth = -reduce.sum(logp, class_dim) * valid
    smooth = reduce.sum(smooth) / reduce.sum(valid) if reduction == "mean" else _reduce(smooth, reduction)
    n = input.shape[class_dim]
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n)


def dropout(input, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    # rand (a recorded call): a jitgrad.compile replay draws a new mask, as eager does
    keep = E.ge(rand(input.shape, dtype=_dt.float64, device=input.device), p)
    out = input * (keep.to(input.dtype) / (1.0 - p))
    if inplace:
        return input.copy_(out)
    return out


@op(name="nn.functional.layer_norm",
    samples=(Sample(Arg(3, 4), (4,), Arg(4), Arg(4)), Sample(Arg(2, 3, 4), (3, 4))))
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if tuple(input.shape[-k:]) != normalized_shape:
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}")
    dims = tuple(range(-k, 0))
    mu = reduce.mean(input, dims, keepdim=True)
    centered = input - mu
    var = reduce.mean(centered * centered, dims, keepdim=True)
    if np.isinf(var._data).any():
        # The squares overflow (values near the float limit), though the result is
        # finite: scale each row by a constant s first, c / sqrt(mean(c^2) + eps) =
        # (c/s) / sqrt(mean((c/s)^2) + eps/s^2); s carries no gradient and changes none.
        s = reduce.amax(E.abs(centered), dims, keepdim=True).detach()
        s = E.where(E.eq(s, 0), 1.0, s)
        centered = centered / s
        var = reduce.mean(centered * centered, dims, keepdim=True) + eps / (s * s)
        out = centered * E.rsqrt(var)
    else:
        out = centered * E.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out
