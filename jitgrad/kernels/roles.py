"""What each kernel of an elementwise op computes, read from its declaration
(ops/pointwise.py `ElementwiseOp`): the forward formula, `g * partial_i` for the
backward of operand i, and the tangent sum of a JVP. A device backend builds its
own kernel from this (the CUDA one builds grid-stride kernels) without compiling
the CPU ufunc of the same formula.

A role is ("forward",), ("backward", i) or ("jvp", mask) (mask: bit i set for
each operand with a tangent).
"""
import numpy as np

from .expr import parse

BOOL = np.dtype(np.bool_)


def role_formula(op, role, kdt):
    """(parameter names, parsed body, prefix or None, parameter dtypes, result dtype,
    (operand indices, reads out) of a backward kernel, else None)."""
    kind = role[0]
    arg_dtypes = [BOOL if a in op.bool_args else kdt for a in op.args]
    if kind == "forward":
        return op.args, op.out_body, None, arg_dtypes, BOOL if op.bool_out else kdt, None
    if kind == "backward":
        body, used = op.partials[role[1]]
        idx = tuple(j for j, a in enumerate(op.args) if a in used)
        uses_out = "out" in used
        names = ("g",) + tuple(op.args[j] for j in idx) + (("out",) if uses_out else ())
        dts = [kdt] + [arg_dtypes[j] for j in idx] + ([kdt] if uses_out else [])
        return names, body, "g", dts, kdt, (idx, uses_out)
    if kind == "jvp":
        idx = [i for i in range(op.n_args) if role[1] >> i & 1]
        names = op.args + ("out",) + tuple(f"t{i}" for i in idx)
        body, _ = parse(" + ".join(f"t{i} * ({op.partial_src[i]})" for i in idx), names)
        return names, body, None, arg_dtypes + [kdt] * (1 + len(idx)), kdt, None
    raise ValueError(f"unknown elementwise kernel role {role!r}: expected ('forward',), "
                     "('backward', i) or ('jvp', mask)")
