"""The scalar code a CUDA elementwise kernel computes for a ufunc: numpy's from a
table, and jitgrad's formula ufuncs (kernels/cpu.py) by their formula, for device
operands that meet a formula ufunc the CPU path compiled (the ops layer asks
jitgrad/_cuda/formulas.py for device kernels, which compiles no CPU ufunc)."""
import numpy as np

from ..kernels.cpu import FORMULAS
from ..kernels.expr import to_scalar_code
from . import kernels as K

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
    "isnan": "{0} != {0}", "isfinite": "abs({0}) < math.inf", "isinf": "abs({0}) == math.inf",
    "sign": "(T(1) if {0} > T(0) else (T(-1) if {0} < T(0) else {0}))",
}
UFUNC_REDUCE = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}
_formula_code = {}  # CPU formula ufunc -> (scalar code, compute dtype)


def scalar_code(names, body, prefix=None):
    """Scalar code of a parsed formula over `names` (renamed v0, v1, ...), times the
    operand `prefix` (the incoming gradient of a backward kernel) if given."""
    code = to_scalar_code(body, {a: f"v{i}" for i, a in enumerate(names)})
    return code if prefix is None else f"v{names.index(prefix)} * {code}"


def ufunc_code(ufunc):
    """(scalar code over v0, v1..., compute dtype or None for numpy's rules) of a
    ufunc: a jitgrad formula ufunc (kernels/cpu.py) or a numpy ufunc of the table."""
    got = _formula_code.get(ufunc)
    if got is not None:
        return got
    meta = FORMULAS.get(ufunc)
    if meta is not None:
        args, body, prefix, compute = meta
        got = _formula_code[ufunc] = (scalar_code(args, body, prefix), compute)
        return got
    tpl = _NP_UFUNCS.get(ufunc.__name__)
    if tpl is None or ufunc.nout != 1:
        return None
    return tpl.format(*[f"v{i}" for i in range(ufunc.nin)]), None
