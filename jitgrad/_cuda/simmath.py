"""`math` for kernels run as Python: by Numba's CUDA simulator, or anywhere
with NUMBA_DISABLE_JIT=1 (kernels/source.py header).

In compiled code, on a GPU or a CPU, `math.exp(1000.0)` is inf and
`math.log(-1.0)` is nan; Python's `math` raises instead. These numpy
versions give the compiled (IEEE) results, so kernels run as Python behave
like compiled ones at the edges."""
import types

import numpy as np

_NAMES = {"exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10,
          "log1p": np.log1p, "expm1": np.expm1,
          "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
          "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
          "acosh": np.arccosh, "atanh": np.arctanh, "sinh": np.sinh, "cosh": np.cosh,
          "tanh": np.tanh, "atan2": np.arctan2, "pow": np.power, "floor": np.floor,
          "ceil": np.ceil, "trunc": np.trunc, "fabs": np.fabs, "isnan": np.isnan,
          "isinf": np.isinf, "copysign": np.copysign}


def _quiet(fn):
    def call(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return call


def _erf(x):
    import math as _m
    return type(x)(_m.erf(x)) if not np.isnan(x) else x


math = types.SimpleNamespace(erf=_erf, inf=np.inf, nan=np.nan, pi=np.pi,
                             **{k: _quiet(f) for k, f in _NAMES.items()})
