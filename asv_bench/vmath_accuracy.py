"""Accuracy and throughput of jitgrad.kernels.vmath, and the derivation of its
polynomial coefficients.

    python asv_bench/vmath_accuracy.py                 # table: max ulp + ns/element
    python asv_bench/vmath_accuracy.py --exhaustive    # float32 error over all 2**32 inputs
    python asv_bench/vmath_accuracy.py --no-speed exp log   # some functions, accuracy only
    python asv_bench/vmath_accuracy.py --fit           # re-derive the coefficients (mpmath)

Accuracy: max error in ulp of the result type. float32 results are compared
with float64 NumPy (libm `erf` through Numba), over every 257th float32 bit
pattern (every one with --exhaustive) plus dense grids of the main range;
float64 results with NumPy on np.longdouble (80-bit extended libm on x86)
and mpmath for erf, over random bit patterns, random values of the main
range and log-uniform magnitudes. sin/cos/tan are measured on |x| <= 2**27,
their documented domain (nan beyond).

Throughput: ns per element for N = 1e6 contiguous elements, best of
`--repeat` runs, of (a) an @njit loop calling vmath, (b) the same loop
calling math.NAME (scalar libm), (c) NumPy's ufunc (scipy.special for erf and
sigmoid when importable), (d) torch with 1 and 2 threads if importable.

For asv the module also defines VmathAccuracy (track_) and VmathTime (time_).
"""
import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

F32, F64, LD = np.float32, np.float64, np.longdouble
NAMES = ["exp", "exp2", "expm1", "log", "log2", "log1p", "sin", "cos", "tan", "tanh", "sinh",
         "cosh", "sigmoid", "asin", "acos", "atan", "atan2", "erf"]
FULLRANGE = ["sin_fullrange", "cos_fullrange", "tan_fullrange"]      # float32 only
LIMIT = 2.0 ** 27

# main range for accuracy grids and (second pair) for timing inputs
RANGE = dict(exp=((-104, 89), (-10, 10)), exp2=((-150, 128), (-10, 10)),
             expm1=((-20, 89), (-10, 10)), log=((0, 4), (0.01, 100)), log2=((0, 4), (0.01, 100)),
             log1p=((-1, 4), (-0.9, 100)), sin=((-20, 20), (-100, 100)), cos=((-20, 20), (-100, 100)),
             tan=((-20, 20), (-100, 100)), tanh=((-10, 10), (-5, 5)), sinh=((-90, 90), (-10, 10)),
             cosh=((-90, 90), (-10, 10)), sigmoid=((-105, 20), (-10, 10)), asin=((-1, 1), (-1, 1)),
             acos=((-1, 1), (-1, 1)), atan=((-8, 8), (-10, 10)), atan2=((-5, 5), (-10, 10)),
             erf=((-6, 6), (-4, 4)))
RANGE64 = dict(exp=(-746, 710), exp2=(-1080, 1025), expm1=(-40, 710), sinh=(-711, 711),
               cosh=(-711, 711), sigmoid=(-750, 40), tanh=(-20, 20))


# ---------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------

def _vmath():
    from jitgrad.kernels import vmath
    return vmath


def make_loop(fn, arity):
    from numba import njit
    if arity == 1:
        @njit(nogil=True)
        def loop1(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        return loop1

    @njit(nogil=True)
    def loop2(y, x, out):
        for i in range(x.shape[0]):
            out[i] = fn(y[i], x[i])
    return loop2


def vmath_fn(name, dtype):
    vm = _vmath()
    if name.endswith("_fullrange"):
        return getattr(vm, name.replace("_fullrange", "_f32_fullrange"))
    return getattr(vm, name + ("_f32" if dtype is F32 else "_f64"))


def libm_fn(name, dtype):
    """The scalar-libm way: math.NAME in an @njit function (float32 stays float32)."""
    from numba import njit
    one = dtype(1.0)
    simple = dict(exp=math.exp, exp2=math.exp2, expm1=math.expm1, log=math.log, log2=math.log2,
                  log1p=math.log1p, sin=math.sin, cos=math.cos, tan=math.tan, tanh=math.tanh,
                  sinh=math.sinh, cosh=math.cosh, asin=math.asin, acos=math.acos,
                  atan=math.atan, erf=math.erf)
    if name in simple:
        f = simple[name]
        return njit(inline="always")(lambda x: f(x))
    if name == "atan2":
        return njit(inline="always")(lambda y, x: math.atan2(y, x))
    if name == "sigmoid":
        return njit(inline="always")(lambda x: one / (one + math.exp(-x)))
    raise KeyError(name)


_LOOPS = {}


def loop(kind, name, dtype):
    key = (kind, name, dtype)
    if key not in _LOOPS:
        arity = 2 if name == "atan2" else 1
        fn = vmath_fn(name, dtype) if kind == "vmath" else libm_fn(name, dtype)
        k = make_loop(fn, arity)
        k(*(np.ones(2, dtype),) * (arity + 1))
        _LOOPS[key] = k
    return _LOOPS[key]


# ---------------------------------------------------------------------------
# references and ulp
# ---------------------------------------------------------------------------

def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_NP = dict(exp=np.exp, exp2=np.exp2, expm1=np.expm1, log=np.log, log2=np.log2, log1p=np.log1p,
           sin=np.sin, cos=np.cos, tan=np.tan, tanh=np.tanh, sinh=np.sinh, cosh=np.cosh,
           sigmoid=_sigmoid, asin=np.arcsin, acos=np.arccos, atan=np.arctan, atan2=np.arctan2)


def _erf64(x):
    out = np.empty_like(x)
    loop("libm", "erf", F64)(x, out)
    return out


def _erf_mp(x):
    import mpmath
    mpmath.mp.dps = 40
    return np.array([LD(mpmath.nstr(mpmath.erf(mpmath.mpf(float(v))), 30)) if np.isfinite(v)
                     else LD(np.nan) if np.isnan(v) else LD(np.sign(v)) for v in x], dtype=LD)


def reference(name, dtype, *xs):
    base = name.replace("_fullrange", "")
    with np.errstate(all="ignore"):
        if dtype is F32:
            xd = [x.astype(F64) for x in xs]
            ref = _erf64(xd[0]) if base == "erf" else _NP[base](*xd)
        else:
            ref = _erf_mp(xs[0]) if base == "erf" else _NP[base](*[x.astype(LD) for x in xs])
    if base in ("sin", "cos", "tan") and not name.endswith("_fullrange"):
        ref = np.where(np.abs(xs[0]) <= LIMIT, ref, np.nan)
    return ref


def ulp_error(y, ref, dtype):
    """|y - ref| in ulps of dtype at ref (subnormal spacing below the normal
    range); 0 for equal nans/infinities, inf for a wrong nan or inf."""
    fi = np.finfo(dtype)
    p = fi.nmant + 1
    hi = F64 if dtype is F32 else LD
    ref = np.asarray(ref, hi)
    yv = np.asarray(y).astype(hi)
    with np.errstate(all="ignore"):
        _, e = np.frexp(np.where(np.isfinite(ref), ref, 1))
        e = np.maximum(e, fi.minexp + 1)
        err = np.abs(yv - ref) / np.ldexp(np.ones_like(ref), e - p)
        ref_inf = np.abs(ref) >= hi(fi.max) * (1 + hi(2.0) ** -p)
        same_inf = np.isinf(yv) & (np.sign(yv) == np.sign(ref))
        err = np.where(ref_inf, np.where(same_inf, 0, np.inf), err)
        err = np.where(np.isinf(yv) & ~ref_inf, np.inf, err)
        nr, ny = np.isnan(ref), np.isnan(yv)
        err = np.where(nr | ny, np.where(nr & ny, 0, np.inf), err)
    return err


_MAX_ULP32 = None


def max_ulp_f32(y, ref):
    """(max, argmax) of ulp_error(y, ref, float32) in one compiled pass (the
    exhaustive float32 run would spend most of its time in NumPy temporaries)."""
    global _MAX_ULP32
    if _MAX_ULP32 is None:
        from numba import njit
        big = float(np.finfo(F32).max) * (1 + 2.0 ** -24)

        @njit(nogil=True)
        def kernel(y, ref):
            worst, at = 0.0, 0
            for i in range(y.shape[0]):
                r = ref[i]
                v = np.float64(y[i])
                if r != r or v != v:
                    e = 0.0 if (r != r and v != v) else math.inf
                elif abs(r) >= big:
                    e = 0.0 if (abs(v) == math.inf and (v > 0) == (r > 0)) else math.inf
                elif abs(v) == math.inf:
                    e = math.inf
                else:
                    ex = math.frexp(r)[1]
                    e = abs(v - r) / math.ldexp(1.0, max(ex, -125) - 24)
                if e > worst:
                    worst, at = e, i
            return worst, at
        _MAX_ULP32 = kernel
    return _MAX_ULP32(y, ref)


# ---------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------

def _grid(name, dtype, n, rng):
    lo, hi = RANGE[name.replace("_fullrange", "")][0]
    if dtype is F64 and name in RANGE64:
        lo, hi = RANGE64[name]
    return np.concatenate([np.linspace(lo, hi, n), rng.uniform(lo, hi, n)]).astype(dtype)


def _logmag(dtype, n, rng):
    e = (-45, 38.5) if dtype is F32 else (-320, 308)
    with np.errstate(over="ignore"):
        return (rng.choice([-1, 1], n) * 10.0 ** rng.uniform(*e, n)).astype(dtype)


def _chunks_f32(exhaustive, stride=257):
    if exhaustive:
        for start in range(0, 2 ** 32, 2 ** 24):
            yield np.arange(start, start + 2 ** 24, dtype=np.uint64).astype(np.uint32).view(F32)
    else:
        yield np.arange(0, 2 ** 32, stride, dtype=np.uint64).astype(np.uint32).view(F32)


def max_ulp(name, dtype, exhaustive=False, n64=1_000_000, seed=0):
    """(max ulp error, input where it occurs, number of inputs)."""
    rng = np.random.default_rng(seed)
    worst = (0.0, None)
    count = 0

    def update(y, ref, *xs):
        nonlocal worst, count
        if dtype is F32:
            e, i = max_ulp_f32(y, np.ascontiguousarray(ref, F64))
        else:
            err = ulp_error(y, ref, dtype)
            i = int(np.argmax(err))
            e = err[i]
        count += y.size
        if e > worst[0]:
            worst = (float(e), tuple(x[i] for x in xs))

    k = loop("vmath", name, dtype)
    if name == "atan2":
        n = 4_000_000 if dtype is F32 else n64
        for part in range(4):
            if dtype is F32:
                bits = rng.integers(0, 2 ** 32, (2, n // 4), dtype=np.uint64).astype(np.uint32).view(F32)
            else:
                bits = rng.integers(0, 2 ** 64, (2, n // 4), dtype=np.uint64).view(F64)
            ys = np.concatenate([bits[0], _grid(name, dtype, n // 8, rng), _logmag(dtype, n // 4, rng)])
            xs = np.concatenate([bits[1], _grid(name, dtype, n // 8, rng), _logmag(dtype, n // 4, rng)])
            out = np.empty_like(xs)
            k(ys, xs, out)
            update(out, reference(name, dtype, ys, xs), ys, xs)
        return worst[0], worst[1], count
    if dtype is F32:
        for x in _chunks_f32(exhaustive):
            out = np.empty_like(x)
            k(x, out)
            update(out, reference(name, dtype, x), x)
        x = _grid(name, dtype, 2_000_000, rng)
    else:
        n = n64 if name != "erf" else 10_000
        bits = rng.integers(0, 2 ** 64, n, dtype=np.uint64).view(F64)
        x = np.concatenate([bits, _grid(name, dtype, n, rng), _logmag(dtype, n, rng)])
    out = np.empty_like(x)
    k(x, out)
    update(out, reference(name, dtype, x), x)
    return worst[0], worst[1], count


# ---------------------------------------------------------------------------
# throughput
# ---------------------------------------------------------------------------

def _best(f, repeat):
    f()
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def _numpy_call(name):
    try:
        import scipy.special as sp
    except ImportError:
        sp = None
    if name == "erf":
        return (lambda x, out: sp.erf(x, out=out)) if sp is not None else None
    if name == "sigmoid":
        if sp is not None:
            return lambda x, out: sp.expit(x, out=out)

        def expression(x, out):                 # 1/(1 + exp(-x)) in three passes
            np.exp(np.negative(x, out=out), out=out)
            np.add(1, out, out=out)
            return np.divide(1, out, out=out)
        return expression
    if name == "atan2":
        return lambda y, x, out: np.arctan2(y, x, out=out)
    return lambda x, out, f=_NP[name]: f(x, out=out)


def _torch_call(name):
    try:
        import torch
    except ImportError:
        return None, None
    f = dict(asin=torch.asin, acos=torch.acos, atan=torch.atan, sigmoid=torch.sigmoid,
             atan2=torch.atan2).get(name) or getattr(torch, name)
    return torch, f


def throughput(name, dtype, n=1_000_000, repeat=20, seed=0):
    """ns/element: vmath loop, libm loop, numpy, torch 1 thread, torch 2 threads."""
    rng = np.random.default_rng(seed)
    lo, hi = RANGE[name][1]
    arity = 2 if name == "atan2" else 1
    xs = [rng.uniform(lo, hi, n).astype(dtype) for _ in range(arity)]
    out = np.empty_like(xs[0])
    res = {}
    for kind in ("vmath", "libm"):
        k = loop(kind, name, dtype)
        res[kind] = _best(lambda: k(*xs, out), repeat) / n * 1e9
    npf = _numpy_call(name)
    res["numpy"] = _best(lambda: npf(*xs, out), repeat) / n * 1e9 if npf else math.nan
    torch, tf = _torch_call(name)
    if torch is not None:
        txs = [torch.from_numpy(x) for x in xs]
        tout = torch.from_numpy(out)
        saved = torch.get_num_threads()
        for threads in (1, 2):
            torch.set_num_threads(threads)
            res[f"torch{threads}"] = _best(lambda: tf(*txs, out=tout), repeat) / n * 1e9
        torch.set_num_threads(saved)
    else:
        res["torch1"] = res["torch2"] = math.nan
    return res


# ---------------------------------------------------------------------------
# coefficient derivation (Remez exchange, mpmath)
# ---------------------------------------------------------------------------

def _fit_specs():
    """(vmath constant, function, weight, interval, exponents, coefficient precision)."""
    import mpmath as mp
    sq, ln2, pi = mp.sqrt, mp.log(2), mp.pi
    expm1 = (lambda r: (mp.expm1(r) - r) / r ** 2, lambda r: r ** 2 / mp.expm1(r),
             (-ln2 / 2 * 1.0005, ln2 / 2 * 1.0005))
    exp2 = (lambda r: (2 ** r - 1) / r, lambda r: r / 2 ** r, (-0.5, 0.5))
    log = (lambda z: 2 * mp.atanh(sq(z)) / sq(z) - 2, lambda z: sq(z) / (2 * mp.atanh(sq(z))),
           (0, ((sq(2) - 1) / (sq(2) + 1) * 1.002) ** 2))
    zt = (0, (pi / 4 * 1.002) ** 2)
    sin = (lambda z: (mp.sin(sq(z)) - sq(z)) / z ** 1.5, lambda z: z ** 1.5 / mp.sin(sq(z)), zt)
    cos = (lambda z: (mp.cos(sq(z)) - 1 + z / 2) / z ** 2, lambda z: z ** 2 / mp.cos(sq(z)), zt)
    tan = (lambda z: (mp.tan(sq(z)) - sq(z)) / z ** 1.5, lambda z: z ** 1.5 / mp.tan(sq(z)), zt)
    tanh = (lambda z: (mp.tanh(sq(z)) - sq(z)) / z ** 1.5, lambda z: z ** 1.5 / mp.tanh(sq(z)),
            (0, mp.mpf(0.5501) ** 2))
    atan = (lambda z: (mp.atan(sq(z)) - sq(z)) / z ** 1.5, lambda z: z ** 1.5 / mp.atan(sq(z)),
            (0, (mp.tan(pi / 8) * 1.002) ** 2))
    asin = (lambda z: (mp.asin(sq(z)) - sq(z)) / z ** 1.5, lambda z: z ** 1.5 / mp.asin(sq(z)), (0, 0.25))
    erfs = (lambda z: mp.erf(sq(z)) / sq(z) - 1, lambda z: sq(z) / mp.erf(sq(z)), (0, mp.mpf(0.9) ** 2))

    def erft(c, x1):
        return (lambda t: mp.log(mp.erfc(t + c)) + (t + c) ** 2, lambda t: mp.erfc(t + c),
                (0.9 - c, x1 - c))
    r = lambda n, first=0: list(range(first, first + n))     # noqa: E731
    return [
        ("_EXPM1_F", *expm1, r(6), F32), ("_EXPM1_D", *expm1, r(10), F64),
        ("_EXP2_F", *exp2, r(6), F32), ("_EXP2_D", *exp2, r(11), F64),
        ("_LOG_F", *log, r(4, 1), F32), ("_LOG_D", *log, r(8, 1), F64),
        ("_LOG_F64LOW", *log, r(4, 1), F64),
        ("_SIN_F", *sin, r(4), F64), ("_COS_F", *cos, r(4), F64), ("_TAN_F", *tan, r(8), F64),
        ("_SIN_D", *sin, r(6), F64), ("_COS_D", *cos, r(6), F64), ("_TAN_D", *tan, r(14), F64),
        ("_TANH_F", *tanh, r(5), F32), ("_TANH_D", *tanh, r(11), F64),
        ("_ATAN_F64LOW", *atan, r(5), F64), ("_ATAN_D", *atan, r(11), F64),
        ("_ASIN_F64LOW", *asin, r(6), F64), ("_ASIN_D", *asin, r(12), F64),
        ("_ERFS_F", *erfs, r(7), F32), ("_ERFS_D", *erfs, r(13), F64),
        # the shift c exactly as the module has it: float32(2.45), float64(3.45)
        ("_ERFT_F", *erft(mp.mpf(float(F32(2.45))), 4.0), r(8), F32),
        ("_ERFT_D", *erft(mp.mpf(3.45), 6.0), r(20), F64),
    ]


def remez(g, w, exps, a, b, iters=40, npts=1500, tol=1e-4):
    """Minimax fit of sum c_i t**exps[i] to g on [a, b], error weighted by w.
    Returns (coefficients, max weighted error)."""
    import mpmath as mp
    a, b = mp.mpf(a), mp.mpf(b)
    tiny = mp.mpf(10) ** -25
    nz = lambda t: t if abs(t) > tiny else (tiny if t >= 0 else -tiny)   # noqa: E731

    def err(c, t):
        t = nz(t)
        return (mp.fsum(ci * t ** e for ci, e in zip(c, exps)) - g(t)) * w(t)

    n, m = len(exps), len(exps) + 1
    ref = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * j / (m - 1)) for j in range(m)]
    grid = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * j / (npts - 1)) for j in range(npts)]
    for _ in range(iters):
        A = mp.matrix(m, m)
        rhs = mp.matrix(m, 1)
        for j, t in enumerate(ref):
            t = nz(t)
            for i, e in enumerate(exps):
                A[j, i] = t ** e
            A[j, n] = (-1) ** j / w(t)
            rhs[j] = g(t)
        sol = mp.lu_solve(A, rhs)
        c = [sol[i] for i in range(n)]
        runs = []                               # extremum of each run of equal sign
        for t in grid:
            e = err(c, t)
            if not runs or (e >= 0) != runs[-1][2]:
                runs.append([t, e, e >= 0])
            elif abs(e) > abs(runs[-1][1]):
                runs[-1][:2] = [t, e]
        pts = []
        h = (b - a) / npts * 2
        for t, e, s in runs:                    # golden-section refinement
            lo, hi = max(a, t - h), min(b, t + h)
            for _ in range(40):
                m1, m2 = lo + (hi - lo) * mp.mpf("0.381966"), lo + (hi - lo) * mp.mpf("0.618034")
                if abs(err(c, m1)) > abs(err(c, m2)):
                    hi = m2
                else:
                    lo = m1
            u = (lo + hi) / 2
            eu = err(c, u)
            pts.append((u, eu) if abs(eu) >= abs(e) and (eu >= 0) == s else (t, e))
        while len(pts) > m:
            pts.pop(0 if abs(pts[0][1]) < abs(pts[-1][1]) else -1)
        ref = [t for t, _ in pts]
        emax, emin = max(abs(e) for _, e in pts), min(abs(e) for _, e in pts)
        if emax - emin < tol * emax:
            break
    return c, emax


def fit(selected=None):
    """Re-derive the coefficient tuples of vmath; print them next to the ones in
    the module. The minimax coefficients are rounded to the working precision
    either all at once or one at a time (lowest order first, refitting the
    rest), whichever leaves the smaller error, as was done for the module."""
    import mpmath as mp
    mp.mp.dps = 50
    vm = _vmath()
    for name, g, w, (a, b), exps, prec in _fit_specs():
        if selected and name not in selected:
            continue
        c, e = remez(g, w, exps, a, b)
        simple = [mp.mpf(float(prec(float(v)))) for v in c]
        fixed = []
        while True:
            fixed.append(mp.mpf(float(prec(float(c[0])))))
            rest = exps[len(fixed):]
            if not rest:
                break
            fe, fx = exps[:len(fixed)], list(fixed)
            g1 = lambda t, fx=fx, fe=fe: g(t) - mp.fsum(ci * t ** ei for ci, ei in zip(fx, fe))  # noqa: E731
            try:
                c, _ = remez(g1, w, rest, a, b)
            except (ZeroDivisionError, RuntimeError):
                c = c[1:]
        # keep the plainly rounded minimax coefficients where they do better
        grid = [a + (b - a) * i / 3999 if i else (b - a) * mp.mpf(10) ** -25 for i in range(4000)]

        def worst(cs):
            return max(abs((mp.fsum(ci * t ** ei for ci, ei in zip(cs, exps)) - g(t)) * w(t)) for t in grid)
        if worst(simple) < worst(fixed):
            fixed = simple
        ours = [float(v) for v in getattr(vm, name)]
        diff = max(abs(float(x) - y) / abs(y) for x, y in zip(fixed, ours))
        print(f"{name}: minimax error 2**{float(mp.log(e, 2)):.1f} on [{float(a):.4g}, {float(b):.4g}]"
              f"; max relative difference to vmath {diff:.1e}")
        print("    (" + ", ".join(repr(float(prec(float(v)))) for v in fixed) + ")")


# ---------------------------------------------------------------------------
# table
# ---------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="functions (default: all)")
    ap.add_argument("--exhaustive", action="store_true", help="float32: all 2**32 inputs")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--dtype", choices=["float32", "float64"], action="append")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--unfused", action="store_true",
                    help="compile with vmath.USE_FMULADD = False (separate multiply and add)")
    ap.add_argument("--fit", action="store_true", help="re-derive the coefficients and exit")
    args = ap.parse_args(argv)
    if args.unfused:
        _vmath().USE_FMULADD = False
    if args.fit:
        fit(set(args.names) or None)
        return
    import numba
    names = args.names or NAMES + FULLRANGE
    dtypes = [np.dtype(d).type for d in (args.dtype or ["float32", "float64"])]
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    print(f"# numba {numba.__version__}, numpy {np.__version__}, CPU {cpu or 'unknown'}, "
          f"{os.cpu_count()} cores, N=1e6, best of {args.repeat}")
    print(f"# accuracy: float32 over {'all 2**32 inputs' if args.exhaustive else 'every 257th bit pattern'}"
          " + grids; float64 over 4e6 random inputs (erf: 4e4)"
          + ("; polynomials UNFUSED (USE_FMULADD=False)" if args.unfused else ""))
    head = (f"| {'function':16s} | {'dtype':7s} | {'max ulp':>7s} | {'vmath':>6s} | {'libm':>6s} |"
            f" {'numpy':>6s} | {'torch1':>6s} | {'torch2':>6s} | {'vs libm':>7s} |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    for name in names:
        for dtype in dtypes:
            if name.endswith("_fullrange") and dtype is not F32:
                continue
            acc = "" if args.no_accuracy else f"{max_ulp(name, dtype, args.exhaustive)[0]:7.3f}"
            if args.no_speed or name.endswith("_fullrange"):
                sp = dict(vmath=math.nan, libm=math.nan, numpy=math.nan, torch1=math.nan, torch2=math.nan)
                if name.endswith("_fullrange") and not args.no_speed:
                    lo, hi = RANGE["sin"][1]
                    x = np.random.default_rng(0).uniform(lo, hi, 1_000_000).astype(F32)
                    out = np.empty_like(x)
                    k = loop("vmath", name, F32)
                    sp["vmath"] = _best(lambda: k(x, out), args.repeat) / 1e6 * 1e9
            else:
                sp = throughput(name, dtype, repeat=args.repeat)
            ratio = sp["libm"] / sp["vmath"]       # nan when either is missing
            cells = [f"{v:6.2f}" if v == v else f"{'-':>6s}"
                     for v in (sp["vmath"], sp["libm"], sp["numpy"], sp["torch1"], sp["torch2"])]
            cells.append(f"{ratio:6.1f}x" if ratio == ratio else f"{'-':>7s}")
            row = [f"{name:16s}", f"{np.dtype(dtype).name:7s}", f"{acc:>7s}"] + cells
            print("| " + " | ".join(row) + " |", flush=True)


# ---------------------------------------------------------------------------
# asv
# ---------------------------------------------------------------------------

class VmathAccuracy:
    params = (NAMES, ["float32", "float64"])
    param_names = ["function", "dtype"]
    unit = "ulp"
    timeout = 600

    def track_max_ulp(self, name, dtype):
        return max_ulp(name, np.dtype(dtype).type, n64=100_000)[0]


class VmathTime:
    params = (NAMES, ["float32", "float64"], ["vmath", "libm"])
    param_names = ["function", "dtype", "implementation"]

    def setup(self, name, dtype, impl):
        dt = np.dtype(dtype).type
        rng = np.random.default_rng(0)
        lo, hi = RANGE[name][1]
        self.args = [rng.uniform(lo, hi, 1_000_000).astype(dt) for _ in range(2 if name == "atan2" else 1)]
        self.args.append(np.empty_like(self.args[0]))
        self.kernel = loop(impl, name, dt)

    def time_1e6(self, name, dtype, impl):
        self.kernel(*self.args)


if __name__ == "__main__":
    main()
