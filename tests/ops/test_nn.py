"""softmax's backward: on arrays when nothing is recorded, with ops when the
backward itself is differentiated; both as torch's."""
import numpy as np
import pytest

import jitgrad

from helpers import torch


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
