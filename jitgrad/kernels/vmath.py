"""Vectorizable elementwise math for generated kernels.

Numba lowers `math.exp`, `math.sin`, ... to calls of the C library (libm).
LLVM cannot vectorize a loop that calls them (the PyPI llvmlite has no SVML),
so a float32 `exp` loop runs several times slower than NumPy's SIMD ufunc.
The functions here are written so that a plain loop

    @njit
    def kernel(x, out):
        for i in range(x.shape[0]):
            out[i] = exp_f32(x[i])

vectorizes: every function is `inline="always"`, made of float and integer
arithmetic, comparisons that LLVM turns into selects (`a if c else b` on
values computed before) and a few tiny intrinsics: bit casts between a float
and an integer of the same width, a division without Numba's zero check,
llvm.sqrt, llvm.copysign and an unrolled Horner polynomial. No libm calls, no
exceptions, no branches on data that survive LLVM's if-conversion. The
loop body must reach the function through inlining, which `inline="always"`
does at the Numba IR level; a generated `@vectorize` ufunc gets the same
vector code in its contiguous-array loop.

Each function NAME comes as NAME_f32 (float32 in, float32 out) and NAME_f64;
each casts its argument first, so a float64 or integer argument of a
float32 function is rounded to float32 instead of breaking the bit tricks.
FUNCTIONS maps the formula names to them; SOURCE_HASH is the sha256 of this
file, for generated kernels that embed it so a disk-cached kernel notices
when this module changes. docs/vmath.md has the method, the measured error
and speed, and the limits. Nothing is compiled at import: Numba compiles a
function when a kernel that uses it is compiled.

Rules for callers: compile without `fastmath` or with `fastmath={"contract"}`
only. `reassoc` breaks the rounding tricks below and `nnan`/`ninf` break the
handling of nan and inf.

Polynomial coefficients are minimax fits made for this module with a Remez
exchange in mpmath (`python asv_bench/vmath_accuracy.py --fit` derives them
again); split constants (ln2, pi/2, 1/ln2 in hi + lo parts) and the table of
2/pi are computed from their definitions.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .expr import vmath_names, vmath_source_hash

_JIT = dict(inline="always", nogil=True)


# ---------------------------------------------------------------------------
# intrinsics
# ---------------------------------------------------------------------------

@intrinsic
def _bits(typingctx, x):
    """The bits of a float32 (float64) as an int32 (int64)."""
    if x == types.float32:
        rt = types.int32
    elif x == types.float64:
        rt = types.int64
    else:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(rt.bitwidth))

    return rt(x), codegen


def _from_bits(width, fty, nbty):
    def impl(typingctx, i):
        if not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            v = args[0]
            if v.type.width > width:
                v = builder.trunc(v, ir.IntType(width))
            elif v.type.width < width:
                v = builder.sext(v, ir.IntType(width)) if i.signed else builder.zext(v, ir.IntType(width))
            return builder.bitcast(v, fty)

        return nbty(i), codegen

    return impl


_f32_from_bits = intrinsic(_from_bits(32, ir.FloatType(), types.float32))
_f32_from_bits.__doc__ = "A float32 with the low 32 bits of an integer as its bits."
_f64_from_bits = intrinsic(_from_bits(64, ir.DoubleType(), types.float64))
_f64_from_bits.__doc__ = "A float64 with the 64 bits of an integer as its bits."


@intrinsic
def _div(typingctx, a, b):
    """a / b as IEEE division: no ZeroDivisionError check (inf or nan instead)."""
    if not isinstance(a, types.Float) or a != b:
        return None

    def codegen(context, builder, sig, args):
        return builder.fdiv(args[0], args[1])

    return a(a, b), codegen


@intrinsic
def _sqrt(typingctx, x):
    """llvm.sqrt: one vsqrtps/vsqrtpd; sqrt of a negative number is nan."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, sig, args):
        fn = builder.module.declare_intrinsic("llvm.sqrt", [args[0].type])
        return builder.call(fn, [args[0]])

    return x(x), codegen


@intrinsic
def _copysign(typingctx, x, y):
    """|x| with the sign bit of y (llvm.copysign)."""
    if not isinstance(x, types.Float) or x != y:
        return None

    def codegen(context, builder, sig, args):
        ty = args[0].type
        fn = builder.module.declare_intrinsic("llvm.copysign", [ty], ir.FunctionType(ty, [ty, ty]))
        return builder.call(fn, [args[0], args[1]])

    return x(x, y), codegen


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma: one vfmadd where the CPU has FMA)."""
    if not isinstance(a, types.Float) or not (a == b == c):
        return None

    def codegen(context, builder, sig, args):
        ty = args[0].type
        fn = builder.module.declare_intrinsic("llvm.fma", [ty], ir.FunctionType(ty, [ty] * 3))
        return builder.call(fn, list(args))

    return a(a, b, c), codegen


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

# Horner steps use llvm.fmuladd: one fused multiply-add where the CPU has FMA
# (1.2-1.7x faster for the long float64 polynomials), a multiply and an add
# elsewhere. The error bounds hold either way (tests check both); set this to
# False before compiling to get the unfused form everywhere.
USE_FMULADD = True


@intrinsic
def _poly(typingctx, x, c):
    """c[0] + c[1]*x + ... + c[n-1]*x**(n-1) by Horner's rule, for a float x and
    a constant tuple c of the same float type. Emitted fully unrolled (a
    loop over the tuple is not unrolled by LLVM past ~16 terms, and then the
    outer loop does not vectorize); the coefficients fold into constants."""
    if not isinstance(x, types.Float) or not isinstance(c, types.UniTuple) or c.dtype != x:
        return None
    n = c.count

    def codegen(context, builder, sig, args):
        xv, cv = args
        ty = xv.type
        fused = USE_FMULADD                 # read when the caller is compiled
        fma = builder.module.declare_intrinsic("llvm.fmuladd", [ty], ir.FunctionType(ty, [ty] * 3))
        p = builder.extract_value(cv, n - 1)
        for i in range(n - 2, -1, -1):
            ci = builder.extract_value(cv, i)
            p = builder.call(fma, [p, xv, ci]) if fused else builder.fadd(builder.fmul(p, xv), ci)
        return p

    return x(x, c), codegen


@njit(**_JIT)
def _clamp(x, lo, hi):
    """min(max(x, lo), hi) that keeps nan."""
    x = hi if x > hi else x
    return lo if x < lo else x


@njit(**_JIT)
def _pow2_f32(k):
    """2.0**k as float32 for -126 <= k <= 127 (integer k)."""
    return _f32_from_bits((k + 127) << 23)


@njit(**_JIT)
def _pow2_f64(k):
    """2.0**k as float64 for -1022 <= k <= 1023 (integer k)."""
    return _f64_from_bits((k + 1023) << 52)


_F = np.float32
_ZERO_F, _HALF_F, _ONE_F, _TWO_F = _F(0.0), _F(0.5), _F(1.0), _F(2.0)
_INF_F, _NAN_F = _F(np.inf), _F(np.nan)
_NINF_F = _F(-np.inf)
_INF_D, _NAN_D, _NINF_D = math.inf, math.nan, -math.inf
_MAXF_F = _F(np.finfo(np.float32).max)

# x + SHIFT rounds x to an integer k (|x| < 2**22 resp. 2**51) that sits in the
# low mantissa bits: bits(x + SHIFT) - bits(SHIFT) == k.
_SHIFT_F = _F(12582912.0)                   # 1.5 * 2**23
_SHIFT_F_BITS = 0x4B400000
_SHIFT_D = 6755399441055744.0              # 1.5 * 2**52
_SHIFT_D_BITS = 0x4338000000000000

# ---------------------------------------------------------------------------
# exp, exp2, expm1
# ---------------------------------------------------------------------------
# x = k*ln2 + r, |r| <= ln2/2 (Cody-Waite: k*LN2HI is exact, so r = x - k*LN2HI
# is exact and only the tiny k*LN2LO is rounded). exp(r) = 1 + expm1(r) with
# expm1(r) = r + r*r*P(r), P minimax for relative error of expm1 on
# [-ln2/2, ln2/2]. 2**k is built from exponent bits; it is applied as two
# factors 2**(k//2) * 2**(k - k//2) so that results near overflow and the
# subnormal results come out of one correctly rounded multiplication.

_LOG2E_F = _F(1.4426950408889634)
_LN2HI_F = _F(0.693145751953125)            # ln2 to 16 bits: k*LN2HI exact for |k| < 256
_LN2LO_F = _F(1.428606765330187e-06)        # ln2 - LN2HI
_EXPM1_F = tuple(_F(c) for c in (           # relative error 2**-30.6 (deg 5)
    0.5, 0.1666666567325592, 0.04166646674275398, 0.008333643898367882,
    0.001393520855344832, 0.0001965815608855337))
_EXP_HI_F = _F(89.0)                        # above: overflow to inf
_EXP_LO_F = _F(-104.0)                      # below: rounds to 0
_EXPM1_LO_F = _F(-20.0)                     # below: expm1 rounds to -1

_LOG2E_D = 1.4426950408889634
_LN2HI_D = 0.6931471805598903              # ln2 to 42 bits: k*LN2HI exact for |k| < 2048
_LN2LO_D = 5.497923018708371e-14
_EXPM1_D = (                               # relative error 2**-54.9 (deg 9)
    0.5000000000000007, 0.16666666666666696, 0.041666666666562074,
    0.008333333333293086, 0.001388888893629513, 0.00019841269987286783,
    2.4801499609867758e-05, 2.7557116561509596e-06, 2.762828836818811e-07,
    2.5161455171008725e-08)
_EXP_HI_D = 710.0
_EXP_LO_D = -746.0
_EXPM1_LO_D = -40.0

_EXP2_F = tuple(_F(c) for c in (            # 2**r = 1 + r*Q(r), |r| <= 1/2, rel. error 2**-27.5
    0.6931472420692444, 0.24022655189037323, 0.05550272390246391,
    0.009617063216865063, 0.0013418203452602029, 0.00015820508997421712))
_EXP2_D = (                                # rel. error 2**-54.4
    0.6931471805599457, 0.24022650695910097, 0.05550410866479039,
    0.009618129107607003, 0.0013333558153440042, 0.00015403530441572406,
    1.5252727385128803e-05, 1.3215442675167586e-06, 1.0180647683572118e-07,
    7.072570443123021e-09, 4.0780685953593294e-10)


@njit(**_JIT)
def _exp_reduce_f32(x):
    """k, expm1(r) with x = k*ln2 + r (x finite or nan, |x| < 2**21)."""
    t = x * _LOG2E_F + _SHIFT_F
    kf = t - _SHIFT_F
    k = _bits(t) - _SHIFT_F_BITS
    rh = x - kf * _LN2HI_F                 # exact
    rl = kf * _LN2LO_F
    r = rh - rl
    return k, rh + (r * r * _poly(r, _EXPM1_F) - rl)


@njit(**_JIT)
def _exp_reduce_f64(x):
    t = x * _LOG2E_D + _SHIFT_D
    kf = t - _SHIFT_D
    k = _bits(t) - _SHIFT_D_BITS
    rh = x - kf * _LN2HI_D
    rl = kf * _LN2LO_D
    r = rh - rl
    return k, rh + (r * r * _poly(r, _EXPM1_D) - rl)


@njit(**_JIT)
def _scale_f32(p, k):
    """p * 2**k for -300 < k < 300, one rounding (subnormal results included)."""
    k1 = k >> 1
    return (p * _pow2_f32(k1)) * _pow2_f32(k - k1)


@njit(**_JIT)
def _scale_f64(p, k):
    k1 = k >> 1
    return (p * _pow2_f64(k1)) * _pow2_f64(k - k1)


@njit(**_JIT)
def exp_f32(x):
    x = _F(x)
    x = _clamp(x, _EXP_LO_F, _EXP_HI_F)
    k, em = _exp_reduce_f32(x)
    return _scale_f32(_ONE_F + em, k)


@njit(**_JIT)
def exp_f64(x):
    x = np.float64(x)
    x = _clamp(x, _EXP_LO_D, _EXP_HI_D)
    k, em = _exp_reduce_f64(x)
    return _scale_f64(1.0 + em, k)


@njit(**_JIT)
def exp2_f32(x):
    x = _F(x)
    x = _clamp(x, _F(-151.0), _F(129.0))
    t = x + _SHIFT_F
    kf = t - _SHIFT_F
    k = _bits(t) - _SHIFT_F_BITS
    r = x - kf                             # exact, |r| <= 1/2
    return _scale_f32(_ONE_F + r * _poly(r, _EXP2_F), k)


@njit(**_JIT)
def exp2_f64(x):
    x = np.float64(x)
    x = _clamp(x, -1076.0, 1025.0)
    t = x + _SHIFT_D
    kf = t - _SHIFT_D
    k = _bits(t) - _SHIFT_D_BITS
    r = x - kf
    return _scale_f64(1.0 + r * _poly(r, _EXP2_D), k)


@njit(**_JIT)
def _expm1_f32(x):
    """expm1 without the sign-of-zero fix (x clamped by the caller or here)."""
    x = _clamp(x, _EXPM1_LO_F, _EXP_HI_F)
    k, em = _exp_reduce_f32(x)
    s = _pow2_f32(k)                       # used for k <= 24 only
    mid = (s - _ONE_F) + s * em            # s - 1 and s*em exact: one rounding
    kk = k if k < 60 else 60
    big = _scale_f32((em - _pow2_f32(-kk)) + _ONE_F, k)   # 2**k (1 + em - 2**-k)
    return mid if k <= 24 else big


@njit(**_JIT)
def _expm1_f64(x):
    x = _clamp(x, _EXPM1_LO_D, _EXP_HI_D)
    k, em = _exp_reduce_f64(x)
    s = _pow2_f64(k)
    mid = (s - 1.0) + s * em               # exact parts for k <= 53
    kk = k if k < 200 else 200
    big = _scale_f64((em - _pow2_f64(-kk)) + 1.0, k)
    return mid if k <= 53 else big


@njit(**_JIT)
def expm1_f32(x):
    x = _F(x)
    y = _expm1_f32(x)
    return x if x == _ZERO_F else y        # expm1(-0) = -0


@njit(**_JIT)
def expm1_f64(x):
    x = np.float64(x)
    y = _expm1_f64(x)
    return x if x == 0.0 else y


# ---------------------------------------------------------------------------
# log, log2, log1p
# ---------------------------------------------------------------------------
# x = 2**k * m, sqrt(1/2) <= m < sqrt(2) from the bits (subnormals scaled up
# first); f = m - 1 is exact. With s = f/(2+f), log(1+f) = 2*atanh(s)
#   = f - f*f/2 + s*(f*f/2 + R(s*s)),  R(z) = z*(2/3 + 2/5 z + ...) minimax,
# so the leading term f is exact and the rounding errors sit in small terms.

_MINNORM_F = _F(np.finfo(np.float32).tiny)
_TWO23_F = _F(2.0 ** 23)
_SQRTH_F_BITS = 0x3F3504F3                  # bits of float32(sqrt(1/2))
_LOG_F = tuple(_F(c) for c in (              # R(z)/z, |s| <= 0.1716; error 2**-35
    0.6666666269302368, 0.40000972151756287, 0.284988135099411, 0.24277837574481964))
_LOG_F64LOW = (0.6666666563196639, 0.40000338653774603,   # float64, for float32 results:
               0.28537065862836536, 0.23587142660988156)   # error 2**-37.6
_IVLN2HI_F = _F(1.4423828125)                # 1/ln2 to 12 bits
_IVLN2LO_F = _F(0.00031222839606925845)

_MINNORM_D = np.finfo(np.float64).tiny
_TWO54_D = 2.0 ** 54
_SQRTH_D_BITS = 0x3FE6A09E667F3BCD
_LOG_D = (                                  # error 2**-66
    0.6666666666666666, 0.40000000000004976, 0.2857142856938461, 0.22222222611937412,
    0.18181777901936652, 0.15387010518633612, 0.13251626985810575, 0.13239754863762426)
_IVLN2HI_D = 1.4426950407214463             # 1/ln2 to 32 bits
_IVLN2LO_D = 1.6751713164886512e-10


@njit(**_JIT)
def _log_reduce_f32(x):
    """k, f with x = 2**k * (1 + f), sqrt(1/2) <= 1 + f < sqrt(2); x > 0 finite."""
    sub = x < _MINNORM_F
    xs = x * _TWO23_F if sub else x
    ix = _bits(xs)
    k = (ix - _SQRTH_F_BITS) >> 23
    m = _f32_from_bits(ix - (k << 23))
    k = k - 23 if sub else k
    return k, m - _ONE_F


@njit(**_JIT)
def _log_reduce_f64(x):
    sub = x < _MINNORM_D
    xs = x * _TWO54_D if sub else x
    ix = _bits(xs)
    k = (ix - _SQRTH_D_BITS) >> 52
    m = _f64_from_bits(ix - (k << 52))
    k = k - 54 if sub else k
    return k, m - 1.0


@njit(**_JIT)
def _log1p_parts_f32(f):
    """f*f/2 and s*(f*f/2 + R): log(1+f) = f - hfsq + tail."""
    s = _div(f, _TWO_F + f)
    z = s * s
    hfsq = _HALF_F * f * f
    return hfsq, s * (hfsq + z * _poly(z, _LOG_F))


@njit(**_JIT)
def _log1p_parts_f64(f):
    s = _div(f, 2.0 + f)
    z = s * s
    hfsq = 0.5 * f * f
    return hfsq, s * (hfsq + z * _poly(z, _LOG_D))


@njit(**_JIT)
def _log_special_f32(x, y):
    """y for x > 0 finite; -inf at 0, nan below 0 or nan, inf at inf."""
    y = y if x > _ZERO_F else (_NINF_F if x == _ZERO_F else _NAN_F)
    return x if x == _INF_F else y


@njit(**_JIT)
def _log_special_f64(x, y):
    y = y if x > 0.0 else (_NINF_D if x == 0.0 else _NAN_D)
    return x if x == _INF_D else y


@njit(**_JIT)
def log_f32(x):
    x = _F(x)
    k, f = _log_reduce_f32(x)
    hfsq, t = _log1p_parts_f32(f)
    kf = _F(k)
    y = kf * _LN2HI_F - ((hfsq - (t + kf * _LN2LO_F)) - f)
    return _log_special_f32(x, y)


@njit(**_JIT)
def log_f64(x):
    x = np.float64(x)
    k, f = _log_reduce_f64(x)
    hfsq, t = _log1p_parts_f64(f)
    kf = np.float64(k)
    y = kf * _LN2HI_D - ((hfsq - (t + kf * _LN2LO_D)) - f)
    return _log_special_f64(x, y)


@njit(**_JIT)
def log2_f32(x):
    x = _F(x)
    # log2(x) = k + log(1+f)/ln2 with log(1+f) = hi + lo, hi with 12 bits so that
    # hi*IVLN2HI is exact, and the sum k + hi*IVLN2HI compensated (Fast2Sum).
    k, f = _log_reduce_f32(x)
    hfsq, t = _log1p_parts_f32(f)
    hi = f - hfsq
    hi = _f32_from_bits(_bits(hi) & -4096)
    lo = ((f - hi) - hfsq) + t
    vhi = hi * _IVLN2HI_F
    vlo = (lo + hi) * _IVLN2LO_F + lo * _IVLN2HI_F
    kf = _F(k)
    w = kf + vhi
    vlo = vlo + ((kf - w) + vhi)
    return _log_special_f32(x, vlo + w)


@njit(**_JIT)
def log2_f64(x):
    x = np.float64(x)
    k, f = _log_reduce_f64(x)
    hfsq, t = _log1p_parts_f64(f)
    hi = f - hfsq
    hi = _f64_from_bits(_bits(hi) & -4294967296)
    lo = ((f - hi) - hfsq) + t
    vhi = hi * _IVLN2HI_D
    vlo = (lo + hi) * _IVLN2LO_D + lo * _IVLN2HI_D
    kf = np.float64(k)
    w = kf + vhi
    vlo = vlo + ((kf - w) + vhi)
    return _log_special_f64(x, vlo + w)


@njit(**_JIT)
def _log1p_d(x, coef):
    # u = 1 + x rounded; for k == 0 use f = x exactly, otherwise f from u and
    # add the rounding error of u back as c/u (log(u + c) = log(u) + c/u).
    u = 1.0 + x
    k, fu = _log_reduce_f64(u)
    c = _div((1.0 - (u - x)) if k > 0 else (x - (u - 1.0)), u)
    f = x if k == 0 else fu
    c = 0.0 if k == 0 else c
    s = _div(f, 2.0 + f)
    z = s * s
    hfsq = 0.5 * f * f
    t = s * (hfsq + z * _poly(z, coef))
    kf = np.float64(k)
    y = kf * _LN2HI_D - ((hfsq - (t + (kf * _LN2LO_D + c))) - f)
    y = _log_special_f64(u, y)
    y = x if x == _INF_D else y
    return x if x == 0.0 else y             # log1p(-0) = -0


@njit(**_JIT)
def log1p_f32(x):
    x = _F(x)
    # in float64: the float32 algorithm loses up to 2 ulp where k*ln2 and
    # log(m) cancel (x just above sqrt(2) - 1)
    return _F(_log1p_d(np.float64(x), _LOG_F64LOW))


@njit(**_JIT)
def log1p_f64(x):
    x = np.float64(x)
    return _log1p_d(x, _LOG_D)


# ---------------------------------------------------------------------------
# sin, cos, tan
# ---------------------------------------------------------------------------
# x = j*pi/2 + r, |r| <= pi/4; sin/cos/tan of x from sin(r), cos(r), tan(r)
# and j mod 4.
#
# Cody-Waite in float64 for both dtypes: pi/2 is split in pieces P1, P2, ...
# of 26 bits, so that j*Pi is exact for |j| < 2**27 and the first
# subtractions x - j*P1 - j*P2 are exact. float32 needs one more (full
# precision) piece: pi/2 - P1 - P2 - P3F ~ 2**-110. float64 subtracts
# j*P3 with TwoSum and keeps its rounding error, j*P4 and j*P5 (pi/2 to
# 2**-157) as a low part r_lo that the polynomials take into account.
# Accurate for |x| <= 2**27 (134217728); beyond that the functions return
# nan (a documented limit). float32 evaluates the reduction and its
# (shorter) polynomials in float64: one rounding at the end, about 0.5 ulp.
#
# sin_f32_fullrange / cos_f32_fullrange / tan_f32_fullrange are exact for
# every finite float32 (Payne-Hanek): |x| = M * 2**E with an integer
# M < 2**24, and a table holds T(E) = 2**E * 2/pi mod 4 in three float64
# parts T1 + T2 + T3 (29, 29 and 53 bits) so that M*T1 and M*T2 are exact
# and the fraction x*2/pi - j is known to about 2**-85. The three table
# loads are gathers, which make them about 3x slower; they are not in
# FUNCTIONS. (A float64 Payne-Hanek needs about 7 table parts and a split M
# and would cost more than the rest of the function.)

# 2/pi to 400 bits: floor(2/pi * 2**400).
_TWO_OVER_PI_400 = int(
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561"
    "b7246e3a424dd2e006492eea09d1921cfe1e", 16)


def _payne_hanek_table():
    """T1, T2, T3 (float64 arrays of 256) with T1 + T2 + T3 ~ 2**(e-150) * 2/pi
    mod 4 for the float32 exponent field e (x = M * 2**(e-150))."""
    t1 = np.zeros(256)
    t2 = np.zeros(256)
    t3 = np.zeros(256)
    for e in range(1, 255):
        d = 550 - e                         # T = (B mod 2**(d+2)) / 2**d
        v = _TWO_OVER_PI_400 % (1 << (d + 2)) if d + 2 < 400 else _TWO_OVER_PI_400
        a = v >> (d - 27)                   # T1: multiples of 2**-27 (<= 29 bits)
        v -= a << (d - 27)
        b = v >> (d - 56)                   # T2: multiples of 2**-56 (<= 29 bits)
        v -= b << (d - 56)
        t1[e] = a / 2.0 ** 27
        t2[e] = b / 2.0 ** 56
        t3[e] = v / (1 << d)                # correctly rounded
    return t1, t2, t3


_PH1, _PH2, _PH3 = _payne_hanek_table()
_PIO2_D = 1.5707963267948966
_TWO_OVER_PI_D = 0.6366197723675814
_PIO2_1 = 1.5707963109016418                # pi/2 in 26-bit pieces
_PIO2_2 = 1.5893254712295857e-08
_PIO2_3 = 6.123233932053594e-17
_PIO2_4 = 6.368317055225283e-25
_PIO2_5 = 1.082856673921914e-32
_PIO2_3F = 6.123233995736766e-17            # pi/2 - P1 - P2 rounded
_TRIG_LIMIT_D = 2.0 ** 27
_TRIG_LIMIT_F = _F(2.0 ** 27)

_SIN_F = (-0.16666666640377886, 0.008333329256084493,       # float64, for float32 results:
          -0.00019839296537999373, 2.717971241641708e-06)    # rel. error 2**-37
_COS_F = (0.04166666661871824, -0.0013888883434173755,      # 2**-43
          2.4799442896817742e-05, -2.7204335943269027e-07)
_TAN_F = (0.33333331793353177, 0.1333341299511959, 0.05395426023962938,   # 2**-33
          0.021987341113321346, 0.008321170695630356, 0.005014118464894772,
          -0.0006189286168623994, 0.002051215905335747)
_SIN_D = (-0.1666666666666663, 0.00833333333332184, -0.00019841269829358528,    # 2**-57.9
          2.7557313538514158e-06, -2.5050734389215648e-08, 1.5895433284094686e-10)
_COS_D = (0.04166666666666659, -0.0013888888888872186, 2.480158728829539e-05,   # 2**-63.8
          -2.75573140151224e-07, 2.0875678084764045e-09, -1.135733671510123e-11)
_TAN_D = (0.33333333333332743, 0.1333333333341939, 0.0539682539243923,          # 2**-56.1
          0.021869489663511238, 0.008863218396763376, 0.0035922960006753517,
          0.001454715920538038, 0.0005952416957886258, 0.00022185769837551063,
          0.00013760223837224386, -2.7905896750197287e-05, 9.085117409661797e-05,
          -4.5632914233660455e-05, 2.1045458087958075e-05)


@njit(**_JIT)
def _trig_reduce_f32_ph(x):
    """j mod 4 and r (float64) with |x| = j*pi/2 + r, |r| <= pi/4 (+ tiny)."""
    ix = _bits(x) & 0x7FFFFFFF
    e = ix >> 23
    mant = ix & 0x7FFFFF
    m = np.float64(mant | 0x800000) if e > 0 else np.float64(mant)
    e = e if e > 0 else 1
    y1 = m * _PH1[e]                            # exact, < 2**26
    y1 = y1 - 4.0 * ((y1 * 0.25 + _SHIFT_D) - _SHIFT_D)   # mod 4, exact
    y2 = m * _PH2[e]                            # exact
    t = (y1 + y2) + _SHIFT_D
    jf = t - _SHIFT_D
    q = _bits(t) & 3
    f = ((y1 - jf) + y2) + m * _PH3[e]
    return q, f * _PIO2_D


@njit(**_JIT)
def _trig_reduce_f32(x):
    """j mod 4 and r (float64) with x = j*pi/2 + r (|x| <= 2**27)."""
    xd = np.float64(x)
    t = xd * _TWO_OVER_PI_D + _SHIFT_D
    jf = t - _SHIFT_D
    q = _bits(t) & 3
    return q, ((xd - jf * _PIO2_1) - jf * _PIO2_2) - jf * _PIO2_3F


@njit(**_JIT)
def _trig_reduce_f64(x):
    """j mod 4 and r + lo = x - j*pi/2 (|x| <= 2**27), lo a correction below ulp(r)."""
    t = x * _TWO_OVER_PI_D + _SHIFT_D
    jf = t - _SHIFT_D
    q = _bits(t) & 3
    a = (x - jf * _PIO2_1) - jf * _PIO2_2   # exact
    b = jf * _PIO2_3                        # exact
    r = a - b                               # rounded; TwoSum gives the error
    bv = r - a
    av = r - bv
    e = (a - av) - (b + bv)
    lo = e - (jf * _PIO2_4 + jf * _PIO2_5)
    return q, r, lo


@njit(**_JIT)
def _sincos_f32(r):
    z = r * r
    s = r + r * z * _poly(z, _SIN_F)
    c = (1.0 - 0.5 * z) + z * z * _poly(z, _COS_F)
    return s, c


@njit(**_JIT)
def _sincos_f64(r, lo):
    """sin and cos of r + lo (lo tiny): sin(r) + lo*cos(r), cos(r) - lo*sin(r)."""
    z = r * r
    hz = 0.5 * z
    s = r + (r * z * _poly(z, _SIN_D) + lo * (1.0 - hz))
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + (z * z * _poly(z, _COS_D) - r * lo))
    return s, c


@njit(**_JIT)
def _sin_from(q, r):
    s, c = _sincos_f32(r)
    y = c if q & 1 else s
    return _F(-y if q & 2 else y)


@njit(**_JIT)
def _cos_from(q, r):
    s, c = _sincos_f32(r)
    y = s if q & 1 else c
    return _F(-y if (q + 1) & 2 else y)


@njit(**_JIT)
def _tan_from(q, r):
    z = r * r
    t = r + r * z * _poly(z, _TAN_F)
    return _F(_div(-1.0 if q & 1 else t, t if q & 1 else 1.0))


@njit(**_JIT)
def sin_f32(x):
    x = _F(x)
    q, r = _trig_reduce_f32(x)
    y = _sin_from(q, r)
    y = x if x == _ZERO_F else y            # sin(-0) = -0
    return y if abs(x) <= _TRIG_LIMIT_F else _NAN_F


@njit(**_JIT)
def cos_f32(x):
    x = _F(x)
    q, r = _trig_reduce_f32(x)
    y = _cos_from(q, r)
    return y if abs(x) <= _TRIG_LIMIT_F else _NAN_F


@njit(**_JIT)
def tan_f32(x):
    x = _F(x)
    q, r = _trig_reduce_f32(x)
    y = _tan_from(q, r)
    y = x if x == _ZERO_F else y
    return y if abs(x) <= _TRIG_LIMIT_F else _NAN_F


@njit(**_JIT)
def sin_f32_fullrange(x):
    x = _F(x)
    q, r = _trig_reduce_f32_ph(x)           # of |x|
    y = _sin_from(q, r)
    y = -y if _bits(x) < 0 else y
    return y if abs(x) <= _MAXF_F else _NAN_F


@njit(**_JIT)
def cos_f32_fullrange(x):
    x = _F(x)
    q, r = _trig_reduce_f32_ph(x)
    y = _cos_from(q, r)
    return y if abs(x) <= _MAXF_F else _NAN_F


@njit(**_JIT)
def tan_f32_fullrange(x):
    x = _F(x)
    q, r = _trig_reduce_f32_ph(x)
    y = _tan_from(q, r)
    y = -y if _bits(x) < 0 else y
    return y if abs(x) <= _MAXF_F else _NAN_F


@njit(**_JIT)
def sin_f64(x):
    x = np.float64(x)
    q, r, lo = _trig_reduce_f64(x)
    s, c = _sincos_f64(r, lo)
    y = c if q & 1 else s
    y = -y if q & 2 else y
    y = x if x == 0.0 else y
    return y if abs(x) <= _TRIG_LIMIT_D else _NAN_D


@njit(**_JIT)
def cos_f64(x):
    x = np.float64(x)
    q, r, lo = _trig_reduce_f64(x)
    s, c = _sincos_f64(r, lo)
    y = s if q & 1 else c
    y = -y if (q + 1) & 2 else y
    return y if abs(x) <= _TRIG_LIMIT_D else _NAN_D


@njit(**_JIT)
def tan_f64(x):
    x = np.float64(x)
    q, r, lo = _trig_reduce_f64(x)
    z = r * r
    p = r * z * _poly(z, _TAN_D)
    t0 = r + p
    t = r + (p + lo * (1.0 + t0 * t0))      # tan(r + lo) = tan(r) + lo*(1 + tan(r)**2)
    num = -1.0 if q & 1 else t
    den = t if q & 1 else 1.0
    y = _div(num, den)
    y = x if x == 0.0 else y
    return y if abs(x) <= _TRIG_LIMIT_D else _NAN_D


# ---------------------------------------------------------------------------
# tanh, sinh, cosh, sigmoid
# ---------------------------------------------------------------------------
# From one expm1/exp evaluation each:
#   tanh(a) = a + a^3 P(a^2) for a < 0.55 and 1 - 2/(E + 2) above, E = expm1(2a);
#   sinh(a) = (E + E/(E + 1))/2 for a < 1, H - 1/(4H) above, H = exp(a)/2;
#   cosh(a) = H + 1/(4H);  sigmoid(x) = 1/(1 + e) or e/(1 + e), e = exp(-|x|).
# H = exp(a)/2 is computed with the halving folded into the 2**k scaling, so
# cosh and sinh stay finite up to the float64 limit 710.47.
# float32 sinh and cosh are evaluated through the float64 functions: one
# rounding at the end, and no separate care for the float32 range where
# exp(a) overflows but cosh(a) does not (88.7 < a < 89.4).

_TANH_SPLIT_F = _F(0.55)
_TANH_F = tuple(_F(c) for c in (             # tanh(a) = a + a^3 P(a^2), a <= 0.55: 2**-29.7
    -0.33333316445350647, 0.13332544267177582, -0.0538475476205349,
    0.02105071395635605, -0.00624284939840436))
_TANH_D = (                                 # 2**-60.6
    -0.333333333333333, 0.1333333333332658, -0.05396825396373661,
    0.021869488385139312, -0.008863232589075003, 0.0035920918986588955,
    -0.0014555419523179579, 0.0005884406276292729, -0.00023337129319429695,
    8.330109111545234e-05, -1.9484827673827673e-05)


@njit(**_JIT)
def tanh_f32(x):
    x = _F(x)
    a = abs(x)
    z = a * a
    ps = a + a * z * _poly(z, _TANH_F)
    e = _expm1_f32(_clamp(_TWO_F * a, _ZERO_F, _F(20.0)))   # tanh(10) rounds to 1
    pb = _ONE_F - _div(_TWO_F, e + _TWO_F)
    return _copysign(ps if a < _TANH_SPLIT_F else pb, x)


@njit(**_JIT)
def tanh_f64(x):
    x = np.float64(x)
    a = abs(x)
    z = a * a
    ps = a + a * z * _poly(z, _TANH_D)
    e = _expm1_f64(_clamp(2.0 * a, 0.0, 40.0))
    pb = 1.0 - _div(2.0, e + 2.0)
    return _copysign(ps if a < 0.55 else pb, x)


@njit(**_JIT)
def _sinh_cosh_parts_f64(a):
    """E = expm1(a) (a < 1) and H = exp(a)/2 (any a >= 0)."""
    a = _clamp(a, 0.0, 711.0)
    k, em = _exp_reduce_f64(a)
    s = _pow2_f64(k)                        # k <= 2 where E is used
    e = (s - 1.0) + s * em
    h = _scale_f64(1.0 + em, k - 1)
    return e, h


@njit(**_JIT)
def sinh_f64(x):
    x = np.float64(x)
    a = abs(x)
    e, h = _sinh_cosh_parts_f64(a)
    small = a < 1.0
    v = _div(e if small else 0.25, (e + 1.0) if small else h)
    y = 0.5 * (e + v) if small else h - v
    return _copysign(y, x)


@njit(**_JIT)
def cosh_f64(x):
    x = np.float64(x)
    e, h = _sinh_cosh_parts_f64(abs(x))
    return h + _div(0.25, h)


@njit(**_JIT)
def sinh_f32(x):
    x = _F(x)
    return _F(sinh_f64(np.float64(x)))


@njit(**_JIT)
def cosh_f32(x):
    x = _F(x)
    return _F(cosh_f64(np.float64(x)))


@njit(**_JIT)
def sigmoid_f32(x):
    # e = exp(-|x|) = 2**k * (p + plo) with p = fl(1 + em) and its rounding
    # error plo; d = fl(1 + e) with err = 1 + e + elo - d. Then
    #   1/(1 + e)   = v - v*err/d        (x >= 0, v = 1/d, 1/d ~ v)
    #   e/(1 + e)   = v + (elo - v*err)/d (x < 0, v = e/d, 1/d ~ 1 - v)
    # so only the division rounds at full size: about 1 ulp.
    x = _F(x)
    n = _clamp(-abs(x), _EXP_LO_F, _ZERO_F)
    k, em = _exp_reduce_f32(n)
    p = _ONE_F + em
    plo = (_ONE_F - p) + em                 # exact (Fast2Sum, |em| < 1)
    e = _scale_f32(p, k)
    elo = _scale_f32(plo, k)
    pos = x >= _ZERO_F
    d = _ONE_F + e
    err = ((_ONE_F - d) + e) + elo
    v = _div(_ONE_F if pos else e, d)
    return v + ((_ZERO_F if pos else elo) - v * err) * (v if pos else _ONE_F - v)


@njit(**_JIT)
def sigmoid_f64(x):
    x = np.float64(x)
    n = _clamp(-abs(x), _EXP_LO_D, 0.0)
    k, em = _exp_reduce_f64(n)
    p = 1.0 + em
    plo = (1.0 - p) + em
    e = _scale_f64(p, k)
    elo = _scale_f64(plo, k)
    pos = x >= 0.0
    d = 1.0 + e
    err = ((1.0 - d) + e) + elo
    v = _div(1.0 if pos else e, d)
    return v + ((0.0 if pos else elo) - v * err) * (v if pos else 1.0 - v)


# ---------------------------------------------------------------------------
# asin, acos, atan, atan2
# ---------------------------------------------------------------------------
# asin(a) = a + a^3 B(a^2) for a <= 1/2; above, asin(a) = pi/2 - 2 asin(s) with
# s = sqrt((1 - a)/2) <= 1/2 (1 - a is exact), so one polynomial serves both.
# atan: a > tan(3pi/8): pi/2 + atan(-1/a); a > tan(pi/8): pi/4 + atan((a-1)/(a+1));
# then atan(t) = t + t^3 A(t^2), |t| <= tan(pi/8). Multiples of pi are added
# as hi + lo pairs.

_ASIN_F64LOW = (0.16666659991287142, 0.0750050418578671,    # float64, for float32
                0.044516954769425354, 0.03180772263785354,  # results: 2**-31.8
                0.01443858711831888, 0.03751647660851499)
_ATAN_F64LOW = (-0.3333331485323551, 0.1999844935493616,    # 2**-30.4
                -0.1424308775583095, 0.10590339165626401, -0.06068999268688913)

_PIO2HI_D, _PIO2LO_D = 1.5707963267948966, 6.123233995736766e-17
_PIO4HI_D, _PIO4LO_D = 0.7853981633974483, 3.061616997868383e-17
_PIHI_D, _PILO_D = 3.141592653589793, 1.2246467991473532e-16
_TANPIO8_D, _TAN3PIO8_D = 0.41421356237309503, 2.414213562373095
_ASIN_D = (                                 # rel. error 2**-55.9
    0.16666666666665408, 0.07500000000337141, 0.04464285682821853,
    0.030381959141673548, 0.02237175793385257, 0.017359706571116986,
    0.013885217170933932, 0.012169334400452219, 0.006527433548078604,
    0.019529776300141327, -0.01622666780994524, 0.03191395455778994)
_ATAN_D = (                                 # rel. error 2**-59.4
    -0.3333333333333319, 0.19999999999951965, -0.14285714280019052,
    0.11111110774105067, -0.09090897478348015, 0.07692055097241865,
    -0.06663044459211158, 0.05847446723579923, -0.050372744090743,
    0.03801214806974282, -0.017848982032886707)


@njit(**_JIT)
def _asin_parts_d(a, coef):
    small = a <= 0.5
    z = a * a if small else (1.0 - a) * 0.5
    s = a if small else _sqrt(z)
    return small, s + s * z * _poly(z, coef)


@njit(**_JIT)
def _asin_d(x, coef):
    small, p = _asin_parts_d(abs(x), coef)
    y = p if small else _PIO2HI_D - (2.0 * p - _PIO2LO_D)
    return _copysign(y, x)


@njit(**_JIT)
def _acos_d(x, coef):
    small, p = _asin_parts_d(abs(x), coef)
    y_small = _PIO2HI_D - (_copysign(p, x) - _PIO2LO_D)
    y_pos = 2.0 * p
    y_neg = _PIHI_D - (2.0 * p - _PILO_D)
    return y_small if small else (y_pos if x > 0.0 else y_neg)


@njit(**_JIT)
def _atan_d(x, coef):
    a = abs(x)
    big = a > _TAN3PIO8_D
    mid = a > _TANPIO8_D
    num = -1.0 if big else (a - 1.0 if mid else a)
    den = a if big else (a + 1.0 if mid else 1.0)
    t = _div(num, den)
    hi = _PIO2HI_D if big else (_PIO4HI_D if mid else 0.0)
    lo = _PIO2LO_D if big else (_PIO4LO_D if mid else 0.0)
    z = t * t
    y = hi + ((t + t * z * _poly(z, coef)) + lo)
    return _copysign(y, x)


@njit(**_JIT)
def _atan2_d(y, x, coef):
    # a = atan(min/max) in [0, pi/4]; then pi/2 - a if |y| > |x|, pi - a if x
    # has its sign bit set, and the sign of y. Both zero: atan2 = +-0 or +-pi;
    # both infinite: +-pi/4 or +-3pi/4 (the C99 / IEEE 754 rules).
    ax = abs(x)
    ay = abs(y)
    swap = ay > ax
    num = ax if swap else ay
    den = ay if swap else ax
    bothinf = num == _INF_D
    mid = (num > _TANPIO8_D * den) | bothinf
    u = _div(num - den if mid else num, num + den if mid else den)
    u = 0.0 if (den == 0.0) | bothinf else u
    z = u * u
    hi = _PIO4HI_D if mid else 0.0
    lo = _PIO4LO_D if mid else 0.0
    a = hi + ((u + u * z * _poly(z, coef)) + lo)
    a = _PIO2HI_D - (a - _PIO2LO_D) if swap else a
    a = _PIHI_D - (a - _PILO_D) if _bits(x) < 0 else a
    a = _copysign(a, y)
    return x + y if (x != x) | (y != y) else a


# float32: evaluated in float64 (with float32-grade polynomials) and rounded
# once; in float32 arithmetic the cancellations pi/4 + atan(t < 0) and
# pi/2 - 2*asin(s) cost up to 2.2 ulp.

@njit(**_JIT)
def asin_f32(x):
    x = _F(x)
    return _F(_asin_d(np.float64(x), _ASIN_F64LOW))


@njit(**_JIT)
def asin_f64(x):
    x = np.float64(x)
    return _asin_d(x, _ASIN_D)


@njit(**_JIT)
def acos_f32(x):
    x = _F(x)
    return _F(_acos_d(np.float64(x), _ASIN_F64LOW))


@njit(**_JIT)
def acos_f64(x):
    x = np.float64(x)
    return _acos_d(x, _ASIN_D)


@njit(**_JIT)
def atan_f32(x):
    x = _F(x)
    return _F(_atan_d(np.float64(x), _ATAN_F64LOW))


@njit(**_JIT)
def atan_f64(x):
    x = np.float64(x)
    return _atan_d(x, _ATAN_D)


@njit(**_JIT)
def atan2_f32(y, x):
    y = _F(y)
    x = _F(x)
    return _F(_atan2_d(np.float64(y), np.float64(x), _ATAN_F64LOW))


@njit(**_JIT)
def atan2_f64(y, x):
    y = np.float64(y)
    x = np.float64(x)
    return _atan2_d(y, x, _ATAN_D)


# ---------------------------------------------------------------------------
# erf
# ---------------------------------------------------------------------------
# |x| < 0.9: erf(x) = x + x*E(x^2) (E minimax for erf(x)/x - 1, relative).
# |x| >= 0.9: erf(x) = 1 - exp(-x^2 + H(|x| - c)), H minimax for
# log(erfc(x)) + x^2, weighted by erfc(x) (the error that reaches erf); x^2
# needs no extra precision because erfc(x) < 0.21 damps its rounding.

_ERF_X0_F = _F(0.9)
_ERF_C_F = _F(2.45)
_ERF_X1_F = _F(4.0)                          # erf rounds to 1 above 3.92
_ERFS_F = tuple(_F(c) for c in (             # rel. error 2**-30.1
    0.12837916612625122, -0.37612634897232056, 0.11283715069293976,
    -0.02686050906777382, 0.005203858949244022, -0.0008175639668479562,
    8.513104694429785e-05))
_ERFT_F = tuple(_F(c) for c in (             # weighted error 2**-34.1
    -1.5390397310256958, -0.35837438702583313, 0.05776943638920784,
    -0.011292710900306702, 0.0022878528106957674, -0.00043971402919851243,
    7.443818321917206e-05, -2.0783940271940082e-05))

_ERF_X0_D = 0.9
_ERF_C_D = 3.45
_ERF_X1_D = 6.0                             # erf rounds to 1 above 5.93
_ERFS_D = (                                 # rel. error 2**-56.3
    0.1283791670955126, -0.37612638903183754, 0.11283791670955097,
    -0.02686617064512365, 0.005223977625335712, -0.0008548327014556269,
    0.00012055332503926637, -1.492563311720485e-05, 1.646168738657306e-06,
    -1.6358554900686795e-07, 1.4722576827019808e-08, -1.1648175047071264e-09,
    6.486214774685553e-11)
_ERFT_D = (                                 # weighted error 2**-60.7
    -1.8490486466527578, -0.2694639168240353, 0.03404408572767219,
    -0.005404139906229201, 0.0009114437967106745, -0.00015482168893163957,
    2.5789262915514565e-05, -4.132806844403136e-06, 6.21085644855494e-07,
    -8.594176334049146e-08, 1.1549949529939403e-08, 1.2922618115365563e-09,
    9.818601219672023e-10, -3.916188106637342e-12, -4.075617446029817e-10,
    -2.7546805365777605e-10, -1.0653323536677237e-10, -2.465436199319852e-11,
    -3.36595517242207e-12, -2.0735867417727622e-13)


@njit(**_JIT)
def erf_f32(x):
    x = _F(x)
    a = abs(x)
    small = a + a * _poly(a * a, _ERFS_F)
    at = _ERF_X1_F if a > _ERF_X1_F else a
    ec = exp_f32(_poly(at - _ERF_C_F, _ERFT_F) - at * at)
    y = small if a < _ERF_X0_F else _ONE_F - ec
    return _copysign(y, x)


@njit(**_JIT)
def erf_f64(x):
    x = np.float64(x)
    a = abs(x)
    small = a + a * _poly(a * a, _ERFS_D)
    at = _ERF_X1_D if a > _ERF_X1_D else a
    ec = exp_f64(_poly(at - _ERF_C_D, _ERFT_D) - at * at)
    y = small if a < _ERF_X0_D else 1.0 - ec
    return _copysign(y, x)


# ---------------------------------------------------------------------------
# fma
# ---------------------------------------------------------------------------
# a * b + c with one rounding: the product may overflow or cancel where the
# result does not (torch's vectorized lerp is written with it).

@njit(**_JIT)
def fma_f32(a, b, c):
    return _fma(_F(a), _F(b), _F(c))


@njit(**_JIT)
def fma_f64(a, b, c):
    return _fma(np.float64(a), np.float64(b), np.float64(c))


# ---------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------

FUNCTIONS = vmath_names()
"""formula name -> (float32 function name, float64 function name) in this module."""

ARITY = {name: {"atan2": 2, "fma": 3}.get(name, 1) for name in FUNCTIONS}

SOURCE_HASH = vmath_source_hash()
