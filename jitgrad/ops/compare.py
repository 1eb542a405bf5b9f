"""Whole-tensor tests and closeness: all, any, isclose, allclose, equal. None of
them is differentiable (bool results), as in torch."""
import numpy as np

from .._trace import graph_break
from ..errors import size_mismatch
from ..tensor import Tensor, asarray
from .legacy import scalar_type
from .reduce import _axes
from .registry import op


def _reduce_bool(np_fn, x, dim, keepdim):
    d = x._data
    return Tensor(asarray(np_fn(d, axis=_axes(dim, d.ndim), keepdims=keepdim), dtype=np.bool_))


@op(name="all", method=True, export=True)
def all_(x, dim=None, keepdim=False):
    """True where every element (along `dim`, an int or a tuple) is nonzero.

    >>> import jitgrad
    >>> jitgrad.tensor([[1, 0], [1, 1]]).all(1)
    tensor([False,  True])
    """
    return _reduce_bool(np.all, x, dim, keepdim)


@op(name="any", method=True, export=True)
def any_(x, dim=None, keepdim=False):
    """True where some element (along `dim`, an int or a tuple) is nonzero.

    >>> import jitgrad
    >>> jitgrad.any(jitgrad.tensor([[0.0, 0.0], [0.0, 2.0]]), dim=0, keepdim=True)
    tensor([[False,  True]])
    """
    return _reduce_bool(np.any, x, dim, keepdim)


def _closeness_operands(x, other, rtol, atol, who):
    if not isinstance(other, Tensor):
        raise TypeError(f"{who}(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")
    if x._data.dtype != other._data.dtype:
        raise RuntimeError(f"{scalar_type(x)} did not match {scalar_type(other)}: {who}() "
                           f"compares tensors of one dtype; convert one with .to(other.dtype)")
    for name, v in (("rtol", rtol), ("atol", atol)):
        if v < 0:
            raise RuntimeError(f"{name} must be greater than or equal to zero, but got {v}")
    a, b = x._data, other._data
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise RuntimeError(size_mismatch(a.shape, b.shape)) from None
    return a, b


@op(method=True, export=True)
def isclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise `|x - other| <= atol + rtol * |other|` (equal infinities are
    close; NaNs only with `equal_nan=True`), broadcasting, for tensors of one dtype.

    >>> import jitgrad
    >>> jitgrad.isclose(jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([1.0 + 1e-7, 2.1]))
    tensor([ True, False])
    """
    a, b = _closeness_operands(x, other, rtol, atol, "isclose")
    return Tensor(asarray(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


@op(method=True, export=True)
def allclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when `isclose` holds everywhere; a Python bool.

    >>> import jitgrad
    >>> jitgrad.allclose(jitgrad.ones(3), jitgrad.ones(3) + 1e-9)
    True
    """
    graph_break("allclose() hands a comparison of tensors' values to Python (a bool)")
    a, b = _closeness_operands(x, other, rtol, atol, "allclose")
    return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


@op(method=True, export=True)
def equal(x, other):
    """True when both have the same shape and the same values; a Python bool.
    Tensors of different dtypes compare their values (as torch does).

    >>> import jitgrad
    >>> jitgrad.tensor([1.0, 2.0]).equal(jitgrad.tensor([1, 2]))
    True
    """
    if not isinstance(other, Tensor):
        raise TypeError(f"equal(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")
    graph_break("equal() hands a comparison of tensors' values to Python (a bool)")
    return x._data.shape == other._data.shape and bool(np.array_equal(x._data, other._data))


# ---- elementwise tests and logic: bool results ------------------------------------------------

def _elementwise_test(name, np_fn, doc):
    def fn(x):
        d = x._data
        return Tensor(asarray(np_fn(d), dtype=np.bool_))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return op(name=name, method=True, export=True)(fn)


def _finite_kind(np_fn, integers):
    """np_fn on floats; `integers` (a constant) for integer and bool tensors."""
    return lambda d: np_fn(d) if d.dtype.kind in "fc" else np.full(d.shape, integers, like=d)


isnan = _elementwise_test("isnan", _finite_kind(np.isnan, False), "True where an element is NaN.")
isinf = _elementwise_test("isinf", _finite_kind(np.isinf, False),
                          "True where an element is +inf or -inf.")
isfinite = _elementwise_test("isfinite", _finite_kind(np.isfinite, True),
                             "True where an element is neither NaN nor infinite.")
isposinf = _elementwise_test("isposinf", _finite_kind(np.isposinf, False),
                             "True where an element is +inf.")
isneginf = _elementwise_test("isneginf", _finite_kind(np.isneginf, False),
                             "True where an element is -inf.")
signbit = _elementwise_test("signbit", np.signbit,
                            "True where the sign bit is set (negative numbers and -0.0).")


def _logical(name, np_fn):
    def fn(x, other):
        """Elementwise logical op on truth values (nonzero is True); bool result."""
        if not isinstance(other, Tensor):
            raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not "
                            f"{type(other).__name__}")
        a, b = x._data, other._data
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise RuntimeError(size_mismatch(a.shape, b.shape)) from None
        return Tensor(asarray(np_fn(a, b), dtype=np.bool_))
    fn.__name__ = fn.__qualname__ = name
    return op(name=name, method=True, export=True)(fn)


logical_and = _logical("logical_and", np.logical_and)
logical_or = _logical("logical_or", np.logical_or)
logical_xor = _logical("logical_xor", np.logical_xor)
