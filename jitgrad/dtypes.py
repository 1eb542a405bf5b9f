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
