"""The convolution's im2col and col2im: the compiled kernels give numpy's bits for
every geometry (strides, dilation, padding wider than the kernel's reach, taps that
meet no input at all), and a convolution with its gradients matches torch whichever
of the two runs."""
import numpy as np
import pytest

import jitgrad
from jitgrad.kernels import cache
from jitgrad.ops import conv

import helpers

# (input shape, kernel, stride, dilation, padding (before, after) per dim)
GEOMETRIES = [
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((2, 3, 7, 6), (3, 2), (2, 1), (1, 2), ((1, 2), (2, 0))),
    ((1, 2, 5, 9), (2, 4), (3, 2), (2, 1), ((0, 0), (3, 3))),
    ((1, 2, 3, 3), (3, 3), (1, 1), (1, 1), ((4, 4), (0, 5))),  # outputs that meet no input
    ((1, 2, 4, 2), (1, 3), (1, 1), (1, 3), ((0, 0), (3, 3))),  # taps that meet no input
    ((3, 1, 1, 11), (1, 5), (1, 2), (1, 2), ((0, 0), (2, 2))),  # a 1-D convolution
]


def compiled(name, like, monkeypatch):
    """The Numba kernel of copy `name` (Numba taken as started, so it loads at once)."""
    monkeypatch.setattr(cache, "started", lambda: True)
    kernel = conv._copy(name, like)
    assert kernel is not conv._COPIES[name][0]
    return kernel


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, kernel, stride, dilation, padding", GEOMETRIES,
                         ids=lambda v: str(v))
def test_kernels_give_numpys_bits(shape, kernel, stride, dilation, padding, dtype, monkeypatch):
    rng = helpers.rng_for("conv copies", shape, kernel, stride, padding, dtype)
    geom = conv.Geometry(stride, dilation, padding, 1, 2)
    image = rng.standard_normal(shape).astype(dtype)
    c = conv._Columns(geom, shape, (4, shape[1]) + kernel, image.dtype, image)
    numpy_cols, kernel_cols = c.buffer(), c.buffer()
    conv._im2col_numpy(image, numpy_cols, c.taps, c.sizes)
    compiled("im2col", image, monkeypatch)(image, kernel_cols, c.taps, c.sizes)
    assert np.array_equal(numpy_cols, kernel_cols)

    cols = rng.standard_normal(numpy_cols.shape).astype(dtype)
    numpy_image, kernel_image = np.full_like(image, np.nan), np.full_like(image, np.nan)
    conv._col2im_numpy(numpy_image, cols, c.taps, c.sizes)
    compiled("col2im", image, monkeypatch)(kernel_image, cols, c.taps, c.sizes)
    assert np.array_equal(numpy_image, kernel_image)


@pytest.mark.parametrize("copies", ["numpy", "compiled"])
@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, 1, 1, 1), ((2, 1), (1, 2), (1, 2), 2), (3, 0, 1, 1), (1, 3, 2, 1)])
def test_convolution_and_gradients_match_torch(copies, stride, padding, dilation, groups,
                                                monkeypatch):
    torch = pytest.importorskip("torch")
    if copies == "numpy":
        monkeypatch.setattr(conv, "_copy", lambda name, like: conv._COPIES[name][0])
    else:
        monkeypatch.setattr(cache, "started", lambda: True)
    rng = helpers.rng_for("conv copies vs torch", stride, padding, dilation, groups)
    x, w = rng.standard_normal((5, 4, 9, 8)), rng.standard_normal((6, 4 // groups, 3, 3))
    b = rng.standard_normal(6)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    res = []
    for lib in (jitgrad, torch):
        xs, ws, bs = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        out = lib.nn.functional.conv2d(xs, ws, bs, **kwargs)
        out.backward(lib.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape))))
        res.append([t.detach().numpy() for t in (out, xs.grad, ws.grad, bs.grad)])
    for a, e in zip(*res):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12)


def test_weight_gradient_bits_do_not_depend_on_the_threads(monkeypatch):
    """Threads take blocks as they get free; the per-block parts are still added in block
    order, so every run, and a run on one thread, gives the same bits."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rng = helpers.rng_for("conv weight gradient threads")
    x = rng.standard_normal((16, 16, 32, 32)).astype(np.float32)  # blocks of one sample
    g = rng.standard_normal((16, 8, 32, 32)).astype(np.float32)
    geom = conv.Geometry((1, 1), (1, 1), ((1, 1), (1, 1)), 1, 2)
    assert len(conv._Columns(geom, x.shape, (8, 16, 3, 3), x.dtype, x).blocks()) == 16
    runs = [conv._weight_grad_array(x, g, geom, (8, 16, 3, 3)) for _ in range(4)]
    monkeypatch.setattr(conv.threads, "get_num_threads", lambda: 1)
    with threadpoolctl.threadpool_limits(1, "blas"):
        runs.append(conv._weight_grad_array(x, g, geom, (8, 16, 3, 3)))
    for r in runs[1:]:
        assert np.array_equal(r, runs[0])
