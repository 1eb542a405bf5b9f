"""DeviceArray: the storage of a CUDA tensor, and what every CUDA array operation
builds on (allocation, transfers, elementwise kernels, the host fallback).

A strided view (element offset, shape, element strides) over a 1-D numba.cuda
device buffer. It implements numpy's protocols for array-likes (NEP 18
`__array_function__`, `__array_ufunc__`, NEP 35 `like=`) so the ops layer,
written against numpy, runs unchanged on the GPU:
- view geometry (reshape, transpose, basic indexing, broadcast_to, ...) is
  computed by numpy itself on a "shadow" array that has the same strides over
  a one-element anchor and is never read;
- ufuncs with a formula (numpy's table in ufunc_code.py, jitgrad's formula
  kernels) run elementwise kernels.py kernels; memory comes from a caching
  pool (memory.py);
- every other numpy function is looked up in FUNCTIONS, filled by the modules
  that implement them with `@implements(np.fn)`: reductions.py, indexing.py,
  linalg.py, functions.py (api.py loads them all); array methods that are numpy
  functions (sum, max, argmax, ...) go through the same table;
- anything else runs on the host (a copy each way, a one-time warning) and
  is counted in `host_fallbacks()`.
Mixing with a host array raises torch's device error; 0-d host values act as
scalars, as CPU scalar tensors do in torch.
"""
import warnings

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin
from numpy.lib.stride_tricks import as_strided

from . import cuda, kernels as K
from .memory import alloc
from .ufunc_code import ufunc_code

NUMPY_ERROR = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
               "tensor to host memory first.")
_fallbacks = {}  # numpy function name -> calls run on the host

# numpy function, (ufunc, method) or DeviceArray operation name ("getitem",
# "setitem", "softmax") -> its CUDA implementation
FUNCTIONS = {}


def implements(*keys):
    """Register the decorated function as the CUDA implementation of `keys`."""
    def register(fn):
        for key in keys:
            FUNCTIONS[key] = fn
        return fn
    return register


def _table_method(key):
    """A DeviceArray method that is the numpy function `key` of the array itself."""
    def method(self, *args, **kwargs):
        return FUNCTIONS[key](self, *args, **kwargs)
    method.__name__ = getattr(key, "__name__", key)
    return method


def host_fallbacks():
    return dict(_fallbacks)


def c_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return tuple(reversed(st))


def numel(shape):
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
    size = property(lambda self: numel(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    strides = property(lambda self: tuple(s * self.dtype.itemsize for s in self.strides_))
    T = property(lambda self: self.transpose())

    @property
    def device(self):
        return "cuda:0"

    def contiguous(self):
        return all(st == c for st, c, s in zip(self.strides_, c_strides(self.shape), self.shape)
                   if s != 1)

    @property
    def flags(self):
        c = self.contiguous()
        f = all(st == c2 for st, c2, s in zip(self.strides_, c_strides(self.shape[::-1])[::-1],
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

    # Pickles as its values; unpickles onto the GPU through api.py's from_host, which
    # api.py sets here: unpickling in a new process then loads every implementation.
    unpickler = None

    def __reduce__(self):
        return self.unpickler, (self.get(),)

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
            if numel(self.shape) != numel([s for s in shape if s != -1]) and -1 not in shape:
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
        if is_basic(key):
            k = key if isinstance(key, tuple) else (key,)
            if not any(e is Ellipsis for e in k):
                k = k + (Ellipsis,)  # a 0-d view, never a scalar read from the shadow
            return self._view(self._shadow()[k])
        return FUNCTIONS["getitem"](self, key)

    def __setitem__(self, key, value):
        if is_basic(key):
            copyto(self[key], value)
            return
        FUNCTIONS["setitem"](self, key, value)

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
        return host_call("view", lambda a: a.view(dtype), (self,), {})

    def fill(self, value):
        copyto(self, value)

    # ---- numpy methods that are numpy functions of the array ----------------------------
    sum, prod, max, min, mean, var, std, argmax, argmin, cumsum, cumprod, any, all = (
        _table_method(fn) for fn in (np.sum, np.prod, np.max, np.min, np.mean, np.var, np.std,
                                     np.argmax, np.argmin, np.cumsum, np.cumprod, np.any, np.all))
    # softmax (or log_softmax) along an axis: softmax(axis, log=False)
    softmax = _table_method("softmax")

    def __getattr__(self, name):
        # Any other ndarray method: run it on the host (counted, warned once).
        if name.startswith("__") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'DeviceArray' object has no attribute '{name}'")
        return lambda *a, **k: host_call(name, lambda arr, *a2, **k2: getattr(arr, name)(*a2, **k2),
                                          (self,) + a, k)

    # ---- numpy protocols -------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if method == "__call__" and not kwargs:
            impl = FUNCTIONS.get(ufunc) if out is None else None  # matmul
            if impl is not None:
                return impl(*inputs)
            code = ufunc_code(ufunc)
            if code is not None:
                return _run_ufunc(ufunc, code, inputs, out)
        impl = FUNCTIONS.get((ufunc, method))
        if impl is not None:
            return impl(*inputs, out=out, **kwargs)
        if out is not None:
            kwargs["out"] = out
        return host_call(f"{ufunc.__name__}.{method}", getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        impl = FUNCTIONS.get(func)
        if impl is not None:
            return impl(*args, **kwargs)
        return host_call(func.__name__, func, args, kwargs)


def is_basic(key):
    for k in key if isinstance(key, tuple) else (key,):
        if not (k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice))) or \
                isinstance(k, bool):
            return False
    return True


# ---- allocation and transfers ----------------------------------------------------

def empty(shape, dtype):
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    return DeviceArray(alloc(numel(shape), dtype), 0, shape, c_strides(shape), dtype)


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


def check_devices(values):
    """Host arrays of more than zero dims cannot meet device arrays (torch's error)."""
    for v in values:
        if isinstance(v, np.ndarray) and v.ndim:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                               "two devices, cuda:0 and cpu! Move them with .to('cuda') or "
                               ".cpu() first.")


def scalarize(v):
    if isinstance(v, np.ndarray):  # 0-d host value: a scalar, as CPU scalar tensors in torch
        return v[()]
    return v


def copyto(dst, src, casting="unsafe", where=True):
    """dst[...] = src (broadcast, cast). A host array src is uploaded: copying
    between devices is what copy_ and assignment do, as in torch."""
    if where is not True:
        return host_call("copyto", np.copyto, (dst, src), {"casting": casting, "where": where})
    if isinstance(src, np.ndarray) and src.ndim:
        src = to_device(src)
    src = scalarize(src)
    if not isinstance(src, DeviceArray):
        src = dst.dtype.type(src)
    if dst.size:
        launch_elementwise("v0", [src], dst, dst.dtype)


def _run_ufunc(ufunc, impl, inputs, out):
    code, compute = impl
    if compute is not None:  # a formula ufunc: the CPU path already cast its operands
        return run_formula(code, compute, np.dtype(ufunc.types[0].split("->")[1]), inputs, out)
    # numpy's own type resolution (NEP 50 for Python scalars)
    check_devices(inputs)
    inputs = [scalarize(v) for v in inputs]
    dts = tuple(v.dtype if isinstance(v, (DeviceArray, np.generic)) else type(v) for v in inputs)
    loop = ufunc.resolve_dtypes(dts + (None,) * ufunc.nout)
    ops = [v.astype(d, copy=False) if isinstance(v, DeviceArray) else d.type(v)
           for v, d in zip(inputs, loop)]
    return _launch_into(code, ops, out, loop[0], loop[-1])


def run_formula(code, compute, result, inputs, out):
    """A formula kernel's call (operands already of its dtypes, as the ops layer
    casts them): `code` over v0, v1, ... in `compute`, giving `result` dtype."""
    check_devices(inputs)
    return _launch_into(code, [scalarize(v) for v in inputs], out, compute, result)


def _launch_into(code, ops, out, compute, result):
    if out is not None:
        return launch_elementwise(code, ops, out[0] if isinstance(out, tuple) else out, compute)
    shape = np.broadcast_shapes(*[v.shape for v in ops if isinstance(v, DeviceArray)])
    return launch_elementwise(code, ops, empty(shape, result), compute)


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


def host_call(name, fn, args, kwargs):
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
