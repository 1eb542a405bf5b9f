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
    out = []
    for lib in LIBS:
        out.append(flat(call(lib)))
    for a, b in zip(*out):
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
