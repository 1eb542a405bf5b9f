"""Fused backward: same results as unfused (up to reassociation), boundaries
exactly where something observable happens, plan/kernel reuse (the disk cache
is tested in tests/kernels/test_cache.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import jitgrad
from jitgrad.autograd.fusion import explain, set_fusion_enabled

@pytest.fixture(autouse=True)
def fuse_small_tensors(monkeypatch):
    """These tests use small tensors; fusion normally starts at FUSE_MIN_ELEMENTS."""
    from jitgrad.kernels import fuse
    monkeypatch.setattr(fuse, "FUSE_MIN_ELEMENTS", 0)


TOL = {"float32": dict(rtol=2e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-13)}


def grads_of(build, leaves_np, fused, dtype):
    """Run build(*leaves) -> scalar loss, backward with fusion on/off; return the
    grads and the fused groups that backward ran (as `explain` names them)."""
    leaves = [jitgrad.tensor(v, dtype=getattr(jitgrad, dtype), requires_grad=rg)
              for v, rg in leaves_np]
    with set_fusion_enabled(fused):
        loss = build(*leaves)
        groups = explain(loss)
        loss.backward()
    return [None if t.grad is None else t.grad.numpy().copy() for t in leaves], groups


def assert_same(a, b, dtype):
    for x, y in zip(a, b):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(x, y, **TOL[dtype])


# ---- random elementwise DAGs ---------------------------------------------------------------------

UNARY = ["exp", "sin", "cos", "tanh", "sigmoid", "neg", "square", "relu", "abs", "erf", "atan",
         "center", "scale_by_sum"]  # the last two put a reduction inside the chain
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


@st.composite
def dags(draw):
    """A list of steps over a growing pool of values: each step applies a unary or
    binary op to earlier values (fan-out happens when a value is reused)."""
    steps = []
    for k in range(draw(st.integers(2, 9))):
        pool = 3 + k  # three leaves, then one value per step
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(UNARY)), draw(st.integers(0, pool - 1))))
        else:
            a, b = draw(st.integers(0, pool - 1)), draw(st.integers(0, pool - 1))
            scalar = draw(st.sampled_from([None, None, 0.5, -1.25, 2]))
            steps.append(("b", draw(st.sampled_from(BINARY)), a, b, scalar))
    return steps


def run_dag(steps):
    def build(x, y, z):
        vals = [x, y, z]
        for s in steps:
            if s[0] == "u" and s[1] == "center":  # layer-norm-like: v - mean(v)
                v = vals[s[2]]
                vals.append(v - v.mean(-1, keepdim=True) if v.ndim else v * 1.0)
            elif s[0] == "u" and s[1] == "scale_by_sum":
                v = vals[s[2]]
                vals.append(v * (v * v).sum().tanh())
            elif s[0] == "u":
                vals.append(getattr(jitgrad, s[1])(vals[s[2]]))
            else:
                a, b = vals[s[2]], (vals[s[3]] if s[4] is None else s[4])
                if s[3] % 2:  # the scalar (or other operand) on the left, too
                    a, b = b, a
                vals.append(getattr(jitgrad, s[1])(a, b))
        # every value feeds the loss, with distinct weights: all fan-out paths count
        loss = vals[-1].sum() + 0.01 * (x.sum() + y.sum() + z.sum())
        for w, v in enumerate(vals[3:-1]):
            loss = loss + (v * (0.1 * (w + 1))).mean()
        return loss
    return build


@settings(max_examples=25, deadline=None)
@given(steps=dags(), dtype=st.sampled_from(["float32", "float64"]),
       rg=st.tuples(st.booleans(), st.booleans(), st.booleans()),
       shapes=st.sampled_from([((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)),
                               ((2, 3), (), (2, 3))]))
def test_fused_equals_unfused_on_random_dags(steps, dtype, rg, shapes):
    rng = np.random.default_rng(len(steps))
    leaves = [(rng.uniform(-1.5, 1.5, s), r) for s, r in zip(shapes, rg)]
    if not any(rg):
        leaves[0] = (leaves[0][0], True)
    build = run_dag(steps)
    fused, groups = grads_of(build, leaves, True, dtype)
    assert groups, f"no fused group formed for {steps}"
    assert_same(fused, grads_of(build, leaves, False, dtype)[0], dtype)


def test_layer_norm_fan_out_around_a_reduction_does_not_deadlock():
    # `centered` feeds both a reduction (var) and an elementwise consumer that the
    # reduction's result also feeds: fusing across would make groups wait on each other.
    torch = pytest.importorskip("torch")
    v = np.random.default_rng(1).standard_normal((3, 4))
    res = []
    for lib in (jitgrad, torch):
        x = lib.tensor(v, requires_grad=True)
        w = lib.tensor(v[0], requires_grad=True)
        lib.nn.functional.layer_norm(x, (4,), w, w * 0.5).pow(2).sum().backward()
        res.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_w1_is_one_group_and_matches_torch():
    torch = pytest.importorskip("torch")
    v = np.random.default_rng(0).standard_normal(1000).astype(np.float32)

    def w1(m, x):
        return (m.tanh(m.sin(x) * m.exp(-x * x) + 0.5 * x) * m.sigmoid(x)).sum()

    x = jitgrad.tensor(v, requires_grad=True)
    y = w1(jitgrad, x)
    assert len(explain(y)) == 1 and len(explain(y)[0]) == 10  # every elementwise node
    y.backward()
    xt = torch.tensor(v, requires_grad=True)
    w1(torch, xt).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- boundaries --------------------------------------------------------------------------------------

def chain(x):
    a = x.sin()
    b = a * x
    c = b.exp()
    return a, b, c


def test_tensor_hook_splits_the_group_and_fires_once_with_the_unfused_gradient():
    seen = {}
    for fused in (True, False):
        x = jitgrad.linspace(-1, 1, 5, requires_grad=True)
        a, b, c = chain(x)
        calls = []
        b.register_hook(lambda g: calls.append(g.numpy().copy()))
        groups = explain(c.sum())
        assert all("MulBackward0" not in g for g in groups)
        with set_fusion_enabled(fused):
            c.sum().backward()
        assert len(calls) == 1
        seen[fused] = (calls[0], x.grad.numpy().copy())
    np.testing.assert_allclose(seen[True][0], seen[False][0], rtol=1e-6)
    np.testing.assert_allclose(seen[True][1], seen[False][1], rtol=1e-6)


def test_retain_grad_is_a_boundary_and_gets_its_gradient():
    x = jitgrad.linspace(-1, 1, 5, requires_grad=True)
    a, b, c = chain(x)
    b.retain_grad()
    assert all("MulBackward0" not in g for g in explain(c.sum()))
    c.sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), c.detach().numpy(), rtol=1e-6)


def test_node_hooks_are_boundaries():
    x = jitgrad.linspace(-1, 1, 5, requires_grad=True)
    a, b, c = chain(x)
    order = []
    b.grad_fn.register_prehook(lambda go: order.append("pre"))
    b.grad_fn.register_hook(lambda gi, go: order.append("post"))
    assert all("MulBackward0" not in g for g in explain(c.sum()))
    c.sum().backward()
    assert order == ["pre", "post"]


def test_create_graph_is_never_fused_and_double_backward_matches():
    res = []
    for fused in (True, False):
        x = jitgrad.linspace(-1, 1, 5, dtype=jitgrad.float64, requires_grad=True)
        with set_fusion_enabled(fused):
            (g,) = jitgrad.autograd.grad(chain(x)[2].sum(), x, create_graph=True)
            g.sum().backward()
        res.append(x.grad.numpy().copy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12)


def test_grad_of_an_intermediate_input_is_captured_not_fused_over():
    x = jitgrad.linspace(-1, 1, 5, dtype=jitgrad.float64, requires_grad=True)
    a, b, c = chain(x)
    (gb,) = jitgrad.autograd.grad(c.sum(), b)
    np.testing.assert_allclose(gb.numpy(), c.detach().numpy())


def test_fused_group_frees_saved_tensors_like_unfused():
    x = jitgrad.linspace(-1, 1, 5, requires_grad=True)
    c = chain(x)[2]
    loss = c.sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_retain_graph_allows_a_second_fused_backward():
    x = jitgrad.linspace(-1, 1, 5, requires_grad=True)
    loss = chain(x)[2].sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)


# ---- replay and caches ------------------------------------------------------------------------------------

def test_second_identical_step_compiles_nothing_and_hits_the_plan_cache():
    x = jitgrad.randn(64, requires_grad=True)

    def step():
        x.grad = None
        (x.tanh() * x.cos() + x).exp().sum().backward()

    step()
    before = jitgrad.compile_stats()
    step()
    after = jitgrad.compile_stats()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["plan_hits"] > before["plan_hits"]
    assert after["plan_misses"] == before["plan_misses"]


def test_planning_is_skipped_until_a_fusable_node_was_recorded(monkeypatch):
    from jitgrad.autograd import engine
    from jitgrad.kernels import fuse
    from jitgrad.ops import pointwise
    planned = []
    real_plan = engine.plan
    monkeypatch.setattr(engine, "plan", lambda *a: planned.append(1) or real_plan(*a))
    monkeypatch.setattr(pointwise, "FUSABLE_RECORDED", [False])
    monkeypatch.setattr(engine, "FUSABLE_RECORDED", pointwise.FUSABLE_RECORDED)
    monkeypatch.setattr(fuse, "FUSE_MIN_ELEMENTS", 1000)
    x = jitgrad.randn(8, requires_grad=True)
    (x.tanh() * x.cos()).sum().backward()  # below FUSE_MIN_ELEMENTS: no node may fuse
    assert planned == [] and pointwise.FUSABLE_RECORDED == [False]
    monkeypatch.setattr(fuse, "FUSE_MIN_ELEMENTS", 0)
    x.grad = None
    (x.tanh() * x.cos()).sum().backward()
    assert planned == [1] and pointwise.FUSABLE_RECORDED == [True]
    v = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), (1 - np.tanh(v) ** 2) * np.cos(v)
                               - np.tanh(v) * np.sin(v), rtol=1e-5, atol=1e-6)
