"""Forward-mode AD: every registered op's JVP (single and batched tangents)
against finite differences, torch's forward_ad semantics, errors."""
import numpy as np
import pytest

import jitgrad
import jitgrad.autograd.forward_ad as fwAD
from jitgrad.ops.registry import FUNCTIONS, REGISTRY, Arg, Sample

import helpers

EPS = 1e-6


def fd_jvp(fn, args, kwargs, floats, tangents):
    """Central difference of fn along `tangents` (float64 inputs)."""
    def at(s):
        a = list(args)
        for i, t in zip(floats, tangents):
            a[i] = jitgrad.tensor(args[i].detach().numpy() + s * t)
        return np.asarray(fn(*a, **kwargs).detach().numpy(), dtype=np.float64)
    return (at(EPS) - at(-EPS)) / (2 * EPS)


def elementwise_samples():
    for name, op in sorted(REGISTRY.items()):
        if not op.differentiable or name in ("fill", "copy"):
            continue
        lo, hi = op.domain
        args = []
        for a in op.args:
            if a in op.bool_args:
                args.append(Arg(3, 4, kind="bool"))
            elif a in op.scalars:
                args.append(op.scalars[a])
            else:
                args.append(Arg(3, 4, low=lo, high=hi))
        yield pytest.param(name, (lambda op: lambda *a: jitgrad.ops.registry.call(op, *a))(op),
                           Sample(*args), id=name)


def function_samples():
    for name, (fn, samples) in sorted(FUNCTIONS.items()):
        for k, s in enumerate(samples):
            yield pytest.param(name, fn, s, id=f"{name}-{k}")


ALL = list(elementwise_samples()) + list(function_samples())


def run_jvp(fn, sample, batch):
    rng = helpers.rng_for("fwd", repr(sample), batch)
    m = helpers.materialize(sample, rng, "float64")
    args = [a.detach() if isinstance(a, jitgrad.Tensor) else a for a in m.jg_args]
    floats = [i for i, a in enumerate(m.jg_args) if any(a is l for l in m.jg_leaves)]
    tangents = [[rng.standard_normal(args[i].shape) for i in floats] for _ in range(batch or 1)]
    with fwAD.dual_level():
        duals = list(args)
        for j, i in enumerate(floats):
            if batch:
                t = jitgrad.tensor(np.stack([tb[j] for tb in tangents]))
                duals[i] = fwAD.make_batched_dual(args[i], t)
            else:
                duals[i] = fwAD.make_dual(args[i], jitgrad.tensor(tangents[0][j]))
        out = fn(*duals, **m.jg_kwargs)
        got = fwAD.unpack_dual(out).tangent
    expected = [fd_jvp(fn, args, m.jg_kwargs, floats, tb) for tb in tangents]
    return got, expected


@pytest.mark.parametrize("name, fn, sample", ALL)
def test_jvp_matches_finite_differences(name, fn, sample):
    if name == "to_dtype":  # float32 output: finite differences lose the precision
        pytest.skip("checked in test_to_dtype_tangent")
    got, (expected,) = run_jvp(fn, sample, batch=0)
    assert got is not None, f"{name} dropped the tangent"
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name, fn, sample", ALL)
def test_batched_tangents_equal_one_at_a_time(name, fn, sample):
    if name == "to_dtype":
        pytest.skip("checked in test_to_dtype_tangent")
    got, expected = run_jvp(fn, sample, batch=3)
    assert got is not None and got.shape[0] == 3
    for b in range(3):
        np.testing.assert_allclose(np.broadcast_to(got.numpy()[b], expected[b].shape),
                                   expected[b], rtol=1e-5, atol=1e-7)


def test_to_dtype_tangent():
    with fwAD.dual_level():
        x = fwAD.make_dual(jitgrad.ones(3, dtype=jitgrad.float64),
                           jitgrad.tensor([1.0, 2.0, 3.0], dtype=jitgrad.float64))
        t = fwAD.unpack_dual(x.float()).tangent
    assert t.dtype == jitgrad.float32 and t.tolist() == [1.0, 2.0, 3.0]


def test_matches_torch_forward_ad_on_a_composite():
    torch = helpers.require_torch()
    tfw = torch.autograd.forward_ad
    v = np.random.default_rng(0).uniform(0.5, 1.5, (3, 4))
    w = np.random.default_rng(1).standard_normal((3, 4))
    res = []
    for lib, fw in ((jitgrad, fwAD), (torch, tfw)):
        with fw.dual_level():
            x = fw.make_dual(lib.tensor(v), lib.tensor(w))
            y = (x.log().softmax(1) @ x.t()).tanh().sum(0) + x.norm() * x[1].prod()
            res.append(fw.unpack_dual(y).tangent.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10)


def test_inplace_and_views_carry_tangents_like_torch():
    torch = helpers.require_torch()
    tfw = torch.autograd.forward_ad
    res = []
    for lib, fw in ((jitgrad, fwAD), (torch, tfw)):
        with fw.dual_level():
            x = fw.make_dual(lib.tensor([0.5, 1.0, 2.0]), lib.tensor([1.0, 2.0, 3.0]))
            y = x.clone()
            y[0:2].mul_(3)
            y.exp_()
            v = y[1:]
            res.append((fw.unpack_dual(y).tangent.numpy(), fw.unpack_dual(v).tangent.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_forward_over_reverse_gives_hessian_vector_products():
    x0 = np.array([0.3, -1.2, 2.0])
    v0 = np.array([1.0, 0.5, -2.0])
    x = jitgrad.tensor(x0, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, jitgrad.tensor(v0))
        (g,) = jitgrad.autograd.grad((d.sin() * d).sum(), d, create_graph=True)
        hv = fwAD.unpack_dual(g).tangent.detach().numpy()
    h_diag = 2 * np.cos(x0) - x0 * np.sin(x0)  # d2/dx2 of x sin x
    np.testing.assert_allclose(hv, h_diag * v0, rtol=1e-12)


def test_custom_function_jvp():
    class Square(jitgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x * x

        @staticmethod
        def jvp(ctx, tx):
            (x,) = ctx.saved_for_forward
            return 2 * x * tx

    with fwAD.dual_level():
        x = fwAD.make_dual(jitgrad.tensor([3.0]), jitgrad.tensor([1.0]))
        assert fwAD.unpack_dual(Square.apply(x)).tangent.tolist() == [6.0]


def test_levels_and_errors():
    x = jitgrad.ones(3)
    with pytest.raises(RuntimeError, match="dual level"):
        fwAD.make_dual(x, jitgrad.ones(3))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(x, jitgrad.ones(2))
        with pytest.raises(RuntimeError, match="same dtype"):
            fwAD.make_dual(x, jitgrad.ones(3, dtype=jitgrad.float64))
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            with fwAD.dual_level():
                pass
        d = fwAD.make_dual(x, jitgrad.ones(3))
        y = d * 2
        assert fwAD.unpack_dual(x).tangent is None
    # leaving the level drops every tangent
    assert fwAD.unpack_dual(y).tangent is None and y._fw is None
