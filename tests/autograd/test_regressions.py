"""Regressions found while building jitgrad, each against torch."""
import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")
LIBS = [jitgrad, torch]


def no_grad_function(lib):
    class NoGrad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return None
    return NoGrad


@pytest.mark.parametrize("lib", LIBS, ids=["jitgrad", "torch"])
def test_nodes_that_receive_no_gradient_send_none(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    no_grad_function(lib).apply(x.sin()).sum().backward()
    no_grad_function(lib).apply(x.sum()).backward()
    assert x.grad is None


@pytest.mark.parametrize("how", ["split", "unbind", "chunk"])
def test_multi_output_views_with_some_outputs_unused(how):
    res = []
    for lib in LIBS:
        x = lib.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
        parts = {"split": lambda: x.split(1), "unbind": lambda: x.unbind(1),
                 "chunk": lambda: x.chunk(3)}[how]()
        (parts[0] * 3).sum().backward()
        res.append(x.grad.numpy().copy())
    np.testing.assert_array_equal(res[0], res[1])


def test_float64_scalars_keep_their_precision():
    y = jitgrad.tensor(0.7312, dtype=jitgrad.float64, requires_grad=True)
    z = (y + jitgrad.ones(2, 3, dtype=jitgrad.float64)) * 0.3
    (g,) = jitgrad.autograd.grad(z.sum(), y)
    assert g.item() == pytest.approx(1.8, rel=1e-15)
