"""MaxPool/AvgPool/AdaptiveAvgPool modules against torch.nn: values, gradients,
indices, reprs and errors."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn
import jitgrad.nn.functional as F

import helpers

torch = pytest.importorskip("torch")

CASES = [
    ("MaxPool2d", (2, 3, 7, 6), (2,), {}),
    ("MaxPool2d", (3, 7, 6), (3,), dict(stride=2, padding=1, ceil_mode=True)),
    ("MaxPool2d", (1, 2, 9, 8), ((3, 2),), dict(stride=(2, 1), dilation=(2, 1), padding=(1, 0))),
    ("MaxPool1d", (2, 3, 9), (3,), dict(stride=2, padding=1)),
    ("AvgPool2d", (2, 3, 7, 6), (2,), {}),
    ("AvgPool2d", (3, 7, 6), (3,), dict(stride=2, padding=1, ceil_mode=True,
                                        count_include_pad=False)),
    ("AvgPool2d", (1, 2, 6, 6), ((3, 2),), dict(padding=1, divisor_override=2)),
    ("AvgPool1d", (2, 3, 9), (3,), dict(stride=2, padding=1, ceil_mode=True)),
    ("AdaptiveAvgPool2d", (2, 3, 7, 6), ((3, 4),), {}),
    ("AdaptiveAvgPool2d", (2, 3, 8, 6), ((None, 1),), {}),
    ("AdaptiveAvgPool2d", (3, 8, 6), (1,), {}),
    ("AdaptiveAvgPool1d", (2, 3, 10), (4,), {}),
]


@pytest.mark.parametrize("cls, shape, args, kwargs", CASES, ids=lambda v: str(v))
def test_matches_torch(cls, shape, args, kwargs):
    jg, th = getattr(nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
    assert repr(jg) == repr(th)
    rng = helpers.rng_for("pool module", cls, shape, args, tuple(kwargs.items()))
    x = rng.standard_normal(shape)
    xj, xt = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oj, ot = jg(xj), th(xt)
    helpers.assert_same(oj, ot, rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(tuple(ot.shape))
    (oj * jitgrad.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    helpers.assert_same(xj.grad, xt.grad, rtol=1e-12, atol=1e-12, what="input grad")


def test_max_pool_indices_and_ties_as_torch():
    x = np.array([[[[1.0, 1.0, -np.inf], [np.nan, 0.0, -np.inf], [2.0, 2.0, 1.0]]]])
    for kwargs in (dict(kernel_size=2, stride=1), dict(kernel_size=2, padding=1)):
        vj, ij = F.max_pool2d(jitgrad.tensor(x), return_indices=True, **kwargs)
        vt, it = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
        helpers.assert_same(vj, vt, rtol=0, atol=0)
        assert ij.tolist() == it.tolist()
    pool = nn.MaxPool2d(2, return_indices=True)
    values, indices = pool(jitgrad.arange(16.0).reshape(1, 1, 4, 4))
    assert indices.tolist() == [[[[5, 7], [13, 15]]]]


def test_max_pool_node_is_torchs():
    x = jitgrad.randn(1, 2, 4, 4, requires_grad=True)
    assert F.max_pool2d(x, 2).grad_fn.name() == "MaxPool2DWithIndicesBackward0"


@pytest.mark.parametrize("make, message", [
    (lambda: F.max_pool2d(jitgrad.zeros(3, 3), 2),
     "non-empty 3D or 4D (batch mode) tensor expected for input"),
    (lambda: F.max_pool2d(jitgrad.zeros(1, 1, 8, 8), 2, padding=2),
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and "
     "dilation=1"),
    (lambda: F.avg_pool2d(jitgrad.zeros(1, 1, 1, 1), 2),
     "Given input size: (1x1x1). Calculated output size: (1x0x0). Output size is too small"),
    (lambda: F.max_pool2d(jitgrad.zeros(1, 1, 4, 4), 2, stride=0), "stride should not be zero"),
    (lambda: F.adaptive_avg_pool2d(jitgrad.zeros(3), 2),
     "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [3]"),
    (lambda: F.max_pool2d(jitgrad.zeros(1, 1, 4, 4), (2, 2, 2)),
     "max_pool2d: kernel_size must either be a single int, or a tuple of 2 ints"),
])
def test_errors_use_torchs_words(make, message):
    with pytest.raises(RuntimeError) as err:
        make()
    assert message in str(err.value)
