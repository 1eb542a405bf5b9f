"""The one kernel-source generator core: every generated kernel module (forward,
backward, JVP, fused, optimizer; CPU and CUDA) is written from these pieces.

- NUMBA_TYPE: numpy dtype name -> Numba type name;
- header(): the import lines of a module for a target;
- the flat-kernel template: a loop over `i` in [0, n) for a target: "serial"
  (`range`), "parallel" (`numba.prange`) or "cuda" (a grid-stride loop), with
  the length guard on the CPU;
- the length rule of flat kernels (length_guard in compiled CPU code,
  check_lengths on the host before a CUDA launch).
"""
from .cache import NO_RUNTIME
from .expr import jit_disabled, vmath_functions

NUMBA_TYPE = {"float16": "float16", "float32": "float32", "float64": "float64", "int8": "int8",
              "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
              "bool": "boolean", "complex64": "complex64", "complex128": "complex128"}

TARGETS = ("serial", "parallel", "cuda")

_LOOP = {"serial": "for i in range(n):", "parallel": "for i in numba.prange(n):",
         "cuda": "for i in range(cuda.grid(1), n, cuda.gridsize(1)):"}


def array_type(dtype_name):
    """Numba type of a 1-D contiguous array of `dtype_name`."""
    return NUMBA_TYPE[dtype_name] + "[::1]"


def scalar_type(dtype_name):
    """numpy scalar type name in generated code (`np.float32`, `np.bool_`)."""
    return "np.bool_" if dtype_name == "bool" else f"np.{dtype_name}"


def header(code="", target="serial", simulated=False):
    """Import lines of a generated module for `target` ("ufunc" for a @vectorize
    module, which Numba compiles even with its JIT disabled); `code` is scanned
    for the vmath functions it calls (the vmath hash in the header rebuilds a
    cached kernel when vmath changes). Where kernels run as Python (the CUDA
    simulator, NUMBA_DISABLE_JIT=1), `math` is simmath: numpy's semantics,
    inf/nan as in compiled code instead of Python's exceptions."""
    as_python = simulated if target == "cuda" else target != "ufunc" and jit_disabled()
    math = "from jitgrad._cuda.simmath import math" if as_python else "import math"
    if target == "cuda":
        return f"{math}\nimport numba\nimport numpy as np\nfrom numba import cuda\n"
    lines = [math, "import numba", "import numpy as np"]
    if "_vm." in code:
        lines.append(f"from jitgrad.kernels import vmath as _vm  # vmath {vmath_functions()[1]}")
    return "\n".join(lines) + "\n"


def decorator(target, sig=None, runtime=True):
    """The decorator line of a kernel. CPU kernels get an explicit signature (it
    compiles at import, disk-cached, and tells LLVM the arrays are contiguous, which
    it needs to vectorize) and error_model="numpy" (1/0 is inf as in torch, and no
    exception path blocks vectorization). Without `runtime`, for a kernel that
    allocates nothing, Numba's runtime is left out (kernels/cache.py NO_RUNTIME), and
    the kernel can have a native file (kernels/native.py)."""
    if target == "cuda":
        return "@cuda.jit(cache=True)"
    parallel = ", parallel=True" if target == "parallel" else ""
    runtime = "" if runtime else f", {NO_RUNTIME}"
    return (f"@numba.njit({sig!r}, cache=True, nogil=True, error_model='numpy'"
            f"{parallel}{runtime})")


def flat_kernel(target, params, types, loops, guard, what, setup=(), prelude=(), runtime=True):
    """Lines of `def kernel(*params)` running `loops` over i in [0, n) on `target`.

    types: Numba type per parameter (the CPU signature; None for CUDA); loops:
    (condition or None, body lines) pairs, run as if/elif/else branches (one pair:
    no branch); guard: array parameters that must have n elements (checked in the
    kernel on the CPU; a CUDA launcher calls check_lengths); setup: lines before the
    guard (e.g. defining n), prelude: lines after it; runtime: as for `decorator`."""
    sig = None if target == "cuda" else f"void({', '.join(types)})"
    lines = [decorator(target, sig, runtime), f"def kernel({', '.join(params)}):"]
    lines += ["    " + line for line in setup]
    if target != "cuda":
        lines += ["    " + g for g in length_guard("n", guard, what)]
    lines += ["    " + p for p in prelude]
    head = _LOOP[target]
    for k, (cond, body) in enumerate(loops):
        indent = "    "
        if cond is not None:
            lines.append(f"    {'if' if k == 0 else 'elif'} {cond}:")
            indent = "        "
        elif k:
            lines.append("    else:")
            indent = "        "
        lines.append(indent + head)
        lines += [f"{indent}    {b}" for b in body]
    return lines


# A flat kernel indexes its operands without bounds checks. These two helpers are
# the one place that makes it safe: every array operand must have n elements.
# Callers check shapes first with messages of their own, so a failure here is a
# jitgrad bug.
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
    """The same rule on the host, for kernels that cannot raise (CUDA) and for the
    numpy stand-ins of kernels: raise ValueError unless each array among
    `operands` has n elements."""
    for k, a in enumerate(operands):
        if getattr(a, "ndim", 0) and a.size != n:
            raise ValueError(f"{what}: operand {k} has {a.size} elements, n is {n}: "
                             + _LENGTH_RULE)
