"""Hypothesis-generated graphs (elementwise, broadcasting, reductions, views,
matmul, fan-out), small and large, compiled == eager over several calls, with
the backward outside (loss function) and inside (training step) the function."""
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import jitgrad
from jitgrad.compiler.program import SMALL_ELEMENTS

from compile_helpers import CALLS, MODE, assert_close, assert_same_results

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

UNARY = {
    "tanh": lambda x: x.tanh(), "sin": lambda x: x.sin(), "sigmoid": lambda x: x.sigmoid(),
    "relu": lambda x: x.relu(), "neg": lambda x: -x, "exp_tanh": lambda x: x.tanh().exp(),
    "scale": lambda x: x * 0.5 + 1.0,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "maximum": jitgrad.maximum, "div": lambda a, b: a / (b * b + 1.0),
}
REDUCE = {"sum": lambda x: x.sum(-1, keepdim=True), "mean": lambda x: x.mean(-1, keepdim=True),
          "amax": lambda x: x.amax(-1, keepdim=True), "colsum": lambda x: x.sum(0, keepdim=True),
          "colmean": lambda x: x.mean(0, keepdim=True)}
# Views that give back the shape they started from, so every value stays
# broadcastable with every other.
VIEW = {
    "reshape": lambda x: x.reshape(-1).view(x.shape),
    "unsqueeze_index": lambda x: x.unsqueeze(0)[0],
    "slice": lambda x: x[..., ::1],
    "transpose_twice": lambda x: x.transpose(0, 1).transpose(0, 1) if x.ndim == 2 else x,
    "expand_sum": lambda x: x.unsqueeze(0).expand((2,) + tuple(x.shape)).sum(0) * 0.5,
}

steps = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), st.integers(0, 99)),
    st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), st.integers(0, 99),
              st.integers(0, 99)),
    st.tuples(st.just("reduce"), st.sampled_from(sorted(REDUCE)), st.integers(0, 99)),
    st.tuples(st.just("view"), st.sampled_from(sorted(VIEW)), st.integers(0, 99)),
    st.tuples(st.just("matmul"), st.integers(0, 99)),
)


def evaluate(program, x, row, col, w):
    """Run `program` on the inputs x (m, n), row (n,), col (m, 1) and w (n, n): each
    step reads earlier values (any of them: fan-out) and appends its result.
    Returns (a loss, two of the values)."""
    vals = [x, row, col]
    for step in program:
        kind, name = step[0], step[1]
        pick = lambda i: vals[i % len(vals)]  # noqa: E731
        if kind == "unary":
            v = UNARY[name](pick(step[2]))
        elif kind == "binary":
            v = BINARY[name](pick(step[2]), pick(step[3]))
        elif kind == "reduce":
            v = REDUCE[name](pick(step[2]))
        elif kind == "view":
            v = VIEW[name](pick(step[2]))
        else:  # matmul by w: broadcast to (m, n) first where the shape does not fit
            a = vals[name % len(vals)]
            v = (a if a.shape[-1] == w.shape[0] else a * x) @ w
        vals.append(v)
    out = vals[-1] + vals[len(vals) // 2]
    return (out * out).mean(), out, vals[-1]


def _inputs(m, n, seed):
    rng = np.random.default_rng(seed)
    shapes = [(m, n), (n,), (m, 1), (n, n)]
    arrays = [rng.uniform(-1, 1, s) / (np.sqrt(n) if s == (n, n) else 1) for s in shapes]
    make = lambda: [jitgrad.tensor(a, requires_grad=True) for a in arrays]  # noqa: E731
    return make(), make()


def _check(program, m, n, seed, in_step):
    comp, eager = _inputs(m, n, seed)

    def loss_fn(*xs):
        return evaluate(program, *xs)

    def step(*xs):
        loss, out, last = evaluate(program, *xs)
        loss.backward()
        return loss, out, last

    fn = step if in_step else loss_fn
    compiled = jitgrad.compile(fn, mode=MODE)
    for call in range(CALLS + 1):
        got, want = compiled(*comp), fn(*eager)
        assert_same_results(got, want, f"call {call}", graph=not in_step)
        if not in_step:
            got[0].backward()
            want[0].backward()
        for i, (a, b) in enumerate(zip(comp, eager)):
            if b.grad is None:
                assert a.grad is None, f"call {call}: input {i} has a grad, eager none"
            else:
                assert_close(a.grad, b.grad, f"call {call}: grad of input {i}")
    assert compiled.breaks == [] and compiled.eager_calls == 0
    assert compiled.traces <= 2  # the second: .grad went from None to set


@settings(max_examples=40, **SETTINGS)
@given(st.lists(steps, min_size=1, max_size=10), st.booleans(), st.integers(0, 2 ** 16))
def test_small_random_graph_compiled_matches_eager(program, in_step, seed):
    _check(program, 3, 4, seed, in_step)


@settings(max_examples=10, **SETTINGS)
@given(st.lists(steps, min_size=1, max_size=8), st.booleans(), st.integers(0, 2 ** 16))
def test_large_random_graph_compiled_matches_eager(program, in_step, seed):
    m, n = 48, 96
    assert m * n > SMALL_ELEMENTS  # the large-tensor executor's size
    _check(program, m, n, seed, in_step)
