"""The padding and upsampling layers against torch.nn: values, gradients, reprs."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")

PADDING = [(f"{stem}{n}d", n) for n in (1, 2, 3)
           for stem in ("ZeroPad", "ConstantPad", "ReflectionPad", "ReplicationPad", "CircularPad")]


def _make(lib, name, *args):
    cls = getattr(lib.nn, name)
    return cls(*args, 1.5) if name.startswith("ConstantPad") else cls(*args)


def _compare(jg_module, th_module, shape):
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) / 7
    xj, xt = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oj, ot = jg_module(xj), th_module(xt)
    assert tuple(oj.shape) == tuple(ot.shape)
    np.testing.assert_allclose(oj.detach().numpy(), ot.detach().numpy(), rtol=1e-14)
    w = np.random.default_rng(0).standard_normal(tuple(ot.shape))
    (oj * jitgrad.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xj.grad.numpy(), xt.grad.numpy(), rtol=1e-13, atol=1e-15)
    assert repr(jg_module) == repr(th_module)


@pytest.mark.parametrize("name, dims", PADDING)
@pytest.mark.parametrize("padding", ["int", "tuple"])
def test_padding_layers_match_torch(name, dims, padding):
    pad = 2 if padding == "int" else tuple(range(1, 2 * dims + 1))[::-1]
    shape = (2, 3) + (7,) * dims  # batch, channels, the padded dims (each larger than a pad)
    _compare(_make(jitgrad, name, pad), _make(torch, name, pad), shape)


def test_a_padding_of_the_wrong_length_says_what_it_needs():
    with pytest.raises(ValueError, match=r"ZeroPad2d: padding must be an int or 4 ints"):
        nn.ZeroPad2d((1, 2, 3))


@pytest.mark.parametrize("make, shape", [
    (lambda n: n.Upsample(scale_factor=2), (1, 2, 3)),
    (lambda n: n.Upsample(size=(3, 5), mode="bilinear"), (1, 2, 2, 4)),
    (lambda n: n.Upsample(scale_factor=(1.5, 2), mode="bilinear", align_corners=True), (1, 1, 3, 3)),
    (lambda n: n.Upsample(size=(2, 3, 4), mode="trilinear"), (1, 1, 3, 2, 2)),
    (lambda n: n.UpsamplingNearest2d(scale_factor=2), (2, 1, 2, 3)),
    (lambda n: n.UpsamplingBilinear2d(size=4), (1, 2, 3, 3)),
])
def test_upsampling_layers_match_torch(make, shape):
    _compare(make(nn), make(torch.nn), shape)
