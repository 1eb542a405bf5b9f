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

from . import cache
from .expr import to_numpy_code, to_scalar_code
from .source import NUMBA_TYPE, array_type, check_lengths, flat_kernel, header, scalar_type


# ufunc -> (args, parsed body, prefix, compute dtype): how the CUDA backend
# (jitgrad/_cuda/array.py) rebuilds the same kernel for device operands.
FORMULAS = {}


def ufunc(name, args, body, arg_dtypes, compute_dtype, out_dtype, prefix=None):
    """Compile `body` (a parsed formula over `args`) as a ufunc.

    arg_dtypes: numpy dtype per argument; compute_dtype: the `T` of constants;
    out_dtype: the result's dtype. `prefix` multiplies the formula (the
    incoming gradient `g` of a backward kernel)."""
    code = to_scalar_code(body, dtype=compute_dtype.name)
    if prefix is not None:
        code = f"{prefix} * {code}"
    sig = "{}({})".format(NUMBA_TYPE[out_dtype.name],
                          ", ".join(NUMBA_TYPE[d.name] for d in arg_dtypes))
    source = (
        header(code) +
        f"T = np.{compute_dtype.name}\n\n\n"
        f"@numba.vectorize([{sig!r}], cache=True)\n"
        f"def kernel({', '.join(args)}):\n"
        f"    return {scalar_type(out_dtype.name)}({code})\n")
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
    types = ["int64"] + [array_type(d.name) if k == "a" else NUMBA_TYPE[d.name]
                         for d, k in zip(arg_dtypes, kinds)] + [array_type(out_dtype.name)]
    arrays = [a for a, k in zip(args, kinds) if k == "a"] + ["out"]
    store = [f"out[i] = {scalar_type(out_dtype.name)}({code})"]

    def source(target):
        return (header(code) + f"T = np.{compute_dtype.name}\n\n\n" + "\n".join(
            flat_kernel(target, ["n", *args, "out"], types, [(None, store)], arrays, name)) + "\n")
    base = f"{name}_{compute_dtype.name}"
    if not parallel:
        return cache.load(base + "_loop", source("serial"))
    expr = to_numpy_code(body) if compute_dtype.name in NUMPY_TIER else None
    first = None if expr is None else numpy_kernel(
        ["n", *args, "out"], [f"out[...] = {expr}"], compute_dtype.name, arrays, name)
    return tiered(base + "_par", source("parallel"), first, base + "_loop", source("serial"))


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
