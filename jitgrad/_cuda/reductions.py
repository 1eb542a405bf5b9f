"""Reductions of DeviceArrays (sum, prod, max, min and what is built on them:
mean, var, std, any, all, argmax, argmin), scans (cumsum, cumprod) and softmax,
registered as their numpy functions (array.py `implements`)."""
import numpy as np

from . import kernels as K
from .array import DeviceArray, empty, host_call, implements, launch_elementwise, numel, to_device
from .ufunc_code import UFUNC_REDUCE


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    return tuple(sorted(a % ndim if ndim else 0 for a in axis))


def _reduce(op, x, axis, keepdims, dtype=None):
    if not isinstance(x, DeviceArray):
        return getattr(np, {"sum": "sum", "prod": "prod", "max": "max", "min": "min"}[op])(
            x, axis=axis, keepdims=keepdims)
    axes = _axes(axis, x.ndim)
    keep = [d for d in range(x.ndim) if d not in axes]
    R = numel([x.shape[d] for d in axes])
    if R == 0 and op in ("max", "min"):
        raise ValueError(f"zero-size array to reduction operation "
                         f"{'maximum' if op == 'max' else 'minimum'} which has no identity")
    if dtype is not None:
        out_dt = np.dtype(dtype)
    elif op in ("sum", "prod") and x.dtype.kind in "bui":
        out_dt = np.dtype(np.int64)
    else:
        out_dt = x.dtype
    acc = {"f": "float64", "c": None}.get(out_dt.kind, "int64") if op in ("sum", "prod") \
        else out_dt.name
    if out_dt.kind == "b":
        acc = "int64" if op in ("sum", "prod") else "int8"
    init = _init(op, np.dtype(acc))
    kshape = tuple(x.shape[d] for d in keep)
    n_out = numel(kshape)
    src = x
    if x.dtype.kind == "b":
        src = x.astype(np.int8)
    chunks = 1
    chunk = K.reduce_chunk()
    if n_out < 512 and R > 2 * chunk:  # few long rows: split them over more blocks
        chunks = min(1024, -(-R // chunk))
    per_chunk = -(-R // chunks) if R else 0
    res = empty((n_out * chunks,), np.dtype(acc) if chunks > 1 else out_dt)
    kern = K.reduce(op, len(keep), len(axes) or 1, acc, res.dtype.name, init)
    rshape = tuple(x.shape[d] for d in axes) or (1,)
    rs = tuple(src.strides_[d] for d in axes) or (0,)
    kargs = (n_out, chunks, per_chunk, R) + ((kshape, tuple(src.strides_[d] for d in keep))
                                             if keep else ()) + (rshape, rs, src.buf, src.offset,
                                                                 res.buf)
    if n_out:
        blocks = 1 if K.simulator() else min(n_out * chunks, 65535)
        K.launch(kern, blocks, K.threads(), *kargs)
    if chunks > 1:
        res = _reduce(op, res.reshape(n_out, chunks), 1, False, out_dt)
    out = res.reshape(kshape)
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else s for d, s in enumerate(x.shape)))
    return out


def _init(op, acc):
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    if acc.kind == "f":
        return float("-inf") if op == "max" else float("inf")
    info = np.iinfo(acc)
    return int(info.min if op == "max" else info.max)


def _mean(x, axis=None, dtype=None, keepdims=False):
    axes = _axes(axis, x.ndim)
    n = numel([x.shape[d] for d in axes])
    dt = np.dtype(dtype) if dtype is not None else (
        x.dtype if x.dtype.kind == "f" else np.dtype(np.float64))
    s = _reduce("sum", x, axis, keepdims, dt)
    return launch_elementwise("v0 / v1", [s, dt.type(n)], empty(s.shape, dt), dt)


def _arg_extreme(op, a, axis=None, out=None, keepdims=False):
    """argmax/argmin: the first position that holds the max/min (or a nan)."""
    if out is not None:
        return host_call("arg" + op, getattr(np, "arg" + op), (a,),
                          {"axis": axis, "out": out, "keepdims": keepdims})
    if axis is None:
        a, axis = a.reshape(-1), 0
    axis %= a.ndim
    n = a.shape[axis]
    if n == 0:
        raise ValueError(f"attempt to get arg{op} of an empty sequence")
    m = _reduce(op, a, axis, True)
    hit = np.logical_or(a == m, np.logical_and(a != a, m != m))
    iota = to_device(np.arange(n, dtype=np.int64)).reshape((n,) + (1,) * (a.ndim - axis - 1))
    return _reduce("min", np.where(hit, iota, np.int64(n)), axis, keepdims)


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    d = a - _mean(a, axis, dtype, True)
    n = numel([a.shape[x] for x in _axes(axis, a.ndim)])
    return _reduce("sum", d * d, axis, keepdims) / float(max(n - ddof, 0))


def _cumulative(op):
    def scan(a, axis=None, dtype=None, out=None):
        if out is not None:
            return host_call("cum" + op, getattr(np, "cum" + op), (a,),
                              {"axis": axis, "dtype": dtype, "out": out})
        if axis is None:
            a, axis = a.reshape(-1), 0
        dt = np.dtype(dtype) if dtype is not None else (
            np.dtype(np.int64) if a.dtype.kind in "bui" else a.dtype)
        res = empty(a.shape, dt)
        if a.size:
            src = a.astype(dt, copy=False)._view(np.moveaxis(a._shadow(), axis, -1))
            dst = res._view(np.moveaxis(res._shadow(), axis, -1))
            lines = src.shape[:-1]
            kern = K.scan("sum" if op == "sum" else "prod", len(lines), dt.name)
            args = ((lines, src.buf, src.offset, src.strides_[:-1], src.strides_[-1],
                     src.shape[-1], dst.buf, dst.offset, dst.strides_[:-1], dst.strides_[-1])
                    if lines else (src.buf, src.offset, src.strides_[-1], src.shape[-1],
                                   dst.buf, dst.offset, dst.strides_[-1]))
            n_lines = numel(lines)
            blocks, t = K.launch_1d(n_lines)
            K.launch(kern, blocks, t, n_lines, *args)
        return res
    return scan


@implements("softmax")
def softmax(a, axis, log=False):
    """softmax (or log_softmax) along `axis`: one kernel, one block per row."""
    out = empty(a.shape, a.dtype)
    if not a.size:
        return out
    src = a._view(np.moveaxis(a._shadow(), axis, -1))
    dst = out._view(np.moveaxis(out._shadow(), axis, -1))
    lines = src.shape[:-1]
    acc = "float32" if a.dtype == np.float16 else a.dtype.name
    kern = K.softmax(len(lines), acc, a.dtype.name, log)
    largs = (lines, src.strides_[:-1], dst.strides_[:-1]) if lines else ()
    n_lines = numel(lines)
    blocks = 1 if K.simulator() else min(n_lines, 65535)
    K.launch(kern, blocks, K.threads(), n_lines, *largs, src.buf, src.offset,
             src.strides_[-1], src.shape[-1], dst.buf, dst.offset, dst.strides_[-1])
    return out


# ---- registrations ---------------------------------------------------------------

@implements(np.sum)
def _sum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return _reduce("sum", a, axis, keepdims, dtype)


@implements(np.prod)
def _prod(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return _reduce("prod", a, axis, keepdims, dtype)


@implements(np.max, np.amax)
def _max(a, axis=None, out=None, keepdims=False, **kw):
    return _reduce("max", a, axis, keepdims)


@implements(np.min, np.amin)
def _min(a, axis=None, out=None, keepdims=False, **kw):
    return _reduce("min", a, axis, keepdims)


@implements(np.mean)
def _mean_of(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return _mean(a, axis, dtype, keepdims)


@implements(np.any)
def _any(a, axis=None, out=None, keepdims=False, **kw):
    return _reduce("max", a.astype(np.bool_), axis, keepdims)


@implements(np.all)
def _all(a, axis=None, out=None, keepdims=False, **kw):
    return _reduce("min", a.astype(np.bool_), axis, keepdims)


@implements(np.argmax)
def _argmax(a, axis=None, out=None, keepdims=False):
    return _arg_extreme("max", a, axis, out, keepdims)


@implements(np.argmin)
def _argmin(a, axis=None, out=None, keepdims=False):
    return _arg_extreme("min", a, axis, out, keepdims)


@implements(np.std)
def _std(*args, **kwargs):
    return np.sqrt(_var(*args, **kwargs))


implements(np.var)(_var)
implements(np.cumsum)(_cumulative("sum"))
implements(np.cumprod)(_cumulative("prod"))


def _ufunc_reduce(ufunc, op):
    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, **kw):
        if out is not None or kw:
            return host_call(f"{ufunc.__name__}.reduce", ufunc.reduce, (a,),
                             {"axis": axis, "dtype": dtype, "out": out, "keepdims": keepdims,
                              **kw})
        return _reduce(op, a, axis, keepdims, dtype)
    return reduce


for _ufunc, _op in UFUNC_REDUCE.items():
    implements((_ufunc, "reduce"))(_ufunc_reduce(_ufunc, _op))
