"""jitgrad.func's transforms (grad, grad_and_value, vjp, jvp, jacrev, jacfwd,
hessian, functional_call) against torch.func, alone and composed."""
import numpy as np
import pytest

import jitgrad
from jitgrad.func import functional_call, grad, jacrev, stack_module_state, vmap

from helpers import require_torch, rng_for, run_isolated
from test_vmap import compare, data


def f_sin(L, x):
    return (x.sin() * x).sum()


def f_vec(L, x):
    return (x.exp() * x.sum()).tanh()


def f_two(L, x, y):
    return (x * y.cos()).sum() + (x ** 2).sum() * y.sum()


V, W = data(4), data(4, seed=1)
M = data(3, 4)

CASES = [
    ("grad", lambda L, x: L.func.grad(lambda v: f_sin(L, v))(x), (V,)),
    ("grad_matrix", lambda L, x: L.func.grad(lambda v: f_sin(L, v))(x), (M,)),
    ("grad_argnums_1", lambda L, x, y: L.func.grad(lambda a, b: f_two(L, a, b), argnums=1)(x, y),
     (V, W)),
    ("grad_argnums_tuple", lambda L, x, y: L.func.grad(lambda a, b: f_two(L, a, b),
                                                       argnums=(0, 1))(x, y), (V, W)),
    ("grad_argnums_negative", lambda L, x, y: L.func.grad(lambda a, b: f_two(L, a, b),
                                                          argnums=-1)(x, y), (V, W)),
    ("grad_has_aux", lambda L, x: L.func.grad(lambda v: (f_sin(L, v), v.cos()), has_aux=True)(x),
     (V,)),
    ("grad_dict", lambda L, x, y: L.func.grad(
        lambda p: (p["a"] * p["b"].exp()).sum())({"a": x, "b": y}), (V, W)),
    ("grad_unused_input", lambda L, x, y: L.func.grad(lambda a, b: a.sum() * 2,
                                                      argnums=1)(x, y), (V, W)),
    ("grad_and_value", lambda L, x: L.func.grad_and_value(lambda v: f_sin(L, v))(x), (V,)),
    ("grad_and_value_aux", lambda L, x: L.func.grad_and_value(
        lambda v: (f_sin(L, v), {"c": v * 2}), has_aux=True)(x), (V,)),
    ("grad_grad", lambda L, x: L.func.grad(L.func.grad(lambda s: s.sin() * s ** 3))(x),
     (np.array(0.7),)),
    ("grad_of_grad_sum", lambda L, x: L.func.grad(
        lambda v: L.func.grad(lambda u: f_sin(L, u))(v).pow(2).sum())(x), (V,)),
    ("vjp", lambda L, x, c: L.func.vjp(lambda v: f_vec(L, v), x)[1](c), (V, W)),
    ("vjp_two_inputs", lambda L, x, y, c: L.func.vjp(lambda a, b: a * b.sin(), x, y)[1](c),
     (V, W, data(4, seed=2))),
    ("vjp_outputs", lambda L, x: L.func.vjp(lambda v: (v * 2, v.sum()), x)[0], (V,)),
    ("vjp_has_aux", lambda L, x, c: L.func.vjp(lambda v: (v.exp(), v.sum()), x,
                                               has_aux=True)[2], (V, W)),
    ("jvp", lambda L, x, t: L.func.jvp(lambda v: f_vec(L, v), (x,), (t,)), (V, W)),
    ("jvp_two_outputs", lambda L, x, t: L.func.jvp(lambda v: (v.sin(), v.sum()), (x,), (t,)),
     (V, W)),
    ("jvp_has_aux", lambda L, x, t: L.func.jvp(lambda v: (v.sin(), v.cos()), (x,), (t,),
                                               has_aux=True), (V, W)),
    ("jacrev", lambda L, x: L.func.jacrev(lambda v: f_vec(L, v))(x), (V,)),
    ("jacrev_matrix_in_out", lambda L, x: L.func.jacrev(lambda m: m.softmax(-1) * 2)(x), (M,)),
    ("jacrev_argnums_tuple", lambda L, x, y: L.func.jacrev(lambda a, b: a * b.exp(),
                                                           argnums=(0, 1))(x, y), (V, W)),
    ("jacrev_multi_output", lambda L, x: L.func.jacrev(lambda v: (v.sin(), v.sum()))(x), (V,)),
    ("jacrev_has_aux", lambda L, x: L.func.jacrev(lambda v: (v.sin(), v.cos()), has_aux=True)(x),
     (V,)),
    ("jacrev_chunk_size", lambda L, x: L.func.jacrev(lambda v: f_vec(L, v), chunk_size=3)(x),
     (V,)),
    ("jacfwd", lambda L, x: L.func.jacfwd(lambda v: f_vec(L, v))(x), (V,)),
    ("jacfwd_argnums_tuple", lambda L, x, y: L.func.jacfwd(lambda a, b: a * b.exp(),
                                                           argnums=(0, 1))(x, y), (V, W)),
    ("jacfwd_matrix_in_out", lambda L, x: L.func.jacfwd(lambda m: m.softmax(-1) * 2)(x), (M,)),
    ("jacfwd_has_aux", lambda L, x: L.func.jacfwd(lambda v: (v.sin(), v.cos()), has_aux=True)(x),
     (V,)),
    ("hessian", lambda L, x: L.func.hessian(lambda v: f_sin(L, v))(x), (V,)),
    ("hessian_argnums", lambda L, x, y: L.func.hessian(lambda a, b: f_two(L, a, b),
                                                       argnums=1)(x, y), (V, W)),
    ("hessian_dict", lambda L, x, y: L.func.hessian(
        lambda p: (p["a"] * p["b"].sin()).sum())({"a": x, "b": y}), (V, W)),
    ("jacrev_dict_in_out", lambda L, x, y: L.func.jacrev(
        lambda p: {"s": p["a"] * p["b"], "t": p["a"].sum()})({"a": x, "b": y}), (V, W)),
    ("jacrev_jacrev", lambda L, x: L.func.jacrev(L.func.jacrev(lambda v: f_sin(L, v)))(x), (V,)),
    ("jacfwd_jacrev", lambda L, x: L.func.jacfwd(L.func.jacrev(lambda v: f_vec(L, v)))(x), (V,)),
    ("jacrev_jacfwd", lambda L, x: L.func.jacrev(L.func.jacfwd(lambda v: f_vec(L, v)))(x), (V,)),
    ("jacfwd_jacfwd", lambda L, x: L.func.jacfwd(L.func.jacfwd(lambda v: f_sin(L, v)))(x), (V,)),
    ("vmap_grad", lambda L, x: L.func.vmap(L.func.grad(lambda v: f_sin(L, v)))(x), (M,)),
    ("vmap_grad_unbatched_arg", lambda L, w, x: L.func.vmap(
        L.func.grad(lambda w, r: (r @ w).tanh().sum()), in_dims=(None, 0))(w, x),
     (data(4, 2), M)),
    ("vmap_grad_and_value", lambda L, x: L.func.vmap(L.func.grad_and_value(
        lambda v: f_sin(L, v)))(x), (M,)),
    ("vmap_jvp", lambda L, x, t: L.func.vmap(
        lambda p, q: L.func.jvp(lambda v: f_vec(L, v), (p,), (q,)))(x, t), (M, data(3, 4, seed=1))),
    ("vmap_vjp", lambda L, x, c: L.func.vmap(
        lambda p, q: L.func.vjp(lambda v: f_vec(L, v), p)[1](q))(x, c), (M, data(3, 4, seed=1))),
    ("vmap_jacrev", lambda L, x: L.func.vmap(L.func.jacrev(lambda v: f_vec(L, v)))(x), (M,)),
    ("vmap_jacfwd", lambda L, x: L.func.vmap(L.func.jacfwd(lambda v: f_vec(L, v)))(x), (M,)),
    ("vmap_hessian", lambda L, x: L.func.vmap(L.func.hessian(lambda v: f_sin(L, v)))(x), (M,)),
    ("grad_of_vmap", lambda L, x: L.func.grad(
        lambda m: L.func.vmap(lambda r: f_sin(L, r))(m).sum())(x), (M,)),
    ("vmap_vmap_grad", lambda L, x: L.func.vmap(L.func.vmap(L.func.grad(
        lambda s: s.sin() * s)))(x), (M,)),
]


@pytest.mark.parametrize("body, inputs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_transform_matches_torch(body, inputs):
    compare(body, *inputs, rtol=1e-6, atol=1e-8)


# ---- per-sample gradients of a small MLP ----------------------------------------------------

def _mlp(lib, seed=0):
    lib.manual_seed(seed)
    return lib.nn.Sequential(lib.nn.Linear(5, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))


def _copy_params(jg_model, th_model, th):
    with th.no_grad():
        for (name, p), (_, q) in zip(jg_model.named_parameters(), th_model.named_parameters()):
            q.copy_(th.tensor(p.detach().numpy()))


@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_per_sample_grads_of_mlp_match_torch(loss):
    th = require_torch()
    rng = rng_for("per-sample", loss)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    t = rng.standard_normal((6, 3)).astype(np.float32)
    labels = rng.integers(0, 3, 6)
    jg_model, th_model = _mlp(jitgrad), _mlp(th)
    _copy_params(jg_model, th_model, th)

    def per_sample(L, model, x, t, labels):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def sample_loss(p, xi, ti, li):
            out = L.func.functional_call(model, p, (xi.unsqueeze(0),))
            if loss == "mse":
                return L.nn.functional.mse_loss(out, ti.unsqueeze(0))
            return L.nn.functional.cross_entropy(out, li.unsqueeze(0))
        return L.func.vmap(L.func.grad(sample_loss), in_dims=(None, 0, 0, 0))(params, x, t, labels)
    got = per_sample(jitgrad, jg_model, jitgrad.tensor(x), jitgrad.tensor(t),
                     jitgrad.tensor(labels))
    want = per_sample(th, th_model, th.tensor(x), th.tensor(t), th.tensor(labels))
    assert set(got) == set(want)
    for k in got:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=k)


def test_per_sample_grads_equal_a_loop_of_grads():
    model = _mlp(jitgrad, seed=3)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = jitgrad.tensor(data(4, 5)).float()

    def sample_loss(p, xi):
        return functional_call(model, p, (xi,)).pow(2).sum()
    batched = vmap(grad(sample_loss), in_dims=(None, 0))(params, x)
    for i in range(4):
        one = grad(sample_loss)(params, x[i])
        for k in params:
            np.testing.assert_allclose(batched[k][i].numpy(), one[k].numpy(), rtol=1e-6)


# ---- functional_call and stack_module_state -------------------------------------------------

def test_functional_call_matches_torch_and_restores_the_module(lib):
    model = _mlp(lib, seed=1)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    new = {k: v.detach() * 0 + 0.5 for k, v in model.named_parameters()}
    out = lib.func.functional_call(model, new, (lib.ones(2, 5),))
    # every unit of the hidden layer is tanh(0.5 * 5 + 0.5) = tanh(3): out = 0.5 * 8 * tanh(3) + 0.5
    np.testing.assert_allclose(out.detach().numpy(), np.full((2, 3), 4 * np.tanh(3.0) + 0.5),
                               rtol=1e-6)
    for k, v in model.named_parameters():
        assert (v.detach() == before[k]).all()


def test_functional_call_tuple_of_dicts_kwargs_and_strict(lib):
    lin = lib.nn.Linear(2, 1)
    w, b = {"weight": lib.tensor([[1.0, 2.0]])}, {"bias": lib.tensor([0.5])}
    out = lib.func.functional_call(lin, (w, b), args=(), kwargs={"input": lib.tensor([3.0, 4.0])})
    assert out.tolist() == [11.5]
    with pytest.raises(RuntimeError, match=r"Error\(s\) in reparametrizing for Linear:\n\t"
                                           r"Unexpected key\(s\): 'foo'.\n\tMissing key\(s\): "
                                           r"'bias', 'weight'."):
        lib.func.functional_call(lin, {"foo": lib.ones(1)}, (lib.ones(2),), strict=True)
    with pytest.raises(ValueError, match=r"\['weight'\] appeared in multiple dictionaries; behavior of functional call is "
                                        "ambiguous"):
        lib.func.functional_call(lin, (w, w), (lib.ones(2),))


def test_functional_call_tied_weights(lib):
    emb = lib.nn.Linear(2, 2, bias=False)
    model = lib.nn.Sequential(emb, emb)
    out = lib.func.functional_call(model, {"0.weight": lib.eye(2) * 2}, (lib.ones(2),))
    assert out.tolist() == [4.0, 4.0]


def test_stack_module_state_ensemble_matches_loop():
    models = [_mlp(jitgrad, seed=s) for s in range(3)]
    params, buffers = stack_module_state(models)
    assert params["0.weight"].shape == (3, 8, 5) and params["0.weight"].requires_grad
    x = jitgrad.tensor(data(4, 5)).float()
    out = vmap(lambda p, b: functional_call(models[0], (p, b), (x,)))(params, buffers)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-6)


# ---- outer autograd ------------------------------------------------------------------------

def test_grad_result_is_differentiable_when_the_input_requires_grad(lib):
    x = lib.tensor([0.3, -1.2], requires_grad=True)
    g = lib.func.grad(lambda v: (v ** 3).sum())(x)
    (h,) = lib.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.detach().numpy(), 6 * x.detach().numpy())


def test_gradient_penalty_reaches_closed_over_parameters(lib):
    """grad of a model's output with respect to its input, then backward through
    that gradient to the model's parameters (WGAN-GP's penalty)."""
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 1))
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(lib.tensor(data(*p.shape, seed=i)).float())
    x = lib.tensor(data(5, 3)).float()
    g = lib.func.vmap(lib.func.grad(lambda v: model(v).sum()))(x)
    ((g.norm(dim=1) - 1) ** 2).mean().backward()
    weight = model[0].weight.grad.numpy()
    assert np.abs(weight).sum() > 0
    if lib is jitgrad:
        th = require_torch()
        th.manual_seed(0)
        ref = th.nn.Sequential(th.nn.Linear(3, 4), th.nn.Tanh(), th.nn.Linear(4, 1))
        with th.no_grad():
            for i, p in enumerate(ref.parameters()):
                p.copy_(th.tensor(data(*p.shape, seed=i)).float())
        gt = th.func.vmap(th.func.grad(lambda v: ref(v).sum()))(th.tensor(data(5, 3)).float())
        ((gt.norm(dim=1) - 1) ** 2).mean().backward()
        np.testing.assert_allclose(weight, ref[0].weight.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_results_do_not_require_grad_for_plain_inputs():
    x = jitgrad.tensor(data(4))
    assert not grad(lambda v: (v ** 3).sum())(x).requires_grad
    assert not jacrev(lambda v: v.sin())(x).requires_grad
    assert not jitgrad.func.hessian(lambda v: (v ** 3).sum())(x).requires_grad


# ---- errors: torch's wording, on both libraries -------------------------------------------

ERRORS = [
    (lambda L, x: L.func.grad(lambda a: a * 2)(x), RuntimeError,
     r"grad_and_value\(f\)\(\*args\): Expected f\(\*args\) to return a scalar Tensor, got tensor "
     r"with 2 dims. Maybe you wanted to use the vjp or jacrev APIs instead\?"),
    (lambda L, x: L.func.grad(lambda a: 3.0)(x), RuntimeError,
     r"Expected f\(\*args\) to return a Tensor, got <class 'float'>"),
    (lambda L, x: L.func.grad(lambda a: a.sum(), has_aux=True)(x), RuntimeError,
     r"output of function f should be a tuple: \(output, aux\) if has_aux is True"),
    (lambda L, x: L.func.grad(lambda a: a.sum(), argnums=1)(x), RuntimeError,
     r"Got argnum=1, but only 1 positional inputs"),
    (lambda L, x: L.func.grad(lambda a: a.sum(), argnums=1.0)(x), RuntimeError,
     r"argnums must be int or Tuple\[int, ...\], got: <class 'float'>"),
    (lambda L, x: L.func.grad(lambda a: a.sum(), argnums=())(x), RuntimeError,
     r"argnums must be non-empty"),
    (lambda L, x: L.func.grad(lambda a: a.sum())(L.arange(3)), RuntimeError,
     r"only Tensors of floating point dtype can require gradients"),
    (lambda L, x: L.func.grad(lambda a: a)(3.0), ValueError,
     r"Thing passed to transform API must be Tensor, got <class 'float'>"),
    (lambda L, x: L.func.vjp(lambda a: a * 2, x)[1]((x, x)), RuntimeError,
     r"Expected pytree structure of cotangents to be the same as pytree structure of outputs"),
    (lambda L, x: L.func.vjp(lambda a: a * 2, x)[1](x[:2]), RuntimeError,
     r"Mismatch in shape: grad_output\[0\] has a shape of .*\[2, 4\]\) and output\[0\] has a "
     r"shape of .*\[3, 4\]\)."),
    (lambda L, x: L.func.jvp(lambda a: a * 2, (x,), (x[:2],)), RuntimeError,
     r"Trying to set a forward gradient that has a different size than that of the original "
     r"Tensor, this is not supported. Tensor is of size \[3, 4\] while the given forward "
     r"gradient is of size \[2, 4\]."),
    (lambda L, x: L.func.jvp(lambda a: a * 2, x, x), RuntimeError,
     r"jvp\(f, primals, tangents\): Expected primals to be a tuple. E.g. it should be valid to "
     r"call f\(\*primals\)."),
    (lambda L, x: L.func.jvp(lambda a: a * 2, (x,), [x]), RuntimeError,
     r"Expected (primals and tangents to have the same python structure|tangents to be a tuple)"),
    (lambda L, x: L.func.jvp(lambda a: 3, (x,), (x,)), RuntimeError,
     r"jvp\(f, primals, tangents\): expected f\(\*primals\) to return only tensors, got "
     r"unsupported type <class 'int'>"),
    (lambda L, x: L.func.jacrev(lambda a: 3)(x), RuntimeError,
     r"vjp\(f, \*primals\): expected f\(\*primals\) to return only tensors, got unsupported type "
     r"<class 'int'>"),
]


@pytest.mark.parametrize("body, error, pattern", ERRORS)
def test_errors_match_torch(lib, body, error, pattern):
    x = lib.tensor(data(3, 4))
    with pytest.raises(error, match=pattern):
        body(lib, x)


def test_import_jitgrad_leaves_func_unloaded():
    out = run_isolated("import sys, jitgrad; print('jitgrad.func' in sys.modules); "
                       "jitgrad.func.vmap; print('jitgrad.func' in sys.modules)")
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_maml_second_order_per_task_grads_match_torch():
    """vmap over tasks of grad of a loss after one inner grad step (MAML): grad of
    grad inside vmap, with functional_call."""
    th = require_torch()
    rng = rng_for("maml")
    xs = rng.standard_normal((3, 5, 4)).astype(np.float32)
    ys = rng.standard_normal((3, 5, 2)).astype(np.float32)
    jg_model = jitgrad.nn.Sequential(jitgrad.nn.Linear(4, 6), jitgrad.nn.Tanh(),
                                     jitgrad.nn.Linear(6, 2))
    th_model = th.nn.Sequential(th.nn.Linear(4, 6), th.nn.Tanh(), th.nn.Linear(6, 2))
    _copy_params(jg_model, th_model, th)

    def meta_grads(L, model, xs, ys):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def inner_loss(p, x, y):
            return L.nn.functional.mse_loss(L.func.functional_call(model, p, (x,)), y)

        def task_loss(p, x, y):
            g = L.func.grad(inner_loss)(p, x, y)
            return inner_loss({k: p[k] - 0.1 * g[k] for k in p}, x, y)
        return L.func.vmap(L.func.grad(task_loss), in_dims=(None, 0, 0))(params, xs, ys)
    got = meta_grads(jitgrad, jg_model, jitgrad.tensor(xs), jitgrad.tensor(ys))
    want = meta_grads(th, th_model, th.tensor(xs), th.tensor(ys))
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=k)
