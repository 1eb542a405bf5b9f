"""Random compositions of registry ops over 1-3 broadcastable inputs, compared
with torch: forward values, gradients, and (for some) double backward."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import jitgrad
from jitgrad.ops.registry import REGISTRY, Arg, Sample, call

import helpers

torch = pytest.importorskip("torch")

OPS = sorted(n for n, op in REGISTRY.items()
             if op.differentiable and n not in helpers.INPLACE_KERNELS)
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


# ---- expressions: ("in", i) | ("op", name, args) | ("gt", a, b) | ("scalar", v)
#      | ("reduce", fn, dim or None for all, keepdim, a)

def expressions(n_inputs, depth):
    leaf = st.tuples(st.just("in"), st.integers(0, n_inputs - 1))
    if depth == 0:
        return leaf
    sub = expressions(n_inputs, depth - 1)

    def op_node(name):
        op = REGISTRY[name]
        args = [st.just(("scalar", op.scalars[a])) if a in op.scalars
                else st.tuples(st.just("gt"), sub, sub) if a in op.bool_args
                else st.tuples(st.just("reduce"), st.just("sum"), st.none(), st.just(False), sub)
                if helpers.TORCH_OPERAND_SHAPES.get((name, a)) == () else sub
                for a in op.args]
        return st.tuples(st.just("op"), st.just(name), st.tuples(*args))

    reduce = st.tuples(st.just("reduce"), st.sampled_from(["sum", "mean"]), st.integers(0, 2),
                       st.booleans(), sub)
    return st.one_of(leaf, st.sampled_from(OPS).flatmap(op_node), reduce)


@st.composite
def problems(draw, max_depth=3):
    """(expression, input shapes): shapes broadcast against a common base shape."""
    base = draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))
    n = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n):
        keep = draw(st.integers(0, len(base)))
        shapes.append(tuple(1 if draw(st.booleans()) else s for s in base[len(base) - keep:]))
    return draw(expressions(n, max_depth)), shapes


class Evaluator:
    """Evaluates an expression with jitgrad (registry kernels) or torch. Every
    operand is first squashed into its op's domain (mid + 0.9 * half * tanh(v)),
    so no composition leaves the region where the op is smooth and finite."""

    def __init__(self, lib):
        self.lib = lib

    def op(self, name, *args):
        if self.lib is jitgrad:
            return call(REGISTRY[name], *args)
        return helpers.torch_elementwise(name)(*args)

    def __call__(self, expr, inputs):
        kind = expr[0]
        if kind == "in":
            return inputs[expr[1]]
        if kind == "scalar":
            return expr[1]
        if kind == "gt":
            return self(expr[1], inputs) > self(expr[2], inputs)
        if kind == "reduce":
            _, fn, dim, keepdim, a = expr
            v = self(a, inputs)
            if dim is None:
                return getattr(v, fn)()
            if v.dim() == 0:
                return v
            dim = dim % v.dim()
            return getattr(v, fn)(dim, keepdim=keepdim or dim != 0)
        _, name, args = expr
        low, high = REGISTRY[name].domain
        mid, half = (low + high) / 2, 0.9 * (high - low) / 2
        vals = []
        for a, spec in zip(REGISTRY[name].args, args):
            v = self(spec, inputs)
            if spec[0] not in ("scalar", "gt"):
                v = self.op("add", self.op("mul", self.op("tanh", v), half), mid)
            vals.append(v)
        return self.op(name, *vals)


def _sample(shapes):
    return Sample(*[Arg(*s) for s in shapes])


@settings(max_examples=120, **SETTINGS)
@given(problems(), st.integers(0, 2 ** 16))
def test_random_expressions_match_torch(problem, seed):
    expr, shapes = problem
    helpers.check_torch(lambda *xs: Evaluator(jitgrad)(expr, xs),
                        lambda *xs: Evaluator(torch)(expr, xs),
                        _sample(shapes), dtype="float64", seed=seed, rtol=1e-6, atol=1e-9)


def _double_backward(lib, expr, xs, w):
    out = Evaluator(lib)(expr, xs)
    grads = lib.autograd.grad((out * w).sum(), xs, create_graph=True, allow_unused=True)
    total = sum(g.sum() for g in grads if g is not None and g.requires_grad)
    if not isinstance(total, lib.Tensor):  # every first gradient is constant
        return [np.zeros(tuple(x.shape)) for x in xs]
    second = lib.autograd.grad(total, xs, allow_unused=True)
    return [helpers.to_numpy(g) if g is not None else np.zeros(tuple(x.shape))
            for g, x in zip(second, xs)]


@settings(max_examples=80, **SETTINGS)
@given(problems(max_depth=2), st.integers(0, 2 ** 16))
def test_random_expressions_double_backward_match_torch(problem, seed):
    """grad of the sum of first gradients (create_graph=True), compared by value:
    where a first gradient is constant in one library, zeros stand for it."""
    expr, shapes = problem
    rng = helpers.rng_for("double", seed)
    m = helpers.materialize(_sample(shapes), rng)
    out_shape = tuple(Evaluator(torch)(expr, m.th_args).shape)
    w = rng.standard_normal(out_shape)
    jg = _double_backward(jitgrad, expr, m.jg_leaves, jitgrad.tensor(w))
    th = _double_backward(torch, expr, m.th_leaves, torch.tensor(w))
    for i, (a, b) in enumerate(zip(jg, th)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, err_msg=f"input {i}")


def test_fuzz_script_counts_cases_and_fused_groups(capsys):
    """tests/fuzz_vs_torch.py (the long fuzz run) stays in working order."""
    import fuzz_vs_torch  # here, not at the top: it imports this module's generator
    assert fuzz_vs_torch.main(["--cases", "2"]) == 0
    summary = capsys.readouterr().out.splitlines()[0]
    assert summary.startswith("2 graphs, 16 cases") and summary.endswith("0 mismatched")
