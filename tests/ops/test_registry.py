"""Every registered op, tested from the registry itself: a new entry in
REGISTRY or FUNCTIONS is compared with torch and gradchecked (first and
second order, float64) with no new test code."""
import math

import numpy as np
import pytest

import jitgrad
from jitgrad.ops.registry import FUNCTIONS, REGISTRY, Arg, Sample, call

import helpers

from registry_cases import (  # noqa: E402
    DIFFERENTIABLE, INPLACE_KERNELS, PUBLIC, function_samples, jg_op, op_cases, op_sample,
    torch_function)


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
    helpers.require_torch()
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
