"""Every registry op at the edges of floating point, against torch.

Each elementwise formula of REGISTRY runs on every combination of special
values for its tensor operands (+-inf, nan, +-0, subnormals, the float
limits, and both sides of the overflow and underflow thresholds of exp,
cosh and squares), in float32 and float64; forward values and the gradient
of every operand must agree with torch: NaN at the same places, infinities
with the same signs, finite values close. Every function of FUNCTIONS
(reductions, softmax, losses, ...) gets the same values once at one element
and once as a constant input. A new registry entry is covered with no new
code. The few places where jitgrad is deliberately different are listed in
EXCEPTIONS, each with its reason (docs/vmath.md, "Differences from torch").
"""
import itertools
import math
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.ops.registry import FUNCTIONS, REGISTRY, call

import helpers
from helpers import both
from registry_cases import (INPLACE_KERNELS, PUBLIC, TORCH_OPERAND_SHAPES, function_samples,
                            torch_function)

DTYPES = ("float32", "float64")
# Finite values: relative error; a 17% error or 0 against 4e-8 must fail, a few ulp must not.
RTOL = {"float32": 1e-4, "float64": 1e-6}


def special_values(dtype):
    """The values every operand takes (the same list for every op)."""
    fi = np.finfo(dtype)
    edges = [
        math.log(fi.max),                   # exp overflows above
        math.log(fi.max) + math.log(2.0),   # sinh, cosh overflow above
        -math.log(fi.smallest_subnormal),   # exp(-x) is 0 above
        float(fi.maxexp),                   # exp2 overflows above
        math.sqrt(fi.max),                  # x * x overflows above
    ]
    # Each threshold from both sides, far enough (2**-12 relative) that a result
    # within an ulp of overflow cannot decide the comparison.
    near = [e * f for e in edges for f in (1 - 2.0 ** -12, 1 + 2.0 ** -12)]
    magnitudes = [float(fi.smallest_subnormal), float(fi.tiny - fi.smallest_subnormal),
                  float(fi.tiny), 0.5, 1.0, 2.0, 10.0, 20.0, 40.0, float(fi.max), math.inf] + near
    return np.array([0.0, math.nan] + [s * m for m in magnitudes for s in (1.0, -1.0)] + [-0.0],
                    dtype)


# The documented exceptions (docs/vmath.md, "Differences from torch at the edges"):
# name -> (reason, allowed). For an elementwise op, allowed(x, ...) takes the
# operands' values and masks the points that may differ; for a function,
# allowed(v, where) says whether special value v, put at one element ("one") or
# everywhere ("all"), may differ. Only limits of vmath and places where jitgrad
# is closer to the true value; any other mismatch is a bug.
def _fi(x):
    return np.finfo(np.asarray(x).dtype)


def _sinh_cosh_range(x):  # exp(|x|) overflows, exp(|x|) / 2 does not
    return (np.abs(x) > math.log(_fi(x).max)) & (np.abs(x) < math.log(_fi(x).max) + math.log(2))


def _gelu_f32(x):
    return (np.asarray(x).dtype == np.float32) & ((x <= -10) | (x >= _fi(x).max))


def _cube_overflows(x):  # and the square does not, or barely
    return (np.abs(x) > np.cbrt(_fi(x).max)) & (np.abs(x) < 2 * np.sqrt(_fi(x).max))


CONSTANT = ("a constant input: jitgrad's var and std are exactly 0 (it subtracts one element "
            "first); torch's carry the rounding error of its mean, and so do its gradients "
            "(std of twelve 103.3 in float32: torch 1.6e-5)")
_SINGULAR = ("a constant matrix is singular. numpy's LAPACK (OpenBLAS) divides by each pivot; "
             "torch's multiplies by its reciprocal, which overflows for a subnormal pivot and is "
             "0 for one near the float limit, so its LU of such a matrix leaves nan where "
             "numpy's finds exact zeros")
EXCEPTIONS = {
    "det": (_SINGULAR + ": det 0 and gradient 0 here, torch nan; and an entry whose "
            "products overflow (inf, or beyond sqrt(max)): the cofactors' inf, nan or finite "
            "values depend on the order of the operations (here det(A) A^-T)",
            lambda v, where: where == "all" or not np.abs(v) <= np.sqrt(_fi(v).max)),
    "inverse": (_SINGULAR + ": LinAlgError here, as torch raises for exact zeros; torch nan",
                lambda v, where: where == "all"),
    **{op: ("vmath's sin/cos/tan are nan beyond |x| = 2**27 (docs/vmath.md, Limits): a "
            "full-range argument reduction would keep the loops from vectorizing",
            lambda x: np.abs(x) > 2.0 ** 27) for op in ("sin", "cos", "tan")},
    **{op: ("finite where the result is: torch overflows at exp's limit, not at "
            "sinh's and cosh's, 0.69 further", _sinh_cosh_range) for op in ("sinh", "cosh")},
    "sigmoid": ("the subnormal e**x where torch's 1 / (1 + exp(-x)) is 0",
                lambda x: x < -math.log(_fi(x).max)),
    "gelu": ("float32: torch overflows in an intermediate product (gelu(max) is max, "
             "gelu(inf) inf, torch inf and nan) and its slope at -10 is 0 (true: -7.7e-22)",
             _gelu_f32),
    "gelu_tanh": ("where x**3 overflows: torch multiplies it by tanh's zero slope (nan), "
                  "jitgrad's slope is the limit, 1 or 0", _cube_overflows),
    "nn.functional.gelu": ("gelu and gelu_tanh above",
                           lambda v, where: _gelu_f32(v) | _cube_overflows(v)),
    "var": (CONSTANT, lambda v, where: where == "all"),
    "std": (CONSTANT, lambda v, where: where == "all"),
    "nn.functional.layer_norm": (
        "a constant row normalizes the rounding error of its mean, times 1/sqrt(eps), and the "
        "two libraries round the mean differently; a row whose squares overflow: torch nan, "
        "jitgrad rescales it and returns the finite result",
        lambda v, where: where == "all" or np.abs(v) > np.sqrt(_fi(v).max)),
    "softshrink": ("-0.0: torch's scalar tail loop returns -0.0, its vector loop (and "
                   "jitgrad) +0.0", lambda x, lambd: (x == 0) & np.signbit(x)),
    "nn.functional.batch_norm": (
        "as layer_norm: a constant channel (torch normalizes the rounding error of its mean) "
        "and values whose squares overflow (torch nan, jitgrad rescales)",
        lambda v, where: where == "all" or np.abs(v) > np.sqrt(_fi(v).max)),
    "nn.functional.binary_cross_entropy": (
        "torch raises for inputs and targets outside [0, 1], and so does jitgrad (tests/nn)",
        lambda v, where: not 0 <= v <= 1),
    "nn.functional.binary_cross_entropy_with_logits": (
        "a target at the float limit: torch overflows (1 - t) * x and the incoming gradient "
        "times the slope before dividing by the element count, jitgrad stays finite",
        lambda v, where: np.abs(v) == _fi(v).max),
    "nn.functional.kl_div": (
        "a subnormal target or one near the float limit: torch's slope of xlogy(t, t) in its "
        "second t is (g * t) / t, where g * t underflows to 0 or overflows to inf; jitgrad's "
        "is g * (t / t) = g, the true value",
        lambda v, where: (0 < np.abs(v) < _fi(v).tiny) | (np.abs(v) > _fi(v).max / 2)),
    "nn.functional.group_norm": (
        "as layer_norm and batch_norm", lambda v, where: where == "all" or
        np.abs(v) > np.sqrt(_fi(v).max)),
    "nn.functional.glu": (
        "as sigmoid (torch's is 0 where e**x is subnormal), and the float limit, where torch's "
        "slope of the gate is 0 and jitgrad's product a * slope overflows first (nan)",
        lambda v, where: (v < -math.log(_fi(v).max)) | (np.abs(v) == _fi(v).max)),
    "nn.functional.softsign": (
        "beyond sqrt(max) the quotient rule's two terms cancel: torch keeps their rounding "
        "noise (1e-170), jitgrad 0; the true slope is below the normal range",
        lambda v, where: np.abs(v) > np.sqrt(_fi(v).max) / 2),
    **{f"nn.functional.conv{kind}{n}d": (
        "inf and nan: a stride-1 convolution's gradients multiply the zeros of the columns it "
        "drops by the input (nan where torch has inf or a finite value; docs/nn.md), and a "
        "transposed convolution is a convolution's gradient; the float limit: the sums "
        "overflow in another order (inf against nan)",
        lambda v, where: not np.isfinite(v) or np.abs(v) == _fi(v).max)
        for n in (1, 2) for kind in ("", "_transpose")},
    "nn.functional.scaled_dot_product_attention": (
        "a constant key: every score of a row is equal, the query's exact gradient is 0, and "
        "both libraries return rounding noise of their own; a row whose only scores are "
        "infinite: torch's fused kernel returns 0, jitgrad NaN (as torch's reference math)",
        lambda v, where: where == "all" or not np.isfinite(v)),
    "topk": ("a constant input: equal values keep their index order in jitgrad (a stable "
             "sort); torch's topk picks its own among ties, so the gradient lands on other "
             "indices (docs/torch-coverage.md)", lambda v, where: where == "all"),
    "einsum": ("products at the float limits summed in another order (jitgrad contracts "
               "pairwise with matmul): one order overflows where the other does not",
               lambda v, where: np.abs(v) > np.sqrt(_fi(v).max)),
    **{op: ("products at the float limits: torch's fused gemm (gemv for addmv; linear is addmm "
            "with the bias) scales and sums them in its own order (jitgrad: matmul, then sums "
            "and scales), so one gives inf or nan where the other gives a finite value; which "
            "elements differ depends on the CPU's BLAS kernels (AVX-512 ones sum in other "
            "blocks)", lambda v, where: np.abs(v) > np.sqrt(_fi(v).max))
       for op in ("addmm", "addbmm", "baddbmm", "addmv", "nn.functional.linear")},
    "cdist": ("jitgrad's gradient is norm's: 0 where a distance overflows, and for p=1 "
              "sign(nan) = 0 at a NaN; torch's cdist kernel gives nan there",
              lambda v, where: np.isnan(v) | (np.abs(v) > np.sqrt(_fi(v).max))),
    "prod": ("a subnormal factor: torch's result / input loses the gradient (1.0 for "
             "a true 0.58), jitgrad multiplies the other factors",
             lambda v, where: 0 < np.abs(v) < _fi(v).tiny),
}


# ---- comparison ------------------------------------------------------------------------------

def mismatches(a, b, dtype, summed=False, signed_zeros=False):
    """Bool mask: NaN in only one, infinities that differ, or finite values not close:
    relative RTOL, plus one step of the subnormal grid (rounding: torch's lerp rounds
    a fused multiply-add). `summed`: values that are sums of many terms, whose
    cancellation errors scale with the largest finite value of the result.
    `signed_zeros`: -0.0 and +0.0 differ too (sign(-0.0) is +0.0 in torch)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    rtol, atol = RTOL[dtype], float(np.finfo(dtype).smallest_subnormal)
    finite_b = b[np.isfinite(b)]
    if summed and finite_b.size:  # below the normal range: rounding noise of the sum
        atol = max(float(np.finfo(dtype).tiny), rtol * float(np.abs(finite_b).max()))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    inf_a, inf_b = np.isinf(a), np.isinf(b)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = ~(nan_a | nan_b | inf_a | inf_b)
        far = np.abs(a - b) > rtol * np.maximum(np.abs(a), np.abs(b)) + atol
    zeros = signed_zeros & (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
    infs = inf_a & inf_b & (a != b)
    return (nan_a != nan_b) | (inf_a != inf_b) | infs | (finite & far) | zeros


def report(what, bad, points, got, want, limit=8):
    """Assertion text: how many differ and the first few, with their inputs."""
    idx = np.flatnonzero(bad)
    lines = [f"{what}: {idx.size} of {bad.size} points differ from torch"]
    for i in idx[:limit]:
        args = ", ".join(f"{p[i]!r}" for p in points)
        lines.append(f"  at ({args}): jitgrad {got[i]!r}, torch {want[i]!r}")
    return "\n".join(lines)


# ---- elementwise ops -------------------------------------------------------------------------

def _batches(op, dtype):
    """The cases of `op` as batches {operand index: values}: every combination of the
    special values (both booleans for a mask) as one vector per operand. An operand
    that torch takes as a 0-d tensor only is looped over (one batch per value);
    operands in op.scalars keep their fixed value and have no entry."""
    values = {i: np.array([False, True]) if a in op.bool_args else special_values(dtype)
              for i, a in enumerate(op.args) if a not in op.scalars}
    looped = [i for i in values if TORCH_OPERAND_SHAPES.get((op.name, op.args[i])) == ()]
    vector = [i for i in values if i not in looped]
    grids = np.meshgrid(*[values[i] for i in vector], indexing="ij")
    flat = {i: g.reshape(-1) for i, g in zip(vector, grids)}
    for combo in itertools.product(*[values[i] for i in looped]):
        yield {**flat, **{i: np.asarray(v) for i, v in zip(looped, combo)}}


def _operands(op, batch, lib):
    """(operands, indices of those that require grad) for one library."""
    args, leaves = [], []
    for i, a in enumerate(op.args):
        if i not in batch:
            args.append(op.scalars[a])
            continue
        t = lib.tensor(batch[i])
        if a not in op.bool_args:
            t.requires_grad_()
            leaves.append(i)
        args.append(t)
    return args, leaves


def run_elementwise(op, dtype):
    """{"forward" or "grad <operand>": (points, jitgrad values, torch values)}, points
    being each operand's value per case (a 0-d operand's gradient, a sum over its
    batch, is not compared)."""
    torch = helpers.require_torch()
    torch_fn = helpers.torch_elementwise(op.name)
    results = {}
    for batch in _batches(op, dtype):
        n = max(v.size for v in batch.values())
        jg_args, leaves = _operands(op, batch, jitgrad)
        th_args, _ = _operands(op, batch, torch)
        jg, th = call(op, *jg_args), torch_fn(*th_args)
        outs = [("forward", jg.detach(), th.detach())]
        leaves = [i for i in leaves if batch[i].ndim] if op.differentiable else []
        if leaves:
            gj = jitgrad.autograd.grad(jg, [jg_args[i] for i in leaves], jitgrad.ones_like(jg),
                                       allow_unused=True)
            gt = torch.autograd.grad(th, [th_args[i] for i in leaves], torch.ones_like(th),
                                     allow_unused=True)
            outs += [(f"grad {op.args[i]}", jitgrad.zeros_like(jg) if a is None else a,
                      torch.zeros_like(th) if b is None else b) for i, a, b in zip(leaves, gj, gt)]
        points = [np.broadcast_to(batch[i], (n,)) if i in batch else np.full(n, op.scalars[a])
                  for i, a in enumerate(op.args)]
        for what, a, b in outs:
            results.setdefault(what, []).append(
                (points, np.broadcast_to(helpers.to_numpy(a), (n,)),
                 np.broadcast_to(helpers.to_numpy(b), (n,))))
    return {what: ([np.concatenate(p) for p in zip(*[r[0] for r in rs])],
                   np.concatenate([r[1] for r in rs]), np.concatenate([r[2] for r in rs]))
            for what, rs in results.items()}


ELEMENTWISE = [n for n in PUBLIC if n not in INPLACE_KERNELS]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_extremes_match_torch(name, dtype):
    op = REGISTRY[name]
    allowed = EXCEPTIONS.get(name, (None, None))[1]
    failures = []
    for what, (points, got, want) in run_elementwise(op, dtype).items():
        bad = mismatches(got, want, dtype, signed_zeros=what == "forward")
        if allowed is not None:
            bad &= ~allowed(*points)
        if bad.any():
            failures.append(report(f"{name} {dtype} {what}", bad, points, got, want))
    assert not failures, "\n".join(failures)


# ---- every other registered function ---------------------------------------------------------

def _function_variants(name, i, dtype):
    """(leaf, value, where, Materialized) for each float input of sample i, each special
    value, put at its first element ("one") or everywhere ("all")."""
    fn, samples = FUNCTIONS[name]
    n_leaves = len(helpers.materialize(samples[i], helpers.rng_for("x", name, i), dtype).jg_leaves)
    for leaf in range(n_leaves):
        for v in special_values(dtype):
            for where in ("one", "all"):
                m = helpers.materialize(samples[i], helpers.rng_for("x", name, i), dtype)
                for t in (m.jg_leaves[leaf], m.th_leaves[leaf]):
                    flat = t.detach().numpy().reshape(-1)
                    flat[:1 if where == "one" else None] = v
                yield leaf, v, where, m


def run_function(name, i, dtype):
    """Failure messages of function `name`, sample i, over every variant. Gradients are
    of sum(out * w) with a fixed random w: with w = 1 the exact gradient of softmax
    and the like is 0, and rounding noise would be compared against it."""
    torch = helpers.require_torch()
    fn = FUNCTIONS[name][0]
    th_fn = torch_function(name)
    rng = helpers.rng_for("w", name, i)
    allowed = EXCEPTIONS.get(name, (None, lambda v, where: False))[1]
    failures = []
    for leaf, v, where, m in _function_variants(name, i, dtype):
        if allowed(v, where):
            continue
        jo = helpers.outputs_of(fn(*m.jg_args, **m.jg_kwargs))
        to = helpers.outputs_of(th_fn(*m.th_args, **m.th_kwargs))
        pairs = [(f"output {k}", a.detach(), b.detach()) for k, (a, b) in enumerate(zip(jo, to))]
        diff = [(o, b) for o, b in zip(jo, to) if b.requires_grad]
        if diff:
            ws = [rng.uniform(0.5, 1.5, tuple(b.shape)).astype(dtype) for _, b in diff]
            gj = jitgrad.autograd.grad([o for o, _ in diff], m.jg_leaves,
                                       [jitgrad.tensor(w) for w in ws], allow_unused=True)
            gt = torch.autograd.grad([b for _, b in diff], m.th_leaves,
                                     [torch.tensor(w) for w in ws], allow_unused=True)
            pairs += [(f"grad {k}", a, b) for k, (a, b) in enumerate(zip(gj, gt)) if b is not None]
        for what, a, b in pairs:
            if a is None:
                failures.append(f"{what}: None, torch computes one")
                continue
            a, b = helpers.to_numpy(a).reshape(-1), helpers.to_numpy(b).reshape(-1)
            if a.shape != b.shape:
                failures.append(f"{what}: shape {a.shape}, torch {b.shape}")
            elif (mismatches(a, b, dtype, summed=True) if a.dtype.kind == "f" else a != b).any():
                failures.append(f"input {leaf} = {v!r} ({where}): {what} {a}, torch {b}")
    return failures


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, i", function_samples())
def test_function_extremes_match_torch(name, i, dtype):
    with np.errstate(all="ignore"):  # numpy's overflow warnings (torch has none)
        failures = run_function(name, i, dtype)
    assert not failures, (f"{name} sample {i} {dtype}: {len(failures)} differ\n"
                          + "\n".join(failures[:8]))


# ---- the reported cases, each as torch 2.13 computes it ---------------------------------------

nan, inf = math.nan, math.inf
# name -> (dtype, inputs, fn(lib, *inputs) -> output): output and input gradients must
# match torch, NaN for NaN and zeros with their sign.
CASES = {
    "softplus slope in the float32 tail": (
        "float32", [[-15.0, -17.0, -20.0, -37.0, -100.0]],
        lambda lib, x: lib.nn.functional.softplus(x)),
    "softplus slope in the float64 tail": (
        "float64", [[-37.0, -40.0, -700.0]], lambda lib, x: lib.nn.functional.softplus(x)),
    "atan2(0, 0)": ("float64", [[0.0, -0.0], [0.0, 0.0]], lambda lib, y, x: lib.atan2(y, x)),
    "std of a constant": ("float64", [[1.0, 1.0, 1.0]], lambda lib, x: x.std()),
    "max() with a NaN": ("float64", [[1.0, nan, 3.0]], lambda lib, x: x.max()),
    "max() with two NaNs": ("float64", [[nan, nan, 3.0]], lambda lib, x: x.max()),
    "amax with a NaN": ("float64", [[1.0, nan, 3.0]], lambda lib, x: x.amax()),
    "clamp(nan)": ("float64", [[nan, 1.0, -1.0]], lambda lib, x: lib.clamp(x, -1.0, 1.0)),
    "relu(nan)": ("float64", [[nan, 0.0, -0.0]], lambda lib, x: lib.nn.functional.relu(x)),
    "abs(nan)": ("float64", [[nan, -inf]], lambda lib, x: lib.abs(x)),
    "maximum(nan, 0)": ("float64", [[nan, 0.0], [0.0, nan]], lambda lib, x, y: lib.maximum(x, y)),
    "sign(nan), sign(-0.0)": ("float64", [[nan, -0.0]], lambda lib, x: lib.sign(x)),
    "log_softmax([inf, 1, 2])": ("float64", [[inf, 1.0, 2.0]], lambda lib, x: lib.log_softmax(x, 0)),
    "cross_entropy with an inf logit": (
        "float64", [[[inf, 1.0, 2.0]]],
        lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor([1]))),
    "lerp(inf, 1, 0.5)": ("float64", [[inf], [1.0]], lambda lib, x, y: lib.lerp(x, y, 0.5)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reported_case_matches_torch(case):
    torch = helpers.require_torch()
    dtype, inputs, fn = CASES[case]
    got, want = [], []
    for lib, into in ((jitgrad, got), (torch, want)):
        xs = [lib.tensor(np.array(v, dtype), requires_grad=True) for v in inputs]
        out = fn(lib, *xs)
        into.append(out)
        into.extend(lib.autograd.grad(out, xs, lib.ones_like(out)))
    for i, (a, b) in enumerate(zip(got, want)):
        a, b = helpers.to_numpy(a).reshape(-1), helpers.to_numpy(b).reshape(-1)
        assert not mismatches(a, b, dtype, signed_zeros=i == 0).any(), (
            f"{'output' if i == 0 else f'grad of input {i - 1}'}: {a}, torch {b}")


def test_amax_over_an_empty_dim_raises_index_error():
    torch = helpers.require_torch()
    for lib in (jitgrad, torch):
        with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero size"):
            lib.empty(0, 3).amax(dim=0)
        assert tuple(lib.empty(0, 3).amax(dim=1).shape) == (0,)


# ---- special values and zero-size tensors through Tensor methods ---------------------------

# IEEE special values (inf, nan) come out as torch's, forward and backward.
SPECIAL_VALUES = {
    "log(0), log(-1)": lambda x: x.log(),
    "1 / 0": lambda x: 1.0 / x,
    "0 / 0": lambda x: x * 0 / x,
    "exp(1 / 0)": lambda x: (1.0 / x).exp(),
    "sqrt(-1)": lambda x: x.sqrt(),
    "exp overflow": lambda x: (x * 1000).exp(),
    "pow(0, -1)": lambda x: x ** -1.0,
    "rsqrt(0)": lambda x: x.rsqrt(),
}


def _special(lib, case):
    x = lib.tensor([0.0, -1.0, 1.0], requires_grad=True)
    y = SPECIAL_VALUES[case](x)
    y.sum().backward()
    return helpers.to_numpy(y), helpers.to_numpy(x.grad)


@pytest.mark.parametrize("case", sorted(SPECIAL_VALUES))
def test_special_values_match_torch(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (jy, jg), (ty, tg) = both(lambda lib: _special(lib, case))
    np.testing.assert_array_equal(jy, ty)
    np.testing.assert_array_equal(jg, tg)


@pytest.mark.parametrize("case", sorted(SPECIAL_VALUES))
def test_special_values_do_not_warn(case):
    """torch computes inf and nan silently; numpy-style RuntimeWarnings would turn
    into errors under `-W error`."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _special(jitgrad, case)


# Zero-size tensors: forward shape and values, and the gradient's shape.
EMPTY = {
    "exp then sum": lambda lib, x: x.exp().sum(),
    "mean": lambda lib, x: x.mean(),
    "sum over the empty dim": lambda lib, x: x.sum(0),
    "matmul": lambda lib, x: x.t() @ x,
    "cat": lambda lib, x: lib.cat([x, x]),
    "softmax": lambda lib, x: x.softmax(1),
    "logsumexp over the empty dim": lambda lib, x: x.logsumexp(0),
    "prod over the empty dim": lambda lib, x: x.prod(0),
    "amax over a non-empty dim": lambda lib, x: x.amax(1),
    "max over a non-empty dim": lambda lib, x: x.max(1)[0],
    "var": lambda lib, x: x.var(0),
    "empty index": lambda lib, x: x[lib.tensor([], dtype=lib.int64)],
    "cumsum": lambda lib, x: x.cumsum(0),
    "norm": lambda lib, x: x.norm(),
    "reshape -1": lambda lib, x: x.reshape(-1, 3),
}


@pytest.mark.parametrize("case", sorted(EMPTY))
def test_zero_size_tensors_match_torch(case):
    def run(lib):
        x = lib.zeros(0, 3, requires_grad=True)
        y = EMPTY[case](lib, x)
        y.sum().backward()
        return tuple(y.shape), helpers.to_numpy(y), tuple(x.grad.shape)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (js, jy, jg), (ts, ty, tg) = both(run)
    assert (js, jg) == (ts, tg)
    np.testing.assert_array_equal(jy, ty)
