"""CUDA kernels of elementwise ops, built from the op's declaration
(kernels/roles.py): a CUDA-only program compiles no CPU ufunc for them."""
from ..kernels.roles import role_formula
from .array import run_formula
from .ufunc_code import scalar_code

_kernels = {}  # (op, role, kernel dtype) -> what the CPU backend returns for that role


class FormulaKernel:
    """Called like the CPU ufunc of the same formula: kernel(*operands, out=None)."""
    __slots__ = ("code", "compute", "result")

    def __init__(self, code, compute, result):
        self.code, self.compute, self.result = code, compute, result

    def __call__(self, *operands, out=None):
        return run_formula(self.code, self.compute, self.result, operands, out)


def elementwise_kernel(op, role, kdt):
    """The kernel of `role` (see kernels/roles.py) for kernel dtype `kdt`; a backward
    role gives (kernel, operand indices it reads, reads out), as on the CPU."""
    key = (op, role, kdt)
    got = _kernels.get(key)
    if got is None:
        names, body, prefix, _, result, reads = role_formula(op, role, kdt)
        got = FormulaKernel(scalar_code(names, body, prefix), kdt, result)
        if reads is not None:
            got = (got,) + reads
        _kernels[key] = got
    return got
