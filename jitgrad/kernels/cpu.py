"""CPU kernels generated from formulas: one Numba ufunc per (op, role, dtypes).

A ufunc handles broadcasting, strides, 0-d operands and `out=` in one
compiled call, which keeps the per-op Python cost to a single call.

Every kernel validates what it is given, so no caller can make it read or
write outside an array: a ufunc checks shapes, broadcasting and `out=` itself;
a flat loop kernel (here, kernels/fuse.py, optim/_kernels.py) has an explicit
Numba signature, which rejects another dtype, a non-contiguous or a read-only
array with a TypeError, and starts with `length_guard`, which rejects operands
of another length (`check_lengths` before a CUDA launch).
"""
import numpy as np

from . import cache
from .expr import module_header, to_numpy_code, to_scalar_code

_NUMBA_TYPE = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64",
               "bool": "boolean", "complex64": "complex64", "complex128": "complex128"}


# ufunc -> (args, parsed body, prefix, compute dtype): how the CUDA backend
# (jitgrad/_cuda/array.py) rebuilds the same kernel for device operands.
FORMULAS = {}


# A flat kernel (a loop over n elements of 1-D operands: loop() below, the fused
# backward of fuse.py, the optimizer updates of optim/_kernels.py, on the CPU and on
# CUDA) indexes its operands without bounds checks. These two helpers are the one
# place that makes it safe: every array operand must have n elements. Callers check
# shapes first with messages of their own, so a failure here is a jitgrad bug.
_LENGTH_RULE = ("every array operand of a flat kernel must have n elements (callers check "
                "shapes first: please report this as a jitgrad bug)")


def length_guard(n, arrays, what):
    """Source lines, for the start of a compiled CPU kernel, that raise ValueError
    unless each 1-D array named in `arrays` has `n` elements (`n`: an expression).
    Costs one compare per operand per call."""
    if not arrays:
        return []
    return [f"if {' or '.join(f'{a}.shape[0] != {n}' for a in arrays)}:",
            f"    raise ValueError({f'{what}: {_LENGTH_RULE}'!r})"]


def check_lengths(n, operands, what):
    """The same rule on the host, for kernels that cannot raise (CUDA): raise
    ValueError unless each array among `operands` has n elements."""
    for k, a in enumerate(operands):
        if getattr(a, "ndim", 0) and a.size != n:
            raise ValueError(f"{what}: operand {k} has {a.size} elements, n is {n}: "
                             + _LENGTH_RULE)


def ufunc(name, args, body, arg_dtypes, compute_dtype, out_dtype, prefix=None):
    """Compile `body` (a parsed formula over `args`) as a ufunc.

    arg_dtypes: numpy dtype per argument; compute_dtype: the `T` of constants;
    out_dtype: the result's dtype. `prefix` multiplies the formula (the
    incoming gradient `g` of a backward kernel)."""
    code = to_scalar_code(body, dtype=compute_dtype.name)
    if prefix is not None:
        code = f"{prefix} * {code}"
    sig = "{}({})".format(_NUMBA_TYPE[out_dtype.name],
                          ", ".join(_NUMBA_TYPE[d.name] for d in arg_dtypes))
    out_t = "np.bool_" if out_dtype.name == "bool" else f"np.{out_dtype.name}"
    source = (
        module_header(code) +
        f"T = np.{compute_dtype.name}\n\n\n"
        f"@numba.vectorize([{sig!r}], cache=True)\n"
        f"def kernel({', '.join(args)}):\n"
        f"    return {out_t}({code})\n")
    # The DUFunc's underlying numpy ufunc: same loops, a third of the call cost.
    u = cache.load(f"{name}_{compute_dtype.name}", source).ufunc
    FORMULAS[u] = (tuple(args), body, prefix, compute_dtype)
    return u


def loop(name, args, kinds, body, arg_dtypes, compute_dtype, out_dtype, parallel):
    """A loop kernel `kernel(n, *operands, out)` over 1-D contiguous arrays (kind
    "a") and scalars (kind "s"), for large same-shape operands; with `parallel`,
    split across cores (see fuse.PARALLEL_MIN_ELEMENTS)."""
    code = to_scalar_code(body, {a: f"{a}[i]" for a, k in zip(args, kinds) if k == "a"},
                          dtype=compute_dtype.name)
    types = ["int64"] + [
        _NUMBA_TYPE[d.name] + ("[::1]" if k == "a" else "") for d, k in zip(arg_dtypes, kinds)]
    types.append(_NUMBA_TYPE[out_dtype.name] + "[::1]")
    sig = f"void({', '.join(types)})"
    out_t = "np.bool_" if out_dtype.name == "bool" else f"np.{out_dtype.name}"
    guard = length_guard("n", [a for a, k in zip(args, kinds) if k == "a"] + ["out"], name)

    def source(parallel):
        return (
            module_header(code) +
            f"T = np.{compute_dtype.name}\n\n\n"
            f"@numba.njit({sig!r}, cache=True, nogil=True, parallel={parallel}, "
            f"error_model='numpy')\n"
            f"def kernel(n, {', '.join(args)}, out):\n" +
            "".join(f"    {line}\n" for line in guard) +
            f"    for i in {'numba.prange' if parallel else 'range'}(n):\n"
            f"        out[i] = {out_t}({code})\n")
    base = f"{name}_{compute_dtype.name}"
    if not parallel:
        return cache.load(base + "_loop", source(False))
    expr = to_numpy_code(body) if compute_dtype.name in NUMPY_TIER else None
    first = None if expr is None else numpy_kernel(
        ["n", *args, "out"], [f"out[...] = {expr}"], compute_dtype.name,
        [a for a, k in zip(args, kinds) if k == "a"] + ["out"], name)
    return tiered(base + "_par", source(True), first, base + "_loop", source(False))


# A parallel kernel compiles 3-4 times slower than the same loop run serially
# (measured: 0.5 s against 0.15 s per elementwise kernel, after Numba's own 0.5 s
# start-up), and a first step runs each kernel once or twice: compiling there made
# the first W1 step at N=1e6 take 5 s. So a parallel kernel that is not in the
# disk cache runs its first PROMOTE_AFTER_CALLS calls through numpy (whole-array
# operations on the same formula, no compilation), or serially where numpy lacks
# a function; the call after those compiles it. A loop repeating a step pays that
# compilation at step PROMOTE_AFTER_CALLS + 1, once per cache folder; a script
# that runs a step once never compiles it.
PROMOTE_AFTER_CALLS = 2
NUMPY_TIER = ("float32", "float64")  # dtypes whose numpy results match the kernels'


def tiered(parallel_name, parallel_source, first, serial_name, serial_source):
    """The parallel kernel if it is loaded or on disk, else a callable with its
    arguments that runs `first` (a numpy_kernel, or None for the serial kernel)
    PROMOTE_AFTER_CALLS times and then compiles and runs the parallel kernel."""
    if cache.is_ready(parallel_name, parallel_source):
        return cache.load(parallel_name, parallel_source)
    if first is None:
        first = cache.load(serial_name, serial_source)
    calls = 0
    kernel = None

    def call(*args):
        nonlocal calls, kernel
        if kernel is None:
            calls += 1
            if calls <= PROMOTE_AFTER_CALLS:
                return first(*args)
            kernel = cache.load(parallel_name, parallel_source)
        return kernel(*args)
    return call


def numpy_kernel(params, lines, dtype, arrays, what):
    """A Python function `kernel(*params)` running `lines` (numpy code over whole
    arrays, `T` the `dtype` scalar type) quietly, as the compiled kernels do, after
    the length rule of flat kernels (`arrays`: the array parameters)."""
    src = (f"def kernel({', '.join(params)}):\n"
           f"    check_lengths(n, ({', '.join(arrays)},), {what!r})\n"
           f"    with np.errstate(all='ignore'):\n" +
           "".join(f"        {line}\n" for line in lines))
    namespace = {"np": np, "T": np.dtype(dtype).type, "check_lengths": check_lengths}
    exec(compile(src, f"<jitgrad numpy kernel {what}>", "exec"), namespace)
    return namespace["kernel"]
