"""dtypes and torch's type-promotion rules.

Kernels are keyed by numpy dtypes; the public `jitgrad.float32` etc. are thin
named wrappers so that reprs and comparisons read like torch.
"""
import numpy as np

# Promotion categories, lowest first: a higher category always wins.
_BOOL, _INT, _FLOAT, _COMPLEX = range(4)


class dtype:
    __slots__ = ("name", "np", "_cat", "itemsize")

    def __init__(self, name, np_type, cat):
        self.name = name
        self.np = np.dtype(np_type)
        self._cat = cat
        self.itemsize = self.np.itemsize

    is_floating_point = property(lambda self: self._cat == _FLOAT)
    is_complex = property(lambda self: self._cat == _COMPLEX)
    is_signed = property(lambda self: self._cat != _BOOL)

    def __repr__(self):
        return "jitgrad." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


float16 = dtype("float16", np.float16, _FLOAT)
float32 = dtype("float32", np.float32, _FLOAT)
float64 = dtype("float64", np.float64, _FLOAT)
int32 = dtype("int32", np.int32, _INT)
int64 = dtype("int64", np.int64, _INT)
bool_ = dtype("bool", np.bool_, _BOOL)
complex64 = dtype("complex64", np.complex64, _COMPLEX)
complex128 = dtype("complex128", np.complex128, _COMPLEX)
ALL = (float16, float32, float64, int32, int64, bool_, complex64, complex128)
half, float, double, int, long, cfloat, cdouble = (
    float16, float32, float64, int32, int64, complex64, complex128)

_FROM_NP = {d.np: d for d in ALL}
_CAT = {d.np: d._cat for d in ALL}


def _by_name(name):
    return globals()[name if name != "bool" else "bool_"]


class _Default:
    float = float32


_default = _Default()


def get_default_dtype():
    return _default.float


def set_default_dtype(d):
    d = to_dtype(d)
    if d._cat != _FLOAT:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default.float = d


def from_np(np_dtype):
    try:
        return _FROM_NP[np_dtype]
    except KeyError:
        raise TypeError(
            f"numpy dtype {np_dtype} is not supported by jitgrad; "
            f"convert the array to one of {', '.join(d.name for d in ALL)} first") from None


def to_dtype(d):
    """Accept a jitgrad dtype, a numpy dtype/type or a Python type."""
    if isinstance(d, dtype):
        return d
    if d is builtins_float:
        return _default.float
    if d is builtins_int:
        return int64
    if d is builtins_bool:
        return bool_
    if d is builtins_complex:
        return complex64 if _default.float is float32 else complex128
    return from_np(np.dtype(d))


import builtins as _b  # noqa: E402  (after the module-level names shadowing float/int)

builtins_float, builtins_int, builtins_bool, builtins_complex = _b.float, _b.int, _b.bool, _b.complex


def promote_np(a, b):
    """torch.promote_types on numpy dtypes."""
    if a == b:
        return a
    ca, cb = _CAT[a], _CAT[b]
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if _CAT[hi] == _COMPLEX and lo == np.float64:
            return np.dtype(np.complex128)
        return hi
    return a if a.itemsize >= b.itemsize else b


def scalar_np(value):
    """dtype a Python scalar takes when it decides a result's category."""
    if isinstance(value, _b.bool):
        return np.dtype(np.bool_)
    if isinstance(value, _b.int):
        return np.dtype(np.int64)
    if isinstance(value, _b.float):
        return _default.float.np
    if isinstance(value, _b.complex):
        return np.dtype(np.complex64 if _default.float is float32 else np.complex128)
    if isinstance(value, np.generic):
        return scalar_np(value.item())
    raise TypeError(f"expected a Tensor or a Python number, got {type(value).__name__}")


def result_np(tensors_np, zero_dim_np, scalars):
    """torch's result_type: dimensioned tensors win over zero-dim tensors, which win
    over Python scalars, unless the lower-priority group is of a higher category."""
    out = None
    for group in (tensors_np, zero_dim_np, [scalar_np(s) for s in scalars]):
        if not group:
            continue
        g = group[0]
        for d in group[1:]:
            g = promote_np(g, d)
        if out is None or _CAT[g] > _CAT[out]:
            out = g
    return out


_F32 = np.dtype(np.float32)


def kernel_dtypes(name, tensors_np, zero_dim_np, scalars, floating, bool_promotes):
    """(kernel dtype, result dtype) of elementwise op `name` under torch's promotion:
    `floating` ops compute integers and bools in the default float dtype,
    `bool_promotes` ops compute bools in int64."""
    res = result_np(tensors_np, zero_dim_np, scalars)
    if res.kind == "c":
        raise TypeError(f"{name}: complex tensors are not supported by jitgrad's kernels; "
                        "work on the real and imaginary parts as float tensors")
    if floating and res.kind in "biu":
        res = _default.float.np
    elif res.kind == "b" and bool_promotes:
        res = np.dtype(np.int64)
    # float16 computes in float32 (Numba's CPU target has no float16 arithmetic).
    return (_F32 if res == np.float16 else res), res


# ---- torch's dtype queries: promote_types, result_type, can_cast, finfo, iinfo ----------------

def promote_types(type1, type2):
    """The smallest dtype both promote to (torch.promote_types)."""
    return from_np(promote_np(to_dtype(type1).np, to_dtype(type2).np))


def result_type(tensor1, tensor2):
    """The dtype of an arithmetic op on these operands (tensors or Python numbers),
    with torch's priorities: dimensioned tensors, then 0-d tensors, then numbers."""
    groups = ([], [], [])
    for v in (tensor1, tensor2):
        arr = getattr(v, "_data", None)
        if arr is None:
            groups[2].append(v)
        else:
            groups[0 if arr.ndim else 1].append(arr.dtype)
    return from_np(result_np(*groups))


def can_cast(from_, to):
    """Whether torch's type promotion allows a value of `from_` into `to` without
    changing its kind: bool < integer < floating point < complex."""
    return to_dtype(from_)._cat <= to_dtype(to)._cat


class _Info:
    """A numpy finfo/iinfo read as torch's (Python numbers, the dtype's name)."""

    def __init__(self, d, info, fields):
        self.dtype = d.name
        self.bits = info.bits
        for name in fields:
            setattr(self, name, _b.float(getattr(info, name)) if d._cat == _FLOAT
                    else _b.int(getattr(info, name)))
        if "resolution" in fields:  # torch's is a power of ten (numpy's is rounded to the dtype)
            self.resolution = 10.0 ** -info.precision
        self._fields = fields

    def __repr__(self):
        kind = "finfo" if "eps" in self._fields else "iinfo"
        values = ", ".join(f"{k}={getattr(self, k):g}" for k in self._fields)
        return f"{kind}({values}, dtype={self.dtype})"


def finfo(type=None):
    """Machine limits of a floating-point dtype (the default dtype when none is given):
    bits, eps, max, min, tiny (= smallest_normal) and resolution."""
    d = _default.float if type is None else to_dtype(type)
    if d._cat not in (_FLOAT, _COMPLEX):
        raise TypeError(f"jitgrad.finfo() requires a floating point input type, got {d!r}. "
                        "Use jitgrad.iinfo to handle integer types")
    real = from_np(np.dtype(d.np.type(0).real.dtype)) if d._cat == _COMPLEX else d
    return _Info(real, np.finfo(real.np),
                 ("resolution", "min", "max", "eps", "smallest_normal", "tiny"))


def iinfo(type):
    """Machine limits of an integer dtype: bits, min and max."""
    d = to_dtype(type)
    if d is bool_:
        raise TypeError(f"{d!r} is not supported by jitgrad.iinfo")
    if d._cat != _INT:
        raise TypeError(f"jitgrad.iinfo() requires an integer input type, got {d!r}. "
                        "Use jitgrad.finfo to handle floating point types")
    return _Info(d, np.iinfo(d.np), ("min", "max"))
