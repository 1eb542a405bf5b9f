"""Conv1d/Conv2d against torch.nn: outputs and gradients after loading torch's
state_dict, every padding form and padding_mode, groups, dilation, strides,
unbatched inputs, initialisation bounds, reprs, and errors with torch's wording
raised before anything is computed."""
import math

import numpy as np
import pytest

import jitgrad
from jitgrad import nn
import jitgrad.nn.functional as F

import helpers

torch = pytest.importorskip("torch")

CASES = [
    ("Conv2d", (2, 4, 7, 6), dict(in_channels=4, out_channels=6, kernel_size=3)),
    ("Conv2d", (2, 4, 7, 6), dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=(2, 1),
                                  padding=(1, 2), dilation=(1, 2), groups=2, bias=False)),
    ("Conv2d", (4, 8, 9), dict(in_channels=4, out_channels=2, kernel_size=4, padding="same",
                               dilation=1)),
    ("Conv2d", (1, 3, 8, 8), dict(in_channels=3, out_channels=3, kernel_size=3, groups=3,
                                  padding="valid", stride=3)),
    ("Conv2d", (2, 2, 6, 5), dict(in_channels=2, out_channels=4, kernel_size=3, padding=1,
                                  padding_mode="reflect")),
    ("Conv2d", (2, 2, 6, 5), dict(in_channels=2, out_channels=4, kernel_size=3, padding=(2, 1),
                                  padding_mode="replicate")),
    ("Conv2d", (2, 2, 6, 5), dict(in_channels=2, out_channels=4, kernel_size=3, padding="same",
                                  padding_mode="circular")),
    ("Conv1d", (3, 4, 11), dict(in_channels=4, out_channels=6, kernel_size=5, stride=2, padding=2)),
    ("Conv1d", (4, 9), dict(in_channels=4, out_channels=4, kernel_size=2, padding="same",
                            dilation=3, groups=4)),
    ("Conv1d", (2, 2, 7), dict(in_channels=2, out_channels=3, kernel_size=3, padding=1,
                               padding_mode="circular")),
    ("ConvTranspose2d", (2, 4, 5, 5), dict(in_channels=4, out_channels=6, kernel_size=3)),
    ("ConvTranspose2d", (2, 4, 5, 6), dict(in_channels=4, out_channels=6, kernel_size=(3, 2),
                                           stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
                                           dilation=(1, 2), groups=2, bias=False)),
    ("ConvTranspose2d", (4, 3, 3), dict(in_channels=4, out_channels=2, kernel_size=4, stride=2,
                                        padding=1)),
    ("ConvTranspose1d", (3, 4, 6), dict(in_channels=4, out_channels=2, kernel_size=3, stride=3,
                                        dilation=2, output_padding=1)),
]


def pair(cls, kwargs):
    th = getattr(torch.nn, cls)(**kwargs, dtype=torch.float64)
    jg = getattr(nn, cls)(**kwargs, dtype=jitgrad.float64)
    jg.load_state_dict({k: jitgrad.tensor(v.detach().numpy()) for k, v in th.state_dict().items()})
    return jg, th


@pytest.mark.parametrize("cls, shape, kwargs", CASES, ids=lambda v: str(v))
def test_matches_torch_with_its_state_dict(cls, shape, kwargs):
    jg, th = pair(cls, kwargs)
    assert list(jg.state_dict()) == list(th.state_dict())
    assert repr(jg) == repr(th)
    rng = helpers.rng_for("conv module", cls, shape, tuple(kwargs.items()))
    x = rng.standard_normal(shape)
    xj, xt = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oj, ot = jg(xj), th(xt)
    helpers.assert_same(oj, ot, rtol=1e-10, atol=1e-12)
    w = rng.standard_normal(tuple(ot.shape))
    (oj * jitgrad.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    helpers.assert_same(xj.grad, xt.grad, rtol=1e-10, atol=1e-12, what="input grad")
    for (name, a), b in zip(jg.named_parameters(), th.parameters()):
        helpers.assert_same(a.grad, b.grad, rtol=1e-10, atol=1e-12, what=name)


@pytest.mark.parametrize("output_size", [(9, 9), [2, 6, 10, 10], (11, 10)])
def test_a_transposed_convolution_reaches_the_output_size_asked_for(output_size):
    jg, th = pair("ConvTranspose2d", dict(in_channels=6, out_channels=2, kernel_size=3, stride=2))
    x = np.ones((2, 6, 4, 4))
    try:
        want = th(torch.tensor(x), output_size=output_size)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            jg(jitgrad.tensor(x), output_size=output_size)
        assert str(got.value) == str(e).replace("torch.", "jitgrad.")
        return
    helpers.assert_same(jg(jitgrad.tensor(x), output_size=output_size), want, rtol=1e-12,
                        atol=1e-12)


@pytest.mark.parametrize("call", [
    lambda F, L: F.conv_transpose2d(L.ones(2, 4, 5, 5), L.ones(4, 3, 3, 3), output_padding=1),
    lambda F, L: F.conv_transpose2d(L.ones(2, 4, 5, 5), L.ones(3, 3, 3, 3)),
    lambda F, L: F.conv_transpose2d(L.ones(5, 5), L.ones(4, 3, 3, 3)),
    lambda F, L: F.conv_transpose2d(L.ones(2, 4, 5, 5), L.ones(4, 3, 3, 3), bias=L.ones(5)),
])
def test_transposed_errors_use_torchs_words(call):
    helpers.same_as_torch(lambda L: call(L.nn.functional, L))


def test_output_node_is_torchs():
    conv = nn.Conv2d(2, 3, 3)
    assert conv(jitgrad.randn(1, 2, 5, 5)).grad_fn.name() == "ConvolutionBackward0"


def test_float32_target_shape_matches_torch():
    """The benchmark's case (smaller batch): float32 values and gradients as torch's."""
    th = torch.nn.Conv2d(16, 32, 3, padding=1)
    jg = nn.Conv2d(16, 32, 3, padding=1)
    jg.load_state_dict({k: jitgrad.tensor(v.detach().numpy()) for k, v in th.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((4, 16, 32, 32)).astype(np.float32)
    xj, xt = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oj, ot = jg(xj), th(xt)
    helpers.assert_same(oj, ot, rtol=1e-4, atol=1e-5)
    oj.sum().backward()
    ot.sum().backward()
    helpers.assert_same(xj.grad, xt.grad, rtol=1e-4, atol=1e-4, what="input grad")
    helpers.assert_same(jg.weight.grad, th.weight.grad, rtol=1e-4, atol=1e-3, what="weight grad")


def test_reset_parameters_bounds_as_torch():
    jitgrad.manual_seed(0)
    conv = nn.Conv2d(4, 8, (3, 5), groups=2)
    bound = 1 / math.sqrt(2 * 3 * 5)  # fan_in = in_channels / groups * kernel elements
    for p in (conv.weight, conv.bias):
        assert float(p.abs().max()) <= bound
        assert float(p.abs().max()) > bound / 2
    assert conv.weight.shape == (8, 2, 3, 5)


@pytest.mark.parametrize("make, message", [
    (lambda: F.conv2d(jitgrad.zeros(2, 3), jitgrad.zeros(4, 3, 3, 3)),
     "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 3]"),
    (lambda: F.conv1d(jitgrad.zeros(3), jitgrad.zeros(4, 3, 3)),
     "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [3]"),
    (lambda: F.conv2d(jitgrad.zeros(1, 5, 8, 8), jitgrad.zeros(4, 3, 3, 3)),
     "Given groups=1, weight of size [4, 3, 3, 3], expected input[1, 5, 8, 8] to have 3 "
     "channels, but got 5 channels instead"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 2, 2), jitgrad.zeros(4, 3, 3, 3)),
     "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size "
     "can't be greater than actual input size"),
    (lambda: F.conv2d(jitgrad.zeros(1, 4, 8, 8), jitgrad.zeros(3, 2, 3, 3), groups=2),
     "Given groups=2, expected weight to be divisible by 2 at dimension 0"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 8, 8), jitgrad.zeros(4, 3, 3, 3), stride=2,
                      padding="same"),
     "padding='same' is not supported for strided convolutions"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 8, 8), jitgrad.zeros(4, 3, 3, 3), padding="foo"),
     "Invalid padding string: 'foo'"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 8, 8), jitgrad.zeros(4, 3, 3, 3), jitgrad.zeros(5)),
     "expected bias to be 1-dimensional with 4 elements, but got bias of size [5] instead"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 8, 8), jitgrad.zeros(4, 3, 3, 3, dtype=jitgrad.float64)),
     "expected scalar type float32 but found float64"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 8, 8), jitgrad.zeros(4, 3, 3, 3), padding=-1),
     "negative padding is not supported"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 8, 8), jitgrad.zeros(4, 3, 3, 3), stride=0),
     "non-positive stride is not supported"),
    (lambda: F.conv2d(jitgrad.zeros(1, 3, 8, 8), jitgrad.zeros(4, 3, 3)),
     "conv2d: expected a 4-D weight"),
])
def test_errors_use_torchs_words(make, message):
    with pytest.raises(RuntimeError) as err:
        make()
    assert message in str(err.value)


@pytest.mark.parametrize("kwargs, message", [
    (dict(padding_mode="foo"), "padding_mode must be one of"),
    (dict(groups=2), "in_channels must be divisible by groups"),
    (dict(padding="same", stride=2), "padding='same' is not supported for strided convolutions"),
    (dict(padding="full"), "Invalid padding string 'full'"),
])
def test_constructor_errors_as_torch(kwargs, message):
    with pytest.raises(ValueError, match=message):
        nn.Conv2d(3, 4, 3, **kwargs)
    with pytest.raises(ValueError, match=message):
        torch.nn.Conv2d(3, 4, 3, **kwargs)


def test_double_backward_through_a_gradient_penalty():
    """d/dw of |d out / d x|^2 as torch computes it (the gradients are convolutions too)."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    res = []
    for lib in (jitgrad, torch):
        xs, ws = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        out = lib.nn.functional.conv2d(xs, ws, stride=2, padding=1).tanh().sum()
        (gx,) = lib.autograd.grad(out, xs, create_graph=True)
        (gw,) = lib.autograd.grad((gx * gx).sum(), ws)
        res.append(gw.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10)


def test_forward_over_reverse_hessian_matches_torch():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 2, 5, 4)), rng.standard_normal((3, 2, 3, 3))
    res = []
    for lib in (jitgrad, torch):
        def f(weight):
            out = lib.nn.functional.conv2d(lib.tensor(x), weight, padding=1, stride=(2, 1))
            return out.tanh().sum()
        h = lib.autograd.functional.hessian(f, lib.tensor(w), vectorize=True,
                                            outer_jacobian_strategy="forward-mode")
        res.append(h.detach().numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10, atol=1e-12)


def _conv_in_child(x, w, expected):
    out = F.conv2d(jitgrad.tensor(x), jitgrad.tensor(w), padding=1).numpy()
    raise SystemExit(0 if np.allclose(out, expected, rtol=1e-5, atol=1e-5) else 1)


def test_forked_child_runs_blocks_on_threads_of_its_own():
    """A DataLoader worker forked after a threaded convolution inherits the pool object
    but not its threads: it must make its own rather than wait forever."""
    import multiprocessing
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 16, 32, 32)).astype(np.float32)  # many blocks: threads
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    expected = F.conv2d(jitgrad.tensor(x), jitgrad.tensor(w), padding=1).numpy()
    child = multiprocessing.get_context("fork").Process(target=_conv_in_child, args=(x, w, expected))
    child.start()
    child.join(120)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child's convolution did not finish")
    assert child.exitcode == 0
