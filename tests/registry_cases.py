"""The cases that registry-driven tests are parametrized with (tests/ops and
tests/cuda): samples per elementwise op and shape pattern, and the torch
counterpart of every registered function."""
import itertools

import pytest

from jitgrad.ops.registry import FUNCTIONS, REGISTRY, Arg, Sample, call

import helpers

# ---- elementwise ops --------------------------------------------------------------------------

# Operand shapes, cycled over an op's tensor operands: same shapes, broadcasting
# against a row / a column, broadcasting across ranks, 0-d.
SHAPES = {
    "same": [(3, 4)],
    "row": [(3, 4), (4,), (3, 1)],
    "rank": [(2, 1, 3), (4, 1), (3,)],
    "0d": [()],
}
# "grid": values on a 0.5 grid, so operands tie (x == y) and hit kinks (0, clamp
# bounds), where the chosen subgradient must match torch's.
GRID = 0.5
CASES = [(case, None) for case in SHAPES] + [("row", GRID)]

TORCH_OPERAND_SHAPES = helpers.TORCH_OPERAND_SHAPES
INPLACE_KERNELS = helpers.INPLACE_KERNELS

ELEMENTWISE = sorted(REGISTRY)
DIFFERENTIABLE = [n for n in ELEMENTWISE if REGISTRY[n].differentiable]
PUBLIC = [n for n in ELEMENTWISE if n not in INPLACE_KERNELS]


def n_tensor_operands(op):
    return sum(a not in op.scalars for a in op.args)


def op_sample(op, case):
    """A Sample for `op`: tensors from op.domain, op.scalars as Python numbers,
    bool masks for op.bool_args."""
    shapes = itertools.cycle(SHAPES[case])
    low, high = op.domain
    args = []
    for a in op.args:
        if a in op.scalars:
            args.append(op.scalars[a])
            continue
        shape = TORCH_OPERAND_SHAPES.get((op.name, a), next(shapes))
        kind = dict(kind="bool") if a in op.bool_args else dict(low=low, high=high)
        args.append(Arg(*shape, **kind))
    return Sample(*args)


def op_cases(names):
    """(name, case, grid) triples; broadcasting cases only for ops with 2+ tensors."""
    out = []
    for name in names:
        for case, grid in CASES:
            if n_tensor_operands(REGISTRY[name]) == 1 and case in ("row", "rank") and grid is None:
                continue
            out.append(pytest.param(name, case, grid, id=f"{name}-{case}{'-grid' if grid else ''}"))
    return out


def jg_op(op):
    return lambda *operands: call(op, *operands)


# ---- every other op: FUNCTIONS ------------------------------------------------------------------

def _torch_index_put(x, key, value):
    y = x.clone()
    y[key] = value
    return y


def _values(fn):
    return lambda x, *a, **k: fn(x, *a, **k)[0] if a or k else fn(x)


# FUNCTIONS names whose torch counterpart is not torch.<name> / Tensor.<name> /
# torch.nn.functional.<rest>: mirrors of the wrappers registered in jitgrad.
TORCH_FUNCTIONS = {
    "getitem": lambda torch: lambda x, key: x[key],
    "index_put": lambda torch: _torch_index_put,
    "to_dtype": lambda torch: lambda x: x.to(torch.float32),
    "cat": lambda torch: lambda *ts, dim=0: torch.cat(ts, dim),
    "stack": lambda torch: lambda *ts, dim=0: torch.stack(ts, dim),
    "split": lambda torch: lambda x, s, dim=0: torch.cat(torch.split(x, s, dim), dim),
    "chunk": lambda torch: lambda x, c, dim=0: torch.cat(torch.chunk(x, c, dim), dim),
    "unbind": lambda torch: lambda x, dim=0: torch.stack(torch.unbind(x, dim), dim),
    "max": lambda torch: _values(torch.max),
    "min": lambda torch: _values(torch.min),
    "einsum": lambda torch: lambda *ts, eq: torch.einsum(eq, *ts),
    "sort": lambda torch: lambda *a, **k: torch.sort(*a, **k).values,
    "topk": lambda torch: lambda *a, **k: torch.topk(*a, **k).values,
    "meshgrid": lambda torch: lambda *ts, indexing: torch.stack(torch.meshgrid(*ts, indexing=indexing)),
}


def torch_function(name):
    torch = helpers.require_torch()
    if name in TORCH_FUNCTIONS:
        return TORCH_FUNCTIONS[name](torch)
    if name.startswith("nn.functional."):
        fn = getattr(torch.nn.functional, name[len("nn.functional."):], None)
    else:
        fn = getattr(torch, name, None) or getattr(torch.Tensor, name, None)
    if fn is None:
        pytest.fail(f"registered function {name!r} has no torch equivalent: add one to "
                    f"TORCH_FUNCTIONS in {__file__}")
    return fn


def function_samples():
    return [pytest.param(name, i, id=f"{name}-{i}")
            for name in sorted(FUNCTIONS) for i in range(len(FUNCTIONS[name][1]))]
