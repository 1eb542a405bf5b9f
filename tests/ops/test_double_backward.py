"""Gradients taken with create_graph=True, against torch, for every registry op:
a first-order gradient requires grad exactly where torch's does (torch's
ThresholdBackwardBackward0 for relu, NllLossBackwardBackward0 for nll_loss:
functions of the input with derivative 0), and a gradient penalty
sum(grad ** 2) differentiates to torch's values."""
import numpy as np
import pytest

import jitgrad
from jitgrad.ops.registry import FUNCTIONS, REGISTRY, call

import helpers
from registry_cases import (DIFFERENTIABLE, INPLACE_KERNELS, function_samples, op_sample,
                            torch_function)

# torch's layer_norm and batch_norm are one node whose backward reads the input for every output,
# the bias gradient included; jitgrad's is a composition, where d loss / d bias is
# a plain sum of the incoming gradient and does not depend on the input.
_BIAS_GAP = "bias gradient does not require grad under create_graph=True (torch: it does)"
KNOWN_GAPS = {("nn.functional.layer_norm", 0): _BIAS_GAP,
              ("nn.functional.batch_norm", 0): _BIAS_GAP,
              ("nn.functional.batch_norm", 2): _BIAS_GAP,
              # windows of unequal sizes: a mean per window, whose gradient is the incoming
              # one spread, not a function of the input (torch's one node reads it)
              ("nn.functional.adaptive_avg_pool1d", 0): _BIAS_GAP.replace("bias", "input"),
              ("nn.functional.adaptive_avg_pool2d", 0): _BIAS_GAP.replace("bias", "input"),
              ("hardsigmoid",): "torch has no second derivative of hardsigmoid (it raises); "
                                "jitgrad's is 0"}


# Ops whose double backward torch does not implement: no oracle here (jitgrad's is
# gradgradchecked in test_registry.py).
NO_TORCH_DOUBLE_BACKWARD = {"cdist": "torch: the derivative for '_cdist_backward' is not implemented"}


def _marks(values):
    if values in KNOWN_GAPS:
        return [pytest.mark.xfail(reason=KNOWN_GAPS[values], strict=True)]
    if values[0] in NO_TORCH_DOUBLE_BACKWARD:
        return [pytest.mark.skip(reason=NO_TORCH_DOUBLE_BACKWARD[values[0]])]
    return []


def _elementwise(name):
    op = REGISTRY[name]
    return (lambda *a: call(op, *a)), helpers.torch_elementwise(name), op_sample(op, "same")


def _function(name, i):
    return FUNCTIONS[name][0], torch_function(name), FUNCTIONS[name][1][i]


CASES = ([pytest.param(_elementwise, (n,), id=n,
                       marks=[pytest.mark.xfail(reason=KNOWN_GAPS[(n,)], strict=True)]
                       if (n,) in KNOWN_GAPS else [])
          for n in DIFFERENTIABLE if n not in INPLACE_KERNELS]
         + [pytest.param(_function, p.values, id=p.id, marks=_marks(p.values))
            for p in function_samples()])


def _penalty(lib, fn, args, kwargs, leaves, ws):
    outs = [o for o in helpers.outputs_of(fn(*args, **kwargs)) if o.requires_grad]
    grads = lib.autograd.grad(outs, leaves, [lib.tensor(w) for w in ws], create_graph=True,
                              allow_unused=True)
    flags = [None if g is None else g.requires_grad for g in grads]
    penalty = [(g * g).sum() for g in grads if g is not None and g.requires_grad]
    if not penalty:
        return flags, None
    total = penalty[0]
    for p in penalty[1:]:
        total = total + p
    return flags, lib.autograd.grad(total, leaves, allow_unused=True)


@pytest.mark.parametrize("make, key", CASES)
def test_gradient_penalty_matches_torch(make, key):
    torch = helpers.require_torch()
    jg_fn, th_fn, sample = make(*key)
    m = helpers.materialize(sample, helpers.rng_for("penalty", key))
    rng = helpers.rng_for("penalty weights", key)
    th_outs = [o for o in helpers.outputs_of(th_fn(*m.th_args, **m.th_kwargs)) if o.requires_grad]
    ws = [rng.standard_normal(tuple(o.shape)) for o in th_outs]
    th_flags, th_second = _penalty(torch, th_fn, m.th_args, m.th_kwargs, m.th_leaves, ws)
    jg_flags, jg_second = _penalty(jitgrad, jg_fn, m.jg_args, m.jg_kwargs, m.jg_leaves, ws)
    assert jg_flags == th_flags, f"first-order grads require grad: {jg_flags}, torch {th_flags}"
    if th_second is None:
        return
    for i, (a, b) in enumerate(zip(jg_second, th_second)):
        assert (a is None) == (b is None), f"input {i}: gradient {a}, torch {b}"
        if b is not None:  # force: torch returns its ZeroTensor where the derivative is 0
            np.testing.assert_allclose(helpers.to_numpy(a), b.detach().numpy(force=True),
                                       rtol=1e-7, atol=1e-9, err_msg=f"penalty grad of input {i}")


def _network_penalty(lib, loss):
    """x.grad and w.grad after penalising the input gradient of a small classifier
    (the same seeded numbers for every library)."""
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    w = lib.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    head = lib.tensor(rng.standard_normal((4, 3)))
    target = lib.tensor([0, 2, 1, 2])
    F = lib.nn.functional
    h = x @ w
    if loss == "relu":
        out = (F.relu(h) * head).sum()
    elif loss == "nll_loss":
        out = F.nll_loss(h, target)
    else:
        out = F.cross_entropy(F.relu(h), target)
    (g,) = lib.autograd.grad(out, x, create_graph=True)
    (g * g).sum().backward()
    return helpers.to_numpy(x.grad), helpers.to_numpy(w.grad)


@pytest.mark.parametrize("loss", ["relu", "nll_loss", "cross_entropy"])
def test_gradient_penalty_through_a_network(loss):
    """The issue's use: relu's and nll_loss's second derivatives are 0, yet the
    penalty must run and reach x and w as in torch."""
    torch = helpers.require_torch()
    for got, want in zip(_network_penalty(jitgrad, loss), _network_penalty(torch, loss)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_nll_loss_weight_that_requires_grad_is_refused_as_in_torch():
    torch = helpers.require_torch()
    for lib in (jitgrad, torch):
        x = lib.zeros(3, 4, requires_grad=True)
        w = lib.ones(4, requires_grad=True)
        with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
            lib.nn.functional.nll_loss(x, lib.tensor([0, 1, 2]), weight=w)
