"""Rounding and replacing values: floor, ceil, trunc, round, frac, nan_to_num.
Rounding is piecewise constant, so its gradient is zero (torch's too); frac
and nan_to_num pass the gradient where the value is kept."""
import numpy as np

from ..tensor import Tensor
from . import formulas as E
from .compare import isfinite
from .creation import zeros_as
from .legacy import scalar_type
from .registry import Arg, Sample, op

_SAMPLES = (Sample(Arg(3, 4, low=-3.0, high=3.0)),)


def _zero_backward(node, g):
    return (zeros_as(g._data.shape, g._data.dtype, g),)


def _zero_jvp(b, out, inputs, attrs, tx):
    return b.zeros(None, out)


def _piecewise_constant(name, np_fn, doc):
    """floor, ceil, trunc: the op on floats, a copy of an integer tensor (as torch)."""
    def fn(x):
        d = x._data
        out = Tensor(np_fn(d) if d.dtype.kind in "fc" else d.copy())
        return declared.op.emit(out, (x,), ())
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    declared = op(name.capitalize() + "Backward0", backward=_zero_backward, jvp=_zero_jvp,
                  method=True, export=True, inplace=True, samples=_SAMPLES)(fn)
    return declared


floor = _piecewise_constant("floor", np.floor, "The largest integer <= each element.")
ceil = _piecewise_constant("ceil", np.ceil, "The smallest integer >= each element.")
trunc = _piecewise_constant("trunc", np.trunc, "Each element rounded toward zero.")


@op("RoundBackward0", backward=_zero_backward, jvp=_zero_jvp, method=True, export=True,
    inplace=True, samples=_SAMPLES + (Sample(Arg(3, 4, low=-3.0, high=3.0), decimals=1),))
def round(x, *, decimals=0):
    """Each element rounded to `decimals` places, halves to even (as torch).

    >>> import jitgrad
    >>> jitgrad.tensor([0.5, 1.5, 2.567]).round(), jitgrad.tensor([2.567]).round(decimals=2)
    (tensor([0., 2., 3.]), tensor([2.5700]))
    """
    d = x._data
    out = Tensor(np.round(d, decimals) if d.dtype.kind in "fc" else d.copy())
    return round.op.emit(out, (x,), (), node="RoundBackward0" if decimals == 0 else "RoundBackward1")


@op("FracBackward0", backward=lambda node, g: (g,), jvp=lambda b, out, inputs, attrs, tx: tx,
    method=True, export=True,
    inplace=True, samples=_SAMPLES)
def frac(x):
    """The fractional part, x - trunc(x) (the sign of x)."""
    d = x._data
    if d.dtype.kind not in "fc":
        raise NotImplementedError(f"\"frac_cpu\" not implemented for '{scalar_type(x)}'; frac "
                                  "needs a floating point tensor, convert it with .float()")
    with np.errstate(invalid="ignore"):  # frac(inf) is nan, as in torch
        return frac.op.emit(Tensor(d - np.trunc(d)), (x,), ())


def _nan_to_num_backward(node, g):
    (x,) = node.saved()
    return (E.where(isfinite(x), g, 0.0),)


def _nan_to_num_jvp(b, out, inputs, attrs, tx):
    return E.where(isfinite(inputs[0]), tx, 0.0)


@op("NanToNumBackward0", backward=_nan_to_num_backward, jvp=_nan_to_num_jvp, saves=("self",),
    method=True, export=True, inplace=True, samples=_SAMPLES)
def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default the
    dtype's largest and lowest finite values).

    >>> import jitgrad
    >>> jitgrad.tensor([float("nan"), float("inf"), -1.0]).nan_to_num(posinf=9.0)
    tensor([ 0.,  9., -1.])
    """
    d = x._data
    out = Tensor(np.nan_to_num(d, nan=nan, posinf=posinf, neginf=neginf)
                 if d.dtype.kind in "fc" else d.copy())
    return nan_to_num.op.emit(out, (x,), (), (x,))
