"""softmax and log_softmax: numpy forward (max-shifted), backward with jitgrad
ops so both are differentiable twice."""
import numpy as np

from .. import backend
from ..tensor import Tensor, wrap_dim
from ..kernels import quiet
from . import formulas as E
from .record import records_nothing
from .reduce import sum
from .registry import Arg, Dims, Sample, op


def _softmax_backward(node, g):
    (dim,) = node._attrs
    if records_nothing() and backend.is_host(g._data):  # the same on arrays, unrecorded
        o, ga = node._saved[0].data(node), g._data
        return (Tensor(quiet(_softmax_grad, o, ga, dim)),)
    (out,) = node.saved()
    return (out * (g - sum(g * out, dim, keepdim=True)),)


def _softmax_array(x, dim):
    z, ax = _shifted(x, dim, "softmax")
    e = np.exp(z)
    return e / np.add.reduce(e, axis=ax, keepdims=True) if e.ndim else np.ones_like(e)


def _softmax_grad(o, g, dim):
    # the ufunc's reduce: what ndarray.sum runs, without its Python layer (small tensors)
    return o * (g - np.add.reduce(g * o, axis=dim if o.ndim else None, keepdims=True))


def _shifted(x, dim, who):
    if x._data.dtype.kind not in "fc":
        raise RuntimeError(f"{who}: expected a floating point input, got {x.dtype.name}; "
                           f"convert with .float() first")
    d = x._data
    ax = wrap_dim(dim, d.ndim)
    if d.ndim == 0:
        return d - d, ax
    # Shifted by the max even when it is infinite: a row with +inf (or only -inf)
    # is all NaN, as in torch (logsumexp, not this, treats -inf rows specially).
    # the ufunc's reduce: what ndarray.max runs, without its Python layer (small tensors)
    m = np.maximum.reduce(d, axis=ax, keepdims=True) if d.size else 0
    return d - m, ax


def _device_kernel(x, dim, log):
    """The CUDA softmax kernel's result, or None on the CPU (numpy below)."""
    d = x._data
    if backend.is_host(d) or not d.ndim or d.dtype.kind != "f":
        return None
    return Tensor(d.softmax(wrap_dim(dim, d.ndim), log))


def _softmax_jvp(b, out, inputs, attrs, tx):
    return out * (tx - sum(tx * out, b.dim(attrs[0]), keepdim=True))


@op("SoftmaxBackward0", backward=_softmax_backward, jvp=_softmax_jvp, saves=("result",),
    method=True, export=True, vmap=Dims("dim"), samples=(Sample(Arg(3, 4), 1), Sample(Arg(3, 4), 0)))
def softmax(x, dim, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    out = _device_kernel(x, dim, False)
    if out is None:  # quiet: kernels' error-state switch, 3 us less than np.errstate
        out = Tensor(quiet(_softmax_array, x, dim))
    return softmax.op.emit(out, (x,), (wrap_dim(dim, x._data.ndim),), (out,))


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
    if dtype is not None:
        x = x.to(dtype)
    out = _device_kernel(x, dim, True)
    if out is None:
        with np.errstate(invalid="ignore"):
            z, ax = _shifted(x, dim, "log_softmax")
            out = Tensor((z - np.log(np.exp(z).sum(axis=ax, keepdims=True))) if z.ndim else z)
    return log_softmax.op.emit(out, (x,), (wrap_dim(dim, x._data.ndim),), (out,))
