"""Grad modes: thread-local flags in _state, changed only by context managers
(also usable as decorators) that restore the previous value."""
import functools
import inspect

from .. import _state


class _Mode:
    """Base: a context manager that is also a decorator (a fresh instance per call).

    A decorated generator function or coroutine function runs each step (up to
    the next `yield` or `await`) in the mode, and the caller's mode between
    steps, so the mode never leaks out of a suspended body; `close()` and
    exceptions thrown in also run in the mode."""

    def __new__(cls, *args, **kwargs):
        # `@no_grad` without parentheses, as torch allows
        if cls in _BARE_DECORATORS and len(args) == 1 and callable(args[0]) and not kwargs:
            return cls()(args[0])
        return super().__new__(cls)

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args, **kwargs):
                return (yield from _steps_in_mode(self.clone, fn(*args, **kwargs)))
            return generator
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def coroutine(*args, **kwargs):
                return await _AwaitSteps(_steps_in_mode(self.clone, fn(*args, **kwargs)))
            return coroutine

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_Mode):
    """Disable gradient recording.

    >>> import jitgrad
    >>> x = jitgrad.ones(2, requires_grad=True)
    >>> with jitgrad.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    def __enter__(self):
        self.prev = _state.local.grad_enabled
        _state.local.grad_enabled = False

    def __exit__(self, *exc):
        _state.local.grad_enabled = self.prev


class enable_grad(_Mode):
    def __enter__(self):
        self.prev = _state.local.grad_enabled
        _state.local.grad_enabled = True

    def __exit__(self, *exc):
        _state.local.grad_enabled = self.prev


class set_grad_enabled(_Mode):
    """Set grad mode; takes effect at once (function form) or for a `with` block."""

    def __init__(self, mode):
        self.prev = _state.local.grad_enabled
        self.mode = bool(mode)
        _state.local.grad_enabled = self.mode

    def __call__(self, fn):
        # As a decorator the mode applies to calls only: undo the change __init__ made.
        _state.local.grad_enabled = self.prev
        return super().__call__(fn)

    def clone(self):
        return set_grad_enabled(self.mode)

    def __enter__(self):
        _state.local.grad_enabled = self.mode

    def __exit__(self, *exc):
        _state.local.grad_enabled = self.prev


class inference_mode(_Mode):
    """Like no_grad, and tensors made inside are inference tensors: they cannot be
    saved for backward later. `inference_mode(False)` turns both off: it records,
    even inside `no_grad` (as torch's)."""

    def __new__(cls, mode=True):
        if callable(mode):  # bare `@inference_mode`
            inst = super().__new__(cls)
            inst.mode = True
            return inst(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        if callable(mode):
            return
        self.mode = bool(mode)

    def clone(self):
        return inference_mode(self.mode)

    def __enter__(self):
        loc = _state.local
        self.prev = (loc.grad_enabled, loc.inference)
        loc.grad_enabled, loc.inference = not self.mode, self.mode

    def __exit__(self, *exc):
        _state.local.grad_enabled, _state.local.inference = self.prev


_BARE_DECORATORS = (no_grad, enable_grad)


def _steps_in_mode(make_mode, steps):
    """Drive a generator or coroutine one step at a time, each step inside a
    fresh `make_mode()` context; yields what it yields, returns what it returns."""
    advance, value = steps.send, None
    while True:
        try:
            with make_mode():
                yielded = advance(value)
        except StopIteration as stop:
            return stop.value
        try:
            value = yield yielded
            advance = steps.send
        except GeneratorExit:
            with make_mode():
                steps.close()
            raise
        except BaseException as exc:  # thrown in by the caller: deliver it in the mode
            advance, value = steps.throw, exc


class _AwaitSteps:
    """An awaitable over a step driver, so a coroutine's awaits pass through it."""
    __slots__ = ("steps",)

    def __init__(self, steps):
        self.steps = steps

    def __await__(self):
        return self.steps


def is_grad_enabled():
    return _state.local.grad_enabled


def is_inference_mode_enabled():
    return _state.local.inference
