"""nn.functional.pad against torch: every mode, negative widths, batch and
channel dims, integer tensors, errors, and gradients (where an element was
copied more than once, its gradients add up)."""
import numpy as np
import pytest

import helpers
from helpers import same_as_torch


def _x(L, *shape, dtype=None):
    return L.arange(float(np.prod(shape)), dtype=dtype or L.float64).reshape(*shape)


@pytest.mark.parametrize("call", [
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (1, 2)),
    lambda L: L.nn.functional.pad(_x(L, 1, 3, 4), (-1, 2, 1, 0), value=9.0),
    lambda L: L.nn.functional.pad(_x(L, 2, 3), (0, 0, 0, 0, 1, 1)),
    lambda L: L.nn.functional.pad(L.arange(6).reshape(2, 3), (1, 1), value=7),
    lambda L: L.nn.functional.pad(_x(L, 1, 3, 4), (2, 1), mode="reflect"),
    lambda L: L.nn.functional.pad(_x(L, 2, 3, 4), (3, 3, 2, 2), mode="reflect"),
    lambda L: L.nn.functional.pad(_x(L, 1, 2, 2, 3, 4), (1, 2, 2, 1, 1, 0), mode="reflect"),
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (2, 3), mode="replicate"),
    lambda L: L.nn.functional.pad(_x(L, 1, 2, 3, 4), (2, 3, 1, 2), mode="replicate"),
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (4, 2), mode="circular"),
    lambda L: L.nn.functional.pad(_x(L, 2, 2, 3, 4), (1, 3, 2, 0), mode="circular"),
    lambda L: L.constant_pad_nd(_x(L, 2, 3), (1, -1)),
    # errors
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (1,)),
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (1, 1) * 3),
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (-3, -2)),
    lambda L: L.nn.functional.pad(_x(L, 1, 3, 4), (4, 0), mode="reflect"),
    lambda L: L.nn.functional.pad(_x(L, 3), (1, 1), mode="reflect"),
    lambda L: L.nn.functional.pad(_x(L, 2, 2, 3, 4), (1, 1), mode="replicate"),
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (1, 1), mode="reflect", value=2.0),
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (1, 1), mode="bogus"),
    lambda L: L.nn.functional.pad(_x(L, 1, 3, 4), (5, 5), mode="circular"),
    lambda L: L.nn.functional.pad(_x(L, 3, 4), (1.5, 1)),
])
def test_matches_torch(call):
    same_as_torch(call)


@pytest.mark.parametrize("mode, pad, shape", [
    ("constant", (1, -1, 2, 0), (2, 3, 4)), ("reflect", (3, 2), (2, 5)),
    ("reflect", (2, 1, 1, 2), (1, 3, 4)), ("replicate", (2, 3, 1, 0), (2, 3, 4)),
    ("circular", (3, 2), (2, 4)), ("circular", (1, 2, 2, 1, 0, 1), (1, 2, 3, 3, 3)),
])
def test_gradients_match_torch(mode, pad, shape):
    def f(L):
        return lambda x: (L.nn.functional.pad(x, pad, mode=mode) ** 2).sum(-1)
    torch = helpers.require_torch()
    import jitgrad
    helpers.check_torch(f(jitgrad), f(torch), [shape], dtype="float64")
