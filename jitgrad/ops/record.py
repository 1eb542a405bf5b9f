"""Recording a non-elementwise op: its backward node (`record`) and its
forward-mode tangent (`jvp`). Every op outside the formula table calls these
two after computing its result."""
from .. import _state
from .._dual import set_tangent
from .._node import EMPTY_SAVED, Node, SavedTensor, edge_of
from ..tensor import Tensor


NODE_CLASSES = {}


def node_class(name, base):
    """One named Node subclass per backward name (`MulBackward0`), made on demand."""
    cls = NODE_CLASSES.get(name)
    if cls is None:
        cls = NODE_CLASSES[name] = type(name, (base,), {"__slots__": ()})
    return cls


class FunctionNode(Node):
    """Node of a non-elementwise op: `backward(node, *grads)` written with Tensor ops;
    it gets one gradient (or None) per output."""
    __slots__ = ("_bwd", "_saved", "_names", "_attrs", "_nout")

    def apply(self, grads):
        if len(grads) < self._nout:
            grads = list(grads) + [None] * (self._nout - len(grads))
        return self._bwd(self, *grads)

    def saved(self):
        return tuple(s.unpack(self) for s in self._saved)

    def _saved_tensors(self):
        return [s for s in self._saved if s is not None]

    def __getattr__(self, name):
        return saved_attribute(self, name, self._names, self._saved)


def saved_attribute(node, name, names, saved):
    for prefix, raw in (("_saved_", False), ("_raw_saved_", True)):
        if name.startswith(prefix) and name[len(prefix):] in names:
            s = saved[names.index(name[len(prefix):])]
            if type(s) is SavedTensor:
                return s if raw else s.unpack(node)
            return EMPTY_SAVED if raw and s is None else s
    raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")


def meta(t):
    return (t._data.shape, t._data.dtype, type(t._data)) if isinstance(t, Tensor) and t._rg else None


def record(name, inputs, outputs, backward, save=(), names=(), attrs=None):
    """Attach a FunctionNode to `outputs` if grad mode is on and an input needs grad.

    inputs: the tensors gradients flow to (one `next_functions` entry each);
    backward(node, *grads_per_output) returns one gradient (or None) per input."""
    if not _state.local.grad_enabled:
        return
    for t in inputs:
        if t is not None and t._rg:
            break
    else:
        return
    node = node_class(name, FunctionNode)(
        tuple(edge_of(t) if t is not None else (None, 0) for t in inputs),
        tuple(meta(t) for t in inputs))
    node._bwd = backward
    node._nout = len(outputs)
    node._names = names
    node._attrs = attrs
    for i, o in enumerate(outputs):
        o.grad_fn, o.output_nr, o._rg = node, i, True
    # after wiring: a saved output must remember that it requires grad
    node._saved = tuple(SavedTensor(s, is_output=any(s is o for o in outputs)) if s is not None
                        else None for s in save)


FW = _state.fw_level


def nb(t, x):
    """How many leading batch dims a tangent has over its primal (vectorized
    forward mode pushes a batch of tangents at once; 0 otherwise)."""
    return t._data.ndim - x._data.ndim


def jvp(outputs, inputs, rule):
    """Forward AD: give `outputs` (a Tensor or a tuple) the tangents `rule(*tangents)`
    if an input carries one (None stands for an input without). Callers test
    `FW[0] is not None` first, so forward AD costs nothing when off."""
    tangents = [t._fw if isinstance(t, Tensor) else None for t in inputs]
    for t in tangents:
        if t is not None:
            break
    else:
        return
    prev, FW[0] = FW[0], None  # tangents are plain tensors: no tangent of a tangent
    try:
        res = rule(*tangents)
    finally:
        FW[0] = prev
    if isinstance(outputs, Tensor):
        set_tangent(outputs, res)
    else:
        for o, r in zip(outputs, res):
            if r is not None:
                set_tangent(o, r)
