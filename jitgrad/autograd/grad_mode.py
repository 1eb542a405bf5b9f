"""Grad modes: thread-local flags in _state, changed only by context managers
(also usable as decorators) that restore the previous value."""
import functools

from .. import _state


class _Mode:
    """Base: a context manager that is also a decorator (a fresh instance per call)."""

    def __new__(cls, *args, **kwargs):
        # `@no_grad` without parentheses, as torch allows
        if cls in _BARE_DECORATORS and len(args) == 1 and callable(args[0]) and not kwargs:
            return cls()(args[0])
        return super().__new__(cls)

    def __call__(self, fn):
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

    def clone(self):
        return set_grad_enabled(self.mode)

    def __enter__(self):
        _state.local.grad_enabled = self.mode

    def __exit__(self, *exc):
        _state.local.grad_enabled = self.prev


class inference_mode(_Mode):
    """Like no_grad, and tensors made inside are inference tensors: they cannot be
    saved for backward later."""

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
        if self.mode:
            loc.grad_enabled, loc.inference = False, True
        else:
            loc.inference = False

    def __exit__(self, *exc):
        _state.local.grad_enabled, _state.local.inference = self.prev


_BARE_DECORATORS = (no_grad, enable_grad)


def is_grad_enabled():
    return _state.local.grad_enabled


def is_inference_mode_enabled():
    return _state.local.inference
