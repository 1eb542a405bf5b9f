"""ops/reduce.py against torch beyond the registry samples: cumprod where
elements are zero (one, several, first or last), its gradients of two orders
and its forward-mode tangent there. A full sum's bits and its gradient's
layout, on its short path."""
import numpy as np
import pytest

import helpers
import jitgrad
import jitgrad.autograd.forward_ad as fwAD

ROWS = [[1.5, 2.0, 0.0, 4.0, 0.0, 3.0], [0.0, 2.0, 3.0, 0.5, 1.0, 2.0],
        [2.0, 3.0, 4.0, 0.5, 1.5, 0.0], [0.0, 0.0, 2.0, 1.0, 3.0, 1.0]]


@pytest.mark.parametrize("dim", [0, 1])
def test_cumprod_with_zeros_matches_torch(dim):
    torch = helpers.require_torch()
    data = np.array(ROWS)
    w = np.random.default_rng(0).standard_normal(data.shape)
    grads = []
    for lib in (jitgrad, torch):
        x = lib.tensor(data, requires_grad=True)
        (g,) = lib.autograd.grad((x.cumprod(dim) * lib.tensor(w)).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        grads.append((x.cumprod(dim).detach().numpy(), g.detach().numpy(), gg.numpy()))
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_cumprod_tangent_with_zeros_is_the_jacobian_times_the_tangent():
    data = np.array(ROWS[0])
    t = np.random.default_rng(1).standard_normal(data.shape)
    with fwAD.dual_level():
        out = fwAD.make_dual(jitgrad.tensor(data), jitgrad.tensor(t)).cumprod(0)
        tangent = fwAD.unpack_dual(out).tangent.numpy()
    jac = np.array([[np.prod([data[k] for k in range(j + 1) if k != i]) if i <= j else 0.0
                     for i in range(len(data))] for j in range(len(data))])
    np.testing.assert_allclose(tangent, jac @ t, rtol=1e-12, atol=1e-12)


def test_cumprod_integers_and_dtype():
    helpers.same_as_torch(lambda L: L.tensor([[1, 2], [3, 4]]).cumprod(1))
    helpers.same_as_torch(lambda L: L.tensor([1, 2, 3]).cumprod(0, dtype=L.float64))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (5,), (16,), (130,), (7, 9), (1, 1), (2, 1, 300)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_full_sum_has_the_bits_of_ndarray_sum(shape, dtype, keepdim):
    base = jitgrad.tensor(np.random.default_rng(0).standard_normal(shape).astype(dtype),
                          requires_grad=True)
    views = [base.transpose(0, -1), base[::2]] if base.ndim else []
    for x in [base] + views:  # contiguous or not: numpy's order of additions either way
        y = x.sum(keepdim=keepdim) if keepdim else x.sum()
        v = x.detach().numpy()
        want = np.asarray(v.sum(axis=tuple(range(v.ndim)), keepdims=keepdim, dtype=v.dtype))
        got = y.detach().numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
        base.grad = None
        y.backward(jitgrad.ones_like(y))
        g = base.grad.numpy()
        assert g.shape == base.shape and np.count_nonzero(g == 1) == x.numel() == g.sum()
