"""jitgrad.compile and an argument's incoming .grad: a step that assigns it before
anything reads it replays whatever the previous call left there (one trace); a
step that reads it, or whose backward accumulates into it, is guarded on it (a
trace with .grad None, one with it set). Compared with torch over several steps."""
import numpy as np
import pytest

import jitgrad
from jitgrad.compiler.program import SMALL_ELEMENTS

from compile_helpers import MODE

import helpers

STEPS = 4
# the scalar tape executor's size and the fused-kernel executor's
SIZES = {"small": 5, "large": SMALL_ELEMENTS + 3}


def _twins(n, seed=0):
    torch = helpers.require_torch()
    a = np.random.default_rng(seed).uniform(-1, 1, n)
    return jitgrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _loss(lib, x):
    return (lib.sin(x) * x + 0.5 * x).sum()


def _assert_same(jg, th, what):
    if th is None:
        assert jg is None, f"{what}: set, torch leaves it None"
        return
    assert jg is not None, f"{what}: None, torch has {th}"
    np.testing.assert_allclose(jg.detach().numpy(), th.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=what)


@pytest.mark.parametrize("size", SIZES)
def test_a_step_that_clears_grad_first_traces_once(size):
    torch = helpers.require_torch()

    def step(lib, x):
        x.grad = None
        loss = _loss(lib, x)
        loss.backward()
        return loss

    compiled = jitgrad.compile(lambda x: step(jitgrad, x), mode=MODE)
    x, tx = _twins(SIZES[size])
    for i in range(STEPS):  # from the second call on, x.grad is the previous step's
        _assert_same(compiled(x), step(torch, tx), f"loss of step {i}")
        _assert_same(x.grad, tx.grad, f".grad after step {i}")
    assert compiled.traces == 1 and compiled.eager_calls == 0
    assert ".grad" not in "\n".join(jitgrad.compile.explain(compiled, x).guards)


@pytest.mark.parametrize("size", SIZES)
def test_a_step_whose_backward_accumulates_is_guarded_on_grad(size):
    torch = helpers.require_torch()

    def step(lib, x):
        loss = _loss(lib, x)
        loss.backward()  # adds into the .grad the previous step left
        return loss

    compiled = jitgrad.compile(lambda x: step(jitgrad, x), mode=MODE)
    x, tx = _twins(SIZES[size], seed=1)
    for i in range(STEPS):
        _assert_same(compiled(x), step(torch, tx), f"loss of step {i}")
        _assert_same(x.grad, tx.grad, f".grad after step {i}")
    assert compiled.traces == 2 and compiled.eager_calls == 0  # .grad None, then set
    x.grad = None
    _assert_same(compiled(x), step(torch, tx.detach().requires_grad_()), "loss from None")
    assert compiled.traces == 2
    assert "tensor argument 0: .grad set (the step reads it before assigning it)" in \
        jitgrad.compile.explain(compiled, x).guards


def test_a_step_that_reads_grad_before_assigning_it_is_guarded_on_grad():
    torch = helpers.require_torch()

    def step(lib, x):
        previous = x.grad
        x.grad = None
        loss = _loss(lib, x)
        if previous is not None:  # Python control flow on the .grad the caller left
            loss = loss + (previous * x).sum()
        loss.backward()
        return loss

    compiled = jitgrad.compile(lambda x: step(jitgrad, x), mode=MODE)
    x, tx = _twins(SIZES["small"], seed=2)
    for i in range(STEPS):
        _assert_same(compiled(x), step(torch, tx), f"loss of step {i}")
        _assert_same(x.grad, tx.grad, f".grad after step {i}")
    assert compiled.traces == 2 and compiled.eager_calls == 0


def test_an_optimizer_holding_an_argument_keeps_its_grad_guard():
    """zero_grad(set_to_none=False) and step() read the .grad of the parameters they
    hold, arguments of the step among them: the grad state stays in the guard."""
    torch = helpers.require_torch()

    def make(lib, x):
        opt = lib.optim.SGD([x], lr=0.1, momentum=0.9)

        def step(x):
            opt.zero_grad(set_to_none=False)
            loss = _loss(lib, x)
            loss.backward()
            opt.step()
            return loss
        return step

    x, tx = _twins(SIZES["small"], seed=3)
    compiled, eager = jitgrad.compile(make(jitgrad, x), mode=MODE), make(torch, tx)
    for i in range(STEPS):
        _assert_same(compiled(x), eager(tx), f"loss of step {i}")
        _assert_same(x.grad, tx.grad, f".grad after step {i}")
        _assert_same(x.detach(), tx, f"x after step {i}")
    assert compiled.traces == 2 and compiled.eager_calls == 0
