"""nn.functional.interpolate against torch: nearest, nearest-exact, linear,
bilinear and trilinear, by size and by scale factor (torch's kernels divide by
the scale factor, not by the sizes' ratio), with and without align_corners,
values and gradients; and torch's errors."""
import pytest

import helpers
import jitgrad
from helpers import same_as_torch

CASES = [
    ((1, 2, 3, 4), dict(size=(5, 7))),
    ((1, 2, 7, 5), dict(scale_factor=(0.6, 1.7))),
    ((1, 2, 7, 5), dict(scale_factor=1.5, mode="nearest-exact")),
    ((2, 3, 5), dict(size=8, mode="linear")),
    ((2, 3, 5), dict(size=3, mode="linear", align_corners=True)),
    ((1, 2, 3, 4), dict(scale_factor=2, mode="bilinear")),
    ((1, 2, 7, 5), dict(scale_factor=(0.6, 1.7), mode="bilinear")),
    ((1, 2, 7, 5), dict(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True)),
    ((1, 2, 7, 5), dict(size=(3, 9), mode="bilinear", align_corners=True)),
    ((1, 1, 3, 4, 5), dict(size=(4, 2, 7), mode="trilinear")),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, kwargs", CASES)
def test_values_and_gradients_match_torch(shape, kwargs, dtype):
    torch = helpers.require_torch()
    rng = helpers.rng_for("interpolate", shape, tuple(kwargs.items()), dtype)
    x = rng.standard_normal(shape).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)
    outs = []
    for lib in (jitgrad, torch):
        t = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.interpolate(t, **kwargs)
        w = lib.tensor(helpers.rng_for("w", shape).standard_normal(tuple(y.shape)).astype(dtype))
        (y * w).sum().backward()
        outs.append((y, t.grad))
    (y, g), (ty, tg) = outs
    helpers.assert_same(y, ty, what="output", **tol)
    helpers.assert_same(g, tg, what="gradient", **tol)


def test_the_result_is_a_new_tensor_at_the_same_size():
    x = jitgrad.ones(1, 1, 2, 2)
    y = jitgrad.nn.functional.interpolate(x, size=(2, 2))
    y.add_(1)
    assert float(x.sum()) == 4.0


@pytest.mark.parametrize("call", [
    lambda F, x: F.interpolate(x, size=5, scale_factor=2),
    lambda F, x: F.interpolate(x),
    lambda F, x: F.interpolate(x, size=5, mode="linear"),
    lambda F, x: F.interpolate(x, size=5, mode="nearest", align_corners=True),
    lambda F, x: F.interpolate(x, size=5, mode="bogus"),
    lambda F, x: F.interpolate(x[0, 0], size=5),
    lambda F, x: F.interpolate(x, size=(5,)),
    lambda F, x: F.interpolate(x, scale_factor=(2, 3, 4)),
    lambda F, x: F.interpolate(x, size=(5, 0)),
])
def test_errors_match_torch(call):
    same_as_torch(lambda L: call(L.nn.functional, L.arange(24.0).reshape(1, 2, 3, 4)))


def test_modes_not_done_say_so():
    x = jitgrad.ones(1, 1, 3, 3)
    for kwargs in (dict(mode="bicubic"), dict(mode="area"), dict(mode="bilinear", antialias=True)):
        with pytest.raises(NotImplementedError, match="not supported yet"):
            jitgrad.nn.functional.interpolate(x, size=(5, 5), **kwargs)
