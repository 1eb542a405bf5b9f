"""The formula table: every elementwise op of jitgrad, one entry each.

`out` is the forward formula; each keyword named after an operand is the
partial derivative of `out` with respect to it. Operands: x, y, (w); `out`
is the forward result. Functions: see kernels/expr.py MATH.

An entry made with `_op` is public: `jitgrad.<name>` and `Tensor.<name>`;
`_op_` adds the in-place `Tensor.<name>_` (as torch's trailing underscore).
`_ew` entries are internal kernels that public functions elsewhere wrap.
"""
import functools

import numpy as np

from .pointwise import FORMULA_FUNCTIONS
from .indexing import nonzero
from .registry import elementwise as _ew

_op = functools.partial(_ew, export=True, method=True)
_op_ = functools.partial(_op, inplace=True)

_XY = ("x", "y")
LN2 = "0.6931471805599453"
LN10 = "2.302585092994046"

# ---- unary, floating (integer inputs compute in the default float dtype) --------
exp = _op_("exp", out="exp(x)", x="out")
exp2 = _op_("exp2", out="exp2(x)", x=f"out * {LN2}")
log = _op_("log", out="log(x)", x="1 / x", domain=(0.1, 3.0))
log2 = _op_("log2", out="log2(x)", x=f"1 / (x * {LN2})", domain=(0.1, 3.0))
log10 = _op_("log10", out="log10(x)", x=f"1 / (x * {LN10})", domain=(0.1, 3.0))
log1p = _op_("log1p", out="log1p(x)", x="1 / (1 + x)", domain=(-0.9, 3.0),
             node_names={(True,): "Log1PBackward0"})
expm1 = _op_("expm1", out="expm1(x)", x="out + 1")
sqrt = _op_("sqrt", out="sqrt(x)", x="0.5 / out", domain=(0.1, 3.0))
rsqrt = _op_("rsqrt", out="1 / sqrt(x)", x="-0.5 * out * out * out", domain=(0.1, 3.0))
sin = _op_("sin", out="sin(x)", x="cos(x)")
cos = _op_("cos", out="cos(x)", x="-sin(x)")
tan = _op_("tan", out="tan(x)", x="1 + out * out", domain=(-1.2, 1.2))
asin = _op_("asin", out="asin(x)", x="1 / sqrt(1 - x * x)", domain=(-0.9, 0.9))
acos = _op_("acos", out="acos(x)", x="-1 / sqrt(1 - x * x)", domain=(-0.9, 0.9))
atan = _op_("atan", out="atan(x)", x="1 / (1 + x * x)")
asinh = _op_("asinh", out="asinh(x)", x="1 / sqrt(x * x + 1)")
acosh = _op_("acosh", out="acosh(x)", x="1 / sqrt(x * x - 1)", domain=(1.1, 3.0))
atanh = _op_("atanh", out="atanh(x)", x="1 / (1 - x * x)", domain=(-0.9, 0.9))
sinh = _op_("sinh", out="sinh(x)", x="cosh(x)")
cosh = _op_("cosh", out="cosh(x)", x="sinh(x)")
tanh = _op_("tanh", out="tanh(x)", x="1 - out * out")
# Two branches so exp never overflows: exp(-x) for x >= 0, exp(x) otherwise.
sigmoid = _op_("sigmoid", out="where(x >= 0, 1 / (1 + exp(-x)), exp(x) / (1 + exp(x)))",
              x="out * (1 - out)")
reciprocal = _op_("reciprocal", out="1 / x", x="-out * out", domain=(0.5, 2.0))
# torch multiplies by the constant in the tensor's dtype, as this does: the same bits
rad2deg = _op_("rad2deg", out="x * 57.29577951308232", x="57.29577951308232",
               node_names={(True,): "Rad2DegBackward0"})
erf = _op_("erf", out="erf(x)", x="1.1283791670955126 * exp(-x * x)")
# softplus(x) = log(1 + exp(beta x)) / beta, linear above threshold (torch's rule).
# The slope is sigmoid(beta x) as e / (1 + e): `1 - 1 / (1 + e)` cancels to 0 in the
# tail (float32 from x = -17, float64 from -37) where the true slope is e.
_softplus = _ew("softplus", args=("x", "beta", "threshold"),
                out="where(x * beta > threshold, x, log1p(exp(x * beta)) / beta)",
                x="where(x * beta > threshold, 1, exp(x * beta) / (1 + exp(x * beta)))",
                scalars={"beta": 1.5, "threshold": 20.0}, scalar_params=("beta", "threshold"))
_gelu = _ew("gelu", out="0.5 * x * (1 + erf(x * 0.7071067811865476))",
            x="0.5 * (1 + erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * x * x)")
_gelu_tanh = _ew("gelu_tanh",
                 out="0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))",
                 x="0.5 * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) + 0.5 * x"
                   " * (1 - tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))"
                   " * tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"
                   " * 0.7978845608028654 * (1 + 0.134145 * x * x)",
                 node_names={(True,): "GeluBackward0"})
# torch's forms: silu = x / (1 + exp(-x)) (nan at -inf, as torch); the slopes of elu and
# leaky_relu test `x > 0` as torch's kernels do, so that nan takes the same branch. leaky_relu's
# slope is a function of x with derivative 0 (`0 * sign(x)`, in both branches, so that on
# Tensors it has x's dtype, not the default one), as torch's, so that a gradient penalty
# differentiates through it (see relu).
_silu = _ew("silu", out="x / (1 + exp(-x))",
            x="1 / (1 + exp(-x)) * (1 + x * (1 - 1 / (1 + exp(-x))))")
_elu = _ew("elu", args=("x", "alpha"), out="where(x <= 0, alpha * expm1(x), x)",
           x="where(x > 0, 1, alpha * exp(x))", scalars={"alpha": 1.5}, scalar_params=("alpha",))
_leaky_relu = _ew("leaky_relu", args=("x", "slope"), out="where(x > 0, x, x * slope)",
                  x="where(x > 0, 1 + 0 * sign(x), slope + 0 * sign(x))", scalars={"slope": 0.2},
                  scalar_params=("slope",))
# The piecewise activations test their kinks as torch's vectorized kernels do: hardtanh's
# slope is 0 at either bound and at nan, hardswish's 0 at -3 and nan at nan, hardsigmoid's
# 0 at nan; hardtanh's slope is a function of x with derivative 0 (`0 * sign(x)`, see
# leaky_relu). hardsigmoid's slope is torch's 1/6 rounded to float32, in float64 too.
_hardtanh = _ew("hardtanh", ("x", "lo", "hi"), out="where(x < lo, lo, where(x > hi, hi, x))",
                x="where(x > lo, where(x < hi, 1, 0), 0) + 0 * sign(x)",
                scalars={"lo": -1, "hi": 1}, scalar_params=("lo", "hi"), floating=False)
_hardswish = _ew("hardswish", out="x * where(x + 3 < 0, 0, where(x + 3 > 6, 6, x + 3)) / 6",
                 x="where(x >= 3, 1, where(x <= -3, 0, x / 3 + 0.5))", domain=(-4.0, 4.0))
_hardsigmoid = _ew("hardsigmoid", out="where(x + 3 < 0, 0, where(x + 3 > 6, 6, x + 3)) / 6",
                   x="where(x > -3, where(x < 3, 0.1666666716337204, 0), 0)", domain=(-4.0, 4.0))
# selu, celu, threshold, hardshrink, softshrink: torch's branches; their slopes at nan are
# those of torch's vectorized kernels (selu and celu nan, threshold 1, the shrinks 0), and
# the constant slopes carry `0 * sign(x)` so that a gradient penalty differentiates them.
_selu = _ew("selu", out="where(x <= 0, 1.7580993408473766 * expm1(x), 1.0507009873554805 * x)",
            x="where(x > 0, 1.0507009873554805, 1.7580993408473766 * exp(x))",
            node_names={(True,): "EluBackward0"})
_celu = _ew("celu", ("x", "alpha"), out="where(x <= 0, alpha * expm1(x / alpha), x)",
            x="where(x > 0, 1, exp(x / alpha))", scalars={"alpha": 1.5},
            scalar_params=("alpha",))
_threshold = _ew("threshold", ("x", "th", "value"), out="where(x <= th, value, x)",
                 x="where(x <= th, 0, 1) + 0 * sign(x)", scalars={"th": 0, "value": -1},
                 scalar_params=("th", "value"), floating=False)
_hardshrink = _ew("hardshrink", ("x", "lambd"), out="where(abs(x) <= lambd, 0, x)",
                  x="where(abs(x) > lambd, 1, 0) + 0 * sign(x)", scalars={"lambd": 0.5},
                  scalar_params=("lambd",))
_softshrink = _ew("softshrink", ("x", "lambd"),
                  out="where(x > lambd, x - lambd, where(x < -lambd, x + lambd, where(x != x, x, 0)))",
                  x="where(abs(x) > lambd, 1, 0) + 0 * sign(x)", scalars={"lambd": 0.5},
                  scalar_params=("lambd",))
# log_sigmoid = min(x, 0) - log1p(exp(-|x|)): no overflow on either side (torch's form).
_log_sigmoid = _ew("log_sigmoid", out="where(x < 0, x, 0) - log1p(exp(-abs(x)))",
                   x="where(x < 0, 1 - exp(-abs(x)) / (1 + exp(-abs(x))),"
                     " exp(-abs(x)) / (1 + exp(-abs(x))))")
_mish = _ew("mish", out="x * tanh(log1p(exp(x)))",
            x="tanh(log1p(exp(x))) + x / (1 + exp(-x))"
              " * (1 - tanh(log1p(exp(x))) * tanh(log1p(exp(x))))")
# torch.xlogy: 0 where x is 0 (unless y is nan); its slopes are torch's: log(y) (0 where
# x == 0 and y <= 0) and x / y, so xlogy(t, t) has slope log(t) + 1 even at a subnormal t.
_xlogy = _ew("xlogy", _XY, out="where(y != y, y, where(x == 0, 0, x * log(y)))",
             x="where(x == 0, where(y <= 0, 0, log(y)), log(y))", y="x / y", domain=(0.1, 3.0))
# Pointwise losses, unreduced, with torch's branches (its slopes test `<= -beta` / `>= beta`
# on the signed difference, so nan falls into the quadratic zone and stays nan).
_smooth_l1_loss = _ew(
    "smooth_l1_loss", ("x", "y", "beta"),
    out="where(abs(x - y) < beta, 0.5 * (x - y) * (x - y) / beta, abs(x - y) - 0.5 * beta)",
    x="where(x - y <= -beta, -1, where(x - y >= beta, 1, (x - y) / beta))",
    y="where(y - x <= -beta, -1, where(y - x >= beta, 1, (y - x) / beta))",
    scalars={"beta": 0.5}, scalar_params=("beta",))
_huber_loss = _ew(
    "huber_loss", ("x", "y", "delta"),
    out="where(abs(x - y) < delta, 0.5 * (x - y) * (x - y), delta * (abs(x - y) - 0.5 * delta))",
    x="where(x - y <= -delta, -delta, where(x - y >= delta, delta, x - y))",
    y="where(y - x <= -delta, -delta, where(y - x >= delta, delta, y - x))",
    scalars={"delta": 0.5}, scalar_params=("delta",))

# ---- unary, dtype-preserving ------------------------------------------------------
neg = _op_("neg", out="-x", x="-1", floating=False)
abs = _op_("abs", out="abs(x)", x="sign(x)", floating=False)  # sign(nan) = 0: slope 0 at nan
sign = _op_("sign", out="sign(x)", x="0", floating=False)
square = _op_("square", out="x * x", x="2 * x", floating=False, bool_promotes=True,
             node_names={(True,): "PowBackward0"})
# Slope 1 at nan (torch's threshold_backward tests out <= 0). sign(out) is that 0,
# written as a function of out so that a gradient taken with create_graph=True
# stays connected to the graph (torch: ThresholdBackwardBackward0): gradient
# penalties through relu get their zero second derivative instead of an error.
relu = _op_("relu", out="where(x < 0, 0, x)", x="where(out <= 0, sign(out), 1)", floating=False)

# ---- binary -------------------------------------------------------------------------
add = _ew("add", _XY, out="x + y", x="1", y="1", floating=False)
sub = _ew("sub", _XY, out="x - y", x="1", y="-1", floating=False, scalar_params=("x",),
          node_names={(False, True): "RsubBackward1"})
mul = _op_("mul", _XY, out="x * y", x="y", y="x", floating=False)
div = _op_("div", _XY, out="x / y", x="1 / y", y="-out / y", domain=(0.5, 2.0))
# torch: d/dx is 0 where the exponent is 0; d/dy is 0 where x == 0 and y >= 0.
pow = _ew("pow", _XY, out="x ** y", floating=False, domain=(0.5, 2.0),
          x="where(y == 0, 0, y * x ** (y - 1))",
          y="where(x == 0, where(y >= 0, 0, out * log(x)), out * log(x))",
          node_names={(True, False): "PowBackward0", (True, True): "PowBackward1",
                      (False, True): "PowBackward2"}, scalar_params=("x", "y"))
# torch: both partials are 0 where x * x + y * y is 0 (the origin, or squares that underflow).
atan2 = _op("atan2", _XY, out="atan2(x, y)", domain=(0.5, 2.0),
            x="y * where(x * x + y * y == 0, 0, 1 / (x * x + y * y))",
            y="-x * where(x * x + y * y == 0, 0, 1 / (x * x + y * y))")
# NaN propagates (the last branch picks whichever is NaN); ties split the gradient, and
# where either is NaN both get it (torch masks only the strictly smaller / larger side).
maximum = _op("maximum", _XY, out="where(x > y, x, where(x < y, y, where(x != x, x, y)))", floating=False,
              x="where(x == y, 0.5, where(x < y, 0, 1))", y="where(x == y, 0.5, where(y < x, 0, 1))")
minimum = _op("minimum", _XY, out="where(x < y, x, where(x > y, y, where(x != x, x, y)))", floating=False,
              x="where(x == y, 0.5, where(x > y, 0, 1))", y="where(x == y, 0.5, where(y > x, 0, 1))")
# Bounds are operands: Python numbers or tensors (ClampBackward1 / ClampBackward0).
# torch: min(max(x, lo), hi), so hi wins when lo > hi, and NaN in any operand gives NaN;
# x gets the gradient only where lo <= x <= hi (not at NaN).
_clamp = _ew("clamp", ("x", "lo", "hi"),
             out="where(x != x, x, where(lo != lo, lo, where(hi != hi, hi,"
                 " where(x >= lo, where(x <= hi, x, hi), where(lo <= hi, lo, hi)))))",
             floating=False, x="where(x >= lo, where(x <= hi, 1, 0), 0)",
             lo="where(x < lo, where(lo < hi, 1, 0), 0)", hi="where(x > hi, 1, where(hi < lo, 1, 0))",
             node_names={(True, False, False): "ClampBackward1"}, scalars={"lo": -0.5, "hi": 0.5},
             scalar_params=("lo", "hi"))
# torch: LerpBackward0 for a Python-number weight, LerpBackward1 for a tensor weight.
# torch's two forms, each exact at its end (lerp(inf, 1, 0.5) is inf, not inf - inf), with
# one rounding as its vector loop: lerp(0, max, -1) is -max, though (y - x) * (1 - w) overflows.
lerp = _op("lerp", ("x", "y", "w"), out="where(abs(w) < 0.5, fma(w, y - x, x), fma(w - 1, y - x, y))",
           x="1 - w", y="w", w="y - x",
           node_names={(a, b, w): f"LerpBackward{int(w)}"
                       for a in (True, False) for b in (True, False) for w in (True, False)},
           scalar_params=("w",))
_where = _ew("where", ("c", "x", "y"), out="where(c, x, y)", floating=False, bool_args=("c",),
             x="where(c, 1, 0)", y="where(c, 0, 1)")

masked_fill_op = _ew("masked_fill", ("x", "c", "v"), out="where(c, v, x)", floating=False,
                     bool_args=("c",), x="where(c, 0, 1)", v="where(c, 1, 0)", scalar_params=("v",),
                     node_names={(True, True, True): "MaskedFillBackward1",
                                 (False, True, True): "MaskedFillBackward1"})
# The kernels of fill_ / copy_: x only gives the shape; its history gets a zero gradient.
fill_op = _ew("fill", _XY, out="y", x="0", y="1", floating=False,
              node_names={(True, False): "FillBackward0"})
copy_op = _ew("copy", _XY, out="y", x="0", y="1", floating=False,
              node_names={(True, True): "CopyBackwards", (False, True): "CopyBackwards",
                          (True, False): "CopyBackwards"})

# ---- comparisons: boolean result, not differentiable -------------------------------------
lt = _op("lt", _XY, out="x < y", bool_out=True, floating=False)
le = _op("le", _XY, out="x <= y", bool_out=True, floating=False)
gt = _op("gt", _XY, out="x > y", bool_out=True, floating=False)
ge = _op("ge", _XY, out="x >= y", bool_out=True, floating=False)
eq = _op("eq", _XY, out="x == y", bool_out=True, floating=False)
ne = _op("ne", _XY, out="x != y", bool_out=True, floating=False)


def where(condition, x=None, y=None):
    """x where condition holds, else y; `where(condition)` alone is
    `nonzero(condition, as_tuple=True)`, as in torch."""
    if x is None and y is None:
        return nonzero(condition, as_tuple=True)
    if x is None or y is None:
        got = ", ".join(type(v).__name__ for v in (condition, x, y) if v is not None)
        raise TypeError(f"where() received an invalid combination of arguments - got ({got}), but "
                        "expected one of: (Tensor condition) or (Tensor condition, Tensor input, "
                        "Tensor other)")
    return _where(condition, x, y)


def clamp(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    lo = -float("inf") if min is None else min
    hi = float("inf") if max is None else max
    if x._data.dtype.kind in "iu":  # integer tensors: integer infinities
        info = np.iinfo(x._data.dtype)
        lo = info.min if min is None else lo
        hi = info.max if max is None else hi
    return _clamp(x, lo, hi)


clip = clamp


def _fma(a, b, c):
    return a * b + c


# The formula names as functions of Tensors, for double backward.
vars(FORMULA_FUNCTIONS).update(
    exp=exp, exp2=exp2, log=log, log2=log2, log10=log10, log1p=log1p, expm1=expm1, sqrt=sqrt, sin=sin,
    cos=cos, tan=tan, asin=asin, acos=acos, atan=atan, asinh=asinh, acosh=acosh, atanh=atanh,
    sinh=sinh, cosh=cosh, tanh=tanh,
    erf=erf, atan2=atan2, abs=abs, sign=sign, where=where, fma=_fma)
