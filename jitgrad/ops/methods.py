"""Attach the ops to Tensor as methods and operators, by looping the tables."""
import numpy as np

from .. import _state
from .._trace import traced, traced_inplace
from .. import dtypes as _dt
from ..tensor import Tensor, asarray, check_device, device as _device
from . import formulas as E
from . import inplace as I
from . import (compare, convert, creation, einsum, indexing, join, legacy, linalg, nn, padding,
               rearrange, reduce, rounding, sorting, triangular, views)
from .keywords import accept_aliases
from .registry import API_BUILT, OPS, REGISTRY, Arg, Sample, op

# ---- functions with torch's extra arguments -----------------------------------------------


def add(x, other, alpha=1):
    return E.add(x, other if alpha == 1 else other * alpha)


def sub(x, other, alpha=1):
    return E.sub(x, other if alpha == 1 else other * alpha)


def rsub(x, other, alpha=1):
    return E.sub(other, x if alpha == 1 else x * alpha)


def pow(x, exponent):
    return E.pow(x, exponent)


@op(method=True, export=True, inplace=True, samples=(Sample(Arg(3, 4), 0.2),))
def clamp_min(x, min):
    return E.clamp(x, min, None)


@op(method=True, export=True, inplace=True, samples=(Sample(Arg(3, 4), -0.2),))
def clamp_max(x, max):
    return E.clamp(x, None, max)


@op(method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 4), Arg(3, 4), Arg(4), value=0.5),))
def addcmul(x, tensor1, tensor2, *, value=1):
    """x + value * tensor1 * tensor2."""
    return E.add(x, E.mul(tensor1, tensor2) * value if value != 1 else E.mul(tensor1, tensor2))


@op(method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 4), Arg(3, 4), Arg(4, low=0.5, high=1.5), value=-2.0),))
def addcdiv(x, tensor1, tensor2, *, value=1):
    """x + value * tensor1 / tensor2."""
    return E.add(x, E.div(tensor1, tensor2) * value if value != 1 else E.div(tensor1, tensor2))


@op(method=True, export=True)
def positive(x):
    """x itself (torch's unary plus)."""
    return x


def _bool_mask(mask, who):
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"{who} only supports boolean masks, but got mask with dtype {got}")
    return mask


def _fill_value(value, who):
    if isinstance(value, Tensor) and value._data.ndim != 0:
        raise RuntimeError(f"{who} only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value._data.ndim} dimension(s).")
    return value


def masked_fill(x, mask, value):
    _bool_mask(mask, "masked_fill_")
    out = E.masked_fill_op(x, mask, _fill_value(value, "masked_fill_"))
    if out._data.shape != x._data.shape:
        raise RuntimeError(f"masked_fill: mask of shape {list(mask.shape)} does not broadcast to the "
                           f"tensor's shape {list(x.shape)}")
    return out


def _logical(np_fn, name):
    def fn(x, other=None):
        a = x._data if isinstance(x, Tensor) else x
        if other is None:
            return Tensor(asarray(np_fn(a)))
        b = other._data if isinstance(other, Tensor) else other
        if asarray(a).dtype.kind == "f" or asarray(b).dtype.kind == "f":
            raise TypeError(f"{name} is only supported for integer and boolean tensors")
        return Tensor(asarray(np_fn(a, b)))
    fn.__name__ = name
    return fn


bitwise_and = _logical(np.bitwise_and, "bitwise_and")
bitwise_or = _logical(np.bitwise_or, "bitwise_or")
bitwise_xor = _logical(np.bitwise_xor, "bitwise_xor")
bitwise_not = _logical(np.invert, "bitwise_not")
logical_not = _logical(np.logical_not, "logical_not")


def to(x, *args, **kwargs):
    """x.to(dtype) / x.to(device) / x.to(device, dtype) / x.to(other)."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    copy = kwargs.pop("copy", False)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, (str, _device)):
            device = a
        elif a is not None:
            dtype = a
    dev = check_device(device) if device is not None else None
    out = convert.to_dtype(x, dtype) if dtype is not None else x
    if dev is not None:
        out = convert.to_device(out, dev)
    return views.clone(out) if copy and out is x else out


# ---- in place -------------------------------------------------------------------------------


def add_(x, other, alpha=1):
    return I.inplace_elementwise(E.add.op, x, other if alpha == 1 else other * alpha)


def sub_(x, other, alpha=1):
    return I.inplace_elementwise(E.sub.op, x, other if alpha == 1 else other * alpha)


def clamp_(x, min=None, max=None):
    return I.apply_inplace(x, lambda t: E.clamp(t, min, max))


def fill_(x, value):
    return I.inplace_elementwise(E.fill_op.op, x, _fill_value(value, "fill_"))


def zero_(x):
    return fill_(x, 0)


def copy_(x, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    if src.device != x.device and src._data.ndim:  # across devices: a differentiable transfer
        src = convert.to_device(src, x.device)
    return I.inplace_elementwise(E.copy_op.op, x, src)


def masked_fill_(x, mask, value):
    _bool_mask(mask, "masked_fill_")
    return I.inplace_elementwise(E.masked_fill_op.op, x, mask, _fill_value(value, "masked_fill_"))


def setitem(x, key, value):
    if isinstance(value, Tensor) or _needs_graph(x):
        I.apply_inplace(x, lambda t: indexing.index_put(t, key, value))
        return
    I.check_writable(x)
    k, _ = indexing._norm_key(key, x._data.ndim)
    try:
        x._data[k] = value
    except IndexError as e:
        raise indexing._index_error(e) from None
    x._vc[0] += 1


def _needs_graph(x):
    return _state.local.grad_enabled and x._rg or _state.fw_level[0] is not None


def _inplace_method(op):
    """Tensor.<name>_ of an elementwise op: the op's result stored into self."""
    arity = len(op.args) - 1

    # One code object for every op: the profiler names its event from the op that
    # inplace_elementwise runs, and skips this wrapper (its name is private).
    def _inplace(x, *others):
        if len(others) != arity:
            raise TypeError(f"{op.name}_() takes {arity} argument(s) besides self, "
                            f"got {len(others)}")
        return I.inplace_elementwise(op, x, *others)
    return _inplace


# The modules whose declarations (registry.OPS) the tables below read; imported for that.
_DECLARING = (compare, einsum, indexing, join, linalg, nn, padding, rearrange, reduce, rounding,
              sorting, triangular)


def _inplace_op_method(fn):
    """Tensor.<name>_ of a declared op: its result stored into self."""
    def _inplace(x, *args, **kwargs):
        return I.apply_inplace(x, lambda t: fn(t, *args, **kwargs))
    return _inplace


def _method_table():
    # The registry's own declarations (method/inplace flags of each op).
    API_BUILT[0] = True
    m = {name: op.function for name, op in REGISTRY.items() if op.method}
    m.update({name + "_": _inplace_method(op) for name, op in REGISTRY.items() if op.inplace})
    for d in OPS.values():
        m.update((n, d.function) for n in d.methods)
        m.update((n + "_", _inplace_op_method(d.function)) for n in d.inplace)
    m.update(add=add, sub=sub, pow=pow, clamp=E.clamp, lerp=E.lerp, masked_fill=masked_fill,
             where=lambda x, condition, y: E.where(condition, x, y), to=to,
             bitwise_and=bitwise_and, bitwise_or=bitwise_or, bitwise_xor=bitwise_xor,
             bitwise_not=bitwise_not, logical_not=logical_not)
    m.update(add_=add_, sub_=sub_, pow_=lambda x, e: I.inplace_elementwise(E.pow.op, x, e),
             clamp_=clamp_, fill_=fill_, zero_=zero_, copy_=copy_,
             masked_fill_=masked_fill_)
    return _with_aliases(m)


# torch's other names for the same op: alias -> name (functions, methods and, where the
# op has one, the in-place method)
ALIASES = {
    "negative": "neg", "absolute": "abs", "multiply": "mul", "divide": "div",
    "true_divide": "div", "subtract": "sub", "clip": "clamp", "greater": "gt",
    "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
    "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arctan2": "atan2",
    "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh",
    "swapaxes": "transpose", "swapdims": "transpose", "moveaxis": "movedim", "fix": "trunc",
    "concatenate": "cat",
}


def _with_aliases(table):
    for alias, name in ALIASES.items():
        for suffix in ("", "_"):
            if name + suffix in table:
                table.setdefault(alias + suffix, table[name + suffix])
    return table


def _conversions():
    def conv(d):
        return lambda x, memory_format=None: convert.to_dtype(x, d)
    return dict(float=conv(_dt.float32), double=conv(_dt.float64), half=conv(_dt.float16),
                int=conv(_dt.int32), long=conv(_dt.int64), bool=conv(_dt.bool_),
                cpu=lambda x, memory_format=None: convert.to_device(x, check_device("cpu")),
                cuda=lambda x, device=None, non_blocking=False, memory_format=None:
                convert.to_device(x, check_device("cuda" if device is None else device)),
                type_as=lambda x, o: convert.to_device(convert.to_dtype(x, o.dtype), o.device),
                type=legacy.tensor_type, new_zeros=creation.new_zeros,
                new_ones=creation.new_ones, new_empty=creation.new_empty,
                new_full=creation.new_full, new_tensor=creation.new_tensor,
                bernoulli=creation.bernoulli, multinomial=creation.multinomial,
                **creation.random_fills)


def _operators():
    return {
        # torch keeps a Python number second in commutative ops (next_functions order)
        "__add__": E.add, "__radd__": E.add,
        "__sub__": E.sub, "__rsub__": lambda x, o: E.sub(o, x),
        "__mul__": E.mul, "__rmul__": E.mul,
        "__truediv__": E.div, "__rtruediv__": lambda x, o: E.div(o, x),
        "__pow__": E.pow, "__rpow__": lambda x, o: E.pow(o, x),
        "__matmul__": linalg.matmul, "__rmatmul__": lambda x, o: linalg.matmul(o, x),
        "__neg__": E.neg, "__pos__": lambda x: x, "__abs__": E.abs,
        "__lt__": E.lt, "__le__": E.le, "__gt__": E.gt, "__ge__": E.ge,
        "__eq__": E.eq, "__ne__": E.ne,
        "__and__": bitwise_and, "__or__": bitwise_or, "__xor__": bitwise_xor,
        "__rand__": bitwise_and, "__ror__": bitwise_or, "__rxor__": bitwise_xor,
        "__invert__": bitwise_not,
        "__iadd__": add_, "__isub__": sub_,
        "__imul__": lambda x, o: I.inplace_elementwise(E.mul.op, x, o),
        "__itruediv__": lambda x, o: I.inplace_elementwise(E.div.op, x, o),
        "__getitem__": indexing.getitem, "__setitem__": setitem,
        "__format__": _format,
    }


def _format(x, spec):
    """A 0-d tensor formats as its number ('{:+.2f}'), as in torch; others only with
    an empty spec (their str)."""
    if x._data.ndim == 0:
        return format(x.item(), spec)
    return object.__format__(x, spec)


# Methods that write into self: a jitgrad.compile trace records them as such.
_WRITES_SELF = frozenset(("__iadd__", "__isub__", "__imul__", "__itruediv__", "__setitem__"))


def _for_trace(name, fn):
    """`fn` as jitgrad.compile's tracer must see it. Elementwise functions and
    declared ops are recorded where they run; the rest of the table is recorded here."""
    if hasattr(fn, "__wrapped_op__") or (hasattr(fn, "op") and fn.op.function is fn):
        return fn
    if name in _WRITES_SELF or (name.endswith("_") and not name.startswith("__")):
        return traced_inplace(fn, name)
    return traced(fn, name)


def attach():
    for table in (_method_table(), _conversions(), _operators()):
        for name, fn in table.items():
            setattr(Tensor, name, accept_aliases(_for_trace(name, fn), name))
    Tensor.T = property(views.T)
    Tensor.mT = property(lambda x: views.transpose(x, -2, -1))
    Tensor.__hash__ = object.__hash__
