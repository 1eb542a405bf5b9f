"""DeviceArray: the storage of a CUDA tensor.

A strided view (element offset, shape, element strides) over a 1-D numba.cuda
device buffer. It implements numpy's protocols (`__array_ufunc__`,
`__array_function__`, NEP 35 `like=`) so the ops layer, written against
numpy, runs unchanged on the GPU:
- view geometry (reshape, transpose, basic indexing, broadcast_to, ...) is
  computed by numpy itself on a "shadow" array that has the same strides over
  a one-element anchor and is never read;
- ufuncs, reductions, matmul, copies, indexing, gather and scatter-add run
  kernels.py kernels; memory comes from a caching pool;
- anything else runs on the host (a copy each way, a one-time warning) and
  is counted in `host_fallbacks()`.
Mixing with a host array raises torch's device error; 0-d host values act as
scalars, as CPU scalar tensors do in torch.
"""
import warnings
import weakref

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin
from numpy.lib.stride_tricks import as_strided

from ..kernels.cpu import FORMULAS
from ..kernels.expr import to_scalar_code
from . import cuda, kernels as K

NUMPY_ERROR = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
               "tensor to host memory first.")
_fallbacks = {}  # numpy function name -> calls run on the host


def host_fallbacks():
    return dict(_fallbacks)


class OutOfMemoryError(RuntimeError):
    pass


def _nbytes_text(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} bytes"


# ---- device memory: a caching pool ------------------------------------------------
# A driver allocation per temporary would cost more than the kernels that use
# it; freed buffers are kept by size class and handed out again, as torch's
# caching allocator does. All kernels run on one stream, so a buffer released
# while queued kernels still use it is only reused by kernels queued after them.
_free = {}  # size class in bytes -> [raw uint8 device arrays]
_pool = {"in_use": 0, "free": 0, "hits": 0, "misses": 0}


def _size_class(nbytes):
    """nbytes rounded up to a multiple of 512 B or of a quarter of its power of two
    (at most 25% waste; few classes, so buffers get reused)."""
    step = max(512, 1 << max(0, nbytes.bit_length() - 3))
    return -(-nbytes // step) * step


def _recycle(size, raw):
    _pool["in_use"] -= size
    _pool["free"] += size
    _free.setdefault(size, []).append(raw)


def empty_cache():
    """Give every pooled (unused) buffer back to the driver."""
    _free.clear()
    _pool["free"] = 0


def pool_stats():
    return dict(_pool)


def _alloc(n, dtype):
    """A 1-D device buffer of n elements of `dtype`, from the pool when a freed one
    of its size class is there."""
    nbytes = max(n, 1) * dtype.itemsize
    size = _size_class(nbytes)
    lst = _free.get(size)
    if lst:
        raw = lst.pop()
        _pool["free"] -= size
        _pool["hits"] += 1
    else:
        raw = _driver_alloc(size)
        _pool["misses"] += 1
    buf = raw[:nbytes].view(dtype)
    _pool["in_use"] += size
    weakref.finalize(buf, _recycle, size, raw).atexit = False
    return buf


def _driver_alloc(size):
    """A new raw buffer; on out-of-memory, the pool is emptied and the allocation
    tried once more before a clear error naming the size (nothing changed)."""
    cu = cuda()
    for attempt in (0, 1):
        try:
            return cu.device_array(size, np.uint8)
        except (MemoryError, ValueError) as e:  # the simulator allocates with numpy
            detail = str(e)
        except Exception as e:  # the driver's CUDA_ERROR_OUT_OF_MEMORY, after numba's retry
            if "OUT_OF_MEMORY" not in str(e):
                raise
            detail = _memory_info(cu)
        if attempt == 0 and _pool["free"]:
            empty_cache()
            continue
        break
    raise OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {_nbytes_text(size)} ({detail}). Use smaller "
        "tensors or batches, or free memory: drop references to tensors (and graphs) you no "
        "longer need.") from None


def _memory_info(cu):
    try:
        free, total = cu.current_context().get_memory_info()
    except Exception:
        return "free memory unknown"
    return (f"GPU 0 has a total capacity of {_nbytes_text(total)} of which "
            f"{_nbytes_text(free)} is free")


def _c_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return tuple(reversed(st))


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "writeable", "owndata")

    def __init__(self, c, f):
        self.c_contiguous, self.f_contiguous, self.writeable, self.owndata = c, f, True, False

    def __getitem__(self, key):
        return getattr(self, {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
                              "WRITEABLE": "writeable"}.get(key, key.lower()))


_ANCHORS = {}


def _anchor(dtype):
    a = _ANCHORS.get(dtype)
    if a is None:
        a = _ANCHORS[dtype] = np.zeros(1, dtype)
    return a


class DeviceArray(NDArrayOperatorsMixin):
    __slots__ = ("buf", "offset", "_shape", "strides_", "dtype", "__weakref__")
    __array_priority__ = 2000
    on_device = True  # what Tensor checks, without importing this module

    def __init__(self, buf, offset, shape, strides, dtype):
        self.buf, self.offset, self._shape = buf, offset, tuple(shape)
        self.strides_, self.dtype = tuple(strides), dtype

    @property
    def shape(self):
        return self._shape

    @shape.setter
    def shape(self, shape):
        # numpy's in-place reshape: only without a copy
        try:
            v = self._view(np.reshape(self._shadow(), shape, copy=False))
        except ValueError:
            raise AttributeError("Incompatible shape for in-place modification. Use "
                                 "`.reshape()` to make a copy with the desired shape.") from None
        self._shape, self.strides_, self.offset = v._shape, v.strides_, v.offset

    # ---- attributes ------------------------------------------------------------
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: _numel(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    strides = property(lambda self: tuple(s * self.dtype.itemsize for s in self.strides_))
    T = property(lambda self: self.transpose())

    @property
    def device(self):
        return "cuda:0"

    def contiguous(self):
        return all(st == c for st, c, s in zip(self.strides_, _c_strides(self.shape), self.shape)
                   if s != 1)

    @property
    def flags(self):
        c = self.contiguous()
        f = all(st == c2 for st, c2, s in zip(self.strides_, _c_strides(self.shape[::-1])[::-1],
                                              self.shape) if s != 1)
        return _Flags(c, f)

    def __repr__(self):
        return f"DeviceArray({self.get()!r}, device='cuda:0')"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __array__(self, dtype=None, copy=None):
        raise TypeError(NUMPY_ERROR)

    def __reduce__(self):  # pickles as its values; unpickles onto the GPU
        return to_device, (self.get(),)

    # ---- host transfers --------------------------------------------------------
    def flat_view(self):
        """The numba device array of this (contiguous) array's elements."""
        return self.buf[self.offset:self.offset + self.size]

    def get(self, pinned=False):
        """A host copy (numpy array of the same shape); `pinned`: in page-locked
        memory (faster transfers)."""
        a = self if self.contiguous() else self.copy()
        host = cuda().pinned_array(a.shape, a.dtype) if pinned else np.empty(a.shape, a.dtype)
        if a.size:
            a.flat_view().copy_to_host(host.reshape(-1))
        return host

    def item(self, *args):
        if args:
            return self[args if len(args) > 1 else args[0]].item()
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self.get().reshape(-1)[0].item()

    def tolist(self):
        return self.get().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    # ---- geometry (views) ------------------------------------------------------
    def _shadow(self):
        it = self.dtype.itemsize
        return as_strided(_anchor(self.dtype), self.shape, [s * it for s in self.strides_],
                          writeable=False)

    def _view(self, shadow):
        it = self.dtype.itemsize
        delta = shadow.__array_interface__["data"][0] - _anchor(self.dtype).ctypes.data
        return DeviceArray(self.buf, self.offset + delta // it, shadow.shape,
                           [s // it for s in shadow.strides], self.dtype)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        try:
            return self._view(np.reshape(self._shadow(), shape, copy=False))
        except ValueError:
            if _numel(self.shape) != _numel([s for s in shape if s != -1]) and -1 not in shape:
                raise
            return self.copy().reshape(*shape)

    def ravel(self, order="C"):
        return self.reshape(-1)

    def flatten(self, order="C"):
        return self.copy().reshape(-1)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return self._view(self._shadow().transpose(*axes))

    def swapaxes(self, a, b):
        return self._view(self._shadow().swapaxes(a, b))

    def squeeze(self, axis=None):
        return self._view(self._shadow().squeeze(axis))

    def __getitem__(self, key):
        if _is_basic(key):
            k = key if isinstance(key, tuple) else (key,)
            if not any(e is Ellipsis for e in k):
                k = k + (Ellipsis,)  # a 0-d view, never a scalar read from the shadow
            return self._view(self._shadow()[k])
        _check_devices(key if isinstance(key, tuple) else (key,))
        idxs = _advanced_key(self, key)
        if idxs is not None:
            index, view, dim, shape = _advanced(self, idxs)
            out = empty(shape, self.dtype)
            _indexed("gather", out, index, view, dim)
            return out
        return _host_call("getitem", lambda a, k: a[k], (self, key), {})

    def __setitem__(self, key, value):
        if _is_basic(key):
            copyto(self[key], value)
            return
        _check_devices(key if isinstance(key, tuple) else (key,))
        idxs = _advanced_key(self, key)
        if idxs is None:
            return _host_call("setitem", _host_setitem, (self, key, value), {})
        index, view, dim, shape = _advanced(self, idxs)
        _indexed("scatter_store", _values_like(value, shape, self.dtype), index, view, dim)

    # ---- copies ----------------------------------------------------------------
    def copy(self, order="C"):
        out = empty(self.shape, self.dtype)
        copyto(out, self)
        return out

    def astype(self, dtype, copy=True, order="K", casting="unsafe"):
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        out = empty(self.shape, dtype)
        copyto(out, self)
        return out

    def view(self, dtype=None):
        if dtype is None or np.dtype(dtype) == self.dtype:
            return DeviceArray(self.buf, self.offset, self.shape, self.strides_, self.dtype)
        return _host_call("view", lambda a: a.view(dtype), (self,), {})

    def fill(self, value):
        copyto(self, value)

    # ---- numpy methods that map to numpy functions -------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return _reduce("sum", self, axis, keepdims, dtype)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        return _reduce("prod", self, axis, keepdims, dtype)

    def max(self, axis=None, out=None, keepdims=False):
        return _reduce("max", self, axis, keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return _reduce("min", self, axis, keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return _mean(self, axis, dtype, keepdims)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return _var(self, axis, dtype, out, ddof, keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return np.sqrt(_var(self, axis, dtype, out, ddof, keepdims))

    def argmax(self, axis=None, out=None, keepdims=False):
        return _arg_extreme("max", self, axis, out, keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return _arg_extreme("min", self, axis, out, keepdims)

    def cumsum(self, axis=None, dtype=None, out=None):
        return _cumulative("sum")(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        return _cumulative("prod")(self, axis, dtype, out)

    def softmax(self, axis, log=False):
        """softmax (or log_softmax) along `axis`: one kernel, one block per row."""
        out = empty(self.shape, self.dtype)
        if not self.size:
            return out
        src = self._view(np.moveaxis(self._shadow(), axis, -1))
        dst = out._view(np.moveaxis(out._shadow(), axis, -1))
        lines = src.shape[:-1]
        acc = "float32" if self.dtype == np.float16 else self.dtype.name
        kern = K.softmax(len(lines), acc, self.dtype.name, log)
        largs = (lines, src.strides_[:-1], dst.strides_[:-1]) if lines else ()
        n_lines = _numel(lines)
        blocks = 1 if K.simulator() else min(n_lines, 65535)
        K.launch(kern, blocks, K.threads(), n_lines, *largs, src.buf, src.offset,
                 src.strides_[-1], src.shape[-1], dst.buf, dst.offset, dst.strides_[-1])
        return out

    def any(self, axis=None, keepdims=False):
        return _reduce("max", self.astype(np.bool_), axis, keepdims)

    def all(self, axis=None, keepdims=False):
        return _reduce("min", self.astype(np.bool_), axis, keepdims)

    def __getattr__(self, name):
        # Any other ndarray method: run it on the host (counted, warned once).
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'DeviceArray' object has no attribute '{name}'")
        return lambda *a, **k: _host_call(name, lambda arr, *a2, **k2: getattr(arr, name)(*a2, **k2),
                                          (self,) + a, k)

    # ---- numpy protocols -------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if ufunc is np.matmul and method == "__call__" and not kwargs and out is None:
            return matmul(*inputs)
        if method == "__call__" and not kwargs:
            impl = _ufunc_kernel(ufunc)
            if impl is not None:
                return _run_ufunc(ufunc, impl, inputs, out)
        if method == "at" and ufunc is np.add and len(inputs) == 3:
            return _add_at(*inputs)
        if method == "reduce" and ufunc in _UFUNC_REDUCE and out is None and \
                set(kwargs) <= {"axis", "keepdims", "dtype"}:
            return _reduce(_UFUNC_REDUCE[ufunc], inputs[0], kwargs.get("axis", 0),
                           kwargs.get("keepdims", False), kwargs.get("dtype"))
        if out is not None:
            kwargs["out"] = out
        return _host_call(f"{ufunc.__name__}.{method}", getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        impl = _FUNCTIONS.get(func)
        if impl is not None:
            return impl(*args, **kwargs)
        return _host_call(func.__name__, func, args, kwargs)


def _is_basic(key):
    for k in key if isinstance(key, tuple) else (key,):
        if not (k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice))) or \
                isinstance(k, bool):
            return False
    return True


def _host_setitem(a, key, value):
    a[key] = value


# ---- allocation and transfers ----------------------------------------------------

def empty(shape, dtype):
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    return DeviceArray(_alloc(_numel(shape), dtype), 0, shape, _c_strides(shape), dtype)


def to_device(host):
    """A device copy of a numpy array (or scalar)."""
    host = np.asarray(host)
    out = empty(host.shape, host.dtype)
    if host.size:
        out.flat_view().copy_to_device(np.ascontiguousarray(host).reshape(-1))
    return out


def full(shape, value, dtype):
    out = empty(shape, dtype)
    copyto(out, value)
    return out


# ---- elementwise -----------------------------------------------------------------

def _operand(v, shape):
    """(kind, kernel args) of one operand of an elementwise kernel with output `shape`."""
    if isinstance(v, DeviceArray):
        if v.shape == shape and v.contiguous():
            return "c", (v.buf, v.offset)
        b = v._view(np.broadcast_to(v._shadow(), shape))
        return "g", (b.buf, b.offset, b.strides_)
    return "s", (v,)


def launch_elementwise(code, operands, out, compute):
    """out[...] = code(v0, v1, ...) over broadcast operands (DeviceArrays or numpy
    scalars), computing in `compute` (numpy dtype)."""
    shape = out.shape
    kinds, args = [], []
    for v in operands:
        k, a = _operand(v, shape)
        kinds.append(k)
        args += a
    if out.contiguous():
        kinds.append("c")
        args += [out.buf, out.offset]
    else:
        kinds.append("g")
        args += [out.buf, out.offset, out.strides_]
    if "g" not in kinds:  # flat: rank does not matter
        ndim, shp = 0, (1,)
    else:
        ndim, shp = len(shape), shape
    kern = K.elementwise(code, tuple(kinds), ndim, compute.name, out.dtype.name)
    K.run(kern, out.size, shp, *args)
    return out


def _check_devices(values):
    """Host arrays of more than zero dims cannot meet device arrays (torch's error)."""
    for v in values:
        if isinstance(v, np.ndarray) and v.ndim:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                               "two devices, cuda:0 and cpu! Move them with .to('cuda') or "
                               ".cpu() first.")


def _scalarize(v):
    if isinstance(v, np.ndarray):  # 0-d host value: a scalar, as CPU scalar tensors in torch
        return v[()]
    return v


def copyto(dst, src, casting="unsafe", where=True):
    """dst[...] = src (broadcast, cast). A host array src is uploaded: copying
    between devices is what copy_ and assignment do, as in torch."""
    if where is not True:
        return _host_call("copyto", np.copyto, (dst, src), {"casting": casting, "where": where})
    if isinstance(src, np.ndarray) and src.ndim:
        src = to_device(src)
    src = _scalarize(src)
    if not isinstance(src, DeviceArray):
        src = dst.dtype.type(src)
    if dst.size:
        launch_elementwise("v0", [src], dst, dst.dtype)


# Scalar code per numpy ufunc ({0}, {1}: operands); others run on the host.
_NP_UFUNCS = {
    "add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
    "divide": "{0} / {1}", "true_divide": "{0} / {1}", "power": "{0} ** {1}",
    "negative": "-{0}", "positive": "{0}", "absolute": "abs({0})", "square": "{0} * {0}",
    "reciprocal": "T(1) / {0}", "sqrt": "math.sqrt({0})", "exp": "math.exp({0})",
    "log": "math.log({0})", "tanh": "math.tanh({0})",
    "greater": "{0} > {1}", "greater_equal": "{0} >= {1}", "less": "{0} < {1}",
    "less_equal": "{0} <= {1}", "equal": "{0} == {1}", "not_equal": "{0} != {1}",
    "maximum": K.COMBINE["max"], "minimum": K.COMBINE["min"],
    "logical_and": "{0} and {1}", "logical_or": "{0} or {1}", "logical_not": "not {0}",
    "isnan": "{0} != {0}", "isfinite": "abs({0}) < math.inf", "sign":
        "(T(1) if {0} > T(0) else (T(-1) if {0} < T(0) else {0}))",
}
_UFUNC_REDUCE = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}
_formula_code = {}  # CPU formula ufunc -> (scalar code, compute dtype)


def _ufunc_kernel(ufunc):
    """(scalar code over v0, v1..., compute dtype or None for numpy's rules) of a
    ufunc: a jitgrad formula ufunc (kernels/cpu.py) or a numpy ufunc of the table."""
    got = _formula_code.get(ufunc)
    if got is not None:
        return got
    meta = FORMULAS.get(ufunc)
    if meta is not None:
        args, body, prefix, compute = meta
        code = to_scalar_code(body, {a: f"v{i}" for i, a in enumerate(args)})
        if prefix is not None:
            code = f"v{args.index(prefix)} * {code}"
        got = _formula_code[ufunc] = (code, compute)
        return got
    tpl = _NP_UFUNCS.get(ufunc.__name__)
    if tpl is None or ufunc.nout != 1:
        return None
    return tpl.format(*[f"v{i}" for i in range(ufunc.nin)]), None


def _run_ufunc(ufunc, impl, inputs, out):
    code, compute = impl
    _check_devices(inputs)
    inputs = [_scalarize(v) for v in inputs]
    if compute is not None:  # a formula ufunc: the CPU path already cast its operands
        res = np.dtype(ufunc.types[0].split("->")[1])
        ops = inputs
    else:  # numpy's own type resolution (NEP 50 for Python scalars)
        dts = tuple(v.dtype if isinstance(v, (DeviceArray, np.generic)) else type(v)
                    for v in inputs)
        loop = ufunc.resolve_dtypes(dts + (None,) * ufunc.nout)
        compute, res = loop[0], loop[-1]
        ops = [v.astype(d, copy=False) if isinstance(v, DeviceArray) else d.type(v)
               for v, d in zip(inputs, loop)]
    if out is not None:
        return launch_elementwise(code, ops, out[0] if isinstance(out, tuple) else out, compute)
    shape = np.broadcast_shapes(*[v.shape for v in inputs if isinstance(v, DeviceArray)])
    return launch_elementwise(code, ops, empty(shape, res), compute)


# ---- reductions ------------------------------------------------------------------

def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    return tuple(sorted(a % ndim if ndim else 0 for a in axis))


_ACC = {"f": {"float16": "float32", "float32": "float64", "float64": "float64"}}


def _reduce(op, x, axis, keepdims, dtype=None):
    if not isinstance(x, DeviceArray):
        return getattr(np, {"sum": "sum", "prod": "prod", "max": "max", "min": "min"}[op])(
            x, axis=axis, keepdims=keepdims)
    axes = _axes(axis, x.ndim)
    keep = [d for d in range(x.ndim) if d not in axes]
    R = _numel([x.shape[d] for d in axes])
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
    n_out = _numel(kshape)
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
    n = _numel([x.shape[d] for d in axes])
    dt = np.dtype(dtype) if dtype is not None else (
        x.dtype if x.dtype.kind == "f" else np.dtype(np.float64))
    s = _reduce("sum", x, axis, keepdims, dt)
    return launch_elementwise("v0 / v1", [s, dt.type(n)], empty(s.shape, dt), dt)


# ---- matmul ----------------------------------------------------------------------

def matmul(a, b):
    _check_devices([a, b])
    if not (isinstance(a, DeviceArray) and isinstance(b, DeviceArray)) or \
            a.dtype != b.dtype or a.dtype.kind != "f" or a.ndim == 0 or b.ndim == 0:
        return _host_call("matmul", np.matmul, (a, b), {})
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = a.reshape(1, -1)
    if vb:
        b = b.reshape(-1, 1)
    M, Ka = a.shape[-2:]
    Kb, N = b.shape[-2:]
    if Ka != Kb:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, "
                         f"with gufunc signature (n?,k),(k,m?)->(n?,m?) (size {Kb} is different "
                         f"from {Ka})")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    ab = a._view(np.broadcast_to(a._shadow(), batch + a.shape[-2:]))
    bb = b._view(np.broadcast_to(b._shadow(), batch + b.shape[-2:]))
    nbatch = _numel(batch)
    out = empty(batch + (M, N), a.dtype)
    if out.size and Ka == 0:
        copyto(out, 0)
    elif out.size:
        nbd = len(batch)
        t = K.tile()
        kern = K.matmul(nbd, a.dtype.name)
        bargs = (batch, ab.strides_[:nbd], bb.strides_[:nbd]) if nbd else ()
        grid = (-(-N // t), -(-M // t), min(nbatch, 65535))
        K.launch(kern, grid, (t, t), M, N, Ka, nbatch, *bargs, ab.buf, ab.offset,
                 *ab.strides_[-2:], bb.buf, bb.offset, *bb.strides_[-2:], out.buf)
    if va:
        out = out.reshape(out.shape[:-2] + (N,))
    if vb:
        out = out.reshape(out.shape[:-1] if va else out.shape[:-2] + (M,))
    return out


# ---- gather and scatter-add ---------------------------------------------------------

def _indexed(kind, src, index, arr, dim):
    """Run the indexed kernel `kind` (kernels.INDEXED) over src's shape: element p
    pairs src[p] with arr[p, except index[p] along `dim`] (index broadcast to
    src's shape)."""
    shape = src.shape
    idx = index._view(np.broadcast_to(index._shadow(), shape))
    ds = tuple(0 if d == dim or arr.shape[d] == 1 else arr.strides_[d] for d in range(len(shape)))
    kern = K.indexed(kind, len(shape), arr.dtype.name)
    K.run(kern, src.size, shape, src.buf, src.offset, src.strides_, idx.buf, idx.offset,
          idx.strides_, arr.buf, arr.offset, ds, arr.strides_[dim], arr.shape[dim])


def _check_bounds(index, n, axis):
    """numpy's IndexError for an index outside [-n, n) (checked before any kernel
    reads out of bounds)."""
    if index.size and np.logical_or(index < -n, index >= n).any():
        bad = index.get().reshape(-1)
        bad = bad[(bad < -n) | (bad >= n)][0]
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")


def _advanced_key(a, key):
    """The integer index arrays of `key` if it is k >= 1 of them (boolean masks
    become their nonzero positions) indexing a's first dims, followed only by full
    slices; None for other keys (those run on the host)."""
    key = key if isinstance(key, tuple) else (key,)
    idxs, used = [], 0
    for k in key:
        if isinstance(k, DeviceArray) and k.dtype.kind == "b" and k.ndim:
            idxs.extend(_nonzero(k))
        elif isinstance(k, DeviceArray) and k.dtype.kind in "iu":
            idxs.append(k)
        else:
            break
        used += 1
    tail = key[used:]
    if not idxs or len(idxs) > a.ndim or any(
            not (t is Ellipsis or (isinstance(t, slice) and t == slice(None))) for t in tail):
        return None
    if not np.broadcast_shapes(*[i.shape for i in idxs]):
        return None  # 0-d indices: a scalar read, on the host
    return idxs


def _advanced(a, idxs):
    """(index, view, dim, result shape) that gather/scatter kernels (_indexed) take
    for a[idxs]: k integer arrays (broadcast together) indexing a's first k dims.
    One index addresses a's first dim directly; several are folded into the
    elements' linear offsets (a dim of stride 1)."""
    k = len(idxs)
    ishape = np.broadcast_shapes(*[i.shape for i in idxs])
    rest = a.shape[k:]
    for j, ix in enumerate(idxs):
        _check_bounds(ix, a.shape[j], j)
    if k == 1:
        index, dim_len, dim_stride = idxs[0], a.shape[0], a.strides_[0]
    else:
        index = full(ishape, 0, np.dtype(np.int64))
        for j, ix in enumerate(idxs):
            n = np.int64(a.shape[j])
            launch_elementwise("v0 + (v1 + v2 if v1 < 0 else v1) * v3",
                               [index, ix.astype(np.int64, copy=False), n, np.int64(a.strides_[j])],
                               index, np.dtype(np.int64))
        dim_len, dim_stride = 1, 1
    nd = len(ishape)
    view = DeviceArray(a.buf, a.offset, (1,) * (nd - 1) + (dim_len,) + rest,
                       (0,) * (nd - 1) + (dim_stride,) + a.strides_[k:], a.dtype)
    index = index.reshape(index.shape + (1,) * len(rest))
    return index, view, nd - 1, ishape + rest


def _values_like(values, shape, dtype):
    src = values if isinstance(values, DeviceArray) else full((), _scalarize(values), dtype)
    src = src.astype(dtype, copy=False)
    return src._view(np.broadcast_to(src._shadow(), shape))


def _nonzero(a):
    """np.nonzero: each thread counts the nonzeros of one chunk, a scan gives the
    chunks' write positions, then each thread writes its chunk's flat indices;
    the flat indices are unravelled per dim. The count is read back (the size of
    the result), as it must be."""
    if not a.ndim:
        return _host_call("nonzero", np.nonzero, (a,), {})
    flat = (a if a.dtype.kind == "b" else a != 0).reshape(-1)
    flat = flat if flat.contiguous() else flat.copy()
    n, chunk = flat.size, K.compact_chunk()
    nchunks = max(1, -(-n // chunk))
    counts = empty(nchunks, np.dtype(np.int64))
    fv, cv = flat.flat_view(), counts.flat_view()
    blocks, t = K.launch_1d(nchunks)
    K.launch(K.compact(False), blocks, t, nchunks, chunk, n, fv, cv, cv)
    starts = _cumulative("sum")(counts) - counts  # exclusive scan
    total = int(starts[nchunks - 1].item() + counts[nchunks - 1].item()) if n else 0
    positions = empty(total, np.dtype(np.int64))
    if total:
        K.launch(K.compact(True), blocks, t, nchunks, chunk, n, fv, starts.flat_view(),
                 positions.flat_view())
    if a.ndim == 1:
        return (positions,)
    out = []
    for d, (size, stride) in enumerate(zip(a.shape, _c_strides(a.shape))):
        out.append(launch_elementwise("(v0 // v1) % v2",
                                      [positions, np.int64(stride), np.int64(size)],
                                      empty(total, np.dtype(np.int64)), np.dtype(np.int64)))
    return tuple(out)


def _add_at(dst, index, values):
    """np.add.at(dst, index, values) for integer index arrays on dst's first dims
    (the backward of indexing and index_select) with atomics; other forms on the host."""
    _check_devices([index, values])
    idxs = _advanced_key(dst, index) if isinstance(dst, DeviceArray) and \
        dst.dtype.kind == "f" else None
    if idxs is None:
        return _host_call("add.at", np.add.at, (dst, index, values), {})
    idx, view, dim, shape = _advanced(dst, idxs)
    _indexed("scatter_add", _values_like(values, shape, dst.dtype), idx, view, dim)


def scatter_add(dst, dim, index, src):
    """dst[..., index[p], ...] += src[p] along `dim` (torch's scatter_add_)."""
    _indexed("scatter_add", src, index, dst, dim % dst.ndim)


def _take(a, indices, axis=None, out=None, mode="raise"):
    """np.take along one axis with a 1-D index (index_select) as a gather kernel."""
    _check_devices([indices])
    if axis is None or out is not None or mode != "raise" or \
            not isinstance(indices, DeviceArray) or indices.ndim != 1:
        return _host_call("take", np.take, (a, indices), {"axis": axis, "out": out, "mode": mode})
    axis %= a.ndim
    _check_bounds(indices, a.shape[axis], axis)
    out = empty(a.shape[:axis] + indices.shape + a.shape[axis + 1:], a.dtype)
    _indexed("gather", out, indices.reshape((1,) * axis + (-1,) + (1,) * (a.ndim - axis - 1)),
             a, axis)
    return out


def _arg_extreme(op, a, axis=None, out=None, keepdims=False):
    """argmax/argmin: the first position that holds the max/min (or a nan)."""
    if out is not None:
        return _host_call("arg" + op, getattr(np, "arg" + op), (a,),
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
    return _reduce("min", _where(hit, iota, np.int64(n)), axis, keepdims)


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    d = a - _mean(a, axis, dtype, True)
    n = _numel([a.shape[x] for x in _axes(axis, a.ndim)])
    return _reduce("sum", d * d, axis, keepdims) / float(max(n - ddof, 0))


def _cumulative(op):
    def scan(a, axis=None, dtype=None, out=None):
        if out is not None:
            return _host_call("cum" + op, getattr(np, "cum" + op), (a,),
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
            n_lines = _numel(lines)
            blocks, t = K.launch_1d(n_lines)
            K.launch(kern, blocks, t, n_lines, *args)
        return res
    return scan


def take_along_axis(arr, indices, axis):
    """np.take_along_axis as one gather kernel (no host copy)."""
    _check_devices([arr, indices])
    if not isinstance(indices, DeviceArray) or axis is None or indices.ndim != arr.ndim:
        return _host_call("take_along_axis", np.take_along_axis, (arr, indices, axis), {})
    axis %= arr.ndim
    shape = list(np.broadcast_shapes(
        tuple(1 if d == axis else s for d, s in enumerate(arr.shape)),
        tuple(1 if d == axis else s for d, s in enumerate(indices.shape))))
    shape[axis] = indices.shape[axis]
    out = empty(tuple(shape), arr.dtype)
    _indexed("gather", out, indices, arr, axis)
    return out


# ---- numpy functions -------------------------------------------------------------

def _like_creation(fn):
    def create(*args, **kwargs):
        kwargs.pop("like", None)
        return to_device(fn(*args, **kwargs))
    return create


def _where(cond, a=None, b=None):
    if a is None:
        return _host_call("nonzero", np.where, (cond,), {})
    _check_devices([cond, a, b])
    vals = [_scalarize(v) for v in (cond, a, b)]
    dts = [v.dtype if isinstance(v, (DeviceArray, np.generic)) else type(v) for v in vals[1:]]
    res = np.result_type(*[d if not isinstance(d, type) else d(0) for d in dts])
    shape = np.broadcast_shapes(*[v.shape for v in vals if isinstance(v, DeviceArray)])
    ops = [vals[0] if isinstance(vals[0], DeviceArray) else np.bool_(vals[0])]
    for v in vals[1:]:
        ops.append(v.astype(res, copy=False) if isinstance(v, DeviceArray) else res.type(v))
    return launch_elementwise("(v1 if v0 else v2)", ops, empty(shape, res), res)


def _concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = list(arrays)
    _check_devices(arrays)
    if axis is None or out is not None:
        return _host_call("concatenate", np.concatenate, (arrays,), {"axis": axis, "out": out})
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*[a.dtype for a in arrays])
    first = arrays[0]
    axis %= first.ndim
    total = sum(a.shape[axis] for a in arrays)
    out = empty(first.shape[:axis] + (total,) + first.shape[axis + 1:], dt)
    pos = 0
    for a in arrays:
        n = a.shape[axis]
        copyto(out[(slice(None),) * axis + (slice(pos, pos + n),)], a)
        pos += n
    return out


def _stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = list(arrays)
    ax = axis % (arrays[0].ndim + 1)
    return _concatenate([np.expand_dims(a, ax) for a in arrays], ax, dtype=dtype)


def _geometry(fn):
    """A numpy function that only makes a view: applied to the shadow."""
    def view(a, *args, **kwargs):
        return a._view(fn(a._shadow(), *args, **kwargs))
    return view


def _result_type(*args):
    return np.result_type(*[a.dtype if isinstance(a, DeviceArray) else a for a in args])


def _empty_like(a, dtype=None, order="K", subok=True, shape=None, device=None):
    return empty(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, device=None):
    return full(a.shape if shape is None else shape, fill_value,
                np.dtype(a.dtype if dtype is None else dtype))


def _copy(a, order="K", subok=False):
    return a.copy()


def _clip(a, a_min=None, a_max=None, out=None, **kw):
    r = a if a_min is None else np.maximum(a, a_min)
    return r if a_max is None else np.minimum(r, a_max)


_FUNCTIONS = {
    np.sum: lambda a, axis=None, dtype=None, out=None, keepdims=False, **kw:
        _reduce("sum", a, axis, keepdims, dtype),
    np.prod: lambda a, axis=None, dtype=None, out=None, keepdims=False, **kw:
        _reduce("prod", a, axis, keepdims, dtype),
    np.max: lambda a, axis=None, out=None, keepdims=False, **kw: _reduce("max", a, axis, keepdims),
    np.min: lambda a, axis=None, out=None, keepdims=False, **kw: _reduce("min", a, axis, keepdims),
    np.amax: lambda a, axis=None, out=None, keepdims=False, **kw: _reduce("max", a, axis, keepdims),
    np.amin: lambda a, axis=None, out=None, keepdims=False, **kw: _reduce("min", a, axis, keepdims),
    np.mean: lambda a, axis=None, dtype=None, out=None, keepdims=False, **kw:
        _mean(a, axis, dtype, keepdims),
    np.any: lambda a, axis=None, out=None, keepdims=False, **kw: a.any(axis, keepdims),
    np.all: lambda a, axis=None, out=None, keepdims=False, **kw: a.all(axis, keepdims),
    np.where: _where,
    np.copyto: copyto,
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.take_along_axis: take_along_axis,
    np.take: _take,
    np.nonzero: _nonzero,
    np.argmax: lambda a, axis=None, out=None, keepdims=False: _arg_extreme("max", a, axis, out,
                                                                           keepdims),
    np.argmin: lambda a, axis=None, out=None, keepdims=False: _arg_extreme("min", a, axis, out,
                                                                           keepdims),
    np.var: _var,
    np.std: lambda *a, **k: np.sqrt(_var(*a, **k)),
    np.cumsum: _cumulative("sum"),
    np.cumprod: _cumulative("prod"),
    np.clip: _clip,
    np.result_type: _result_type,
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.copy: _copy,
    np.ascontiguousarray: lambda a, dtype=None, like=None: a.copy() if not a.contiguous() or
        (dtype is not None and np.dtype(dtype) != a.dtype) else a,
    np.empty_like: _empty_like,
    np.zeros_like: lambda a, dtype=None, order="K", subok=True, shape=None, device=None:
        _full_like(a, 0, dtype, shape=shape),
    np.ones_like: lambda a, dtype=None, order="K", subok=True, shape=None, device=None:
        _full_like(a, 1, dtype, shape=shape),
    np.full_like: _full_like,
    np.reshape: lambda a, shape=None, order="C", **kw: a.reshape(shape if shape is not None
                                                                 else kw["newshape"]),
    np.ravel: lambda a, order="C": a.reshape(-1),
    np.matmul: matmul,
    np.transpose: _geometry(np.transpose),
    np.broadcast_to: _geometry(np.broadcast_to),
    np.moveaxis: _geometry(np.moveaxis),
    np.swapaxes: _geometry(np.swapaxes),
    np.expand_dims: _geometry(np.expand_dims),
    np.squeeze: _geometry(np.squeeze),
    np.flip: _geometry(np.flip),
    np.diagonal: _geometry(np.diagonal),
}
for _fn in (np.zeros, np.ones, np.empty, np.full, np.array, np.asarray, np.arange, np.eye,
            np.linspace):
    _FUNCTIONS[_fn] = _like_creation(_fn)


# ---- the host fallback -----------------------------------------------------------

def _to_host(v, moved):
    if isinstance(v, DeviceArray):
        h = v.get()
        moved.append((v, h, h.copy()))
        return h
    if isinstance(v, (list, tuple)):
        return type(v)(_to_host(x, moved) for x in v)
    if isinstance(v, dict):
        return {k: _to_host(x, moved) for k, x in v.items()}
    return v


def _to_device(v):
    if isinstance(v, (np.ndarray, np.generic)):
        return to_device(v)
    if isinstance(v, tuple):
        return tuple(_to_device(x) for x in v)
    if isinstance(v, list):
        return [_to_device(x) for x in v]
    return v


def _host_call(name, fn, args, kwargs):
    """Run a numpy function without a CUDA kernel on host copies; write back any
    device operand it modified in place; return device results."""
    _fallbacks[name] = _fallbacks.get(name, 0) + 1
    if _fallbacks[name] == 1:
        warnings.warn(f"jitgrad.cuda: '{name}' has no CUDA kernel yet; it runs on the host "
                      "(one copy each way). jitgrad.cuda.host_fallbacks() counts these calls.",
                      stacklevel=3)
    moved = []
    hargs = _to_host(args, moved)
    hkwargs = _to_host(kwargs, moved)
    result = fn(*hargs, **hkwargs)
    for dev, host, before in moved:
        if not np.array_equal(host, before, equal_nan=host.dtype.kind in "fc"):
            copyto(dev, to_device(host))
    return _to_device(result)
