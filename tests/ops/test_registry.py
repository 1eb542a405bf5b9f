"""Every registered op, tested from the registry itself: a new entry in
REGISTRY or FUNCTIONS is compared with torch and gradchecked (first and
second order, float64) with no new test code."""
import itertools
import math

import numpy as np
import pytest

import jitgrad
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


@pytest.mark.parametrize("dtype", helpers.FLOAT_DTYPES)
@pytest.mark.parametrize("name, case, grid", op_cases(PUBLIC))
def test_elementwise_matches_torch(name, case, grid, dtype):
    op = REGISTRY[name]
    helpers.check_torch(jg_op(op), helpers.torch_elementwise(name), op_sample(op, case),
                        dtype=dtype, seed=(name, case, grid, dtype), grid=grid,
                        grad=op.differentiable)


def _cast_operands(op, args, dtype):
    """Float operands of `op` cast to `dtype` (ints: values doubled and rounded,
    so they still vary; bools: x > 0)."""
    out = []
    for a, v in zip(op.args, args):
        if a in op.bool_args or not hasattr(v, "shape"):
            out.append(v)
            continue
        arr = helpers.to_numpy(v)
        arr = arr > 0 if dtype == "bool" else np.round(arr * 2) if "int" in dtype else arr
        out.append(arr.astype(dtype))
    return out


@pytest.mark.parametrize("dtype", ["float16", "int32", "int64", "bool"])
@pytest.mark.parametrize("name", PUBLIC)
def test_elementwise_other_dtypes_match_torch(name, dtype):
    """Forward values and result dtype (promotion of integer and low-precision
    inputs) where torch has a kernel for the dtype."""
    torch = helpers.require_torch()
    op = REGISTRY[name]
    m = helpers.materialize(op_sample(op, "row"), helpers.rng_for(name, dtype))
    arrays = _cast_operands(op, m.th_args, dtype)
    try:
        th = helpers.torch_elementwise(name)(*[torch.tensor(a) if isinstance(a, np.ndarray) else a
                                               for a in arrays])
    except (RuntimeError, NotImplementedError, TypeError) as e:
        pytest.skip(f"torch has no {dtype} kernel for {name}: {e}")
    jg = call(op, *[jitgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays])
    helpers.assert_same(jg, th, rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("name", [n for n in DIFFERENTIABLE if n not in INPLACE_KERNELS])
def test_elementwise_node_name_matches_torch(name):
    torch = helpers.require_torch()
    op = REGISTRY[name]
    m = helpers.materialize(op_sample(op, "same"), helpers.rng_for(name))
    jg = call(op, *m.jg_args)
    th = helpers.torch_elementwise(name)(*m.th_args)
    assert type(jg.grad_fn).__name__ == type(th.grad_fn).__name__
    assert jg.grad_fn.name() == th.grad_fn.name()


INPLACE_CASES = {  # method -> (destination shape, operands)
    "fill_": ((3, 4), [Arg()]),
    "copy_": ((3, 4), [Arg(4)]),
}


@pytest.mark.parametrize("kernel", sorted(INPLACE_KERNELS))
def test_inplace_kernel_parity(kernel):
    """fill/copy back fill_/copy_: the method on a non-leaf, with a tensor operand
    that requires grad, matches torch in values and gradients."""
    method = INPLACE_KERNELS[kernel]
    shape, operands = INPLACE_CASES[method]

    def run(x, *others):
        y = x * 1  # a non-leaf: in place on a leaf that requires grad is an error
        getattr(y, method)(*others)
        return y

    helpers.check_torch(run, run, Sample(Arg(*shape), *operands), dtype="float64")


def test_every_inplace_kernel_has_a_case():
    assert sorted(INPLACE_CASES) == sorted(INPLACE_KERNELS.values())


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@pytest.mark.parametrize("case", ["row", "0d"])
def test_elementwise_gradcheck(name, case):
    op = REGISTRY[name]
    m = helpers.materialize(op_sample(op, case), helpers.rng_for("gc", name, case))
    helpers.gradcheck(lambda: call(op, *m.jg_args), m.jg_leaves)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_elementwise_gradgradcheck(name):
    op = REGISTRY[name]
    rng = helpers.rng_for("ggc", name)
    m = helpers.materialize(op_sample(op, "row"), rng)
    helpers.gradgradcheck(lambda: call(op, *m.jg_args), m.jg_leaves, rng)


def test_registry_metadata_is_usable():
    """The fields the tests above read: a valid domain and scalars naming operands."""
    for name, op in REGISTRY.items():
        low, high = op.domain
        assert math.isfinite(low) and math.isfinite(high) and low < high, name
        assert set(op.scalars) <= set(op.args), name
        assert set(op.bool_args) <= set(op.args), name


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


@pytest.mark.parametrize("dtype", helpers.FLOAT_DTYPES)
@pytest.mark.parametrize("name, i", function_samples())
def test_function_matches_torch(name, i, dtype):
    fn, samples = FUNCTIONS[name]
    helpers.check_torch(fn, torch_function(name), samples[i], dtype=dtype, seed=(name, i, dtype))


@pytest.mark.parametrize("name, i", function_samples())
def test_function_gradcheck(name, i):
    fn, samples = FUNCTIONS[name]
    m = helpers.materialize(samples[i], helpers.rng_for("gc", name, i))
    helpers.gradcheck(lambda: fn(*m.jg_args, **m.jg_kwargs), m.jg_leaves)


@pytest.mark.parametrize("name, i", function_samples())
def test_function_gradgradcheck(name, i):
    fn, samples = FUNCTIONS[name]
    rng = helpers.rng_for("ggc", name, i)
    m = helpers.materialize(samples[i], rng)
    helpers.gradgradcheck(lambda: fn(*m.jg_args, **m.jg_kwargs), m.jg_leaves, rng)


def test_functions_have_differentiable_samples():
    """A sample without a float Arg would make the gradchecks above vacuous."""
    for name, (fn, samples) in FUNCTIONS.items():
        for i, s in enumerate(samples):
            m = helpers.materialize(s, np.random.default_rng(0))
            assert m.jg_leaves, f"{name} sample {i} has no input that requires grad"
