"""`Variable`, torch's deprecated alias of Tensor: old scripts call
`Variable(t, requires_grad=True)` and test `isinstance(x, Variable)`."""
import warnings

from ..ops.creation import empty
from ..tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)

    def __call__(cls, data=None, requires_grad=False, volatile=None):
        """A new leaf that shares `data`'s storage (no history), requiring grad
        if asked: what `Variable(t, requires_grad=...)` gives in torch."""
        if volatile is not None:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "jitgrad.no_grad():` instead.", UserWarning, stacklevel=2)
        if data is None:
            return empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)

    def __repr__(cls):
        return "<class 'jitgrad.autograd.Variable'>"


class Variable(metaclass=_VariableMeta):
    """Deprecated in torch, kept for old code: `Variable(t, requires_grad=True)`
    is `t.detach().requires_grad_(True)`, and every tensor is a Variable.

    >>> import jitgrad
    >>> from jitgrad.autograd import Variable
    >>> v = Variable(jitgrad.ones(2), requires_grad=True)
    >>> v, isinstance(v, Variable)
    (tensor([1., 1.], requires_grad=True), True)
    """
