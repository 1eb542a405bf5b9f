"""jitgrad.nn.functional against torch.nn.functional, beyond the registry-driven tests
(tests/ops/test_registry.py compares every registered function on its samples): torch's
signatures, the options that change gradients on purpose (ignore_index, label smoothing
with class weights), running statistics of batch_norm, and the error messages."""
import inspect
import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F

import helpers

torch = pytest.importorskip("torch")
TF = torch.nn.functional

NAMES = ["relu", "selu", "celu", "threshold", "silu", "leaky_relu", "elu", "hardtanh", "relu6", "hardswish", "hardsigmoid", "mish",
         "softsign", "tanhshrink", "glu", "softmin", "normalize", "group_norm",
         "softmax", "log_softmax", "embedding", "batch_norm", "dropout1d", "dropout2d",
         "dropout3d", "margin_ranking_loss", "triplet_margin_loss", "cosine_embedding_loss",
         "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
         "binary_cross_entropy_with_logits", "kl_div", "nll_loss", "cross_entropy"]


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_torch(name):
    """Same parameter names, order and defaults: positional calls port unchanged."""
    ours = inspect.signature(getattr(F, name)).parameters
    theirs = inspect.signature(getattr(TF, name)).parameters
    assert [(p.name, p.default) for p in ours.values()] == \
        [(p.name, p.default) for p in theirs.values()]


def both_ways(fn, *arrays, int_args=()):
    """fn(lib, *tensors) for jitgrad and torch: outputs and gradients of every float input."""
    results = []
    for lib in (jitgrad, torch):
        ts = [lib.tensor(a) if i in int_args else lib.tensor(a, requires_grad=True)
              for i, a in enumerate(arrays)]
        out = fn(lib, *ts)
        w = np.random.default_rng(0).standard_normal(tuple(out.shape))
        leaves = [t for i, t in enumerate(ts) if i not in int_args]
        grads = lib.autograd.grad((out * lib.tensor(w)).sum(), leaves)
        results.append([out] + list(grads))
    for i, (a, b) in enumerate(zip(*results)):
        helpers.assert_same(a, b, rtol=1e-9, atol=1e-12, what=f"result {i}")


RNG = np.random.default_rng(11)
LOGITS = RNG.standard_normal((8, 5))
LOGITS3 = RNG.standard_normal((4, 5, 3))
CLASSES = RNG.integers(0, 5, 8)
CLASSES3 = RNG.integers(0, 5, (4, 3))
WEIGHT = RNG.uniform(0.5, 2.0, 5)


@pytest.mark.parametrize("kwargs", [
    dict(), dict(ignore_index=2), dict(ignore_index=2, reduction="sum"),
    dict(weight=True, ignore_index=1), dict(weight=True, reduction="none", ignore_index=3),
    dict(label_smoothing=0.2, ignore_index=4), dict(weight=True, label_smoothing=0.3),
    dict(weight=True, label_smoothing=0.1, ignore_index=0, reduction="sum"),
    dict(weight=True, label_smoothing=0.25, ignore_index=2, reduction="none"),
], ids=str)
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("rank", [2, 3])
def test_class_losses_with_weights_ignore_index_and_smoothing(loss, kwargs, rank):
    if loss == "nll_loss" and "label_smoothing" in kwargs:
        pytest.skip("nll_loss has no label_smoothing")
    x, t = (LOGITS, CLASSES) if rank == 2 else (LOGITS3, CLASSES3)

    def run(lib, x, t):
        kw = dict(kwargs, weight=lib.tensor(WEIGHT)) if kwargs.get("weight") else kwargs
        inp = x if loss == "cross_entropy" else x.log_softmax(1)
        return getattr(lib.nn.functional, loss)(inp, t, **kw)
    both_ways(run, x, t, int_args=(1,))


def test_cross_entropy_probability_targets_with_weight_and_smoothing():
    probs = RNG.dirichlet(np.ones(5), 8)

    def run(lib, x, p):
        return lib.nn.functional.cross_entropy(x, p, weight=lib.tensor(WEIGHT),
                                               label_smoothing=0.2)
    both_ways(run, LOGITS, probs)


def test_nll_loss_every_target_ignored_is_nan_like_torch():
    def run(lib):
        return lib.nn.functional.nll_loss(lib.tensor(LOGITS), lib.tensor(np.full(8, 3)),
                                          ignore_index=3)
    assert np.isnan(run(jitgrad).item()) and np.isnan(run(torch).item())


def test_batch_norm_updates_running_statistics_like_torch():
    x = RNG.standard_normal((6, 3, 2))
    stats = {}
    for lib in (jitgrad, torch):
        mean, var = lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)
        for momentum in (0.1, 0.5):
            out = lib.nn.functional.batch_norm(lib.tensor(x), mean, var, training=True,
                                               momentum=momentum)
        eval_out = lib.nn.functional.batch_norm(lib.tensor(x), mean, var, lib.tensor(WEIGHT[:3]),
                                                lib.tensor(WEIGHT[2:]), eps=1e-3)
        stats[lib.__name__] = (mean, var, out, eval_out)
    for a, b in zip(stats["jitgrad"], stats["torch"]):
        helpers.assert_same(a, b, rtol=1e-10, atol=1e-12)


def test_softmax_dim_none_warns_and_picks_torchs_dim():
    x = RNG.standard_normal((2, 3, 4))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been "
                                         "deprecated. Change the call to include dim=X"):
        a = F.softmax(jitgrad.tensor(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = TF.softmax(torch.tensor(x))
    helpers.assert_same(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("indices, num_classes", [([[0, 2], [1, 1]], -1), ([3, 0], 5), ([], 4),
                                                   ([[[1]]], 2)])
def test_one_hot_matches_torch(indices, num_classes):
    a = F.one_hot(jitgrad.tensor(indices, dtype=jitgrad.int64), num_classes)
    b = TF.one_hot(torch.tensor(indices, dtype=torch.int64), num_classes)
    helpers.assert_same(a, b, rtol=0, atol=0)


def test_normalize_matches_torch_at_zero_rows():
    x = np.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]])
    both_ways(lambda lib, t: lib.nn.functional.normalize(t), x)
    both_ways(lambda lib, t: lib.nn.functional.normalize(t, p=1.0, dim=0), x + 1)


def test_kl_div_mean_warns_like_torch():
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(jitgrad.zeros(2, 3), jitgrad.ones(2, 3))


def _error(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib)
    return info.value


ERRORS = {
    "bce input range": lambda l: l.nn.functional.binary_cross_entropy(
        l.tensor([0.5, 1.5]), l.tensor([0.0, 1.0])),
    "bce nan input": lambda l: l.nn.functional.binary_cross_entropy(
        l.tensor([0.5, float("nan")]), l.tensor([0.0, 1.0])),
    "bce target range": lambda l: l.nn.functional.binary_cross_entropy(
        l.tensor([0.5, 0.5]), l.tensor([0.0, -1.0])),
    "bce sizes": lambda l: l.nn.functional.binary_cross_entropy(
        l.tensor([0.5, 0.5]), l.tensor([0.0, 1.0, 1.0])),
    "bce reduction": lambda l: l.nn.functional.binary_cross_entropy(
        l.tensor([0.5]), l.tensor([0.0]), reduction="avg"),
    "bce logits sizes": lambda l: l.nn.functional.binary_cross_entropy_with_logits(
        l.zeros(2), l.zeros(3)),
    "smooth_l1 beta": lambda l: l.nn.functional.smooth_l1_loss(l.zeros(2), l.zeros(2), beta=-1),
    "huber delta": lambda l: l.nn.functional.huber_loss(l.zeros(2), l.zeros(2), delta=0.0),
    "l1 reduction": lambda l: l.nn.functional.l1_loss(l.zeros(2), l.zeros(2), reduction="x"),
    "l1 weight shape": lambda l: l.nn.functional.l1_loss(l.zeros(2), l.zeros(2),
                                                         weight=l.ones(3)),
    "mse weighted reduction": lambda l: l.nn.functional.mse_loss(
        l.zeros(2), l.zeros(2), weight=l.ones(2), reduction="x"),
    "kl reduction": lambda l: l.nn.functional.kl_div(l.zeros(2), l.zeros(2), reduction="x"),
    "bn one value": lambda l: l.nn.functional.batch_norm(l.zeros(1, 3), None, None,
                                                         training=True),
    "bn eval without stats": lambda l: l.nn.functional.batch_norm(l.zeros(4, 3), None, None),
    "bn running_mean size": lambda l: l.nn.functional.batch_norm(l.zeros(4, 3), l.zeros(4),
                                                                 l.ones(4)),
    "bn weight size": lambda l: l.nn.functional.batch_norm(l.zeros(4, 3), None, None,
                                                           l.ones(2), training=True),
    "bn eps": lambda l: l.nn.functional.batch_norm(l.zeros(4, 3), None, None, training=True,
                                                   eps=0.0),
    "embedding index": lambda l: l.nn.functional.embedding(l.tensor([3]), l.zeros(3, 2)),
    "embedding padding": lambda l: l.nn.functional.embedding(l.tensor([0]), l.zeros(3, 2),
                                                             padding_idx=3),
    "one_hot float": lambda l: l.nn.functional.one_hot(l.tensor([1.0])),
    "one_hot negative": lambda l: l.nn.functional.one_hot(l.tensor([-1])),
    "one_hot too large": lambda l: l.nn.functional.one_hot(l.tensor([3]), 3),
    "one_hot empty": lambda l: l.nn.functional.one_hot(l.tensor([], dtype=l.int64)),
    "glu odd": lambda l: l.nn.functional.glu(l.zeros(3, 5)),
    "prelu channels": lambda l: l.nn.functional.prelu(l.zeros(2, 4), l.ones(3)),
    "hardtanh bounds": lambda l: l.nn.functional.hardtanh(l.zeros(2), 1.0, -1.0),
    "group_norm groups": lambda l: l.nn.functional.group_norm(l.zeros(2, 3), 2),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_torch(case):
    e_jg, e_th = _error(ERRORS[case], jitgrad), _error(ERRORS[case], torch)
    assert type(e_jg) is type(e_th)
    assert str(e_jg) == str(e_th).replace("torch.Size", "jitgrad.Size")


def test_class_weights_that_require_grad_are_refused_before_anything_runs():
    w = jitgrad.ones(2, requires_grad=True)
    for fn in (lambda: F.binary_cross_entropy(jitgrad.full((2,), 0.5), jitgrad.ones(2), w),
               lambda: F.binary_cross_entropy_with_logits(jitgrad.zeros(2), jitgrad.ones(2),
                                                          pos_weight=w)):
        with pytest.raises(RuntimeError, match=r"not differentiable with respect to argument "
                                               r"'(pos_)?weight'.*\.detach\(\) instead"):
            fn()
