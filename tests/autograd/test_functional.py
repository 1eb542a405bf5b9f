"""jitgrad.autograd.functional against torch.autograd.functional."""
import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")
LIBS = (jitgrad, torch)


def fns(lib):
    """(name, function, input shapes): single and tuple inputs and outputs."""
    W = lib.tensor(np.random.default_rng(0).standard_normal((3, 4)))
    return {
        "vec->vec": (lambda x: (W @ x).tanh() * x[:3], [(4,)]),
        "mat->scalar": (lambda x: (x.sin() * x).sum(), [(2, 3)]),
        "two in, two out": (lambda x, y: ((x * y).exp(), (x @ y.t()).sum(1)), [(2, 3), (2, 3)]),
        "softmax": (lambda x: x.softmax(1), [(2, 4)]),
    }


def inputs(shapes, lib):
    rng = np.random.default_rng(1)
    return tuple(lib.tensor(rng.uniform(-1, 1, s)) for s in shapes)


def flat(res):
    if isinstance(res, (tuple, list)):  # (torch's forward-mode jacobian returns lists)
        return [a for r in res for a in flat(r)]
    return [res.detach().numpy()]


def both(call):
    jg, th = (flat(call(lib)) for lib in LIBS)
    assert len(jg) == len(th), f"jitgrad returned {len(jg)} tensors, torch {len(th)}"
    for a, b in zip(jg, th):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(fns(jitgrad)))
@pytest.mark.parametrize("vectorize, strategy", [(False, "reverse-mode"), (True, "reverse-mode"),
                                                 (True, "forward-mode")])
def test_jacobian(name, vectorize, strategy):
    def call(lib):
        f, shapes = fns(lib)[name]
        x = inputs(shapes, lib)
        return lib.autograd.functional.jacobian(f, x if len(x) > 1 else x[0],
                                                vectorize=vectorize, strategy=strategy)
    both(call)


@pytest.mark.parametrize("vectorize", [False, True])
def test_hessian_of_tuple_inputs(vectorize):
    def call(lib):
        x, y = inputs([(2, 3), (3,)], lib)
        return lib.autograd.functional.hessian(lambda a, b: ((a @ b).tanh() * a.sum()).sum(),
                                               (x, y), vectorize=vectorize)
    both(call)


@pytest.mark.parametrize("what", ["vjp", "jvp", "vhp", "hvp"])
def test_products(what):
    def call(lib):
        F = lib.autograd.functional
        x, v = inputs([(2, 3), (2, 3)], lib)
        if what in ("vhp", "hvp"):
            return getattr(F, what)(lambda a: (a.exp() * a.sin()).sum(), x, v)
        if what == "vjp":
            return F.vjp(lambda a: (a * a).tanh(), x, v)
        return F.jvp(lambda a: (a * a).tanh(), x, v)
    both(call)


def test_create_graph_results_are_differentiable():
    res = []
    for lib in LIBS:
        x = lib.tensor([0.3, -0.7, 1.1], dtype=lib.float64, requires_grad=True)
        J = lib.autograd.functional.jacobian(lambda a: a.exp() * a, x, create_graph=True)
        J.sum().backward()
        res.append(x.grad.numpy().copy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12)


@pytest.mark.parametrize("lib", LIBS, ids=["jitgrad", "torch"])
def test_strict_mode_rejects_independent_outputs(lib):
    F = lib.autograd.functional
    x = lib.ones(3, dtype=lib.float64)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not "
                                           "require gradients"):
        F.jacobian(lambda a: lib.ones(2, dtype=lib.float64), x, strict=True)
    with pytest.raises(RuntimeError, match="The output of the user-provided function is "
                                           "independent of input 1"):
        F.vjp(lambda a, b: a * 2, (x, x.clone()), lib.ones(3, dtype=lib.float64), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is "
                                           "independent of input 1"):
        F.jacobian(lambda a, b: a * 2, (x, x.clone()), strict=True)
    J = F.jacobian(lambda a: lib.ones(2, dtype=lib.float64), x)
    assert tuple(J.shape) == (2, 3) and not J.numpy().any()


@pytest.mark.parametrize("lib", LIBS, ids=["jitgrad", "torch"])
def test_bad_inputs_and_outputs(lib):
    F = lib.autograd.functional
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        F.jacobian(lambda a: a, 3.0)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        F.jacobian(lambda a: 3.0, lib.ones(2))
    with pytest.raises(RuntimeError, match="v has invalid size"):
        F.vjp(lambda a: a * 2, lib.ones(2), lib.ones(3))
    with pytest.raises(NotImplementedError):
        F.jacobian(lambda a: a, lib.ones(2), strategy="forward-mode")  # needs vectorize=True


# ---- errors and strict mode: the same call must fail the same way in both ---------------------

def _errors(lib):
    """name -> a call that raises (or returns, for the value check) under lib."""
    F = lib.autograd.functional
    f64 = lib.float64
    x, y, v = (lib.tensor([0.5, -1.0, 2.0], dtype=f64) for _ in range(3))
    two = lib.ones(2, dtype=f64)
    external = lib.tensor([1.0, 2.0, 3.0], dtype=f64, requires_grad=True)

    def cube(a, b=None):
        return (a ** 3).sum()

    def exp_and_external(a, b):
        return a.exp().sum() + (b * external).sum()
    return {
        # argument checks
        "vjp inputs type": lambda: F.vjp(cube, 3.0),
        "vjp inputs entry type": lambda: F.vjp(cube, (x, 3.0)),
        "vjp outputs type": lambda: F.vjp(lambda a: 3.0, x),
        "vjp v None": lambda: F.vjp(lambda a: a * 2, x),
        "vjp v length": lambda: F.vjp(lambda a: (a * 2, a * 3), x, (v,)),
        "vjp v not single": lambda: F.vjp(lambda a: a * 2, x, (v, v)),
        "vjp v size": lambda: F.vjp(lambda a: a * 2, x, two),
        "vjp v entry size": lambda: F.vjp(lambda a: (a * 2, a * 3), x, (v, two)),
        "jvp v None": lambda: F.jvp(lambda a: a * 2, x),
        "jvp v size": lambda: F.jvp(lambda a: a * 2, (x, y), (v, two)),
        "vhp v None": lambda: F.vhp(cube, x),
        "hvp v None": lambda: F.hvp(cube, x),
        "vhp tuple output": lambda: F.vhp(lambda a: (a.sum(), a.sum()), x, v),
        "hvp tuple output": lambda: F.hvp(lambda a: (a.sum(), a.sum()), x, v),
        "vhp several elements": lambda: F.vhp(lambda a: a * 2, x, v),
        "hvp several elements": lambda: F.hvp(lambda a: a * 2, x, v),
        "hessian tuple output": lambda: F.hessian(lambda a: (a.sum(), a.sum()), x),
        "hessian several elements": lambda: F.hessian(lambda a: a * 2, x),
        "jacobian strategy": lambda: F.jacobian(cube, x, strategy="sideways"),
        "hessian strategy": lambda: F.hessian(cube, x, outer_jacobian_strategy="sideways"),
        "jacobian forward create_graph": lambda: F.jacobian(
            cube, x, create_graph=True, vectorize=True, strategy="forward-mode"),
        "jacobian forward strict": lambda: F.jacobian(cube, x, strict=True, vectorize=True,
                                                      strategy="forward-mode"),
        "jacobian forward not vectorized": lambda: F.jacobian(cube, x, strategy="forward-mode"),
        # strict: an output that does not require grad
        "vjp strict constant output": lambda: F.vjp(lambda a: two * 1, x, two, strict=True),
        "jvp strict constant output": lambda: F.jvp(lambda a: two * 1, x, v, strict=True),
        "jacobian strict constant output": lambda: F.jacobian(lambda a: two * 1, x, strict=True),
        "hessian strict constant output": lambda: F.hessian(lambda a: two.sum(), x, strict=True),
        "vhp strict constant output": lambda: F.vhp(lambda a: two.sum(), x, v, strict=True),
        "hvp strict constant output": lambda: F.hvp(lambda a: two.sum(), x, v, strict=True),
        # strict: an input no output depends on
        "vjp strict independent": lambda: F.vjp(cube, (x, y), lib.ones((), dtype=f64),
                                                strict=True),
        "jvp strict independent": lambda: F.jvp(cube, (x, y), (v, v), strict=True),
        "jacobian strict independent": lambda: F.jacobian(cube, (x, y), strict=True),
        "vhp strict independent": lambda: F.vhp(cube, (x, y), (v, v), strict=True),
        "hvp strict independent": lambda: F.hvp(cube, (x, y), (v, v), strict=True),
        # strict: a linear function (constant Jacobian, zero Hessian)
        "hessian strict linear": lambda: F.hessian(lambda a: (a * 2).sum(), x, strict=True),
        "hessian strict independent": lambda: F.hessian(cube, (x, y), strict=True),
        "vhp strict linear": lambda: F.vhp(lambda a: (a * 2).sum(), x, v, strict=True),
        "hvp strict linear": lambda: F.hvp(lambda a: (a * 2).sum(), x, v, strict=True),
        "vjp strict linear create_graph": lambda: F.vjp(lambda a: a * 2, x, v, create_graph=True,
                                                        strict=True),
        "jvp strict linear create_graph": lambda: F.jvp(lambda a: a * 2, x, v, create_graph=True,
                                                        strict=True),
        "jacobian strict linear create_graph": lambda: F.jacobian(lambda a: a * 2, x,
                                                                  create_graph=True, strict=True),
        "hessian strict quadratic create_graph": lambda: F.hessian(
            lambda a: (a * a).sum(), x, create_graph=True, strict=True),
        "vhp strict quadratic create_graph": lambda: F.vhp(lambda a: (a * a).sum(), x, v,
                                                           create_graph=True, strict=True),
        "hvp strict quadratic create_graph": lambda: F.hvp(lambda a: (a * a).sum(), x, v,
                                                           create_graph=True, strict=True),
        # strict: the gradient of input 1 exists but does not depend on the inputs
        "vhp strict gradient independent": lambda: F.vhp(exp_and_external, (x, y), (v, v),
                                                         strict=True),
        "hvp strict gradient independent": lambda: F.hvp(exp_and_external, (x, y), (v, v),
                                                         strict=True),
        # strict mode that passes: values agree
        "jvp strict ok": lambda: F.jvp(lambda a, b: (a * b).sin(), (x, y), (v, v), strict=True),
        "hessian strict ok": lambda: F.hessian(lambda a: (a ** 3).sum(), x, strict=True),
        "hvp strict ok": lambda: F.hvp(lambda a: (a ** 3).sum(), x, v, strict=True),
        "jvp independent output is zero": lambda: F.jvp(lambda a: (a * 2, two * 1), x, v),
    }


TORCH_TYPOS = {"Hessian isonly": "Hessian is only"}  # jitgrad spells these out


def _outcome(call):
    try:
        return "ok", flat(call())
    except Exception as exc:  # the type and the text are what is compared
        text = str(exc).replace("torch.", "LIB.").replace("jitgrad.", "LIB.")
        for typo, fixed in TORCH_TYPOS.items():
            text = text.replace(typo, fixed)
        return type(exc).__name__, text


@pytest.mark.parametrize("name", sorted(_errors(jitgrad)))
def test_errors_and_strict_checks_match_torch(name):
    kind_j, got_j = _outcome(_errors(jitgrad)[name])
    kind_t, got_t = _outcome(_errors(torch)[name])
    assert kind_j == kind_t
    if kind_t == "ok":
        for a, b in zip(got_j, got_t):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    else:
        assert got_j == got_t


def test_strict_vectorized_jacobian_is_supported():
    # torch 2.13 refuses strict=True with vectorize=True; jitgrad's vectorized
    # Jacobian is a forward pass that sees independent inputs, so it checks them
    F = jitgrad.autograd.functional
    x = jitgrad.ones(3, dtype=jitgrad.float64)
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not supported"):
        torch.autograd.functional.jacobian(lambda a: a * 2, torch.ones(3), strict=True,
                                           vectorize=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent "
                                           "of input 1. This is not allowed in strict mode."):
        F.jacobian(lambda a, b: a * 2, (x, x.clone()), strict=True, vectorize=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not "
                                           "require gradients"):
        F.jacobian(lambda a: jitgrad.ones(2), x, strict=True, vectorize=True)
    J = F.jacobian(lambda a: a * 2, x, strict=True, vectorize=True)
    np.testing.assert_allclose(J.numpy(), 2 * np.eye(3))


@pytest.mark.parametrize("strict", [False, True])
def test_jvp_create_graph_returns_a_differentiable_tangent(strict):
    res = []
    for lib in LIBS:
        x = lib.tensor([0.3, -0.7, 1.1], dtype=lib.float64, requires_grad=True)
        v = lib.tensor([1.0, 2.0, -1.0], dtype=lib.float64, requires_grad=True)
        out, tangent = lib.autograd.functional.jvp(lambda a: a.exp() * a.sin(), x, v,
                                                   create_graph=True, strict=strict)
        assert out.requires_grad and tangent.requires_grad
        (tangent * tangent).sum().backward()
        res.append((tangent.detach().numpy(), x.grad.numpy().copy(), v.grad.numpy().copy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)
