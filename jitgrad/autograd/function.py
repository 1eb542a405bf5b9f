"""Custom autograd Functions (torch.autograd.Function's API).

A Function subclass gets its own node class `<ClassName>Backward`; as in
torch, the node is the `ctx` that forward fills and backward reads. Saved
tensors go through SavedTensor, so version checks, saved-tensor hooks and
freeing after backward work as for built-in ops.
"""
import functools

import numpy as np

from .. import _state
from .._node import EMPTY_SAVED, Node, SavedTensor, edge_of
from ..tensor import CPU, CUDA0, Tensor, on_device


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
        Node.__init__(self, (), ())
        self.needs_input_grad = ()
        self.materialize_grads = True

    def apply(self, grads):
        cls = self._forward_cls
        grads = list(grads) + [None] * (len(self._out_meta) - len(grads))
        if self.materialize_grads:
            grads = [g if g is not None or m is None else
                     Tensor(on_device(np.zeros(m[0], m[1]), CPU if m[2] is np.ndarray else CUDA0))
                     for g, m in zip(grads, self._out_meta)]
        result = cls.backward(self, *grads)
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


def _wire(ctx, args, outputs, record):
    """Give the outputs their node, save what forward asked for, as torch does."""
    dirty = ctx.__dict__.get("dirty_tensors", ())
    non_diff = ctx.__dict__.get("non_differentiable", ())
    wired = []
    for o in outputs:
        if isinstance(o, Tensor) and not any(o is d for d in dirty) and any(o is a for a in args):
            o = o.view(o.shape)  # an input returned as is becomes a fresh alias
            o.grad_fn, o.output_nr, o._rg = None, 0, False
        wired.append(o)
    for d in dirty:
        if not any(d is a for a in args):
            raise RuntimeError("mark_dirty() was given a tensor that is not an input of forward")
    if record:
        ctx._edges = tuple(edge_of(a) for a in args if isinstance(a, Tensor))
        ctx._in_meta = tuple((a._data.shape, a._data.dtype, type(a._data)) if a._rg else None
                             for a in args if isinstance(a, Tensor))
        ctx._arg_is_tensor = tuple(isinstance(a, Tensor) for a in args)
        ctx._out_meta = tuple((o._data.shape, o._data.dtype, type(o._data)) if isinstance(o, Tensor) else None
                              for o in wired)
        for i, o in enumerate(wired):
            if not isinstance(o, Tensor):
                continue
            if any(o is n for n in non_diff) or o._data.dtype.kind not in "fc":
                o._rg = False
                continue
            o.grad_fn, o.output_nr, o._rg = ctx, i, True
        ctx._saved = tuple(None if t is None else SavedTensor(t, any(t is o for o in wired))
                           for t in ctx.__dict__.get("to_save", ()))
        ctx.__dict__.pop("to_save", None)
    else:
        for o in wired:
            if isinstance(o, Tensor) and any(o is d for d in dirty):
                o._rg = o._rg and not any(o is n for n in non_diff)
    return tuple(wired)


def _forward_tangents(cls, ctx, args, outputs):
    """Forward AD through a custom Function: its `jvp(ctx, *tangents)`."""
    from .forward_ad import set_tangent
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
    for o, t in zip(outputs, res):
        if isinstance(o, Tensor) and t is not None:
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
