"""stack: one StackBackward0 node, gradients and second derivatives as torch's."""
import numpy as np
import pytest

import jitgrad

from helpers import torch


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("shape,n,dim", [((), 4, 0), ((3,), 2, -1), ((2, 3), 3, 1), ((2, 3), 2, 2)])
def test_stack_as_torch(shape, n, dim):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(shape) for _ in range(n)]
    res = []
    for lib in (jitgrad, torch):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = lib.stack(xs, dim)
        w = lib.tensor(np.arange(np.prod(y.shape), dtype=np.float64).reshape(tuple(y.shape)))
        grads = lib.autograd.grad(((y * y) * w).sum(), xs, create_graph=True)
        second = lib.autograd.grad(sum((g * g).sum() for g in grads), xs)
        res.append((y.grad_fn.name(), len(y.grad_fn.next_functions), tuple(y.shape),
                    [g.detach().numpy() for g in grads + second]))
    (jname, jn, jshape, jvals), (tname, tn, tshape, tvals) = res
    assert (jname, jn, jshape) == (tname, tn, tshape)
    for j, t in zip(jvals, tvals):
        np.testing.assert_allclose(j, t, rtol=1e-12)


def test_stack_promotes_and_gives_each_input_its_dtype():
    a = jitgrad.ones(2, requires_grad=True)
    b = jitgrad.ones(2, dtype=jitgrad.float64, requires_grad=True)
    y = jitgrad.stack([a, b])
    assert y.dtype == jitgrad.float64
    y.sum().backward()
    assert a.grad.dtype == jitgrad.float32 and b.grad.dtype == jitgrad.float64
