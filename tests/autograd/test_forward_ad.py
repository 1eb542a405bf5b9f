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


def test_levels_and_errors(lib):
    fw = lib.autograd.forward_ad
    x = lib.ones(3)
    with pytest.raises(RuntimeError, match="Trying to create a dual Tensor for forward AD but no "
                                           "level exists"):
        fw.make_dual(x, lib.ones(3))
    with fw.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fw.make_dual(x, lib.ones(2))
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            with fw.dual_level():
                pass
        d = fw.make_dual(x, lib.ones(3))
        with pytest.raises(RuntimeError, match="Setting a forward grad that itself has a forward "
                                               "gradient at the same level"):
            fw.make_dual(x, d)
        for primal, tangent, role in [(lib.ones(3, dtype=lib.int64), lib.ones(3), "primal"),
                                      (lib.ones(3), lib.ones(3, dtype=lib.int64), "tangent")]:
            with pytest.raises(ValueError, match=f"Expected {role} to be floating point or "
                                                 "complex, but got: (torch|jitgrad).int64"):
                fw.make_dual(primal, tangent)
        y = d * 2
        assert fw.unpack_dual(x).tangent is None
    # leaving the level drops every tangent
    assert fw.unpack_dual(y).tangent is None


@pytest.mark.parametrize("primal, tangent", [("float64", "float32"), ("float32", "float64")])
def test_tangent_of_another_floating_dtype_is_kept(lib, primal, tangent):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        d = fw.make_dual(lib.ones(2, dtype=getattr(lib, primal)),
                         lib.tensor([1.0, 2.0], dtype=getattr(lib, tangent)))
        assert helpers.dtype_name(fw.unpack_dual(d).tangent) == tangent
        out = fw.unpack_dual(d * 3)
        assert helpers.dtype_name(out.primal) == primal
        assert out.tangent.tolist() == [3.0, 6.0]


def test_repr_of_a_dual_tensor_shows_its_tangent(lib):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        d = fw.make_dual(lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0]))
        assert repr(d) == "tensor([1., 2.], tangent=tensor([3., 4.]))"
        assert repr(d * 2) == "tensor([2., 4.], tangent=tensor([6., 8.]))"
        r = fw.make_dual(lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([3.0, 4.0]))
        assert repr(r) == "tensor([1., 2.], grad_fn=<ViewBackward0>, tangent=tensor([3., 4.]))"
    assert repr(d) == "tensor([1., 2.])"


def test_forward_over_backward(lib):
    fw = lib.autograd.forward_ad
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    with fw.dual_level():
        d = fw.make_dual(x, lib.tensor([1.0, 0.0], dtype=lib.float64))
        (g,) = lib.autograd.grad((d.sin() * d).sum(), d, create_graph=True)
        tangent = fw.unpack_dual(g).tangent
    xs = np.array([1.0, 2.0])
    np.testing.assert_allclose(g.detach().numpy(), np.sin(xs) + xs * np.cos(xs))
    # d/dx of the gradient along e_0: the Hessian's first column
    np.testing.assert_allclose(tangent.detach().numpy(), [2 * np.cos(1.0) - np.sin(1.0), 0.0], atol=1e-15)


def test_backward_over_forward(lib):
    fw = lib.autograd.forward_ad
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    v = lib.tensor([1.0, -1.0], dtype=lib.float64, requires_grad=True)
    with fw.dual_level():
        y = fw.make_dual(x, v)
        tangent = fw.unpack_dual((y.exp() * y).sin()).tangent  # v cos(x e^x) (1 + x) e^x
        tangent.sum().backward()
    xs, vs = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    u = xs * np.exp(xs)
    du = (1 + xs) * np.exp(xs)
    np.testing.assert_allclose(v.grad.numpy(), np.cos(u) * du)
    np.testing.assert_allclose(x.grad.numpy(),
                               vs * (-np.sin(u) * du * du + np.cos(u) * (2 + xs) * np.exp(xs)))


def test_in_place_op_on_a_dual_tensor_writes_its_tangent(lib):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        t = lib.tensor([1.0, 1.0])
        d = fw.make_dual(lib.tensor([1.0, 2.0]), t)
        x = lib.tensor([3.0, 4.0])
        x.mul_(d)                                     # a plain tensor becomes dual
        assert fw.unpack_dual(x).tangent.tolist() == [3.0, 4.0]
        d.mul_(lib.tensor([5.0, 6.0]))
        assert fw.unpack_dual(d).tangent.tolist() == [5.0, 6.0]
        assert t.tolist() == [5.0, 6.0]               # the tangent given to make_dual, in place
        d.zero_()
        assert fw.unpack_dual(d).tangent.tolist() == [0.0, 0.0]


def test_in_place_ops_through_views_update_the_base_tangent(lib):
    fw = lib.autograd.forward_ad
    f64 = lib.float64
    with fw.dual_level():
        plain = lib.tensor([1.0, 2.0, 3.0], dtype=f64)
        v = plain[1:]
        v.mul_(fw.make_dual(lib.tensor([5.0, 6.0], dtype=f64), lib.tensor([1.0, 2.0], dtype=f64)))
        assert fw.unpack_dual(v).tangent.tolist() == [2.0, 6.0]
        assert fw.unpack_dual(plain).tangent.tolist() == [0.0, 2.0, 6.0]

        base = fw.make_dual(lib.tensor([1.0, 2.0, 3.0], dtype=f64), lib.ones(3, dtype=f64))
        head, tail = base[:2], base[1:]
        tail.mul_(2)
        assert fw.unpack_dual(base).tangent.tolist() == [1.0, 2.0, 2.0]
        assert fw.unpack_dual(head).tangent.tolist() == [1.0, 2.0]   # another view follows
        base.add_(lib.ones(3, dtype=f64))
        base.mul_(lib.tensor([1.0, 3.0, 5.0], dtype=f64))
        assert fw.unpack_dual(tail).tangent.tolist() == [6.0, 10.0]  # the base's change too

        square = fw.make_dual(lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=f64),
                              lib.ones(2, 2, dtype=f64))
        square.t()[0].copy_(fw.make_dual(lib.tensor([7.0, 8.0], dtype=f64),
                                         lib.tensor([5.0, 6.0], dtype=f64)))
        assert fw.unpack_dual(square).tangent.tolist() == [[5.0, 1.0], [6.0, 1.0]]


def test_in_place_op_with_itself_as_operand():
    # d.mul_(d): jitgrad's tangent is 2 d t; torch 2.13 reads the already updated
    # primal for one of the two terms (docs/forward-ad-and-functional.md)
    with fwAD.dual_level():
        d = fwAD.make_dual(jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([1.0, 1.0]))
        d.mul_(d)
        assert fwAD.unpack_dual(d).tangent.tolist() == [2.0, 4.0]


def make_with_index(lib, jvp_result):
    """forward returns (2x, a non-differentiable output); jvp returns `jvp_result(t)`."""
    class WithIndex(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            index = x * 3
            ctx.mark_non_differentiable(index)
            return x * 2, index, x > 1

        @staticmethod
        def backward(ctx, g, g_index, g_mask):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return jvp_result(t)
    return WithIndex


def test_custom_function_jvp_with_non_differentiable_outputs(lib):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        d = fw.make_dual(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 1.0]))
        y, index, mask = make_with_index(lib, lambda t: (t * 2, None, None)).apply(d)
        assert fw.unpack_dual(y).tangent.tolist() == [2.0, 2.0]
        assert fw.unpack_dual(index).tangent is None and fw.unpack_dual(mask).tangent is None
        assert index.tolist() == [3.0, 6.0] and mask.tolist() == [False, True]
        with pytest.raises(RuntimeError, match="Function's jvp returned a gradient at position 1, "
                                               "but +the corresponding forward output is not a "
                                               "differentiable Tensor"):
            make_with_index(lib, lambda t: (t * 2, t * 3, None)).apply(d)
        with pytest.raises(RuntimeError, match=r"Function's jvp returned an invalid number of "
                                               r"forward gradients \(expected 3 but got 1\)"):
            make_with_index(lib, lambda t: t * 2).apply(d)
