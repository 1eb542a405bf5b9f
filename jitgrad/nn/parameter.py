"""`Parameter`: a Tensor that a Module registers as one of its parameters.

>>> import jitgrad
>>> w = jitgrad.nn.Parameter(jitgrad.ones(2))
>>> w
Parameter containing:
tensor([1., 1.], requires_grad=True)
>>> isinstance(w, jitgrad.Tensor), w.is_leaf
(True, True)
>>> (w * 2).sum().backward()
>>> w.grad
tensor([2., 2.])
"""
from ..ops.creation import empty
from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor that requires grad (by default) and that `Module.__setattr__`
    registers. It shares storage and version counter with `data`, as torch's
    does; results of ops on it are plain Tensors."""
    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter(data): data must be a Tensor, got {type(data).__name__}; wrap a numpy "
                "array with jitgrad.from_numpy(array) first")
        Tensor.__init__(self, data._data)
        self._vc = data._vc  # same storage, same version counter (torch detaches `data`)
        self._inference = data._inference
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self._data, self._rg))


def _rebuild_parameter(data, requires_grad):
    return Parameter(Tensor(data), requires_grad)
