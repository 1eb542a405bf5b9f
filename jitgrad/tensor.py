"""Tensor: an array (numpy on the CPU) plus autograd metadata.

Tensor is data + dispatch only: math lives in ops/ (which attaches the
operators and methods here by looping its registry), the backward pass in
autograd/engine.py, hooks in autograd/graph.py.
"""
import warnings

import numpy as np

from . import _state
from . import backend
from . import dtypes as _dt
from ._repr import tensor_repr
from ._trace import TRACE, breaks, reads, size_read, traced, traced_inplace


NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information.")


class Size(tuple):
    __slots__ = ()

    def __repr__(self):
        return f"jitgrad.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


class device:
    __slots__ = ("type", "index")

    def __init__(self, spec, index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {spec}")
        self.type = kind
        self.index = int(idx) if idx else index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{idx})"


CPU = device("cpu")
CUDA0 = device("cuda", 0)


def check_device(spec):
    """Resolve a `device=` argument (None: the CPU). CUDA needs numba-cuda and a GPU
    (or Numba's simulator); one GPU, cuda:0, is used."""
    if spec is None:
        return CPU
    d = device(spec)
    if d.type == "cpu":
        return CPU
    reason = backend.cuda.unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"cannot use device '{d}': {reason}")
    if d.index not in (None, 0):
        raise RuntimeError(f"CUDA error: invalid device ordinal: jitgrad uses one GPU, cuda:0 "
                           f"(got '{d}')")
    return CUDA0


def device_for(array_type):
    """The device whose arrays are of `array_type` (the type a node's metadata keeps)."""
    return CPU if backend.is_host_type(array_type) else CUDA0


def on_device(arr, dev):
    """`arr` (a numpy or device array) moved to device `dev` (a checked device)."""
    return backend.move(arr, dev.type)


def asarray(v, dtype=None):
    """`v` as an array on the device it is on (numpy reductions may give scalars:
    those become 0-d host arrays)."""
    if backend.is_array(v):
        return v if dtype is None else v.astype(dtype, copy=False)
    return np.asarray(v, dtype)


def ascontiguous(a):
    """A C-contiguous array with a's values (a itself if it already is one)."""
    return a if a.flags.c_contiguous else a.copy()


def describe(arr):
    return f"jitgrad.{_dt.from_np(arr.dtype).name} [{', '.join(map(str, arr.shape))}]"


_UNUSUAL = _state.unusual
_new = object.__new__


def result_tensor(data):
    """Tensor(data) for an op's result, `data` already an array. Outside a
    jitgrad.compile trace, the same slots as Tensor.__init__ sets (a test compares
    them), without the type call's dispatch and the conversions: an eager op on small
    tensors spent a tenth of its time making its result. In a trace, Tensor(data),
    which the tracer sees made."""
    if TRACE[0] is not None:
        return Tensor(data)
    t = _new(Tensor)
    t._data = data
    t._rg = False
    t.grad_fn = None
    t.output_nr = 0
    t._vc = {0: 0}  # see Tensor.__init__
    t._base = t._view_chain = t._grad_value = t._views = t._hooks = t._post_hooks = t._accum = \
        t._fw = t._creation_meta = None
    t._retains_grad = False
    t._inference = _state.local.inference if _UNUSUAL else False
    return t


_engine_backward = None  # autograd.engine.backward, once Tensor.backward first runs


class Tensor:
    __slots__ = ("_data", "_rg", "grad_fn", "output_nr", "_vc", "_base", "_view_chain",
                 "_grad_value", "_hooks", "_post_hooks", "_retains_grad", "_accum", "_inference",
                 "_fw", "_views", "_creation_meta", "__weakref__")
    # Makes numpy hand `ndarray * Tensor` to Tensor.__rmul__.
    __array_priority__ = 1000

    def __init__(self, data, requires_grad=False):
        if type(data) is not np.ndarray:
            # numpy scalars (e.g. a full reduction, any ufunc on 0-d arrays) keep
            # their dtype, tested first as they are the common case; Python data
            # takes the default float dtype, as torch.Tensor(data) does.
            if isinstance(data, np.generic):
                data = np.asarray(data)
            elif not backend.is_array(data):
                data = np.array(data, dtype=_dt.get_default_dtype().np)
        self._data = data
        self._rg = requires_grad
        self.grad_fn = None
        self.output_nr = 0  # which output of grad_fn this is; 0 while grad_fn is None
        # The version counter, shared with views: one per storage. A dict of ints is not
        # tracked by the garbage collector (a list is): a graph of many small ops keeps
        # hundreds of tensors alive, and each tracked object costs about 1.6 us per step
        # in collections (docs/performance.md).
        self._vc = {0: 0}
        # _creation_meta: how a view was made, when autograd cannot rebase it
        self._base = self._view_chain = self._grad_value = self._views = self._hooks = \
            self._post_hooks = self._accum = self._fw = self._creation_meta = None
        self._retains_grad = False
        self._inference = _state.local.inference if _UNUSUAL else False
        if TRACE[0] is not None:  # a jitgrad.compile trace tells its own tensors apart
            TRACE[0].born(self)

    # ---- attributes ---------------------------------------------------------
    @property
    def shape(self):
        if TRACE[0] is not None:
            size_read(self)
        return Size(self._data.shape)

    @property
    def dtype(self):
        return _dt.from_np(self._data.dtype)

    @property
    def device(self):
        return CPU if backend.is_host(self._data) else CUDA0

    @property
    def is_cuda(self):
        return not backend.is_host(self._data)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def _version(self):
        return self._vc[0]

    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if requires_grad and self._inference and not _state.local.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode "
                               "is not allowed.")
        if requires_grad and self._data.dtype.kind not in "fc":
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients "
                f"(got {self.dtype}); convert first, e.g. x.float().requires_grad_()")
        if self.grad_fn is None:
            self._rg = bool(requires_grad)
        return self

    @property
    def grad(self):
        if self._grad_value is None and self.grad_fn is not None and not self._retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad_value

    @grad.setter
    def grad(self, value):
        # torch's checks, in torch's order: the optimizer kernels index a parameter's
        # gradient as they index the parameter, so a wrong one must not get in
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError("assigned grad expected to be a Tensor or None but got grad of "
                                f"type {type(value).__name__}")
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{value.dtype.name}' to a "
                    f"tensor with dtype '{self.dtype.name}'. The gradient must match the "
                    f"tensor's dtype: convert it first, e.g. grad.to({self.dtype})")
            if type(value._data) is not type(self._data):  # another device (see .device)
                raise RuntimeError(
                    f"attempting to assign a gradient with device type '{value.device.type}' to "
                    f"a tensor with device type '{self.device.type}'. Please ensure that the "
                    f"gradient and the tensor are on the same device: move it first, e.g. "
                    f"grad.to('{self.device}')")
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size")
        self._grad_value = value

    # torch's `_grad` is `grad`, checks included
    _grad = grad

    @property
    def data(self):
        # shares storage but not the version counter: changes through .data are
        # invisible to autograd's checks, as in torch
        return Tensor(self._data)

    @data.setter
    def data(self, value):
        # As torch: any shape, dtype or device may be assigned (.grad keeps its own;
        # the optimizer then refuses to step until they agree again).
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if self._rg and value._data.dtype.kind not in "fc":
            raise RuntimeError("data set to a tensor that requires gradients must be floating "
                               f"point or complex dtype (got {value.dtype}); convert it first, "
                               "e.g. .float()")
        self._data = value._data

    @property
    def retains_grad(self):
        return self._retains_grad

    def is_inference(self):
        return self._inference

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def is_complex(self):
        return self._data.dtype.kind == "c"

    # ---- plain queries --------------------------------------------------------
    def size(self, dim=None):
        if dim is None:
            return self.shape
        if TRACE[0] is not None:
            size_read(self)
        return self._data.shape[wrap_dim(dim, self._data.ndim)]

    def dim(self):
        return self._data.ndim

    def numel(self):
        if TRACE[0] is not None:
            size_read(self)
        return self._data.size

    nelement = numel

    def element_size(self):
        return self._data.itemsize

    itemsize = property(element_size)
    nbytes = property(lambda self: self._data.nbytes)

    def stride(self, dim=None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[wrap_dim(dim, self._data.ndim)]

    def is_contiguous(self):
        return self._data.flags.c_contiguous

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self):
        return self._data.tolist()

    def numpy(self, force=False):
        if self._rg and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if not backend.is_host(self._data):
            if force:
                return self._data.get()
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() "
                            "to copy the tensor to host memory first.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if not backend.is_host(self._data):
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() "
                            "to copy the tensor to host memory first.")
        if dtype is not None and np.dtype(dtype) != self._data.dtype:
            return self._data.astype(dtype)
        return self._data.copy() if copy else self._data

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        if TRACE[0] is not None:
            size_read(self)
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                "Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()).item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    __hash__ = object.__hash__

    def __repr__(self):
        return tensor_repr(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data, self._rg))

    # ---- autograd entry points ---------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        global _engine_backward
        if _engine_backward is None:  # the engine sits above the tensor layer: imported once
            from .autograd.engine import backward as _engine_backward
        _engine_backward((self,), None if gradient is None else (gradient,), retain_graph,
                         create_graph, inputs=inputs)

    def detach(self):
        t = Tensor(self._data)
        t._vc = self._vc  # detach shares storage, so it shares the version counter
        t._inference = self._inference
        return t

    def detach_(self):
        if self._base is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
                "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
                "called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")
        self.grad_fn, self.output_nr, self._rg = None, 0, False
        return self


# What a jitgrad.compile trace records (detach, reading .grad or .data), stops at
# (anything that hands a value to Python, or changes autograd state by hand), or
# computes its deferred values for (a repr, pickling).
for _name in ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__",
              "__array__"):
    setattr(Tensor, _name, breaks(getattr(Tensor, _name),
                                  f"Tensor.{_name.strip('_')}() hands a tensor's value to Python"))
Tensor.__repr__ = reads(Tensor.__repr__)
Tensor.__reduce_ex__ = reads(Tensor.__reduce_ex__)
Tensor.requires_grad_ = breaks(Tensor.requires_grad_, "requires_grad_() changes autograd state")
Tensor.detach = traced(Tensor.detach)
Tensor.detach_ = traced_inplace(Tensor.detach_)
Tensor.grad = Tensor._grad = property(traced(Tensor.grad.fget, "grad"),
                                      traced(Tensor.grad.fset, "set_grad"))
Tensor.data = property(traced(Tensor.data.fget, "data"), traced(Tensor.data.fset, "set_data"))
Tensor.requires_grad = property(Tensor.requires_grad.fget, breaks(
    Tensor.requires_grad.fset, "setting requires_grad changes autograd state"))


def _rebuild(data, rg):
    return Tensor(data, rg)


def wrap_dim(dim, ndim):
    """A dim in [-ndim, ndim) as a non-negative index, with torch's error."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n
