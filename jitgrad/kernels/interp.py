"""One compiled interpreter for scalar tapes (compiler/scalar.py lowers programs
of small tensors to them).

A scalar tape is a uint32 array of rows (opcode, out, a, b, c) over one
float64 arena: row i sets arena[out] to the opcode's function of arena[a],
arena[b], arena[c], or stores arena[a] into element `out` of one of the output
buffers. A row (REPEAT, n, da, db, dc) runs the row after it n times, out
advancing by 1 and a, b, c by da, db, dc each time: one op over a whole tensor
is one row to decode and dispatch instead of one per element. Each branch
loops over its repeats (a loop around the whole dispatch ran no faster than
one row per element); that makes the interpreter compile in about 20 s of
CPU instead of 7 s, once per cache folder.

Each elementwise op of the formula table (ops/registry.py REGISTRY) gives one
opcode per float dtype: its forward formula in that dtype's arithmetic, so a
float32 row rounds as an eager float32 kernel does. Math functions are the C
library's (expr.MATH), not kernels/vmath.py's: both are within an ulp or two
of exact, and vmath's functions, compiled into every branch, made the
interpreter take 25-40 s to compile instead of 9 s. The interpreter is generated once from the table and disk-cached
(kernels/cache.py): its compile time does not depend on any program, which
is data. It allocates nothing, so it is compiled without Numba's runtime
(cache.NO_RUNTIME), and it calls nothing but the C math library, so the
process that compiles it also writes it as a native file (kernels/native.py):
a later process loads that without importing Numba (3 ms, against 0.15 s).
"""
import re

import numpy as np

from .cache import NO_RUNTIME
from .expr import to_scalar_code
from .source import header

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NARGS = 3  # operand columns a, b, c

# Opcodes that are not formulas: a float32 rounding of a float64 value, and the
# stores into the float32, float64, bool and int64 output buffers; then REPEAT
# (handled before the dispatch, not a branch of it).
ROUND32, STORE_F32, STORE_F64, STORE_BOOL, STORE_I64, REPEAT = range(6)
_FIXED_LINES = {
    ROUND32: ["_A[_o] = f64(f32(_A[_a]))"],
    STORE_F32: ["_o32[_o] = f32(_A[_a])"],
    STORE_F64: ["_o64[_o] = _A[_a]"],
    STORE_BOOL: ["_ob[_o] = _A[_a] != 0.0"],
    STORE_I64: ["_oi[_o] = np.int64(_A[_a])"],
}
_SCALAR = {"float32": "f32", "float64": "f64"}


def _branch(op, dtype, k):
    """Lines computing one elementwise op in `dtype`: operands read from the
    arena (bool operands as != 0), the formula, the result stored as float64."""
    t = _SCALAR[dtype.name]
    rename = {a: f"{a}{k}" for a in op.args}
    lines = []
    for a, col in zip(op.args, ("_a", "_b", "_c")):
        src = f"_A[{col}] != 0.0" if a in op.bool_args else f"{t}(_A[{col}])"
        lines.append(f"{rename[a]} = {src}")
    code = re.sub(r"\bT\(", f"{t}(", to_scalar_code(op.out_body, rename))  # libm: no dtype
    if op.bool_out:
        lines.append(f"_A[_o] = 1.0 if {code} else 0.0")
    else:
        lines.append(f"_A[_o] = f64({t}({code}))")
    return lines


def _dispatch(branches, indent):
    """Lines choosing the branch of opcode `_k` by bisection: a handful of
    compares whatever the opcode (a chain of ifs tested them one by one)."""
    if len(branches) == 1:
        return [indent + line for line in branches[0][1]]
    mid = len(branches) // 2
    return ([f"{indent}if _k < {branches[mid][0]}:"] + _dispatch(branches[:mid], indent + "    ")
            + [f"{indent}else:"] + _dispatch(branches[mid:], indent + "    "))


def opcodes(ops):
    """{(op name, dtype): opcode} and the interpreter source, for the elementwise
    ops `ops` (ElementwiseOp; those of more than three operands are left out)."""
    table = {}
    branches = list(_FIXED_LINES.items())
    for op in ops:
        if op.n_args > _NARGS:
            continue
        for dt in DTYPES:
            k = len(branches) + 1  # after REPEAT
            table[op.name, dt] = k
            branches.append((k, _branch(op, dt, k)))
    # Each branch loops over its repeats: the dispatch is paid once per row.
    step = ["_o += _one", "_a += _da", "_b += _db", "_c += _dc"]
    body = _dispatch([(k, ["for _j in range(_n):"] + ["    " + line for line in lines + step])
                      for k, lines in branches], "        ")
    text = "\n".join(body)
    # Unsigned cell numbers: Numba indexes with them without the wraparound test of
    # negative indices (a third faster).
    sig = "void(uint32[:, ::1], float64[::1], float32[::1], float64[::1], boolean[::1], int64[::1])"
    source = (header() + "f32 = np.float32\nf64 = np.float64\nu64 = np.uint64\n"
              "# Where Numba compiles this, kernels/native.py also writes it as a native file.\n\n\n"
              f"@numba.njit({sig!r}, cache=True, nogil=True, error_model='numpy', "
              f"{NO_RUNTIME})\n"
              "def kernel(_code, _A, _o32, _o64, _ob, _oi):\n"
              "    _i = 0\n"
              "    _one = u64(1)\n"
              "    while _i < _code.shape[0]:\n"
              "        _n = _one\n"
              "        _da = _db = _dc = u64(0)\n"
              f"        if _code[_i, 0] == {REPEAT}:\n"
              "            _n = u64(_code[_i, 1])\n"
              "            _da = u64(_code[_i, 2])\n"
              "            _db = u64(_code[_i, 3])\n"
              "            _dc = u64(_code[_i, 4])\n"
              "            _i += 1\n"
              "        _k = _code[_i, 0]\n"
              "        _o = u64(_code[_i, 1])\n"
              "        _a = u64(_code[_i, 2])\n"
              "        _b = u64(_code[_i, 3])\n"
              "        _c = u64(_code[_i, 4])\n" + text + "\n"
              "        _i += 1\n")
    return table, source
