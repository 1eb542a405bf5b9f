"""softmax and log_softmax: numpy forward (max-shifted), backward with jitgrad
ops so both are differentiable twice."""
import numpy as np

from ..backend import HOST_ARRAY
from ..tensor import Tensor, result_tensor, wrap_dim
from ..kernels import ERRSTATE, QUIET
from . import formulas as E
from .record import records_nothing, shared
from .reduce import sum
from .registry import Arg, Dims, Sample, op


def _softmax_backward(node, g):
    (dim,) = node._attrs
    ga = g._data
    if type(ga) is HOST_ARRAY and records_nothing():  # the same on arrays, unrecorded
        o = node.saved_array(0)
        token = ERRSTATE.set(QUIET)
        try:
            return (Tensor(_softmax_grad(o, ga, dim)),)  # (a 0-d result is a scalar)
        finally:
            ERRSTATE.reset(token)
    (out,) = node.saved()
    return (out * (g - sum(g * out, dim, keepdim=True)),)


def _softmax_array(d, ax):
    """softmax of array `d` along dim `ax` (wrapped), on d's device."""
    if not d.ndim:
        return np.exp(d - d)  # 1, or NaN for an infinite or NaN input (as torch)
    if d.ndim == 1 and 0 < d.size <= _SHORT and d.dtype.kind == "f" and type(d) is HOST_ARRAY:
        # A short vector (W7 in asv_bench/workloads.py): its max from a list, 0.7 us less
        # than a reduce; the same max, so the same bits. Python's max skips a NaN that is
        # not first: then the sum is NaN, and the reduce below gives numpy's NaN.
        e = np.exp(d - max(d.tolist()))
        s = np.add.reduce(e)
        if s == s:
            return np.divide(e, s, out=e)
    e = np.exp(_shifted(d, ax))
    return e / np.add.reduce(e, axis=ax, keepdims=True)


# Up to this many elements a vector's max is taken from a list (measured faster
# than numpy's reduce up to about 30).
_SHORT = 16
_AXIS0 = (0,)


def _short_softmax(d):
    """_softmax_array's short-vector result, bit for bit, or None. Where the values
    span less than 80 no step can overflow, underflow or be invalid (exp >= exp(-80),
    the sum between 1 and 16, the quotients above float32's smallest normal), so the
    error state has nothing to hide; NaN and infinities fail the test. The max is
    subtracted as a 0-d array (half the cost of a Python float) and a sum of fewer
    than 8 terms taken as numpy's reduce takes it (see _SEQUENTIAL_SUMS)."""
    values = d.tolist()
    m = max(values)
    if not m - min(values) < 80:
        return None
    e = np.exp(d - d[values.index(m), ...])
    n = len(values)
    return np.divide(e, _SEQUENTIAL_SUMS[n](e) if n < 8 else np.add.reduce(e), out=e)


# numpy's add.reduce of a float32 or float64 vector of fewer than 8 elements adds them
# one by one from the first (its pairwise sum starts at 8): the same additions on
# numpy scalars, unrolled, cost a third of the reduce call.
_SEQUENTIAL_SUMS = (None,) + tuple(
    eval("lambda e: " + " + ".join(f"e[{i}]" for i in range(n))) for n in range(1, 8))


def _softmax_grad(o, g, dim):
    p = g * o
    if p.ndim == 1 and 0 < p.size < 8 and p.dtype.kind == "f" and p.itemsize in (4, 8):
        return o * (g - _SEQUENTIAL_SUMS[p.size](p))  # the reduce's bits, see below
    # the ufunc's reduce: what ndarray.sum runs, without its Python layer (small tensors)
    return o * (g - np.add.reduce(p, axis=dim if o.ndim else None, keepdims=True))


def _shifted(d, ax):
    """d minus its max along ax. Shifted by the max even when it is infinite: a row
    with +inf (or only -inf) is all NaN, as in torch (logsumexp, not this, treats
    -inf rows specially)."""
    # the ufunc's reduce: what ndarray.max runs, without its Python layer (small tensors)
    m = np.maximum.reduce(d, axis=ax, keepdims=True) if d.size else 0
    return d - m


def _checked(x, dim, dtype, who):
    """x in `dtype` (when given), its array and dim wrapped; a floating input only."""
    if dtype is not None:
        x = x.to(dtype)
    d = x._data
    if d.dtype.kind not in "fc":
        raise RuntimeError(f"{who}: expected a floating point input, got {x.dtype.name}; "
                           f"convert with .float() first")
    return x, d, wrap_dim(dim, d.ndim)


def _on_device_kernel(d):
    """Whether the CUDA softmax kernel takes `d` (numpy runs the rest)."""
    return type(d) is not HOST_ARRAY and d.ndim and d.dtype.kind == "f"


def _softmax_jvp(b, out, inputs, attrs, tx):
    return out * (tx - sum(tx * out, b.dim(attrs[0]), keepdim=True))


@op("SoftmaxBackward0", backward=_softmax_backward, jvp=_softmax_jvp, saves=("result",),
    method=True, export=True, vmap=Dims("dim"), samples=(Sample(Arg(3, 4), 1), Sample(Arg(3, 4), 0)))
def softmax(x, dim, dtype=None):
    d = x._data
    if (dtype is None and type(d) is HOST_ARRAY and d.ndim == 1 and type(dim) is int
            and (dim == 0 or dim == -1) and 0 < d.size <= _SHORT and d.dtype.kind == "f"
            and d.itemsize in (4, 8)):
        e = _short_softmax(d)
        if e is not None:  # (W7 in asv_bench/workloads.py: a stack of 0-d tensors)
            out = result_tensor(e)
            return softmax.op.emit(out, (x,), _AXIS0, (out,))
    x, d, ax = _checked(x, dim, dtype, "softmax")
    if _on_device_kernel(d):
        out = Tensor(d.softmax(ax, False))
    else:  # numpy, quietly: kernels' error-state switch, 3 us less than np.errstate
        token = ERRSTATE.set(QUIET)
        try:
            out = Tensor(_softmax_array(d, ax))
        finally:
            ERRSTATE.reset(token)
    return softmax.op.emit(out, (x,), shared((ax,)), (out,))


def _log_softmax_backward(node, g):
    (dim,) = node._attrs
    (out,) = node.saved()
    return (g - E.exp(out) * sum(g, dim, keepdim=True),)


def _log_softmax_jvp(b, out, inputs, attrs, tx):
    return tx - sum(E.exp(out) * tx, b.dim(attrs[0]), keepdim=True)


@op("LogSoftmaxBackward0", backward=_log_softmax_backward, jvp=_log_softmax_jvp,
    saves=("result",), method=True, export=True, vmap=Dims("dim"),
    samples=(Sample(Arg(3, 4), 1), Sample(Arg(2, 3, 4), -1)))
def log_softmax(x, dim, dtype=None):
    x, d, ax = _checked(x, dim, dtype, "log_softmax")
    if _on_device_kernel(d):
        out = Tensor(d.softmax(ax, True))
    else:
        token = ERRSTATE.set(QUIET)
        try:
            z = _shifted(d, ax) if d.ndim else d - d
            out = Tensor(z - np.log(np.add.reduce(np.exp(z), axis=ax, keepdims=True))
                         if z.ndim else z)
        finally:
            ERRSTATE.reset(token)
    return log_softmax.op.emit(out, (x,), shared((ax,)), (out,))
