"""Parameters as one flat vector and back (torch.nn.utils.parameters_to_vector /
vector_to_parameters), e.g. for line searches or second-order methods."""
from ..modules.module import _typename
from ...ops import join
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _same_device(params):
    device = None
    for p in params:
        if device is not None and p.device != device:
            raise TypeError("Found two parameters on different devices, this is currently not "
                            "supported.")
        device = p.device
        yield p


def parameters_to_vector(parameters):
    """All of `parameters` flattened and concatenated, in order (differentiable).

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> lin = nn.Linear(3, 2)
    >>> nn.utils.parameters_to_vector(lin.parameters()).shape
    jitgrad.Size([8])
    """
    return join.cat([p.reshape(-1) for p in _same_device(parameters)])


def vector_to_parameters(vec, parameters):
    """Point each parameter's data at its slice of `vec` (sharing memory with it)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected jitgrad.Tensor, but got: {_typename(vec)}")
    pointer = 0
    for p in _same_device(parameters):
        n = p.numel()
        p.data = vec[pointer:pointer + n].view(p.shape).data
        pointer += n
