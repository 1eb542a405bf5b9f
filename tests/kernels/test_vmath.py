"""jitgrad.kernels.vmath: accuracy in ulp over each function's domain, special
values, and that a plain @njit loop over each function vectorizes.

References: float32 results against float64 NumPy (or libm through Numba for
erf), float64 results against NumPy on np.longdouble (x86 80-bit extended
libm) and mpmath for erf. Each (function, dtype) loop is compiled once per
module; the accuracy test also reads that loop's assembly.
"""
import math
import re

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import njit  # noqa: E402

from jitgrad.kernels import vmath  # noqa: E402

F32, F64 = np.float32, np.float64
LD = np.longdouble
BOUND = {F32: 2.0, F64: 4.0}                    # max ulp error promised in docs/vmath.md
EXTENDED = np.finfo(LD).nmant >= 63              # longdouble more precise than double
TRIG = ("sin", "cos", "tan")
LIMIT = 2.0 ** 27                                # sin/cos/tan: nan beyond (documented)


# ---------------------------------------------------------------------------
# loops and references
# ---------------------------------------------------------------------------

def _loop1(fn):
    @njit(nogil=True)
    def kernel(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])
    return kernel


def _loop2(fn):
    @njit(nogil=True)
    def kernel(y, x, out):
        for i in range(x.shape[0]):
            out[i] = fn(y[i], x[i])
    return kernel


_LOOPS = {}


def loop_for(name, dtype, fused=True):
    key = (name, dtype, fused)
    if key not in _LOOPS:
        suffix = "_f32" if dtype is F32 else "_f64"
        fn = getattr(vmath, name + suffix if not name.endswith("_fullrange")
                     else name.replace("_fullrange", "_f32_fullrange"))
        kernel = (_loop2 if name == "atan2" else _loop1)(fn)
        saved = vmath.USE_FMULADD
        vmath.USE_FMULADD = fused
        try:
            args = (np.ones(4, dtype),) * (3 if name == "atan2" else 2)
            kernel(*args)                        # compile now, under this setting
        finally:
            vmath.USE_FMULADD = saved
        _LOOPS[key] = kernel
    return _LOOPS[key]


def run(name, dtype, *xs, fused=True):
    xs = [np.ascontiguousarray(x, dtype) for x in xs]
    out = np.empty_like(xs[0])
    loop_for(name, dtype, fused)(*xs, out)
    return out


@njit
def _libm_erf(x, out):
    for i in range(x.shape[0]):
        out[i] = math.erf(x[i])


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_NP = dict(exp=np.exp, exp2=np.exp2, expm1=np.expm1, log=np.log, log2=np.log2, log1p=np.log1p,
           sin=np.sin, cos=np.cos, tan=np.tan, tanh=np.tanh, sinh=np.sinh, cosh=np.cosh,
           sigmoid=_sigmoid, asin=np.arcsin, acos=np.arccos, atan=np.arctan)


def _mp_erf(x):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    return np.array([LD(mpmath.nstr(mpmath.erf(mpmath.mpf(float(v))), 30))
                     if np.isfinite(v) else LD(np.sign(v)) if not np.isnan(v) else LD(np.nan)
                     for v in x], dtype=LD)


def reference(name, dtype, *xs):
    """Higher-precision reference: float64 values for float32, longdouble for float64."""
    base = name.replace("_fullrange", "")
    with np.errstate(all="ignore"):
        if dtype is F32:
            xd = [np.asarray(x, F32).astype(F64) for x in xs]
            if base == "erf":
                ref = np.empty_like(xd[0])
                _libm_erf(xd[0], ref)
            elif base == "atan2":
                ref = np.arctan2(*xd)
            else:
                ref = _NP[base](xd[0])
        else:
            xl = [np.asarray(x, F64).astype(LD) for x in xs]
            if base == "erf":
                ref = _mp_erf(xs[0])
            elif base == "atan2":
                ref = np.arctan2(*xl)
            else:
                ref = _NP[base](xl[0])
    if base in TRIG and not name.endswith("_fullrange"):
        ref = np.where(np.abs(xs[0]) <= LIMIT, ref, np.nan)
    return ref


def ulp_error(y, ref, dtype):
    """|y - ref| in units of the last place of `dtype` at ref (subnormal spacing
    below the normal range); 0 where both are nan or the same infinity, inf
    where only one is nan or y is inf and ref does not round to inf."""
    fi = np.finfo(dtype)
    p = fi.nmant + 1
    hi = F64 if dtype is F32 else LD
    ref = np.asarray(ref, hi)
    yv = np.asarray(y).astype(hi)
    with np.errstate(all="ignore"):
        _, e = np.frexp(np.where(np.isfinite(ref), ref, 1))
        e = np.maximum(e, fi.minexp + 1)
        err = np.abs(yv - ref) / np.ldexp(np.ones_like(ref), e - p)
        ref_inf = np.abs(ref) >= hi(fi.max) * (1 + hi(2.0) ** -p)     # rounds to +-inf
        same_inf = np.isinf(yv) & (np.sign(yv) == np.sign(ref))
        err = np.where(ref_inf, np.where(same_inf, 0, np.inf), err)
        err = np.where(np.isinf(yv) & ~ref_inf, np.inf, err)
        nr, ny = np.isnan(ref), np.isnan(yv)
        err = np.where(nr | ny, np.where(nr & ny, 0, np.inf), err)
    return err


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------

# main range of each function, where a dense grid and random samples go
RANGE = dict(exp=(-110, 90, -750, 712), exp2=(-152, 130, -1080, 1026),
             expm1=(-20, 90, -40, 712), log=(0, 4, 0, 4), log2=(0, 4, 0, 4),
             log1p=(-1, 4, -1, 4), sin=(-20, 20, -20, 20), cos=(-20, 20, -20, 20),
             tan=(-20, 20, -20, 20), tanh=(-12, 12, -25, 25), sinh=(-92, 92, -712, 712),
             cosh=(-92, 92, -712, 712), sigmoid=(-110, 20, -750, 40), asin=(-1.01, 1.01, -1.01, 1.01),
             acos=(-1.01, 1.01, -1.01, 1.01), atan=(-8, 8, -8, 8), erf=(-7, 7, -7, 7),
             atan2=(-5, 5, -5, 5))
UNARY = [n for n in vmath.FUNCTIONS if vmath.ARITY[n] == 1]
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-30, -1e-30,
            1e30, -1e30, 3.0, 10.0, -10.0, 100.0, -100.0, 88.7, 89.5, -103.9, -104.5, 709.7, 710.3,
            -745.0, -746.0, LIMIT, -LIMIT, 2.0 ** 28, 1e300, -1e300]


def _specials(dtype):
    fi = np.finfo(dtype)
    with np.errstate(over="ignore"):
        s = np.array(SPECIALS, F64).astype(dtype)
    extra = np.array([fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal,
                      fi.tiny / 3, fi.max, -fi.max, fi.eps, -fi.eps], dtype)
    return np.concatenate([s, extra])


def inputs(name, dtype, n_grid=100_000, n_bits=400_000, seed=0):
    """Random bit patterns (float32: a fixed stride), a dense grid and random values
    of the main range, log-uniform magnitudes of both signs, special values."""
    rng = np.random.default_rng(seed)
    lo32, hi32, lo64, hi64 = RANGE[name]
    lo, hi = (lo32, hi32) if dtype is F32 else (lo64, hi64)
    if dtype is F32:
        # every 4093rd bit pattern: the whole float32 line (subnormals, huge, inf, nan)
        allbits = np.arange(0, 2 ** 32, 4093, dtype=np.uint64).astype(np.uint32).view(F32)
    else:
        allbits = rng.integers(0, 2 ** 64, n_bits, dtype=np.uint64).view(F64)
    grid = np.linspace(lo, hi, n_grid).astype(dtype)
    rand = rng.uniform(lo, hi, n_grid).astype(dtype)
    logs = (rng.choice([-1, 1], n_grid) * 10.0 ** rng.uniform(-40 if dtype is F32 else -300,
                                                                 38 if dtype is F32 else 300,
                                                                 n_grid)).astype(dtype)
    return np.concatenate([allbits, grid, rand, logs, _specials(dtype)])


# ---------------------------------------------------------------------------
# accuracy + vectorization, one compile per (function, dtype)
# ---------------------------------------------------------------------------

LIBM = re.compile(r"\b(?:exp|exp2|expm1|log|log2|log1p|sin|cos|tan|tanh|sinh|cosh|asin|acos|"
                  r"atan|atan2|erf|pow|sqrt)f?(?:@PLT)?\b")
# packed (vector) float arithmetic: x86 SSE/AVX (mulps, vfmadd231pd, ...) or AArch64 NEON/SVE
PACKED = re.compile(r"\bv?(?:mul|add|sub|fn?m(?:add|sub)\d*)p[sd]\b"
                    r"|\bf(?:mul|add|sub|mla|mls|madd|msub|fma)\s+[vz]\d+\.(?:4s|2d|s|d)\b")


def _params():
    out = []
    for name in UNARY:
        for dtype in (F32, F64):
            marks = []
            if dtype is F64 and name != "erf" and not EXTENDED:
                marks.append(pytest.mark.skip(reason="np.longdouble is no more precise than float64 here"))
            out.append(pytest.param(name, dtype, marks=marks, id=f"{name}-{dtype.__name__}"))
    return out


@pytest.mark.parametrize("name,dtype", _params())
def test_unary_accuracy_and_vectorized(name, dtype):
    # the float64 erf reference is mpmath: a smaller sample
    x = inputs(name, dtype) if (name, dtype) != ("erf", F64) else inputs(name, dtype, 1000, 1000)
    y = run(name, dtype, x)
    err = ulp_error(y, reference(name, dtype, x), dtype)
    worst = int(np.argmax(err))
    assert err[worst] <= BOUND[dtype], (
        f"{name} {dtype.__name__}: {err[worst]:.3f} ulp at x={x[worst]!r}: got {y[worst]!r}")
    asm = loop_for(name, dtype).inspect_asm(loop_for(name, dtype).signatures[0])
    assert not LIBM.findall(asm), f"{name} {dtype.__name__} calls libm: {set(LIBM.findall(asm))}"
    assert PACKED.search(asm), f"{name} {dtype.__name__}: no packed arithmetic, loop not vectorized"


@pytest.mark.parametrize("dtype", [F32, pytest.param(F64, marks=pytest.mark.skipif(
    not EXTENDED, reason="np.longdouble is no more precise than float64 here"))])
def test_atan2_accuracy_and_specials(dtype):
    rng = np.random.default_rng(1)
    n = 200_000
    mag = 10.0 ** rng.uniform(-30, 30, (2, n)) * rng.choice([-1, 1], (2, n))
    box = rng.uniform(-5, 5, (2, n))
    sp = _specials(dtype)
    sy, sx = np.meshgrid(sp, sp)
    y = np.concatenate([mag[0], box[0], sy.ravel()]).astype(dtype)
    x = np.concatenate([mag[1], box[1], sx.ravel()]).astype(dtype)
    got = run("atan2", dtype, y, x)
    err = ulp_error(got, reference("atan2", dtype, y, x), dtype)
    worst = int(np.argmax(err))
    assert err[worst] <= BOUND[dtype], f"atan2 {err[worst]} ulp at y={y[worst]!r} x={x[worst]!r}"
    # signed zeros and the C99 special cases exactly as numpy
    want = np.arctan2(y, x)
    zero = (want == 0) | (got == 0)
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
    asm = loop_for("atan2", dtype).inspect_asm(loop_for("atan2", dtype).signatures[0])
    assert not LIBM.findall(asm) and PACKED.search(asm)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_fma_rounds_once_and_vectorizes(dtype):
    """a * b + c with a single rounding: the exact product's low bits survive and a
    product beyond the float limit does not overflow a finite result."""
    fma = getattr(vmath, "fma_f32" if dtype is F32 else "fma_f64")

    @njit
    def loop(a, b, c, out):
        for i in range(a.shape[0]):
            out[i] = fma(a[i], b[i], c[i])

    eps = np.finfo(dtype).eps
    big = np.finfo(dtype).max
    a = np.array([1 + eps, big, 2.0, np.nan, np.inf], dtype)
    b = np.array([1 - eps, 2.0, 3.0, 1.0, 0.0], dtype)
    c = np.array([-1.0, -big, 1.0, 1.0, 1.0], dtype)
    out = np.empty_like(a)
    loop(a, b, c, out)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.array([-eps * eps, big, 7.0, np.nan, np.nan], dtype))
    asm = loop.inspect_asm(loop.signatures[0])
    assert not LIBM.findall(asm) and PACKED.search(asm)


@pytest.mark.parametrize("name", ["sin_fullrange", "cos_fullrange", "tan_fullrange"])
def test_float32_fullrange_trig(name):
    x = inputs("sin", F32)
    x = np.concatenate([x, np.float32(2.0) ** np.arange(0, 128, dtype=np.float32),
                        np.nextafter(np.float32(2.0) ** np.arange(0, 128, dtype=np.float32), np.float32(0))])
    y = run(name, F32, x)
    err = ulp_error(y, reference(name, F32, x), F32)
    assert err.max() <= BOUND[F32], f"{name}: {err.max()} ulp at x={x[np.argmax(err)]!r}"


@pytest.mark.parametrize("dtype", [F32, pytest.param(F64, marks=pytest.mark.skipif(
    not EXTENDED, reason="np.longdouble is no more precise than float64 here"))])
def test_unfused_polynomials_keep_the_bounds(dtype):
    """USE_FMULADD=False (the form a CPU without FMA gets): same bounds."""
    for name in ("exp", "expm1", "log", "log1p", "sin", "tanh", "sigmoid", "erf", "atan"):
        x = inputs(name, dtype, 20_000, 40_000) if (name, dtype) != ("erf", F64) else \
            inputs(name, dtype, 500, 500)
        y = run(name, dtype, x, fused=False)
        err = ulp_error(y, reference(name, dtype, x), dtype)
        assert err.max() <= BOUND[dtype], f"{name} unfused: {err.max()} ulp at {x[np.argmax(err)]!r}"


# ---------------------------------------------------------------------------
# special values
# ---------------------------------------------------------------------------

def one(name, dtype, *xs):
    return run(name, dtype, *[np.array([v], dtype) for v in xs])[0]


@pytest.mark.parametrize("dtype", [F32, F64])
def test_special_values(dtype):
    inf, nan = np.inf, np.nan
    t = np.finfo(dtype)
    # exp family: overflow to inf, underflow to 0 through subnormals, no nan
    assert one("exp", dtype, inf) == inf and one("exp", dtype, -inf) == 0
    assert np.isnan(one("exp", dtype, nan))
    big = 89.0 if dtype is F32 else 710.0
    assert one("exp", dtype, big) == inf and one("exp", dtype, -1e30) == 0
    assert np.isfinite(one("exp", dtype, 88.72 if dtype is F32 else 709.78))
    sub = one("exp", dtype, -100.0 if dtype is F32 else -740.0)
    assert 0 < sub < t.tiny                        # a subnormal, not 0, not nan
    assert abs(sub - np.exp(np.array(-100.0 if dtype is F32 else -740.0, dtype))) <= t.smallest_subnormal
    assert one("exp2", dtype, -149.0 if dtype is F32 else -1074.0) == t.smallest_subnormal
    assert one("exp2", dtype, 10.0) == 1024.0 and one("exp2", dtype, -inf) == 0
    assert one("expm1", dtype, -inf) == -1 and one("expm1", dtype, inf) == inf
    assert np.signbit(one("expm1", dtype, -0.0))
    # logs
    for f in ("log", "log2"):
        assert one(f, dtype, 0.0) == -inf and one(f, dtype, -0.0) == -inf
        assert np.isnan(one(f, dtype, -1.0)) and np.isnan(one(f, dtype, -inf))
        assert one(f, dtype, inf) == inf and np.isnan(one(f, dtype, nan)) and one(f, dtype, 1.0) == 0
    assert one("log2", dtype, 2.0 ** -20) == -20 and one("log2", dtype, t.smallest_subnormal) == (
        -149 if dtype is F32 else -1074)
    assert one("log1p", dtype, -1.0) == -inf and np.isnan(one("log1p", dtype, -2.0))
    assert one("log1p", dtype, inf) == inf and np.signbit(one("log1p", dtype, -0.0))
    assert one("log1p", dtype, 1e-30) == dtype(1e-30)
    # trig: signed zero, nan for inf/nan and beyond the documented limit
    for f in ("sin", "tan"):
        assert np.signbit(one(f, dtype, -0.0)) and not np.signbit(one(f, dtype, 0.0))
    for f in TRIG:
        assert np.isnan(one(f, dtype, inf)) and np.isnan(one(f, dtype, nan))
        assert np.isnan(one(f, dtype, 2.0 ** 28))
    assert one("cos", dtype, 0.0) == 1
    # hyperbolic
    assert one("tanh", dtype, inf) == 1 and one("tanh", dtype, -inf) == -1
    assert one("tanh", dtype, 30.0) == 1 and one("tanh", dtype, -1e30) == -1
    assert np.signbit(one("tanh", dtype, -0.0)) and np.isnan(one("tanh", dtype, nan))
    assert one("sinh", dtype, inf) == inf and one("sinh", dtype, -inf) == -inf
    assert one("cosh", dtype, -inf) == inf and np.signbit(one("sinh", dtype, -0.0))
    edge = 89.4 if dtype is F32 else 710.47
    assert np.isfinite(one("cosh", dtype, edge)) and np.isfinite(one("sinh", dtype, -edge))
    assert one("cosh", dtype, edge + 0.1) == inf and one("sinh", dtype, -edge - 0.1) == -inf
    # sigmoid: stable for both signs
    assert one("sigmoid", dtype, 100.0) == 1 and one("sigmoid", dtype, inf) == 1
    assert one("sigmoid", dtype, -inf) == 0 and one("sigmoid", dtype, 0.0) == 0.5
    tiny = one("sigmoid", dtype, -100.0)
    assert 0 < tiny < 1e-43
    if dtype is F64:
        assert abs(tiny / math.exp(-100.0) - 1) < 1e-15
    assert 0 < one("sigmoid", dtype, -700.0 if dtype is F64 else -103.0)
    assert np.isnan(one("sigmoid", dtype, nan))
    # inverse trig
    for f in ("asin", "acos"):
        assert np.isnan(one(f, dtype, 1.5)) and np.isnan(one(f, dtype, -inf)) and np.isnan(one(f, dtype, nan))
    assert one("asin", dtype, 1.0) == dtype(np.pi / 2) and one("acos", dtype, 1.0) == 0
    assert one("acos", dtype, -1.0) == dtype(np.pi) and np.signbit(one("asin", dtype, -0.0))
    assert one("atan", dtype, inf) == dtype(np.pi / 2) and one("atan", dtype, -inf) == -dtype(np.pi / 2)
    assert np.signbit(one("atan", dtype, -0.0))
    # erf
    assert one("erf", dtype, inf) == 1 and one("erf", dtype, -inf) == -1
    assert one("erf", dtype, 10.0) == 1 and np.signbit(one("erf", dtype, -0.0))
    assert np.isnan(one("erf", dtype, nan))


# ---------------------------------------------------------------------------
# module contract
# ---------------------------------------------------------------------------

def test_functions_table_and_source_hash():
    import hashlib
    required = {"exp", "exp2", "expm1", "log", "log2", "log1p", "sin", "cos", "tan", "tanh",
                "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf", "sigmoid"}
    assert required <= set(vmath.FUNCTIONS)
    for name, (f32, f64) in vmath.FUNCTIONS.items():
        assert f32 == f"{name}_f32" and f64 == f"{name}_f64"
        assert isinstance(getattr(vmath, f32), numba.core.registry.CPUDispatcher)
        assert isinstance(getattr(vmath, f64), numba.core.registry.CPUDispatcher)
    with open(vmath.__file__, "rb") as f:
        assert vmath.SOURCE_HASH == hashlib.sha256(f.read()).hexdigest()


def test_float32_in_float32_out():
    for name in ("exp", "log1p", "sin", "tanh", "atan2"):     # each call compiles: a sample
        f32, f64 = vmath.FUNCTIONS[name]
        for fname, arg, nbtype in ((f32, F32(0.5), numba.float32), (f64, F64(0.5), numba.float64)):
            fn = getattr(vmath, fname)
            fn(*(arg,) * vmath.ARITY[name])
            sig = [s for s in fn.nopython_signatures if s.args[0] == nbtype][0]
            assert sig.return_type == nbtype, (fname, sig)


def test_import_compiles_nothing():
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(vmath.__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    code = ("from jitgrad.kernels import vmath\n"
            "assert not any(getattr(vmath, n).signatures for p in vmath.FUNCTIONS.values() for n in p)\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_writing_a_kernel_that_calls_vmath_imports_neither_it_nor_numba():
    """The source of a kernel (and whether the disk cache holds it) is known without
    Numba's 0.15 s import: a compiled step's trace asks it of its eager ops."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(vmath.__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    code = ("import sys\n"
            "from jitgrad.kernels import expr, source\n"
            "code = expr.to_scalar_code(expr.parse('exp(x) + tanh(x)', ('x',))[0], dtype='float32')\n"
            "assert '_vm.exp_f32(x)' in code and '_vm.tanh_f32(x)' in code, code\n"
            "head = source.header(code)\n"
            "assert not {'numba', 'jitgrad.kernels.vmath'} & set(sys.modules), head\n"
            "from jitgrad.kernels import vmath\n"
            "assert (vmath.FUNCTIONS, vmath.SOURCE_HASH) == expr.vmath_functions()\n"
            "assert vmath.SOURCE_HASH in head\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_other_argument_types_are_cast_first():
    """A float64 (or int) argument of a _f32 function is rounded to float32 first,
    instead of feeding float64 bits to the float32 bit tricks."""
    f = njit(lambda x: vmath.exp_f32(x))
    assert f(1.0) == F32(math.e) and f.nopython_signatures[0].return_type == numba.float32
    g = njit(lambda x: vmath.log_f64(x))
    assert g(F32(2.0)) == math.log(2.0) and g.nopython_signatures[0].return_type == numba.float64
    h = njit(lambda x: vmath.sin_f32(x))
    assert h(1) == F32(math.sin(1.0))
