"""Gradient clipping, as torch.nn.utils: `clip_grad_norm_` (= `get_total_norm` then
`clip_grads_with_norm_`) and `clip_grad_value_`. Gradients change in place; `foreach` is
accepted and ignored (each gradient is one kernel call either way)."""
import math

from ...autograd.grad_mode import no_grad
from ...ops import formulas as E
from ...ops import join, reduce
from ...ops.creation import tensor
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _tensors(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _grads(parameters):
    return [p.grad for p in _tensors(parameters) if p.grad is not None]


def _vector_norm(t, p):
    """torch.linalg.vector_norm of all elements: p > 0, inf, -inf or 0 (nonzero count)."""
    if p == 0:
        return reduce.sum(E.ne(t, 0)).to(t.dtype)
    if p == -math.inf:
        return reduce.amin(E.abs(t))
    return reduce.norm(t, p)


@no_grad()
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of all of `tensors` together, as if they were one vector.

    >>> import jitgrad
    >>> from jitgrad.nn.utils import get_total_norm
    >>> get_total_norm([jitgrad.tensor([3.0]), jitgrad.tensor([4.0])])
    tensor(5.)
    """
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    device = tensors[0].device
    norms = [_vector_norm(t, norm_type).to(device) for t in tensors]
    total = _vector_norm(join.stack(norms), norm_type)
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                           "is non-finite, so it cannot be clipped. To disable this error and "
                           "scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale every gradient by min(max_norm / (total_norm + 1e-6), 1)."""
    grads = _grads(parameters)
    if not grads:
        return
    coef = E.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device))


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of `parameters` so that their total norm is at most max_norm;
    returns the total norm before clipping.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> w = nn.Parameter(jitgrad.zeros(2))
    >>> w.grad = jitgrad.tensor([3.0, 4.0])
    >>> nn.utils.clip_grad_norm_([w], max_norm=1.0)
    tensor(5.)
    >>> w.grad
    tensor([0.6000, 0.8000])
    """
    parameters = _tensors(parameters)
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


@no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(min=-clip_value, max=clip_value)
