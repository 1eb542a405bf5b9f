"""Hooks on tensors and the graph-edge API (a thin layer: the engine calls
hooks at its call sites; this module only registers them)."""
import weakref

from .._node import Node, RemovableHandle, _handle_ids, edge_of
from ..tensor import Tensor

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version"]


class GradientEdge(tuple):
    """(node, output_nr): where the gradient of a tensor enters the graph."""
    __slots__ = ()

    def __new__(cls, node, output_nr):
        return tuple.__new__(cls, (node, output_nr))

    node = property(lambda self: self[0])
    output_nr = property(lambda self: self[1])


def get_gradient_edge(tensor):
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not "
                           "require gradients")
    return GradientEdge(*edge_of(tensor))


def increment_version(tensor):
    tensor._vc[0] += 1


def _require_grad(t, what):
    if not t._rg:
        raise RuntimeError(f"cannot register a hook on a tensor that doesn't require gradient ({what})")


def register_hook(self, hook):
    """Call `hook(grad)` when the gradient of this tensor is computed; a returned
    tensor replaces the gradient."""
    _require_grad(self, "call x.requires_grad_() first")
    if self.grad_fn is None:
        if self._hooks is None:
            self._hooks = {}
        k = _handle_ids()
        self._hooks[k] = hook
        return RemovableHandle(self._hooks, k)
    node = self.grad_fn
    if node._tensor_hooks is None:
        node._tensor_hooks = {}
    hooks = node._tensor_hooks.setdefault(self.output_nr, {})
    k = _handle_ids()
    hooks[k] = hook
    return RemovableHandle(hooks, k)


def register_post_accumulate_grad_hook(self, hook):
    if not self._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if self._post_hooks is None:
        self._post_hooks = {}
    k = _handle_ids()
    self._post_hooks[k] = hook
    return RemovableHandle(self._post_hooks, k)


def retain_grad(self):
    if not self._rg:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None or self._retains_grad:
        return
    node = self.grad_fn
    if node._retain is None:
        node._retain = {}
    node._retain[self.output_nr] = weakref.ref(self)
    self._retains_grad = True


Tensor.register_hook = register_hook
Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
Tensor.retain_grad = retain_grad
