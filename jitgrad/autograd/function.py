"""Custom autograd Functions (torch.autograd.Function's API).

A Function subclass gets its own node class `<ClassName>Backward`; as in
torch, the node is the `ctx` that forward fills and backward reads. Saved
tensors go through SavedTensor, so version checks, saved-tensor hooks and
freeing after backward work as for built-in ops.
"""
import functools
import sys
import threading

import numpy as np

from .. import _state
from .._trace import graph_break
from .._dual import set_tangent
from .._node import EMPTY_SAVED, Node, SavedTensor, next_node, output_numbers
from ..ops.inplace import VIEW_OF_LEAF_MESSAGE, move_history
from ..tensor import Tensor, device_for, on_device


class FunctionCtx:
    """The methods `ctx` offers inside forward/setup_context and backward."""

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is "
                                f"of type {type(t).__name__}")
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self):
        if self.__dict__.get("_in_jvp"):
            return tuple(self.__dict__.get("saved_for_forward", ()))
        saved = self.__dict__.get("_saved")
        if saved is None:
            return tuple(self.__dict__.get("to_save", ()))
        return tuple(None if s is None else s.unpack(self) for s in saved)


class BackwardCFunction(FunctionCtx, Node):
    """The node of one custom Function call (instances carry a __dict__ for ctx fields)."""
    _forward_cls = None

    def __init__(self):
        Node.__init__(self, (), (), ())
        self.needs_input_grad = ()
        self.materialize_grads = True

    def apply(self, grads):
        cls = self._forward_cls
        grads = list(grads) + [None] * (len(self._out_meta) - len(grads))
        if self.materialize_grads:
            grads = [g if g is not None or m is None else
                     Tensor(on_device(np.zeros(m[0], m[1]), device_for(m[2])))
                     for g, m in zip(grads, self._out_meta)]
        result = _on_fresh_stack(cls.backward, self, *grads) if _stack_is_deep() else \
            cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_in = len(self._arg_is_tensor)
        if len(result) != n_in:
            extra = result[n_in:]
            if len(result) < n_in or any(r is not None for r in extra):
                raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                                   f"gradients (expected {n_in}, got {len(result)})")
            result = result[:n_in]
        out = []
        for i, (g, is_tensor) in enumerate(zip(result, self._arg_is_tensor)):
            if not is_tensor:
                if g is not None:
                    raise RuntimeError(f"function {self.name()} returned a gradient different "
                                       f"than None at position {i + 1}, but the corresponding "
                                       "forward input was not a Variable")
                continue
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"function {self.name()} returned a {type(g).__name__} as gradient "
                                f"{i}; expected a Tensor or None")
            out.append(g)
        return out

    @property
    def _raw_saved_tensors(self):
        """The stored objects behind saved_tensors (register_hooks on one of them)."""
        return tuple(EMPTY_SAVED if s is None else s for s in self.__dict__.get("_saved", ()))

    def _release(self):
        for s in self.__dict__.get("_saved") or ():
            if s is not None:
                s.release()

    def name(self):
        return type(self).__name__


def _stack_is_deep():
    """More than a quarter of the interpreter's frame limit is in use: a backward
    that calls backward (reentrant, torch's checkpointing) nests ~5 frames a level."""
    try:
        sys._getframe(sys.getrecursionlimit() // 4)
    except ValueError:
        return False
    return True


def _on_fresh_stack(fn, *args):
    """fn(*args) on a new thread (a new frame stack) with this thread's autograd
    flags, this thread waiting: deep reentrant backward never hits RecursionError.
    torch hands reentrant backward past a depth to a worker thread the same way."""
    flags = dict(vars(_state.local))
    outcome = {}

    def run():
        vars(_state.local).update(flags)
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # re-raised in the waiting thread
            outcome["error"] = exc
    worker = threading.Thread(target=run, name="jitgrad-reentrant-backward")
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})


class Function(metaclass=FunctionMeta):
    """Subclass with static `forward` and `backward` and call `.apply(...)`.

    >>> import jitgrad
    >>> class Exp(jitgrad.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, i):
    ...         result = i.exp()
    ...         ctx.save_for_backward(result)
    ...         return result
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         (result,) = ctx.saved_tensors
    ...         return grad_output * result
    >>> x = jitgrad.tensor([0.0, 1.0], requires_grad=True)
    >>> y = Exp.apply(x)
    >>> y
    tensor([1.0000, 2.7183], grad_fn=<ExpBackward>)
    >>> y.sum().backward()
    >>> x.grad
    tensor([1.0000, 2.7183])
    """

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your "
                                  "custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        graph_break(f"custom autograd.Function {cls.__name__}: its backward is Python the "
                    "tracer does not see")
        ctx = cls._backward_cls()
        needs = tuple(isinstance(a, Tensor) and a._rg for a in args)
        ctx.needs_input_grad = needs
        record = _state.local.grad_enabled and any(needs)
        custom_setup = cls.setup_context is not Function.setup_context
        prev = _state.local.grad_enabled
        _state.local.grad_enabled = False
        fw_prev, _state.fw_level[0] = _state.fw_level[0], None  # forward sees plain primals
        try:
            if custom_setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        finally:
            _state.local.grad_enabled = prev
            _state.fw_level[0] = fw_prev
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        outputs = _wire(ctx, args, outputs, record)
        if fw_prev is not None and any(isinstance(a, Tensor) and a._fw is not None for a in args):
            _forward_tangents(cls, ctx, args, outputs)
        return outputs[0] if single else outputs


def _is_one_of(t, tensors):
    return any(t is u for u in tensors)


def _check_dirty(dirty, args, record):
    """What torch checks of the tensors forward modified in place (before any wiring)."""
    for d in dirty:
        if not _is_one_of(d, args):
            raise RuntimeError(
                "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors "
                "that have been mutated should be passed to ctx.mark_dirty(); return a new tensor "
                "instead of marking it dirty.")
        if not record or not d._rg:
            continue
        if d._base is None and d.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                               "operation. Clone it before passing it to the Function, or call the "
                               "Function under `with jitgrad.no_grad():`.")
        if d._base is not None and d._base._rg and d._base.grad_fn is None:
            raise RuntimeError(VIEW_OF_LEAF_MESSAGE + " Clone the view before passing it to the "
                               "Function, or call the Function under `with jitgrad.no_grad():`.")


def _wire(ctx, args, outputs, record):
    """Give the outputs their node, save what forward asked for, as torch does."""
    dirty = ctx.__dict__.get("dirty_tensors", ())
    non_diff = ctx.__dict__.get("non_differentiable", ())
    _check_dirty(dirty, args, record)
    wired = []
    for o in outputs:
        if isinstance(o, Tensor) and not _is_one_of(o, dirty):
            if _is_one_of(o, args):
                o = o.view(o.shape)  # an input returned as is becomes a fresh alias
                o.grad_fn, o.output_nr, o._rg = None, 0, False
            if o._base is not None:
                # autograd cannot rebase it through the custom backward: in-place is refused
                o._creation_meta = "custom_function"
        wired.append(o)
    for d in dirty:
        d._vc[0] += 1  # marking dirty is itself a modification, as torch counts it
    if record:
        tensors = [a for a in args if isinstance(a, Tensor)]
        ctx._next, ctx._nrs = tuple(map(next_node, tensors)), output_numbers(tensors)
        ctx._in_meta = tuple((a._data.shape, a._data.dtype, type(a._data)) if a._rg else None
                             for a in args if isinstance(a, Tensor))
        ctx._arg_is_tensor = tuple(isinstance(a, Tensor) for a in args)
        ctx._out_meta = tuple((o._data.shape, o._data.dtype, type(o._data)) if isinstance(o, Tensor) else None
                              for o in wired)
        last_index = {id(o): i for i, o in enumerate(wired)}  # an output returned twice: the last
        for i, o in enumerate(wired):
            if not isinstance(o, Tensor):
                continue
            if _is_one_of(o, non_diff) or o._data.dtype.kind not in "fc":
                o._rg = False
            elif _is_one_of(o, dirty):
                if last_index[id(o)] == i:
                    new = Tensor(o._data)
                    new.grad_fn, new.output_nr, new._rg = ctx, i, True
                    move_history(o, new)
            else:
                o.grad_fn, o.output_nr, o._rg = ctx, i, True
        ctx._saved = tuple(None if t is None else SavedTensor(t, _is_one_of(t, wired))
                           for t in ctx.__dict__.get("to_save", ()))
        ctx.__dict__.pop("to_save", None)
    else:
        for o in wired:
            if isinstance(o, Tensor) and _is_one_of(o, dirty):
                o._rg = o._rg and not _is_one_of(o, non_diff)
    return tuple(wired)


def _forward_tangents(cls, ctx, args, outputs):
    """Forward AD through a custom Function: its `jvp(ctx, *tangents)`."""
    tangents = [None if not isinstance(a, Tensor) else
                a._fw if a._fw is not None else Tensor(np.zeros_like(a._data)) for a in args]
    prev, _state.fw_level[0] = _state.fw_level[0], None
    ctx._in_jvp = True  # ctx.saved_tensors gives what save_for_forward kept, as torch
    try:
        res = cls.jvp(ctx, *tangents)
    finally:
        _state.fw_level[0] = prev
        ctx._in_jvp = False
    res = res if isinstance(res, tuple) else (res,)
    if len(res) != len(outputs):
        raise RuntimeError(f"Function's jvp returned an invalid number of forward gradients "
                           f"(expected {len(outputs)} but got {len(res)})")
    non_diff = ctx.__dict__.get("non_differentiable", ())
    for i, (o, t) in enumerate(zip(outputs, res)):
        if t is None:
            continue
        if not isinstance(o, Tensor) or o._data.dtype.kind not in "fc" or _is_one_of(o, non_diff):
            raise RuntimeError(
                f"Function's jvp returned a gradient at position {i}, but the corresponding "
                "forward output is not a differentiable Tensor. You should return None at that "
                "position instead.")
    for o, t in zip(outputs, res):
        if t is not None:
            set_tangent(o, t)


def once_differentiable(fn):
    """Run backward without recording; differentiating its result again raises."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with _state.grad_disabled():
            out = fn(ctx, *args)
        if not _state.local.grad_enabled or not any(isinstance(a, Tensor) and a._rg for a in args):
            return out
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        # Detached aliases that require grad, so the error node is recorded.
        wired = tuple(_DelayedError.apply(o.detach().requires_grad_()) if isinstance(o, Tensor)
                      else o for o in outs)
        return wired[0] if single else wired
    return wrapper


class _DelayedError(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")
