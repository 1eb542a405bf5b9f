"""torch.nn.functional on jitgrad ops: activations, embedding, normalization and losses.
Each is a composition of differentiable ops, or one node whose backward is written with
jitgrad ops (binary cross-entropy, nll_loss, embedding), so all are differentiable twice."""
import math
import warnings

import numpy as np

from .. import _state, backend, dtypes as _dt
from .._trace import traced
from ..ops import formulas as E
from ..ops import indexing, linalg, views
from ..ops import conv as _conv, pooling as _pooling
from ..ops import reduce as reductions
from ..ops import nn as _softmax_ops
from ..ops.interpolate import interpolate
from ..ops.padding import pad
from ..ops.creation import as_tensor, rand
from ..ops.inplace import inplace_elementwise
from ..ops.registry import Arg, Sample, op
from ..tensor import Tensor, on_device, wrap_dim

sigmoid = E.sigmoid
tanh = E.tanh

__all__ = ["relu", "sigmoid", "tanh", "softplus", "gelu", "silu", "leaky_relu", "elu", "selu",
           "celu", "threshold", "hardshrink", "softshrink", "hardtanh", "relu6", "hardswish",
           "hardsigmoid", "logsigmoid", "mish", "softsign", "tanhshrink", "glu", "prelu",
           "softmax", "softmin", "log_softmax", "normalize", "one_hot", "linear", "embedding",
           "batch_norm", "group_norm", "layer_norm", "dropout", "dropout1d", "dropout2d",
           "dropout3d", "scaled_dot_product_attention", "cosine_similarity", "pairwise_distance",
           "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div", "cross_entropy", "nll_loss",
           "margin_ranking_loss", "triplet_margin_loss", "cosine_embedding_loss", "conv1d",
           "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "pad", "interpolate",
           "conv_transpose1d", "conv_transpose2d"]


def _activation(fn, input, inplace, *params):
    """fn(input, *params), or written into input (torch's `inplace=True`: the op's node
    becomes input's history, and what its backward reads is kept from before the write)."""
    if inplace:
        return inplace_elementwise(fn.op, input, *params)
    return fn(input, *params)


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


def relu(input, inplace=False):
    return _activation(E.relu, input, inplace)


def silu(input, inplace=False):
    return _activation(E._silu, input, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _activation(E._leaky_relu, input, inplace, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return _activation(E._elu, input, inplace, alpha)


def selu(input, inplace=False):
    return _activation(E._selu, input, inplace)


def celu(input, alpha=1.0, inplace=False):
    return _activation(E._celu, input, inplace, alpha)


def threshold(input, threshold, value, inplace=False):
    return _activation(E._threshold, input, inplace, threshold, value)


def hardshrink(input, lambd=0.5):
    return E._hardshrink(input, lambd)


def softshrink(input, lambd=0.5):
    return E._softshrink(input, lambd)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _activation(E._hardtanh, input, inplace, min_val, max_val)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardswish(input, inplace=False):
    return _activation(E._hardswish, input, inplace)


def hardsigmoid(input, inplace=False):
    return _activation(E._hardsigmoid, input, inplace)


def logsigmoid(input):
    return E._log_sigmoid(input)


def mish(input, inplace=False):
    return _activation(E._mish, input, inplace)


@op(name="nn.functional.softsign", samples=(Sample(Arg(3, 4)),))
def softsign(input):
    return input / (E.abs(input) + 1)


@op(name="nn.functional.tanhshrink", samples=(Sample(Arg(3, 4)),))
def tanhshrink(input):
    return input - E.tanh(input)


@op(name="nn.functional.glu", samples=(Sample(Arg(3, 4)), Sample(Arg(4, 3), 0)))
def glu(input, dim=-1):
    """a * sigmoid(b), a and b the two halves of `input` along dim."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {wrap_dim(dim, input.ndim)}"
                           f" is size {input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * E.sigmoid(b)


def _prelu_backward(node, g):
    (w_shape,) = node._attrs
    x, w = node.saved()
    slope = views.reshape(w, w_shape)
    positive = x > 0
    # torch's selections: where() picks, so an inf or nan on the other side stays out
    gx = E.where(positive, g, slope * g)
    gw = E.where(positive, 0.0, x * g)
    if w.numel() > 1:  # one slope per channel: sum over every dim but the channels'
        gw = reductions.sum(gw, tuple(d for d in range(gw.ndim) if d != 1))
    else:
        gw = reductions.sum(gw)
    return gx, views.reshape(gw, tuple(w.shape))


@op("PreluKernelBackward0", backward=_prelu_backward, saves=("self", "weight"),
    name="nn.functional.prelu",
    samples=(Sample(Arg(3, 4, 2), Arg(4)), Sample(Arg(3, 4), Arg(1)), Sample(Arg(5), Arg(1))))
def prelu(input, weight):
    """max(0, x) + weight * min(0, x), one learned slope per channel (dim 1) or one for all."""
    if weight.dtype != input.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {input.dtype} and "
                           f"{weight.dtype}; convert one of them (e.g. module.to(input.dtype))")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() not in (1, channels):
        raise RuntimeError("Mismatch of parameter numbers and input channel size. Found parameter "
                           f"numbers = {weight.numel()} and channel size = {channels}.")
    w_shape = ((1, channels) + (1,) * (input.ndim - 2) if weight.numel() > 1 and input.ndim >= 2
               else (1,) * max(input.ndim, 1))
    with _state.grad_disabled():
        out = E.where(input > 0, input, views.reshape(weight, w_shape) * input)
    return prelu.op.emit(out, (input, weight), (w_shape,), (input, weight))


def _softmax_dim(name, ndim, dim, stacklevel):
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                  "include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """torch.nn.functional.softmax: `dim=None` picks torch's legacy dim, with its warning."""
    return _softmax_ops.softmax(input, _softmax_dim("softmax", input.ndim, dim, _stacklevel),
                                dtype)


@op(name="nn.functional.softmin", samples=(Sample(Arg(3, 4), 1), Sample(Arg(3, 4), 0)))
def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return _softmax_ops.softmax(-input, _softmax_dim("softmin", input.ndim, dim, _stacklevel),
                                dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _softmax_ops.log_softmax(
        input, _softmax_dim("log_softmax", input.ndim, dim, _stacklevel), dtype)


@op(name="nn.functional.normalize",
    samples=(Sample(Arg(3, 4)), Sample(Arg(3, 4), 1.0, 0), Sample(Arg(2, 3, 2), 3.0, -1)))
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(norm(input, p, dim), eps): unit vectors along dim."""
    if out is not None:
        raise NotImplementedError("normalize(out=...): jitgrad has no out= arguments; assign the "
                                  "result instead")
    return input / E.clamp(reductions.norm(input, p, dim, keepdim=True), min=eps)


def one_hot(tensor, num_classes=-1):
    """int64 tensor with a trailing dim of num_classes (max + 1 when -1), 1 at each index."""
    if not isinstance(tensor, Tensor) or tensor._data.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    host = tensor.cpu()._data
    if num_classes == -1:
        if host.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(host.max()) + 1
    if host.size and host.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if host.size and host.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = (host[..., None] == np.arange(num_classes)).astype(np.int64)
    return Tensor(on_device(out, tensor.device))


@op(name="nn.functional.linear",
    samples=(Sample(Arg(3, 4), Arg(2, 4), Arg(2)), Sample(Arg(5, 3, 4), Arg(2, 4))))
def linear(input, weight, bias=None):
    out = linalg.matmul(input, views.t(weight) if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss, reduction):
    _check_reduction(reduction)
    if reduction == "mean":
        return reductions.mean(loss)
    if reduction == "sum":
        return reductions.sum(loss)
    return loss


def _legacy_reduction(size_average, reduce, reduction, stacklevel=3):
    """torch's reading of the deprecated size_average/reduce flags, with its warning."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    out = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{out}' instead.", stacklevel=stacklevel)
    return out


def _warn_target_size(input, target):
    if input.shape != target.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=3)


def _spread(g, shape, reduction):
    """The gradient of a reduced loss, as the gradient of each of its `shape` elements."""
    if reduction == "none":
        return g
    if reduction == "mean":
        g = g / float(np.prod(shape))
    return views.expand(g, shape)


def _sum_to(grad, shape):
    """A gradient computed at the broadcast shape, summed back to an input's shape."""
    return grad if tuple(grad.shape) == tuple(shape) else views.sum_to_size(grad, shape)


def _not_differentiable(fn, name, t):
    if t is not None and t.requires_grad:
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to argument "
                           f"'{name}'. This input cannot have requires_grad True. Pass "
                           f"{name}.detach() instead.")


@op(name="nn.functional.mse_loss",
    samples=(Sample(Arg(3, 4), Arg(3, 4)), Sample(Arg(3, 4), Arg(3, 4), reduction="sum"),
             Sample(Arg(3, 4), Arg(3, 4), weight=Arg(3, 4, low=0.5, high=1.5, kind="const"))))
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    d = input - target
    # torch: the weighted form is pow(d, 2), whose slope 2 d is formed before the incoming
    # gradient multiplies it; the unweighted form scales d first (2 / n * d * g)
    return _weighted(d * d if weight is None else E.square(d), weight, reduction,
                     mean_by_weight=True)


def _weighted(loss, weight, reduction, mean_by_weight):
    """torch's optional elementwise `weight` of l1/mse/huber: the mean divides by the
    weights' sum (l1_loss, mse_loss) or by the element count (huber_loss)."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(loss.shape):
        raise ValueError("Weights and input must have the same size.")
    if reduction not in ("mean", "sum", "none"):  # torch's wording for the weighted forms
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                         "'sum'.")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return reductions.sum(loss) / reductions.sum(weight)
    return _reduce(loss, reduction)


@op(name="nn.functional.l1_loss",
    samples=(Sample(Arg(3, 4), Arg(3, 4)), Sample(Arg(3, 4), Arg(3, 4), reduction="none"),
             Sample(Arg(3, 4), Arg(3, 4), weight=Arg(3, 4, low=0.5, high=1.5, kind="const"))))
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    return _weighted(E.abs(input - target), weight, reduction, mean_by_weight=True)


@op(name="nn.functional.smooth_l1_loss",
    samples=(Sample(Arg(3, 4), Arg(3, 4)), Sample(Arg(3, 4), Arg(3, 4), beta=0.5, reduction="sum"),
             Sample(Arg(3, 4), Arg(3, 4), beta=0.0)))
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _warn_target_size(input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta == 0.0:  # torch's rule: plain l1 (the quadratic zone is empty)
        return _reduce(E.abs(input - target), reduction)
    return _reduce(E._smooth_l1_loss(input, target, beta), reduction)


@op(name="nn.functional.huber_loss",
    samples=(Sample(Arg(3, 4), Arg(3, 4)), Sample(Arg(3, 4), Arg(3, 4), delta=0.5, reduction="sum"),
             Sample(Arg(3, 4), Arg(3, 4), weight=Arg(3, 4, low=0.5, high=1.5, kind="const"))))
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _warn_target_size(input, target)
    return _weighted(E._huber_loss(input, target, delta), weight, reduction, mean_by_weight=False)


_BCE_EPS = float(np.float32(1e-12))


def _bce_backward(node, g):
    reduction, shape = node._attrs
    x, t, w = node.saved()
    g = _spread(g, shape, reduction)
    if w is not None:
        g = g * w
    # torch's rules: the input's slope divides by max(x (1 - x), eps), eps = 1e-12 rounded
    # to float32 as torch stores it; the target's slope is -logit(x), unclamped
    gx = g * (x - t) / E.clamp((1 - x) * x, min=_BCE_EPS)
    gt = -g * E.log(x / (1 - x))
    return _sum_to(gx, x.shape), _sum_to(gt, t.shape)


@op("BinaryCrossEntropyBackward0", backward=_bce_backward, saves=("self", "target", "weight"),
    name="nn.functional.binary_cross_entropy",
    samples=(Sample(Arg(3, 4, low=0.05, high=0.95), Arg(3, 4, low=0.0, high=1.0)),
             Sample(Arg(3, 4, low=0.05, high=0.95), Arg(3, 4, low=0.0, high=1.0, kind="const"),
                    Arg(4, low=0.5, high=1.5, kind="const"), reduction="sum")))
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         "size.")
    _not_differentiable("binary_cross_entropy", "weight", weight)
    for what, t in (("input", input), ("target", target)):
        if not (bool((t >= 0).all()) and bool((t <= 1).all())):  # nan fails both
            raise RuntimeError(f"all elements of {what} should be between 0 and 1")
    with _state.grad_disabled():
        # log terms clamped at -100 as torch's, so a 0 or 1 input gives a finite loss
        loss = ((target - 1) * E.clamp(E.log1p(-input), min=-100)
                - target * E.clamp(E.log(input), min=-100))
        if weight is not None:
            loss = loss * weight
        out = _reduce(loss, reduction)
    return binary_cross_entropy.op.emit(out, (input, target), (reduction, loss.shape),
                                        (input, target, weight))


def _bce_logits_backward(node, g):
    reduction, shape = node._attrs
    x, t, w, pw = node.saved()
    g = _spread(g, shape, reduction)
    if w is not None:
        g = g * w
    if pw is None:
        gx = (E.sigmoid(x) - t) * g
        gt = -x * g
    else:
        pt = pw * t
        gx = ((pt + 1 - t) * E.sigmoid(x) - pt) * g
        gt = (E._log_sigmoid(-x) - E._log_sigmoid(x) * pw) * g
    return _sum_to(gx, x.shape), _sum_to(gt, t.shape)


@op("BinaryCrossEntropyWithLogitsBackward0", backward=_bce_logits_backward,
    saves=("self", "target", "weight", "pos_weight"),
    name="nn.functional.binary_cross_entropy_with_logits",
    samples=(Sample(Arg(3, 4), Arg(3, 4, low=0.0, high=1.0)),
             Sample(Arg(3, 4), Arg(3, 4, low=0.0, high=1.0), reduction="none",
                    pos_weight=Arg(4, low=0.5, high=2.0, kind="const")),
             Sample(Arg(3, 4), Arg(3, 4, low=0.0, high=1.0, kind="const"),
                    Arg(3, 1, low=0.5, high=1.5, kind="const"), reduction="sum",
                    pos_weight=Arg(4, low=0.5, high=2.0, kind="const"))))
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        _not_differentiable("binary_cross_entropy_with_logits", name, t)
    with _state.grad_disabled():
        log_sig = E._log_sigmoid(input)
        if pos_weight is not None:
            log_sig = log_sig * ((pos_weight - 1) * target + 1)
        loss = (1 - target) * input - log_sig
        if weight is not None:
            loss = loss * weight
        out = _reduce(loss, reduction)
    return binary_cross_entropy_with_logits.op.emit(
        out, (input, target), (reduction, loss.shape), (input, target, weight, pos_weight))


@op(name="nn.functional.kl_div",
    samples=(Sample(Arg(3, 4), Arg(3, 4, low=0.05, high=1.0), reduction="batchmean"),
             Sample(Arg(3, 4), Arg(3, 4), reduction="sum", log_target=True),
             Sample(Arg(3, 4), Arg(3, 4, low=0.05, high=1.0), reduction="none")))
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || exp(input)) pointwise, as torch: input holds log-probabilities;
    `reduction="batchmean"` divides the sum by the batch size (the KL divergence)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if reduction != "batchmean":
        _check_reduction(reduction)
    if log_target:
        loss = E.exp(target) * (target - input)
    else:
        loss = E._xlogy(target, target) - target * input
    if reduction == "batchmean":
        total = reductions.sum(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def _nll_loss_backward(node, g):
    class_dim, index, w, reduction = node._attrs
    (x,) = node.saved()
    if reduction == "mean":
        g = g / reductions.sum(w)
    src = views.unsqueeze(-w * g, class_dim)
    grad = indexing.scatter_add_zeros(src, class_dim, views.unsqueeze(index, class_dim), x.shape)
    # torch's nll_loss backward is a function of the input too, with derivative 0
    # (NllLossBackwardBackward0): with create_graph=True the gradient is linked to
    # it, so a gradient penalty through nll_loss differentiates to 0, not an error.
    return (_conv.linked(grad, x, node="NllLossBackwardBackward0"),)


@traced  # one step of a jitgrad.compile replay: checks each call's targets, makes the mask
def _target_mask(target, n_classes, ignore_index, dtype):
    """(safe, w, valid) for a class-index target, after torch's IndexError for a class
    out of [0, n_classes): valid marks the entries other than ignore_index, safe is
    the target with those at class 0 (so that they can be gathered), w is valid in
    `dtype` (each entry's weight before the class weights)."""
    t = target._data
    if np.logical_and(t != ignore_index, np.logical_or(t < 0, t >= n_classes)).any():
        host = target.cpu()._data
        bad = host[(host != ignore_index) & ((host < 0) | (host >= n_classes))]
        raise IndexError(f"Target {int(bad[0])} is out of bounds (number of classes "
                         f"{n_classes}).")
    if backend.is_host(t):
        # numpy's own ops: on a batch of targets, three op dispatches cost more than the work
        valid = np.asarray(t != ignore_index)  # (an array for a 0-d target too)
        return Tensor(np.asarray(t * valid)), Tensor(valid.astype(dtype.np)), Tensor(valid)
    valid = E.ne(target, ignore_index)
    return target * valid, valid.to(dtype), valid


@op(name="nn.functional.nll_loss",
    samples=(Sample(Arg(4, 5), Arg(4, high=5, kind="int")),
             Sample(Arg(6, 5), Arg(6, high=5, kind="int"), Arg(5, low=0.5, high=1.5, kind="const"),
                    ignore_index=2),
             Sample(Arg(3, 5, 2), Arg(3, 2, high=5, kind="int"),
                    Arg(5, low=0.5, high=1.5, kind="const"), reduction="none")))
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not isinstance(target, Tensor) or target._data.dtype.kind not in "iu":
        raise RuntimeError("expected scalar type Long but found "
                           f"{target.dtype.name if isinstance(target, Tensor) else type(target).__name__}"
                           " for the target of nll_loss")
    if input.ndim < 1 or input.ndim - 1 != target.ndim and not (input.ndim == 1 and target.ndim == 0):
        raise ValueError(f"Expected input batch_size ({input.shape[0] if input.ndim else 1}) to "
                         f"match target batch_size ({target.shape[0] if target.ndim else 1}).")
    class_dim = 1 if input.ndim > 1 else 0
    if weight is not None and weight.requires_grad:
        raise RuntimeError("The function 'nll_loss_forward' is not differentiable with respect to "
                           "argument 'weight'. This input cannot have requires_grad True. Pass "
                           "weight.detach() instead.")
    # a recorded call (not numpy on the arrays here), so that a jitgrad.compile trace
    # records how safe and w come from the target: the backward reads them
    safe, w, valid = _target_mask(target, input.shape[class_dim], ignore_index, input.dtype)
    if weight is not None:
        w = w * indexing.index_select(weight, 0, safe.reshape(-1)).reshape(safe.shape)
    return _nll_loss(input, safe, w, valid, class_dim, reduction)


def _nll_loss_host(x, safe, w, valid, class_dim, reduction):
    """_nll_loss's value on numpy arrays: the same operations as the tensor ops of its
    other branch, in the same order and dtypes (so the same bits), without an op
    dispatch each, which on a batch of losses costs more than the work."""
    if x.ndim == 2:  # (batch, classes): a third of take_along_axis's time
        picked = x[np.arange(x.shape[0]), safe]
    else:
        picked = np.take_along_axis(x, np.expand_dims(safe, class_dim),
                                    class_dim).squeeze(class_dim)
    loss = -np.where(valid, picked, 0) * w
    if reduction == "none":
        return np.asarray(loss)
    if reduction == "sum":
        return np.asarray(loss.sum())
    with np.errstate(invalid="ignore", divide="ignore"):  # every target ignored: nan, as torch
        return np.asarray(loss.sum() / w.sum())


# One NllLossBackward0 node, as torch, so that its gradient can be linked to the input (see
# _nll_loss_backward); forward AD runs through the tensor ops of the forward (no rule here),
# which _nll_loss_host leaves out.
@op("NllLossBackward0", backward=_nll_loss_backward, saves=("self",))
def _nll_loss(input, safe, w, valid, class_dim, reduction):
    if backend.is_host(input._data) and _state.fw_level[0] is None:
        out = Tensor(_nll_loss_host(input._data, safe._data, w._data, valid._data, class_dim,
                                    reduction))
    else:
        with _state.grad_disabled():
            picked = views.squeeze(indexing.gather(input, class_dim,
                                                   views.unsqueeze(safe, class_dim)), class_dim)
            # ignored entries contribute 0 even where the input there is inf or nan
            loss = -E.where(valid, picked, 0.0) * w
            out = (reductions.sum(loss) / reductions.sum(w) if reduction == "mean"
                   else _reduce(loss, reduction))
    return _nll_loss.op.emit(out, (input,), (class_dim, safe, w, reduction), (input,))


@op(name="nn.functional.cross_entropy",
    samples=(Sample(Arg(4, 5), Arg(4, high=5, kind="int")),
             Sample(Arg(4, 5), Arg(4, high=5, kind="int"), label_smoothing=0.1),
             Sample(Arg(4, 5), Arg(4, 5, low=0.0, high=1.0, kind="const")),
             Sample(Arg(4, 5, 2), Arg(4, 2, high=5, kind="int"), reduction="sum"),
             Sample(Arg(6, 5), Arg(6, high=5, kind="int"), Arg(5, low=0.5, high=1.5, kind="const"),
                    ignore_index=1, label_smoothing=0.2),
             Sample(Arg(4, 5, 2), Arg(4, 2, high=5, kind="int"),
                    Arg(5, low=0.5, high=1.5, kind="const"), label_smoothing=0.1,
                    reduction="none"),
             Sample(Arg(4, 5), Arg(4, 5, low=0.0, high=1.0, kind="const"),
                    Arg(5, low=0.5, high=1.5, kind="const"), label_smoothing=0.3)))
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    class_dim = 1 if input.ndim > 1 else 0
    logp = log_softmax(input, class_dim)
    if target._data.dtype.kind == "f":  # class probabilities
        if weight is not None:
            logp = logp * views.reshape(weight, [-1] + [1] * (input.ndim - class_dim - 1))
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / input.shape[class_dim]
        return _reduce(-reductions.sum(logp * target, class_dim), reduction)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    # torch's label smoothing: the smoothing term is -sum_c w_c logp_c per sample, 0 where
    # ignored; its mean divides by the same total weight as nll_loss's
    valid = E.ne(target, ignore_index).to(input.dtype)  # recorded ops: a trace sees them
    if weight is None:
        smooth = -reductions.sum(logp, class_dim) * valid
        total = reductions.sum(valid)
    else:
        w = views.reshape(weight, [-1] + [1] * (input.ndim - class_dim - 1))
        smooth = -reductions.sum(logp * w, class_dim) * valid
        safe = target * E.ne(target, ignore_index)
        total = reductions.sum(indexing.index_select(weight, 0, safe.reshape(-1)) *
                               valid.reshape(-1))
    smooth = reductions.sum(smooth) / total if reduction == "mean" else _reduce(smooth, reduction)
    n = input.shape[class_dim]
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n)


def _dropout(input, p, training, inplace, mask_shape):
    """input times a mask of `mask_shape` (broadcast over input): 0 with probability p,
    else 1 / (1 - p); drawn from jitgrad's generator."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        # rand (a recorded call): a jitgrad.compile replay draws a new mask, as eager does
        keep = E.ge(rand(mask_shape, dtype=_dt.float64, device=input.device), p)
        out = input * (keep.to(input.dtype) / (1.0 - p))
    return input.copy_(out) if inplace else out


def dropout(input, p=0.5, training=True, inplace=False):
    return _dropout(input, p, training, inplace, tuple(input.shape))


def _feature_dropout(input, p, training, inplace, batched):
    """Whole channels zeroed: one draw per (sample, channel), or per channel if unbatched."""
    shape = tuple(input.shape) if batched else (1,) + tuple(input.shape)
    mask = shape[:2] + (1,) * (len(shape) - 2)
    return _dropout(input, p, training, inplace, mask if batched else mask[1:])


def _dropout_dims_warning(name, ndim, expected, spatial):
    warnings.warn(f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will "
                  "result in an error in a future release. To retain the behavior and silence "
                  f"this warning, please use dropout instead. Note that {name} exists to provide "
                  f"channel-wise dropout on inputs with {spatial} spatial dimensions, a channel "
                  f"dimension, and an optional batch dimension (i.e. {expected[0]}D or "
                  f"{expected[1]}D inputs).", stacklevel=3)


def dropout1d(input, p=0.5, training=True, inplace=False):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional "
                           "batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, input.ndim == 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    if input.ndim not in (3, 4):
        _dropout_dims_warning("dropout2d", input.ndim, (3, 4), 2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape (C, H, "
                      "W). To maintain the 1D channel-wise dropout behavior, please switch to "
                      "using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    if input.ndim not in (4, 5):
        _dropout_dims_warning("dropout3d", input.ndim, (4, 5), 3)
    return _feature_dropout(input, p, training, inplace, input.ndim == 5)


# ---- distances and the losses on them -------------------------------------------------------------

@op(name="nn.functional.cosine_similarity",
    samples=(Sample(Arg(3, 4), Arg(3, 4)), Sample(Arg(2, 3, 4), Arg(3, 4), dim=-1)))
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / |x1| * x2 / |x2|) along dim, each norm at least eps (torch's form: the
    clamp does not change the gradient of the norm)."""
    shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    x1, x2 = views.broadcast_to(x1, shape), views.broadcast_to(x2, shape)
    norms = []
    for x in (x1, x2):
        n = reductions.norm(x, 2, dim, keepdim=True).clone()
        with _state.grad_disabled():
            n.clamp_(min=eps)
        norms.append(n)
    return reductions.sum((x1 / norms[0]) * (x2 / norms[1]), dim)


@op(name="nn.functional.pairwise_distance",
    samples=(Sample(Arg(3, 4), Arg(3, 4)), Sample(Arg(3, 4), Arg(4), p=1.0, keepdim=True)))
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps over the last dim."""
    return reductions.norm(x1 - x2 + eps, p, max(x1.ndim, x2.ndim) - 1, keepdim=keepdim)


@op(name="nn.functional.margin_ranking_loss",
    samples=(Sample(Arg(5), Arg(5), Arg(5, kind="const"), margin=0.2),))
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce(E.clamp(-target * (input1 - input2) + margin, min=0), reduction)


@op(name="nn.functional.triplet_margin_loss",
    samples=(Sample(Arg(4, 3), Arg(4, 3), Arg(4, 3)),
             Sample(Arg(4, 3), Arg(4, 3), Arg(4, 3), margin=0.5, p=1.0, swap=True,
                    reduction="none")))
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = E.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(E.clamp(margin + d_pos - d_neg, min=0), reduction)


@op(name="nn.functional.cosine_embedding_loss",
    # targets in {0, 1} here (the -1 branch is compared with torch in tests/nn)
    samples=(Sample(Arg(4, 3), Arg(4, 3), Arg(4, high=2, kind="int")),
             Sample(Arg(4, 3), Arg(4, 3), Arg(4, high=2, kind="int"), reduction="sum")))
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos - margin) where it is -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.ndim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    d = target.ndim
    prod = reductions.sum(input1 * input2, d)
    mag1 = reductions.sum(input1 * input1, d) + 1e-12
    mag2 = reductions.sum(input2 * input2, d) + 1e-12
    cos = prod / E.sqrt(mag1 * mag2)
    loss = (E.where(E.eq(target, 1), 1 - cos, 0.0)
            + E.where(E.eq(target, -1), E.clamp(cos - margin, min=0), 0.0))
    return _reduce(loss, reduction)


# ---- attention ----------------------------------------------------------------------------------

@op(name="nn.functional.scaled_dot_product_attention",
    samples=(Sample(Arg(2, 3, 4, 5), Arg(2, 3, 6, 5), Arg(2, 3, 6, 2)),
             Sample(Arg(2, 4, 3), Arg(2, 4, 3), Arg(2, 4, 3), is_causal=True),
             Sample(Arg(3, 4), Arg(5, 4), Arg(5, 2), Arg(3, 5, kind="const"), scale=0.3)))
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value, torch's reference computation. A bool
    attn_mask says which positions take part (True), a float one is added to the scores;
    is_causal masks the upper triangle."""
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if enable_gqa:
        groups = query.shape[-3] // key.shape[-3]
        key, value = (views.flatten(views.expand(views.unsqueeze(t, -3), tuple(t.shape[:-2])
                                                 + (groups,) + tuple(t.shape[-2:])), -4, -3)
                      for t in (key, value))
    # the query is scaled before the product, as torch's kernels do: fewer overflows
    query = query * (1 / math.sqrt(query.shape[-1]) if scale is None else scale)
    scores = linalg.matmul(query, views.transpose(key, -2, -1))
    if is_causal:  # a constant of the shapes: a jitgrad.compile trace records the call
        attn_mask = as_tensor(np.tril(np.ones((query.shape[-2], key.shape[-2]), np.bool_)),
                              device=query.device)
    if attn_mask is not None:
        if attn_mask.dtype.is_floating_point:
            scores = scores + attn_mask
        else:
            scores = E.where(attn_mask, scores, -math.inf)
    weights = _softmax_ops.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return linalg.matmul(weights, value)


# ---- embedding ----------------------------------------------------------------------------------

def _embedding_backward(node, g):
    weight_shape, input, padding_idx, by_freq = node._attrs
    if padding_idx is not None or by_freq:
        g = g * views.unsqueeze(_row_grad_scale(input, weight_shape[0], padding_idx, by_freq,
                                                g._data.dtype), -1)
    return (indexing.index_put_zeros(g, weight_shape, (input,)),)


@traced  # recorded: a jitgrad.compile replay computes it from that call's indices
def _row_grad_scale(input, n, padding_idx, by_freq, dtype):
    """The factor of each picked row's gradient: 0 at `padding_idx`, and 1 / (how often
    its index occurs) with scale_grad_by_freq."""
    host = input.cpu()._data
    s = np.ones(host.shape, dtype)
    if by_freq:
        s /= np.bincount(host.reshape(-1), minlength=n)[host]
    if padding_idx is not None:
        s[host == padding_idx] = 0
    return Tensor(on_device(s, input.device))


def _embedding_jvp(b, out, inputs, attrs, tangent):
    index = views.reshape(attrs[1], (-1,))
    return views.reshape(indexing.index_select(tangent, b.dim(0), index), b.shape(out.shape))


@op("EmbeddingBackward0", backward=_embedding_backward, jvp=_embedding_jvp,
    name="nn.functional.embedding",
    # padding_idx and scale_grad_by_freq change the gradient on purpose (no gradcheck):
    # tests/nn compares them with torch
    samples=(Sample(Arg(2, 3, high=6, kind="int"), Arg(6, 4)),))
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` picked by the indices `input`: out[..., :] = weight[input[...], :].
    The row at `padding_idx` gets no gradient; `scale_grad_by_freq` divides each row's
    gradient by how often its index occurs in `input`; `max_norm` renormalizes the picked
    rows of `weight` in place first, as torch."""
    if not isinstance(input, Tensor) or input._data.dtype.kind not in "iu":
        got = input.dtype.name if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following "
                           f"scalar types: Long, Int; but got {got} instead (while checking "
                           "arguments for embedding)")
    if sparse:
        raise NotImplementedError("embedding(sparse=True): jitgrad has no sparse gradients; use "
                                  "sparse=False (the dense gradient has the same values)")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got a {weight.ndim}-D tensor")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    index = views.reshape(input, (-1,))
    host = index.cpu()._data
    if host.size and (host.min() < 0 or host.max() >= n):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(weight, np.unique(host), max_norm, norm_type)
    with _state.grad_disabled():
        out = views.reshape(indexing.index_select(weight, 0, index),
                            tuple(input.shape) + (weight.shape[1],))
    return embedding.op.emit(out, (weight,), (tuple(weight.shape), input, padding_idx,
                                              scale_grad_by_freq))


def _embedding_renorm_(weight, rows, max_norm, norm_type):
    """torch.embedding_renorm_: the rows whose norm exceeds max_norm scaled down to it."""
    with _state.grad_disabled():
        index = Tensor(on_device(rows.astype(np.int64), weight.device))
        picked = indexing.index_select(weight, 0, index)
        norms = reductions.norm(picked, norm_type, 1, keepdim=True)
        scale = E.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[index] = picked * scale


# ---- normalization ------------------------------------------------------------------------------

def _normalize(input, dims, eps):
    """(input - mean) / sqrt(var + eps) over `dims`, with the mean and the biased variance
    (keepdim)."""
    mu = reductions.mean(input, dims, keepdim=True)
    centered = input - mu
    var = reductions.mean(centered * centered, dims, keepdim=True)
    if np.isinf(var._data).any():
        # The squares overflow (values near the float limit), though the result is
        # finite: scale each row by a constant s first, c / sqrt(mean(c^2) + eps) =
        # (c/s) / sqrt(mean((c/s)^2) + eps/s^2); s carries no gradient and changes none.
        s = reductions.amax(E.abs(centered), dims, keepdim=True).detach()
        s = E.where(E.eq(s, 0), 1.0, s)
        scaled = centered / s
        out = scaled * E.rsqrt(reductions.mean(scaled * scaled, dims, keepdim=True) + eps / (s * s))
    else:
        out = centered * E.rsqrt(var + eps)
    return out, mu, var


def _check_channels(name, t, channels):
    if t is not None and t.numel() != channels:
        raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")


def _verify_batch_size(shape):
    if shape[0] * math.prod(shape[2:]) == 1:
        raise ValueError("Expected more than 1 value per channel when training, got input size "
                         f"{shape}")


@op(name="nn.functional.batch_norm",
    samples=(Sample(Arg(4, 3), None, None, Arg(3), Arg(3), True),
             Sample(Arg(2, 3, 2, 2), None, None, training=True, eps=1e-3),
             Sample(Arg(4, 3, 5), Arg(3, kind="const"), Arg(3, low=0.5, high=1.5, kind="const"),
                    Arg(3), Arg(3))))
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) over the batch and any spatial dims: with the batch's
    statistics when training (updating running_mean and running_var in place, the variance
    unbiased, as torch), with the running ones otherwise."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm expects an input of at least 2 dims (N, C, ...), got "
                         f"{input.ndim}")
    if training:
        _verify_batch_size(input.shape)
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _check_channels(name, t, channels)
    if not training:
        for name, t in (("running_mean", running_mean), ("running_var", running_var)):
            if t is None:
                raise RuntimeError(f"{name} must be defined in evaluation mode")
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if training:
        dims = (0,) + tuple(range(2, input.ndim))
        out, mean, var = _normalize(input, dims, eps)
        with _state.grad_disabled():
            if running_mean is not None:
                running_mean.copy_(running_mean * (1 - momentum)
                                   + views.reshape(mean, (channels,)) * momentum)
            if running_var is not None:
                n = input.numel() // channels
                unbiased = views.reshape(var, (channels,)) * (n / (n - 1))
                running_var.copy_(running_var * (1 - momentum) + unbiased * momentum)
    else:
        out = ((input - views.reshape(running_mean, shape))
               * E.rsqrt(views.reshape(running_var, shape) + eps))
    if weight is not None:
        out = out * views.reshape(weight, shape)
    if bias is not None:
        out = out + views.reshape(bias, shape)
    return out


@op(name="nn.functional.group_norm",
    samples=(Sample(Arg(3, 4, 5), 2, Arg(4), Arg(4)), Sample(Arg(2, 6, 2, 2), 3)))
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each sample over groups of its channels (dim 1) and any spatial dims."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, channels = input.shape[0], input.shape[1]
    if channels % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != channels):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape {list(t.shape)} and "
                               f"input of shape {list(input.shape)}")
    grouped = views.reshape(input, (n, num_groups, -1))
    out = views.reshape(_normalize(grouped, (2,), eps)[0], tuple(input.shape))
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * views.reshape(weight, shape)
    if bias is not None:
        out = out + views.reshape(bias, shape)
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
    out, _, _ = _normalize(input, tuple(range(-k, 0)), eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


# ---- convolution and pooling (jitgrad/ops/conv.py, jitgrad/ops/pooling.py) ---------------------

@op(name="nn.functional.conv1d",
    samples=(Sample(Arg(2, 3, 7), Arg(4, 3, 3), Arg(4), stride=2, padding=1),
             Sample(Arg(4, 6), Arg(2, 2, 2), dilation=2, groups=2, padding="same")))
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv.conv(input, weight, bias, stride, padding, dilation, groups, 1)


@op(name="nn.functional.conv2d",
    samples=(Sample(Arg(2, 2, 5, 5), Arg(3, 2, 3, 3), Arg(3), padding=1),
             Sample(Arg(1, 4, 6, 5), Arg(4, 2, 2, 3), stride=(2, 1), padding=(1, 0),
                    dilation=(1, 2), groups=2),
             Sample(Arg(2, 5, 4), Arg(2, 2, 3, 3), padding="same")))
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv.conv(input, weight, bias, stride, padding, dilation, groups, 2)


@op(name="nn.functional.conv_transpose1d",
    samples=(Sample(Arg(2, 2, 5), Arg(2, 3, 3), Arg(3), stride=2, padding=1, output_padding=1),
             Sample(Arg(4, 5), Arg(4, 1, 2), groups=2, dilation=2)))
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv.conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                                dilation, 1)


@op(name="nn.functional.conv_transpose2d",
    samples=(Sample(Arg(2, 2, 4, 4), Arg(2, 3, 3, 3), Arg(3), stride=2, padding=1,
                    output_padding=1),
             Sample(Arg(4, 3, 5), Arg(4, 1, 2, 3), stride=(1, 2), groups=2, dilation=(2, 1))))
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv.conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                                dilation, 2)


@op(name="nn.functional.max_pool1d",
    samples=(Sample(Arg(2, 3, 7), 2), Sample(Arg(3, 8), 3, stride=2, padding=1, ceil_mode=True)))
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _pooling.max_pool(input, kernel_size, stride, padding, dilation, ceil_mode,
                             return_indices, 1, "max_pool1d")


@op(name="nn.functional.max_pool2d",
    samples=(Sample(Arg(2, 3, 6, 5), 2),
             Sample(Arg(3, 5, 5), 3, stride=2, padding=1, ceil_mode=True),
             Sample(Arg(1, 2, 7, 6), (2, 3), stride=(1, 2), dilation=(2, 1))))
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _pooling.max_pool(input, kernel_size, stride, padding, dilation, ceil_mode,
                             return_indices, 2, "max_pool2d")


@op(name="nn.functional.avg_pool1d",
    samples=(Sample(Arg(2, 3, 7), 2),
             Sample(Arg(3, 8), 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)))
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _pooling.avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             None, 1, "avg_pool1d")


@op(name="nn.functional.avg_pool2d",
    samples=(Sample(Arg(2, 3, 6, 5), 2),
             Sample(Arg(3, 5, 5), 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
             Sample(Arg(1, 2, 5, 5), 2, divisor_override=3)))
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _pooling.avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override, 2, "avg_pool2d")


@op(name="nn.functional.adaptive_avg_pool1d", samples=(Sample(Arg(2, 3, 7), 3),))
def adaptive_avg_pool1d(input, output_size):
    return _pooling.adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


@op(name="nn.functional.adaptive_avg_pool2d",
    samples=(Sample(Arg(2, 3, 7, 5), (3, 2)), Sample(Arg(3, 4, 4), 1)))
def adaptive_avg_pool2d(input, output_size):
    return _pooling.adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")
