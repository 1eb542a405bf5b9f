"""jitgrad.func.vmap against torch.func.vmap: the same function body, written once
against the shared API (`lib` is jitgrad or torch), on the same inputs."""
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.func import _batched, vmap
from jitgrad.func._pytree import tree_flatten

from helpers import assert_same, require_torch, rng_for


def _torch_tree(tree, th):
    """The same nested structure with numpy arrays made torch tensors."""
    if isinstance(tree, np.ndarray):
        return th.tensor(tree)
    if isinstance(tree, dict):
        return {k: _torch_tree(v, th) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_torch_tree(v, th) for v in tree)
    return tree


def _jitgrad_tree(tree):
    if isinstance(tree, np.ndarray):
        return jitgrad.tensor(tree)
    if isinstance(tree, dict):
        return {k: _jitgrad_tree(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_jitgrad_tree(v) for v in tree)
    return tree


def compare(body, *arrays, rtol=1e-6, atol=1e-6):
    """body(lib, *inputs) on jitgrad and on torch: the same results (nested too)."""
    th = require_torch()
    jg = body(jitgrad, *_jitgrad_tree(arrays))
    ref = body(th, *_torch_tree(arrays, th))
    jl, jspec = tree_flatten(jg)
    tl, _ = tree_flatten(ref if not isinstance(ref, th.Tensor) else ref)
    assert len(jl) == len(tl), f"{len(jl)} results, torch has {len(tl)}"
    for i, (a, b) in enumerate(zip(jl, tl)):
        if isinstance(b, th.Tensor):
            assert type(a) is jitgrad.Tensor, f"result {i} is a {type(a).__name__}"
            assert_same(a, b, rtol, atol, what=f"result {i}")
        else:
            assert a == b


def data(*shape, seed=0, kind="float"):
    rng = rng_for("vmap", shape, seed)
    if kind == "int":
        return rng.integers(0, 3, shape)
    return rng.standard_normal(shape)


def F(lib):
    return lib.nn.functional


X, Y = data(3, 4), data(3, 4, seed=1)
X3 = data(3, 4, 5)

# (name, body(lib, *inputs), inputs): each runs under lib.func.vmap on both libraries
CASES = [
    ("unary", lambda L, x: L.func.vmap(lambda r: r.sin() * r.exp())(x), (X,)),
    ("binary", lambda L, x, y: L.func.vmap(lambda a, b: a * b - a / (1 + b * b))(x, y), (X, Y)),
    ("broadcast_higher_rank_unbatched",
     lambda L, x, m: L.func.vmap(lambda r: r + m)(x), (X, data(2, 4))),
    ("scalar_operand", lambda L, x: L.func.vmap(lambda r: 2.0 ** r + 1)(x), (X,)),
    ("in_dims_1", lambda L, x: L.func.vmap(lambda c: c * c.sum(), in_dims=1)(x), (X,)),
    ("in_dims_negative", lambda L, x: L.func.vmap(lambda c: c.cumsum(0), in_dims=-1)(x), (X,)),
    ("in_dims_none", lambda L, x, w: L.func.vmap(lambda r, w: r @ w, in_dims=(0, None))(x, w),
     (X, data(4, 2))),
    ("in_dims_nested", lambda L, x, y: L.func.vmap(
        lambda p: p[0] * p[1], in_dims=((0, 1),))((x, y.T)), (X, Y)),
    ("dict_input", lambda L, x, y: L.func.vmap(lambda d: d["a"] - d["b"])({"a": x, "b": y}),
     (X, Y)),
    ("out_dims_1", lambda L, x: L.func.vmap(lambda r: r * 2, out_dims=1)(x), (X,)),
    ("out_dims_tuple", lambda L, x: L.func.vmap(lambda r: (r, r.sum()), out_dims=(1, 0))(x),
     (X,)),
    ("out_unbatched_expanded", lambda L, x, w: L.func.vmap(lambda r: w * 1)(x), (X, data(2))),
    ("nested", lambda L, x, y: L.func.vmap(L.func.vmap(lambda a, b: a * b + a.sum()))(x, y),
     (X, Y)),
    ("nested_in_dims", lambda L, a, b: L.func.vmap(
        L.func.vmap(lambda p, q: p * q, in_dims=(None, 0)), in_dims=(0, None))(a, b),
     (data(3), data(5))),
    ("chunk_size", lambda L, x: L.func.vmap(lambda r: r.softmax(0), chunk_size=2)(x), (X,)),
    # reductions
    ("sum_all", lambda L, x: L.func.vmap(lambda r: r.sum())(x), (data(3, 2, 4),)),
    ("sum_dim_keepdim", lambda L, x: L.func.vmap(lambda r: r.sum(-1, keepdim=True))(x),
     (data(3, 2, 4),)),
    ("mean_dims", lambda L, x: L.func.vmap(lambda r: r.mean((0, 1)))(x), (data(3, 2, 4),)),
    ("var_std", lambda L, x: L.func.vmap(lambda r: r.var(0) + r.std())(x), (data(3, 2, 4),)),
    ("prod", lambda L, x: L.func.vmap(lambda r: r.prod() + r.prod(1).sum())(x),
     (data(3, 2, 4),)),
    ("max_min", lambda L, x: L.func.vmap(lambda r: r.max() - r.min(0).values.sum())(x),
     (data(3, 2, 4),)),
    ("argmax", lambda L, x: L.func.vmap(lambda r: (r.argmax(), r.argmin(1)))(x), (data(3, 2, 4),)),
    ("amax_logsumexp", lambda L, x: L.func.vmap(lambda r: r.amax(1) + r.logsumexp(1))(x),
     (data(3, 2, 4),)),
    ("norm", lambda L, x: L.func.vmap(lambda r: r.norm() + r.norm(dim=1).sum())(x),
     (data(3, 2, 4),)),
    ("scalar_samples", lambda L, x: L.func.vmap(lambda s: s.sum() + s.softmax(0))(x), (data(5),)),
    # views
    ("view_reshape", lambda L, x: L.func.vmap(lambda r: r.view(2, 2).t().reshape(-1))(x), (X,)),
    ("transpose_permute", lambda L, x: L.func.vmap(
        lambda r: r.transpose(0, 2).permute(1, 0, 2).flatten())(x), (data(3, 2, 4, 5),)),
    ("squeeze_unsqueeze", lambda L, x: L.func.vmap(
        lambda r: r.unsqueeze(0).unsqueeze(-1).squeeze() + r.squeeze(0).sum())(x),
     (data(3, 1, 4),)),
    ("expand", lambda L, x: L.func.vmap(lambda r: r.unsqueeze(0).expand(3, 4) * 2)(x), (X,)),
    ("movedim_flip", lambda L, x: L.func.vmap(lambda r: r.movedim(0, 1).flip(0))(x),
     (data(3, 2, 4),)),
    ("getitem_basic", lambda L, x: L.func.vmap(lambda r: r[1:3] * r[0] + r[..., -1])(x), (X,)),
    ("getitem_index_tensor", lambda L, x, i: L.func.vmap(lambda r: r[:, i])(x),
     (data(3, 2, 4), np.array([3, 0]))),
    ("getitem_batched_index", lambda L, x, i: L.func.vmap(lambda r, j: r[j])(x, i),
     (X, np.array([[0, 1], [2, 2], [3, 0]]))),
    ("select_narrow", lambda L, x: L.func.vmap(lambda r: r.select(0, 1) + r.narrow(1, 1, 2).sum())(x),
     (data(3, 2, 4),)),
    # join
    ("cat_stack", lambda L, x, w: L.func.vmap(
        lambda r: L.cat([r, r * 2, w]) + L.stack([r, w]).sum(0).repeat(3))(x), (X, data(4))),
    ("split_chunk_unbind", lambda L, x: L.func.vmap(
        lambda r: r.split(1)[1] * r.chunk(2, 1)[0].sum() + sum(r.unbind(0)))(x),
     (data(3, 2, 4),)),
    # linear algebra
    ("vec_mat", lambda L, x, w: L.func.vmap(lambda r: r @ w)(x, ), (X, data(4, 5))),
    ("mat_vec", lambda L, x, w: L.func.vmap(lambda r: w @ r)(x), (X, data(5, 4))),
    ("dot_outer", lambda L, x, y: L.func.vmap(lambda a, b: L.outer(a, b) * L.dot(a, b))(x, y),
     (X, Y)),
    ("mat_mat_both", lambda L, a, b: L.func.vmap(L.matmul)(a, b), (data(3, 2, 4), data(3, 4, 5))),
    ("batched_matmul_unbatched", lambda L, a, b: L.func.vmap(lambda m: m @ b)(a),
     (data(3, 2, 5, 4), data(2, 4, 6))),
    ("vec_mat_both", lambda L, a, m: L.func.vmap(L.matmul)(a, m), (X, data(3, 4, 2))),
    ("stack_of_matrices_vec", lambda L, m, v: L.func.vmap(lambda t: t @ v)(m),
     (data(3, 2, 5, 4), data(4))),
    ("vec_stack_of_matrices", lambda L, m, v: L.func.vmap(lambda t: v @ t)(m),
     (data(3, 2, 4, 5), data(4))),
    ("mm_unbatched_left", lambda L, a, b: L.func.vmap(lambda m: L.mm(b, m))(a),
     (data(3, 4, 2), data(5, 4))),
    # nn
    ("softmax_log_softmax", lambda L, x: L.func.vmap(lambda r: r.softmax(-1) + r.log_softmax(0))(x),
     (data(3, 2, 4),)),
    ("linear_relu", lambda L, x, w, b: L.func.vmap(lambda r: F(L).relu(F(L).linear(r, w, b)))(x),
     (X, data(5, 4), data(5))),
    ("mse_loss", lambda L, x, y: L.func.vmap(F(L).mse_loss)(x, y), (X, Y)),
    ("cross_entropy", lambda L, x, t: L.func.vmap(
        lambda a, b: F(L).cross_entropy(a, b) + F(L).cross_entropy(a, b, reduction="sum"))(x, t),
     (data(3, 4, 5), np.array([[0, 4, 1, 2], [3, 3, 0, 1], [2, 1, 4, 4]]))),
    ("layer_norm", lambda L, x: L.func.vmap(lambda r: F(L).layer_norm(r, (4,)))(x), (X,)),
    ("gelu_silu", lambda L, x: L.func.vmap(lambda r: F(L).gelu(r) * F(L).silu(r))(x), (X,)),
    ("where_clamp", lambda L, x, y: L.func.vmap(
        lambda a, b: L.where(a > b, a, b).clamp(-0.5, 0.5))(x, y), (X, Y)),
    ("gather", lambda L, x, i: L.func.vmap(lambda r: r.gather(1, i))(x),
     (data(3, 2, 4), np.array([[0, 3], [1, 1]]))),
    ("gather_batched_index", lambda L, x, i: L.func.vmap(lambda r, j: r.gather(0, j))(x, i),
     (X, np.array([[0, 1], [2, 2], [3, 0]]))),
    ("to_dtype", lambda L, x: L.func.vmap(lambda r: r.float() * 2)(x), (X,)),
    ("embedding", lambda L, i, w: L.func.vmap(lambda j: F(L).embedding(j, w))(i),
     (np.array([[0, 2], [1, 1], [3, 0]]), data(4, 5))),
    ("binary_cross_entropy", lambda L, x, t: L.func.vmap(
        lambda a, b: F(L).binary_cross_entropy(a.sigmoid(), b) + F(L).binary_cross_entropy(
            a.sigmoid(), b, weight=L.tensor([1.0, 2.0, 0.5, 1.0, 3.0]), reduction="sum"))(x, t),
     (data(3, 4, 5), np.random.default_rng(0).uniform(size=(3, 4, 5)))),
    ("binary_cross_entropy_with_logits", lambda L, x, t: L.func.vmap(
        lambda a, b: F(L).binary_cross_entropy_with_logits(
            a, b, pos_weight=L.tensor([1.0, 2.0, 0.5, 1.0, 3.0]), reduction="none"))(x, t),
     (data(3, 4, 5), np.random.default_rng(1).uniform(size=(3, 4, 5)))),
    # more ops, composites among them
    ("einsum_cdist", lambda L, x: L.func.vmap(
        lambda a: L.einsum("ij,kj->ik", a, a) + L.cdist(a, a))(x), (X3,)),
    ("normalize_cosine", lambda L, x: L.func.vmap(
        lambda a: F(L).normalize(a, dim=1) * F(L).cosine_similarity(a, a * 2 + 1)[:, None])(x),
     (X3,)),
    ("tril_diagonal", lambda L, x: L.func.vmap(lambda a: a.tril() + a.diagonal().sum())(x), (X3,)),
    ("sort_topk_argsort", lambda L, x: L.func.vmap(
        lambda a: a.topk(2).values + a.sort(1).values[:, :2] + a.argsort(0)[:, :2])(x), (X3,)),
    ("cumprod_roll", lambda L, x: L.func.vmap(lambda a: a.cumprod(1) + a.roll(1, 0))(x), (X3,)),
    ("isnan_all", lambda L, x: L.func.vmap(lambda a: (a.isnan() | (a > 0)).all(1))(x), (X3,)),
    ("clamp_min_addcmul", lambda L, x: L.func.vmap(
        lambda a: L.addcmul(a.clamp_min(0), a, a, value=0.5))(x), (X3,)),
    ("tile_baddbmm", lambda L, x: L.func.vmap(
        lambda a: a.tile((2, 1)).sum() + L.baddbmm(a[:1], a[None], a.T[None]))(x),
     (data(3, 4, 4),)),
    ("index_select_fill", lambda L, x: L.func.vmap(
        lambda a: a.index_select(1, L.tensor([0, 3])) + a.index_fill(1, L.tensor([1]), 2.0)[:, :2])(x),
     (X3,)),
    ("repeat_interleave_unfold", lambda L, x: L.func.vmap(
        lambda a: a.repeat_interleave(2, dim=1)[:, :4] + a.unfold(1, 2, 1).sum(-1))(x), (X3,)),
    ("group_norm_attention", lambda L, x: L.func.vmap(
        lambda a: F(L).group_norm(a[None], 2) + F(L).scaled_dot_product_attention(
            a[None], a[None], a[None]))(x), (data(3, 4, 5),)),
    # in place
    ("inplace_batched", lambda L, x, y: L.func.vmap(lambda a, b: a.clone().mul_(2).add_(b))(x, y),
     (X, Y)),
    ("inplace_unbatched_other", lambda L, x, w: L.func.vmap(lambda a: a.clone().sub_(w))(x),
     (X, data(4))),
    ("setitem", lambda L, x: L.func.vmap(lambda a: _set(a.clone()))(x), (X,)),
    ("setitem_batched_value", lambda L, x, y: L.func.vmap(
        lambda a, b: _set(a.clone().reshape(2, 2), b[:2]))(x, y), (X, Y)),
    ("setitem_index_tensor", lambda L, x: L.func.vmap(
        lambda a: _set(a.clone(), 5.0, L.tensor([0, 2])))(x), (X,)),
]


def _set(a, value=0.0, key=1):
    a[key] = value
    return a


@pytest.mark.parametrize("body, inputs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_vmap_matches_torch(body, inputs):
    compare(body, *inputs)


def test_cases_run_without_the_per_sample_loop():
    """Each case above has a batching rule for every op it calls: no loop warning
    (getitem with a batched index, setitem with an index tensor excepted)."""
    looping = {"getitem_batched_index", "setitem_index_tensor"}
    for name, body, inputs in CASES:
        _batched._warned.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            body(jitgrad, *_jitgrad_tree(inputs))
        slow = [str(w.message) for w in caught if "performance drop" in str(w.message)]
        assert bool(slow) == (name in looping), (name, slow)


def test_loop_fallback_warns_once_naming_the_op():
    x = jitgrad.tensor(data(3, 4))
    _batched._warned.clear()
    with pytest.warns(UserWarning, match="batching rule for repeat_interleave"):
        out = vmap(lambda r: r.repeat_interleave(2))(x)
    np.testing.assert_allclose(out.numpy(), np.repeat(x.numpy(), 2, axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vmap(lambda r: r.repeat_interleave(2))(x)


def test_loop_fallback_is_differentiable():
    x = jitgrad.tensor(data(3, 4), requires_grad=True)
    _batched._warned.clear()
    with pytest.warns(UserWarning):
        vmap(lambda r: r.repeat_interleave(2) * r.repeat_interleave(2))(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy())


def test_grad_flows_through_vmap():
    th = require_torch()

    def body(L, x, w):
        w = w.requires_grad_() if L is jitgrad else w.requires_grad_()
        out = L.func.vmap(lambda r: (r @ w).tanh().sum())(x).pow(2).sum()
        return L.autograd.grad(out, w)[0]
    compare(body, X, data(4, 2))
    assert th is not None


def test_batched_tensor_looks_like_one_sample():
    seen = {}

    def f(r):
        seen.update(shape=r.shape, ndim=r.dim(), numel=r.numel(), len=len(r), dtype=r.dtype)
        return r
    vmap(f, in_dims=1)(jitgrad.zeros(2, 3, 4))
    assert seen == dict(shape=jitgrad.Size([2, 4]), ndim=2, numel=8, len=2, dtype=jitgrad.float32)


def test_repr_names_level_and_batch_dim():
    got = []
    vmap(lambda r: got.append(repr(r)) or r)(jitgrad.tensor([1.0, 2.0]))
    assert got[0].startswith("BatchedTensor(lvl=") and "bdim=0" in got[0]


def test_randomness_modes():
    x = jitgrad.zeros(4, 3)
    with pytest.raises(RuntimeError, match="vmap: called random operation while in randomness "
                                           "error mode"):
        vmap(lambda r: r + jitgrad.randn(3))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda r: jitgrad.rand_like(r))(x)
    same = vmap(lambda r: r + jitgrad.randn(3), randomness="same")(x).numpy()
    assert np.all(same == same[0])
    different = vmap(lambda r: r + jitgrad.randn(3), randomness="different")(x).numpy()
    assert len({tuple(row) for row in different}) == 4
    like = vmap(lambda r: jitgrad.rand_like(r), randomness="different")(x).numpy()
    assert len({tuple(row) for row in like}) == 4
    drop = vmap(lambda r: jitgrad.nn.functional.dropout(r + 1, 0.5), randomness="same")(x)
    assert np.all(drop.numpy() == drop.numpy()[0])


# ---- errors: torch's wording, checked on both libraries -------------------------------------

ERRORS = [
    (lambda L, x: L.func.vmap(lambda a, b: a + b, in_dims=(0,))(x, x), ValueError,
     r"in_dims is not compatible with the structure of `inputs`"),
    (lambda L, x: L.func.vmap(lambda a, b: a + b)(x, x[:2]), ValueError,
     r"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
     r"\[3, 2\] for the mapped dimension"),
    (lambda L, x: L.func.vmap(lambda a: a, in_dims=2)(x), ValueError,
     r"Got in_dim=2 for some input, but that input is a Tensor of dimensionality 2 so expected "
     r"in_dim to satisfy -2 <= in_dim < 2"),
    (lambda L, x: L.func.vmap(lambda a: a, in_dims="a")(x), ValueError,
     r"expected `in_dims` to be int or a \(potentially nested\) tuple matching the structure of "
     r"inputs, got: <class 'str'>"),
    (lambda L, x: L.func.vmap(lambda a, b: a, in_dims=(0, 0))(x, 3), ValueError,
     r"We cannot vmap over non-Tensor arguments, please use None as the respective in_dim"),
    (lambda L, x: L.func.vmap(lambda a: a, in_dims=(None,))(x), ValueError,
     r"vmap: Expected at least one Tensor to vmap over"),
    (lambda L, x: L.func.vmap(lambda a: 3)(x), ValueError,
     r"must only return Tensors, got type <class 'int'>. Did you mean to set out_dims= to None"),
    (lambda L, x: L.func.vmap(lambda a: a, out_dims=None)(x), ValueError,
     r"can not return a BatchedTensor when out_dim is None"),
    (lambda L, x: L.func.vmap(lambda a: (a, a), out_dims=(0,))(x), ValueError,
     r"out_dims is not compatible with the structure of `outputs`"),
    (lambda L, x: L.func.vmap(lambda a: a.sum().item())(x), RuntimeError,
     r"vmap: It looks like you're calling .item\(\) on a Tensor. We don't support vmap over "
     r"calling .item\(\) on a Tensor"),
    (lambda L, x: L.func.vmap(lambda a: a if a.sum() > 0 else -a)(x), RuntimeError,
     r"vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow"),
    (lambda L, x: L.func.vmap(lambda a: a, randomness="foo")(x), RuntimeError,
     r"Only allowed values for randomness are 'error', 'different', or 'same'. Got foo"),
    (lambda L, x: L.func.vmap(lambda a: a, chunk_size=0)(x), ValueError,
     r"vmap: chunk_size should be None or greater than 0. \(got 0\)"),
    (lambda L, x: L.func.vmap(lambda a: a.sum().backward())(x.requires_grad_()), RuntimeError,
     r"backward\(\) called inside a functorch transform"),
    (lambda L, x: L.func.vmap(lambda a: L.zeros(4).add_(a))(x), RuntimeError, None),
]


@pytest.mark.parametrize("body, error, pattern", ERRORS)
def test_errors_match_torch(lib, body, error, pattern):
    x = lib.tensor(data(3, 4))
    with pytest.raises(error, match=pattern) as info:
        body(lib, x)
    assert pattern is not None or str(info.value)


def test_escaped_batched_tensor_is_refused():
    kept = []
    vmap(lambda r: kept.append(r) or r)(jitgrad.ones(2, 3))
    with pytest.raises(RuntimeError, match="a tensor batched by a vmap that has returned"):
        vmap(lambda r: r + kept[0])(jitgrad.ones(2, 3))
    with pytest.raises(RuntimeError, match="a tensor batched by a vmap that has returned"):
        kept[0] + 1


def test_vmap_inside_compile_runs_eagerly():
    f = jitgrad.compile(lambda x: vmap(lambda r: r.sin().sum())(x) * 2)
    x = jitgrad.tensor(data(3, 4))
    np.testing.assert_allclose(f(x).numpy(), 2 * np.sin(x.numpy()).sum(1), rtol=1e-6)


# ---- ops declared by users ------------------------------------------------------------------

def test_users_elementwise_op_is_batched_by_the_generated_rule(register):
    softsign = register("vmap_softsign", out="x / (1 + abs(x))",
                        x="1 / ((1 + abs(x)) * (1 + abs(x)))")
    x = jitgrad.tensor(data(3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = vmap(lambda r, w: softsign(r * w), in_dims=(1, None))(x, jitgrad.tensor(2.0))
    xs = x.numpy().T * 2
    np.testing.assert_allclose(out.numpy(), xs / (1 + np.abs(xs)), rtol=1e-6)


def _declare(name, rule):
    from jitgrad.ops.registry import op

    @op(f"{name}Backward0", backward=lambda node, g: (g * 3,), name=name, vmap=rule)
    def triple_last(x):
        out = jitgrad.Tensor(x._data * 3)
        return triple_last.op.emit(out, (x,))
    return triple_last


@pytest.mark.parametrize("rule", [None, "same"])
def test_users_declared_op_with_and_without_a_rule(rule):
    from jitgrad.ops.registry import SAME, unregister
    name = f"vmap_triple_{rule}"
    fn = _declare(name, SAME if rule else None)
    try:
        x = jitgrad.tensor(data(3, 4), requires_grad=True)
        _batched._warned.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = vmap(fn)(x)
        assert any(name in str(w.message) for w in caught) == (rule is None)
        np.testing.assert_allclose(out.detach().numpy(), 3 * x.detach().numpy())
        out.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 3.0))
    finally:
        unregister(name)
