"""Forward-mode AD: dual tensors carry a tangent that every op propagates.

Elementwise ops derive their JVP from the formula table (sum of tangent_i *
partial_i, one generated kernel); every other op has its rule next to its
backward (see `jvp` calls in ops/). Tangents live on the tensors; leaving a
`dual_level` drops them all.
"""
import collections

from .. import _state
from .._dual import drop_tangents, set_tangent
from ..tensor import Tensor

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])


def enter_dual_level():
    if _state.fw_level[0] is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _state.fw_level[0] = 0
    return 0


def exit_dual_level(*, level=None):
    if _state.fw_level[0] is None:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    drop_tangents()
    _state.fw_level[0] = None


class dual_level:
    """Context for forward AD: inside, make_dual creates dual tensors; on exit
    every tangent of the level is dropped.

    >>> import jitgrad
    >>> import jitgrad.autograd.forward_ad as fwAD
    >>> x = jitgrad.tensor([0.0, 1.0])
    >>> with fwAD.dual_level():
    ...     y = fwAD.make_dual(x, jitgrad.ones(2)).sin()
    ...     fwAD.unpack_dual(y).tangent
    tensor([1.0000, 0.5403])
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


def _check_level(level, who):
    if _state.fw_level[0] is None:
        raise RuntimeError(f"{who} requires an active dual level: use it inside "
                           "`with jitgrad.autograd.forward_ad.dual_level():`")
    if level is not None and level != _state.fw_level[0]:
        raise RuntimeError(f"{who}: level {level} is not the active dual level "
                           f"({_state.fw_level[0]})")


def make_dual(tensor, tangent, *, level=None):
    """A tensor whose primal is `tensor` (a view of it) and whose tangent is `tangent`
    (kept as is, as torch: any floating dtype; in-place ops on the dual write into it)."""
    if _state.fw_level[0] is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make "
                           "sure to enter_dual_level() first (`with "
                           "jitgrad.autograd.forward_ad.dual_level():`).")
    _check_level(level, "make_dual")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual expects a Tensor primal and a Tensor tangent")
    for role, t in (("primal", tensor), ("tangent", tangent)):
        if t._data.dtype.kind not in "fc":
            raise ValueError(f"Expected {role} to be floating point or complex, but got: {t.dtype}")
    if tangent._data.shape != tensor._data.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the original "
            f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the "
            f"given forward gradient is of size {list(tangent.shape)}.")
    if tangent._fw is not None:
        raise RuntimeError(
            f"Setting a forward grad that itself has a forward gradient at the same level "
            f"{_state.fw_level[0]} is not supported. Pass the tangent's primal instead: "
            "`unpack_dual(tangent).primal`.")
    out = tensor.view(tensor.shape)
    set_tangent(out, tangent)
    return out


def make_batched_dual(tensor, tangents):
    """A dual tensor whose tangent carries leading batch dims: `tangents[b]` is the
    b-th tangent. Every op propagates the whole batch at once (vectorized
    forward mode, used by functional.jacobian(vectorize=True))."""
    _check_level(None, "make_batched_dual")
    n = tensor._data.ndim
    if tangents._data.shape[tangents._data.ndim - n:] != tensor._data.shape or \
            tangents._data.ndim <= n:
        raise RuntimeError(f"batched tangents must have shape [batch, *{list(tensor.shape)}], "
                           f"got {list(tangents.shape)}")
    out = tensor.view(tensor.shape)
    set_tangent(out, tangents)
    return out


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of a dual tensor; tangent is None for a plain tensor."""
    if _state.fw_level[0] is None:
        return UnpackedDualTensor(tensor, None)
    _check_level(level, "unpack_dual")
    tangent = tensor._fw
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    prev, _state.fw_level[0] = _state.fw_level[0], None
    try:
        primal = tensor.view(tensor.shape)
    finally:
        _state.fw_level[0] = prev
    return UnpackedDualTensor(primal, tangent)
