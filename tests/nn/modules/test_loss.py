"""Loss modules against torch.nn: values and gradients (input and target), options,
buffers, reprs and the legacy size_average/reduce flags."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 4))
PROB = RNG.uniform(0.02, 0.98, (5, 4))
TARGET01 = RNG.uniform(0.0, 1.0, (5, 4))
W4 = RNG.uniform(0.5, 2.0, 4)
W54 = RNG.uniform(0.5, 2.0, (5, 4))

# (module maker taking (nn, tensor)), input, target, does the target get a gradient)
CASES = {
    "l1": (lambda n, t: n.L1Loss(), X, TARGET01, True),
    "l1_sum": (lambda n, t: n.L1Loss(reduction="sum"), X, TARGET01, True),
    "smooth_l1": (lambda n, t: n.SmoothL1Loss(), X * 2, TARGET01, True),
    "smooth_l1_beta": (lambda n, t: n.SmoothL1Loss(beta=0.3, reduction="none"), X, TARGET01, True),
    "smooth_l1_beta0": (lambda n, t: n.SmoothL1Loss(beta=0.0), X, TARGET01, True),
    "huber": (lambda n, t: n.HuberLoss(), X * 2, TARGET01, True),
    "huber_delta": (lambda n, t: n.HuberLoss(delta=0.4, reduction="sum"), X, TARGET01, True),
    "bce": (lambda n, t: n.BCELoss(), PROB, TARGET01, True),
    "bce_weight": (lambda n, t: n.BCELoss(weight=t(W4), reduction="none"), PROB, TARGET01, True),
    "bce_hard_targets": (lambda n, t: n.BCELoss(reduction="sum"), PROB, np.round(TARGET01), True),
    "bce_logits": (lambda n, t: n.BCEWithLogitsLoss(), X * 3, TARGET01, True),
    "bce_logits_pos_weight": (lambda n, t: n.BCEWithLogitsLoss(pos_weight=t(W4)), X, TARGET01, True),
    "bce_logits_both": (lambda n, t: n.BCEWithLogitsLoss(weight=t(W54), pos_weight=t(W4),
                                                         reduction="sum"), X, TARGET01, True),
    "kl": (lambda n, t: n.KLDivLoss(reduction="batchmean"), np.log(PROB), TARGET01, True),
    "kl_sum": (lambda n, t: n.KLDivLoss(reduction="sum"), np.log(PROB), TARGET01, True),
    "kl_log_target": (lambda n, t: n.KLDivLoss(reduction="none", log_target=True), X, X[::-1].copy(),
                      True),
    "mse_weight": (lambda n, t: n.MSELoss(), X, TARGET01, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_module_matches_torch(name):
    make, x, t, target_grad = CASES[name]
    results = []
    for lib in (jitgrad, torch):
        loss = make(lib.nn, lib.tensor)
        xi = lib.tensor(x, requires_grad=True)
        ti = lib.tensor(t, requires_grad=target_grad)
        out = loss(xi, ti)
        (out * lib.tensor(np.ones(tuple(out.shape)) * 1.5)).sum().backward()
        results.append((out.detach().numpy(), xi.grad.numpy(), ti.grad.numpy(), repr(loss),
                        list(loss.state_dict())))
    (oj, gj, tj, rj, sj), (ot, gt, tt, rt, st) = results
    np.testing.assert_allclose(oj, ot, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gj, gt, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tj, tt, rtol=1e-9, atol=1e-12)
    assert rj == rt and sj == st


def test_bce_at_zero_and_one_is_finite_like_torch():
    x = np.array([0.0, 1.0, 1e-30, 1 - 1e-12])
    t = np.array([1.0, 0.0, 0.5, 0.5])
    results = []
    for lib in (jitgrad, torch):
        xi = lib.tensor(x, requires_grad=True)
        ti = lib.tensor(t, requires_grad=True)
        out = lib.nn.functional.binary_cross_entropy(xi, ti, reduction="none")
        out.sum().backward()
        results.append([out.detach().numpy(), xi.grad.numpy(), ti.grad.numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9)


@pytest.mark.parametrize("cls, kwargs, reduction", [
    ("L1Loss", dict(size_average=False), "sum"), ("SmoothL1Loss", dict(reduce=False), "none"),
    ("KLDivLoss", dict(size_average=True, reduce=True), "mean"),
    ("BCELoss", dict(size_average=False), "sum"), ("BCEWithLogitsLoss", dict(reduce=False), "none"),
])
def test_legacy_flags_set_the_reduction_with_torchs_warning(cls, kwargs, reduction):
    with pytest.warns(UserWarning, match=f"please use reduction='{reduction}' instead"):
        loss = getattr(nn, cls)(**kwargs)
    assert loss.reduction == reduction == getattr(torch.nn, cls)(**kwargs).reduction


def test_reprs_match_torch():
    def build(n, t):
        return [n.L1Loss(), n.SmoothL1Loss(beta=0.5), n.HuberLoss(delta=2.0), n.BCELoss(),
                n.BCEWithLogitsLoss(pos_weight=t([1.0])), n.KLDivLoss(log_target=True)]
    for a, b in zip(build(nn, jitgrad.tensor), build(torch.nn, torch.tensor)):
        assert repr(a) == repr(b)
