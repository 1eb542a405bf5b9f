"""CPU kernels generated from formulas: one Numba ufunc per (op, role, dtypes).

A ufunc handles broadcasting, strides, 0-d operands and `out=` in one
compiled call, which keeps the per-op Python cost to a single call.

Every kernel validates what it is given, so no caller can make it read or
write outside an array: a ufunc checks shapes, broadcasting and `out=` itself;
a flat loop kernel (kernels/source.py flat_kernel: here, kernels/fuse.py,
optim/_kernels.py) has an explicit Numba signature, which rejects another dtype,
a non-contiguous or a read-only array with a TypeError, and starts with
`length_guard`, which rejects operands of another length (`check_lengths`
before a CUDA launch or a numpy stand-in).
"""
import numpy as np

from .. import _state
from . import ERRSTATE, QUIET, cache
from .expr import numpy_is_exact, numpy_is_exact_on, to_numpy_code, to_scalar_code
from .source import NUMBA_TYPE, array_type, check_lengths, flat_kernel, header, scalar_type


# ufunc -> (args, parsed body, prefix, compute dtype): how the CUDA backend
# (jitgrad/_cuda/array.py) rebuilds the same kernel for device operands.
FORMULAS = {}


def ufunc(name, args, body, arg_dtypes, compute_dtype, out_dtype, prefix=None, install=None):
    """Compile `body` (a parsed formula over `args`) as a ufunc, or return its numpy
    stand-in (see `staged`; `install` as there).

    arg_dtypes: numpy dtype per argument; compute_dtype: the `T` of constants;
    out_dtype: the result's dtype. `prefix` multiplies the formula (the
    incoming gradient `g` of a backward kernel)."""
    key = f"{name}_{compute_dtype.name}"

    def source():
        code = to_scalar_code(body, dtype=compute_dtype.name)
        if prefix is not None:
            code = f"{prefix} * {code}"
        sig = "{}({})".format(NUMBA_TYPE[out_dtype.name],
                              ", ".join(NUMBA_TYPE[d.name] for d in arg_dtypes))
        return (
            header(code, "ufunc") +
            f"T = np.{compute_dtype.name}\n\n\n"
            f"@numba.vectorize([{sig!r}], cache=True)\n"
            f"def kernel({', '.join(args)}):\n"
            f"    return {scalar_type(out_dtype.name)}({code})\n")

    def compiled():
        # The DUFunc's underlying numpy ufunc: same loops, a third of the call cost.
        u = cache.load(key, source()).ufunc
        FORMULAS[u] = (tuple(args), body, prefix, compute_dtype)
        return u
    exact = numpy_is_exact_on(body, compute_dtype)
    tracing = _state.trace[0] is not None
    # Numba started: a kernel in the disk cache loads at once, but a trace keeps the
    # stand-in of an exact formula (loading a ufunc builds its loop: 0.05-0.1 s each,
    # on the first call of a compiled step).
    if cache.started() and not (exact and tracing):
        return compiled()
    # Not started: an inexact formula's kernel in the disk cache loads at once, so
    # that eager steps give its bits from the first, except in a trace, which would
    # start Numba (0.3 s) for it: there the stand-in runs, in traces only.
    ready = not exact and cache.is_ready(key, source())
    if ready and not tracing:
        return compiled()
    return staged(compiled, numpy_ufunc(args, body, prefix, arg_dtypes, compute_dtype,
                                        out_dtype, name), install, traces_only=ready)


def loop(name, args, kinds, body, arg_dtypes, compute_dtype, out_dtype, parallel, install=None):
    """A loop kernel `kernel(n, *operands, out)` over 1-D contiguous arrays (kind
    "a") and scalars (kind "s"), for large same-shape operands; with `parallel`,
    split across cores (see fuse.PARALLEL_MIN_ELEMENTS). May be a stand-in (see
    `staged`; `install` as there)."""
    subst = {a: f"{a}[i]" for a, k in zip(args, kinds) if k == "a"}
    types = ["int64"] + [array_type(d.name) if k == "a" else NUMBA_TYPE[d.name]
                         for d, k in zip(arg_dtypes, kinds)] + [array_type(out_dtype.name)]
    arrays = [a for a, k in zip(args, kinds) if k == "a"] + ["out"]

    def source(target):
        # made only when needed: writing the scalar code loads kernels/vmath.py (Numba)
        code = to_scalar_code(body, subst, dtype=compute_dtype.name)
        store = [f"out[i] = {scalar_type(out_dtype.name)}({code})"]
        return (header(code) + f"T = np.{compute_dtype.name}\n\n\n" + "\n".join(
            flat_kernel(target, ["n", *args, "out"], types, [(None, store)], arrays, name)) + "\n")
    base = f"{name}_{compute_dtype.name}"
    serial = (base + "_loop", lambda: source("serial"))
    chosen = (base + "_par", lambda: source("parallel")) if parallel else serial
    expr = to_numpy_code(body) if compute_dtype.name in NUMPY_TIER else None
    first = None if expr is None else numpy_kernel(
        ["n", *args, "out"], [f"out[...] = {expr}"], compute_dtype.name, arrays, name)
    return flat_staged(chosen, first, serial if parallel else None, install,
                       exact=numpy_is_exact(body))


# ---- the first calls of a kernel: numpy stand-ins ----------------------------------------
#
# Getting a compiled kernel costs far more than running it once: a process's first
# kernel starts Numba (its import and compiler set-up: 0.3 s, which every short
# script paid for its first op), and a kernel not in the disk cache compiles (0.1 s
# serial, 0.5 s parallel: compiling made the first W1 step at N=1e6 take 5 s). So
# such a kernel starts as a stand-in running numpy code of the same formula
# (whole-array operations, no compilation), or its serial loop where numpy lacks
# a function. The stand-in hands over to the compiled kernel (loaded from disk,
# or compiled) in the third training step it is called in: a step ends with each
# backward pass (end_step). Code that never runs a backward hands over at the call
# after PROMOTE_AFTER_CALLS. A script that runs a step once or twice never starts
# Numba; a loop pays the start-up or the compilation at its third step, once per
# cache folder for the compilation. A jitgrad.compile trace (the first call of a
# compiled step, which runs the step to record it) keeps the stand-ins: the
# program it records compiles kernels of its own, in a worker thread; and while
# that thread compiles, stand-ins keep running rather than wait for it.
#
# A stand-in whose formula calls exp, tanh, sin ... (numpy's math, not jitgrad's)
# differs from the kernel in the last bit, so identical steps would give different
# bits before and after the handover. Such a stand-in runs only while its kernel
# must be compiled (not in the disk cache); with a warm cache the kernel loads at once,
# except in a trace before Numba has started, which runs the stand-in rather than
# start Numba: the trace's own values may differ in the last bit, as its deferred
# values do (compiler/deferred.py), and eager calls after it load the kernel.
PROMOTE_AFTER_STEPS = 2
PROMOTE_AFTER_CALLS = 16
NUMPY_TIER = ("float32", "float64")  # dtypes whose numpy arithmetic matches the kernels'
_steps = [0]


def end_step():
    """Count one training step (the engine calls this after each backward pass)."""
    _steps[0] += 1


def _on_host(values):
    # backend.first_device_array's test: kernels sit below the backend layer
    return all(type(v) is np.ndarray or not getattr(v, "on_device", False) for v in values)


def flat_staged(chosen, first, serial=None, install=None, exact=True):
    """The flat kernel chosen = (name, source function), or its stand-in (see
    `staged`) when getting it now would cost more than a few calls of `first`:
    Numba has not started, or it is a parallel kernel (`serial` is given) not in
    the disk cache. Without `first`, the `serial` kernel stands in for a
    parallel one. `exact`: `first` gives the kernel's bits (else it stands in only
    for a kernel not in the disk cache, see above)."""
    name, source = chosen

    def compiled():
        return cache.load(name, source())
    if cache.started() and (serial is None or cache.is_ready(name, source())):
        return compiled()
    if first is not None and not exact and cache.is_ready(name, source()):
        # (as in `ufunc`: at once, except in a trace)
        if _state.trace[0] is None:
            return compiled()
        return staged(compiled, first, install, traces_only=True)
    if first is None:
        if serial is None:
            return compiled()
        first = cache.load(serial[0], serial[1]())
    return staged(compiled, first, install)


def staged(compiled, first, install=None, traces_only=False):
    """A callable running `first` (a stand-in computing the same results) for the
    calls of its first PROMOTE_AFTER_STEPS steps, of jitgrad.compile traces and while
    another thread compiles (with `traces_only`, for the calls of traces only), then
    compiled() (the kernel) from then on; `install(kernel)` is called once with it,
    so that a caller keeping kernels can drop this wrapper. compiled() at once when
    `first` is None. Device operands go to the compiled kernel, which hands them to
    their backend."""
    if first is None:
        return compiled()
    start = _steps[0]
    calls = 0
    kernel = None

    def call(*args, **kwargs):
        nonlocal calls, kernel
        if kernel is None:
            calls += 1
            waits = not traces_only and (
                calls <= PROMOTE_AFTER_CALLS and _steps[0] - start < PROMOTE_AFTER_STEPS or
                cache.compiling_in_background())
            if (waits or _state.trace[0] is not None) and _on_host(args):
                return first(*args, **kwargs)
            kernel = compiled()
            if install is not None:
                install(kernel)
        return kernel(*args, **kwargs)
    return call


def numpy_ufunc(args, body, prefix, arg_dtypes, compute_dtype, out_dtype, what):
    """The stand-in of a formula ufunc: a Python function with the ufunc's calling
    convention (operands broadcast together, optional `out=`) and results (a new
    array of `out_dtype`), computing with numpy; None where numpy lacks a function
    of the formula or the dtype's results would differ."""
    # operands renamed a0, a1, ...: a formula's `out` (the forward result) is an operand
    names = {a: f"a{i}" for i, a in enumerate(args)}
    expr = to_numpy_code(body, names) if compute_dtype.name in NUMPY_TIER or \
        numpy_is_exact_on(body, compute_dtype) else None
    if expr is None:
        return None
    if prefix is not None:
        expr = f"{names[prefix]} * {expr}"
    params = list(names.values())
    # (numpy's error state through its context variable, and np.broadcast: a trace
    # evaluates deferred values in blocks, thousands of calls of these)
    src = (f"def kernel({', '.join(params)}, *, out=None):\n" +
           "".join(f"    {a} = np.asarray({a}, D{i})\n" for i, a in enumerate(params)) +
           "    token = ERRSTATE.set(QUIET)\n"
           "    try:\n"
           f"        r = {expr}\n"
           "    finally:\n"
           "        ERRSTATE.reset(token)\n"
           "    if out is None:\n"
           f"        shape = np.broadcast({', '.join(params)}).shape\n"
           # a new array of the result's shape and dtype is the result (no copy)
           "        if type(r) is np.ndarray and r.base is None and r.dtype == OUT and "
           f"r.shape == shape{''.join(f' and r is not {a}' for a in params)}:\n"
           "            return r\n"
           "        out = np.empty(shape, OUT)\n"
           "    out[...] = r\n"
           "    return out\n")
    namespace = {"np": np, "T": compute_dtype.type, "OUT": out_dtype, "ERRSTATE": ERRSTATE,
                 "QUIET": QUIET, **{f"D{i}": d for i, d in enumerate(arg_dtypes)}}
    exec(compile(src, f"<jitgrad numpy kernel {what}>", "exec"), namespace)
    return namespace["kernel"]


def numpy_kernel(params, lines, dtype, arrays, what):
    """A Python function `kernel(*params)` running `lines` (numpy code over whole
    arrays, `T` the `dtype` scalar type) quietly, as the compiled kernels do, after
    the length rule of flat kernels (`arrays`: the array parameters)."""
    src = (f"def kernel({', '.join(params)}):\n"
           f"    check_lengths(n, ({', '.join(arrays)},), {what!r})\n"
           "    token = ERRSTATE.set(QUIET)\n"
           "    try:\n" +
           "".join(f"        {line}\n" for line in lines) +
           "    finally:\n"
           "        ERRSTATE.reset(token)\n")
    namespace = {"np": np, "T": np.dtype(dtype).type, "check_lengths": check_lengths,
                 "ERRSTATE": ERRSTATE, "QUIET": QUIET}
    exec(compile(src, f"<jitgrad numpy kernel {what}>", "exec"), namespace)
    return namespace["kernel"]
