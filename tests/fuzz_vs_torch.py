"""Fuzz jitgrad against torch on random graphs of registry ops, and count.

    python tests/fuzz_vs_torch.py --cases 200 [--seed 0]

Each case is a random expression (tests/test_hypothesis.py's generator: any
registry op, broadcasting inputs, sum/mean reductions) evaluated by jitgrad
and by torch on the same inputs, comparing the output and the gradients of
sum(out * w). Every case runs four ways: small tensors and fused-size tensors
(a trailing dimension of 8192), fusion on and off, in float64 and float32.
It prints the number of cases, how many ran a fused group, and every
mismatch (op names, shapes, the first differing value); exit status 1 if any
mismatched. tests/test_hypothesis.py runs the small-tensor case in CI; this
script is the longer run, kept beside it so both draw the same graphs.
"""
import argparse
import collections
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

torch = pytest.importorskip("torch")  # also keeps pytest's doctest collection clean without it

import jitgrad  # noqa: E402
from jitgrad.autograd.fusion import explain, set_fusion_enabled  # noqa: E402
import helpers  # noqa: E402
from test_hypothesis import Evaluator, problems  # noqa: E402

TOLERANCE = {"float64": dict(rtol=1e-6, atol=1e-9), "float32": dict(rtol=2e-3, atol=1e-4)}
FUSED_SIZE = 8192  # kernels/fuse.py FUSE_MIN_ELEMENTS: the smallest group that fuses


def ops_of(expr):
    if expr[0] == "op":
        return {expr[1]}.union(*(ops_of(a) for a in expr[2] if isinstance(a, tuple)))
    if expr[0] in ("gt", "reduce"):
        return set().union(*(ops_of(a) for a in expr[1:] if isinstance(a, tuple)))
    return set()


def run_case(expr, shapes, dtype, fuse, rng):
    """None if jitgrad matches torch, else a description of the first mismatch.
    Also returns whether a fused group ran."""
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    jx = [jitgrad.tensor(a, requires_grad=True) for a in arrays]
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    with set_fusion_enabled(fuse):
        jo = Evaluator(jitgrad)(expr, jx)
        to = Evaluator(torch)(expr, tx)
        w = rng.standard_normal(tuple(to.shape)).astype(dtype)
        jl, tl = (jo * jitgrad.tensor(w)).sum(), (to * torch.tensor(w)).sum()
        fused = bool(jl.requires_grad and explain(jl))
        jg = jitgrad.autograd.grad(jl, jx, allow_unused=True) if jl.requires_grad else [None] * len(jx)
        tg = torch.autograd.grad(tl, tx, allow_unused=True) if tl.requires_grad else [None] * len(tx)
    pairs = [("output", jo, to)] + [(f"grad {i}", a, b) for i, (a, b) in enumerate(zip(jg, tg))]
    for what, a, b in pairs:
        if (a is None) != (b is None):
            return f"{what}: jitgrad {a is None and 'None'}, torch {b is None and 'None'}", fused
        if a is None:
            continue
        try:
            helpers.assert_same(a, b, what=what, **TOLERANCE[dtype])
        except AssertionError as e:
            return " ".join(str(e).split())[:300], fused
    return None, fused


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="random graphs to draw")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    counts = collections.Counter()
    mismatches = []

    @settings(max_examples=args.cases, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(args.seed)
    @given(problems())
    def fuzz(problem):
        expr, shapes = problem
        rng = np.random.default_rng(counts["graphs"])
        counts["graphs"] += 1
        for size in ("small", "fused-size"):
            case_shapes = shapes if size == "small" else [s + (FUSED_SIZE,) for s in shapes]
            for dtype in ("float64", "float32"):
                for fuse in (True, False):
                    counts["cases"] += 1
                    with np.errstate(all="ignore"):
                        problem_text, fused = run_case(expr, case_shapes, dtype, fuse, rng)
                    counts["fused"] += fused
                    if problem_text:
                        mismatches.append((sorted(ops_of(expr)), case_shapes, dtype, fuse,
                                           problem_text))

    fuzz()
    print(f"{counts['graphs']} graphs, {counts['cases']} cases (small and fused-size, "
          f"float64 and float32, fusion on and off), {counts['fused']} ran a fused group, "
          f"{len(mismatches)} mismatched")
    for ops, shapes, dtype, fuse, text in mismatches:
        print(f"- ops {ops} shapes {shapes} {dtype} fusion={'on' if fuse else 'off'}: {text}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
