"""softmax's backward: on arrays when nothing is recorded, with ops when the
backward itself is differentiated; both as torch's. The forward of a short
vector (its max taken from a list): the bits of the reduce path. A 0-d input:
torch's values, NaN included."""
import math

import numpy as np
import pytest

import jitgrad

from helpers import both, torch


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("shape,dim", [((), 0), ((4,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -2)])
@pytest.mark.parametrize("create_graph", [False, True])
def test_softmax_backward_as_torch(shape, dim, create_graph):
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal(shape), rng.standard_normal(shape)
    res = []
    for lib in (jitgrad, torch):
        x = lib.tensor(a, requires_grad=True)
        (g,) = lib.autograd.grad((lib.softmax(x, dim) * lib.tensor(w)).sum(), x,
                                 create_graph=create_graph)
        out = [g.detach().numpy()]
        if create_graph:
            out.append(lib.autograd.grad((g * g).sum(), x)[0].numpy())
        res.append(out)
    for j, t in zip(*res):
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=1e-12)


def _softmax_by_reduce(d):
    e = np.exp(d - np.maximum.reduce(d, axis=0, keepdims=True))
    return e / np.add.reduce(e, axis=0, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("values", [
    [0.3, -1.2, 2.5, 0.7], [1.0], [-0.0, 0.0, -0.0], [np.inf, 1.0, 2.0], [-np.inf, -np.inf],
    [1.0, np.nan, 2.0], [np.nan, 5.0], [np.inf, np.nan, -np.inf], [88.0, -100.0, 1e-30, 3.0],
    list(np.linspace(-4, 4, 16)), list(np.linspace(-4, 4, 17))])
def test_softmax_of_short_vector_has_reduce_bits(values, dtype):
    d = np.array(values, dtype)
    with np.errstate(all="ignore"):
        want = _softmax_by_reduce(d)
    got = jitgrad.softmax(jitgrad.tensor(d), 0).numpy()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("value", [1.5, float("inf"), -float("inf"), float("nan")])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_0d_softmax_matches_torch(fn, value):
    def result(lib):
        return getattr(lib, fn)(lib.tensor(value), 0).item()

    jv, tv = both(result)
    assert (jv == tv) or (math.isnan(jv) and math.isnan(tv)), (jv, tv)
