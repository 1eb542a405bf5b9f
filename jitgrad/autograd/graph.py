"""Hooks on tensors and the graph-edge API (a thin layer: the engine calls
hooks at its call sites; this module only registers them)."""
import threading
import weakref

from .. import _state
from .._trace import graph_break
from .._node import (GradientEdge, Node, RemovableHandle, _handle_ids, current_graph_task,
                     gradient_edge, node_hooks, will_execute)
from ..tensor import Tensor, on_device

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version",
           "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "register_multi_grad_hook", "allow_mutation_on_saved_tensors"]


def get_gradient_edge(tensor):
    """The GradientEdge of `tensor`: pass it among the outputs or inputs of grad and
    backward to differentiate from or to it, even after `tensor` itself is gone."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not "
                           "require gradients")
    return gradient_edge(tensor)


def increment_version(tensor):
    tensor._vc[0] += 1


def _require_grad(t, what):
    if not t._rg:
        raise RuntimeError(f"cannot register a hook on a tensor that doesn't require gradient ({what})")


def register_hook(self, hook):
    """Call `hook(grad)` when the gradient of this tensor is computed; a returned
    tensor replaces the gradient."""
    graph_break("Tensor.register_hook: hooks run Python on each backward")
    _require_grad(self, "call x.requires_grad_() first")
    if self.grad_fn is None:
        if self._hooks is None:
            self._hooks = {}
        k = _handle_ids()
        self._hooks[k] = hook
        return RemovableHandle(self._hooks, k)
    hooks = node_hooks(self.grad_fn, "_tensor_hooks").setdefault(self.output_nr, {})
    k = _handle_ids()
    hooks[k] = hook
    return RemovableHandle(hooks, k)


def register_post_accumulate_grad_hook(self, hook):
    graph_break("Tensor.register_post_accumulate_grad_hook: hooks run Python on each backward")
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
    graph_break("Tensor.retain_grad: stores a gradient on each backward")
    node_hooks(self.grad_fn, "_retain")[self.output_nr] = weakref.ref(self)
    self._retains_grad = True


Tensor.register_hook = register_hook
Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
Tensor.retain_grad = retain_grad


# ---- saved-tensor hooks -------------------------------------------------------------------


class saved_tensors_hooks:
    """Pack every tensor saved for backward with `pack_hook(tensor)` and get it
    back with `unpack_hook(packed)` when backward needs it. The innermost pair
    wins; the hooks apply to tensors saved while the context is open.

    >>> import jitgrad
    >>> def pack(t):
    ...     return t.detach().to(jitgrad.float64)
    >>> def unpack(t):
    ...     return t.to(jitgrad.float32)
    >>> x = jitgrad.ones(3, requires_grad=True)
    >>> with jitgrad.autograd.graph.saved_tensors_hooks(pack, unpack):
    ...     y = x.exp()
    >>> y.grad_fn._saved_result.dtype
    jitgrad.float32
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        loc = _state.local
        if loc.hooks_disabled is not None:
            raise RuntimeError(loc.hooks_disabled)
        loc.saved_hooks = loc.saved_hooks + ((self.pack_hook, self.unpack_hook),)
        with _users_lock:
            _state.saved_hook_users[0] += 1
        return self

    def __exit__(self, *exc):
        _state.local.saved_hooks = _state.local.saved_hooks[:-1]
        with _users_lock:
            _state.saved_hook_users[0] -= 1


_users_lock = threading.Lock()


class save_on_cpu(saved_tensors_hooks):
    """Keep saved tensors in host memory: CUDA tensors are copied to the host when
    saved (into page-locked memory with `pin_memory=True`, which copies faster)
    and back to the GPU when backward needs them; CPU tensors are kept as they are."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        self.pin_memory = pin_memory

        def pack(t):
            if t.device.type == "cpu":
                return (t.device, t)
            return (t.device, Tensor(t._data.get(pinned=pin_memory)))

        def unpack(packed):
            dev, t = packed
            return t if dev.type == "cpu" else Tensor(on_device(t._data, dev))

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Inside, entering saved_tensors_hooks raises RuntimeError(error_message); so
    does entering this context while saved-tensor hooks are active (as torch)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if _state.local.saved_hooks:
            raise RuntimeError(self.error_message)
        self.prev = _state.local.hooks_disabled
        _state.local.hooks_disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _state.local.hooks_disabled = self.prev


class allow_mutation_on_saved_tensors:
    """Inside, a tensor saved for backward may be modified in place: the saved
    value is copied first, so backward sees the value it had when saved.

    >>> import jitgrad
    >>> with jitgrad.autograd.graph.allow_mutation_on_saved_tensors():
    ...     a = jitgrad.ones(2, 3, requires_grad=True)
    ...     b = a.clone()
    ...     out = (b ** 2).sum()
    ...     b.sin_()
    ...     out.sum().backward()
    tensor([[0.8415, 0.8415, 0.8415],
            [0.8415, 0.8415, 0.8415]], grad_fn=<SinBackward0>)
    >>> a.grad
    tensor([[2., 2., 2.],
            [2., 2., 2.]])
    """

    def __enter__(self):
        loc = _state.local
        if loc.mutation_ctx is not None:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        self.active = True
        self.saved = {}  # id(version counter) -> SavedTensors sharing that storage
        loc.mutation_ctx = self
        with _users_lock:
            _state.saved_hook_users[0] += 1
        return self

    def __exit__(self, *exc):
        self.active = False
        self.saved = {}
        _state.local.mutation_ctx = None
        with _users_lock:
            _state.saved_hook_users[0] -= 1

    def track(self, saved):
        if saved._vc is not None:
            self.saved.setdefault(id(saved._vc), []).append(saved)

    def before_mutation(self, tensor):
        for s in self.saved.pop(id(tensor._vc), ()):
            s.snapshot()


# ---- multi-tensor hooks ------------------------------------------------------------------------


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Call `fn` once per backward pass over the gradients of `tensors`.

    mode="all": after every tensor's gradient that this backward computes is
    ready, with `fn(grads)` (None for tensors it does not reach);
    mode="any": on the first gradient computed, with `fn(grad)`.
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    lock = threading.Lock()
    if mode == "any":
        fired = set()

        def any_hook(grad):
            task = current_graph_task()
            with lock:
                if task in fired:
                    return
                fired.add(task)
            fn(grad)

        handles = [t.register_hook(any_hook) for t in tensors if t.requires_grad]
        return _MultiHandle(handles)

    count, buffers = {}, {}

    def inner(idx):
        def hook(grad):
            task = current_graph_task()
            with lock:
                if task not in count:
                    count[task] = sum(1 for t in tensors if t.requires_grad and will_execute(t))
                    buffers[task] = [None] * len(tensors)
                buffers[task][idx] = grad
                count[task] -= 1
                done = count[task] == 0
                if done:
                    grads = buffers.pop(task)
                    del count[task]
            if done:
                fn(grads)  # a list, as torch passes
        return hook

    handles = [t.register_hook(inner(i)) for i, t in enumerate(tensors) if t.requires_grad]
    return _MultiHandle(handles)


class _MultiHandle:
    __slots__ = ("handles",)

    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
