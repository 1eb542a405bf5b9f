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


def test_short_softmax_has_the_bits_of_the_general_path():
    # the short-vector path (no error-state switch, numpy's additions unrolled) against
    # the reduce path, on the vectors where it applies
    from jitgrad.ops.nn import _short_softmax
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        for n in range(1, 17):
            for _ in range(200):
                d = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 2)).astype(dtype)
                got, want = _short_softmax(d), _softmax_by_reduce(d)
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), d


def _softmax_node(lib):
    x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    return x, lib.softmax(x, 0)


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_softmax_saved_result_as_torch():
    # softmax keeps its result in its node (no SavedTensor until one is asked for)
    def saved(lib):
        x, y = _softmax_node(lib)
        r = y.grad_fn._saved_result
        raw = y.grad_fn._raw_saved_result
        assert raw is y.grad_fn._raw_saved_result and type(raw).__name__ == "SavedTensor"
        assert r is not y and r.grad_fn is y.grad_fn and r.requires_grad
        (y * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        return r.detach(), r._version, x.grad

    (jr, jv, jg), (tr, tv, tg) = both(saved)
    np.testing.assert_allclose(jr.numpy(), tr.numpy(), rtol=1e-6)
    np.testing.assert_allclose(jg.numpy(), tg.numpy(), rtol=1e-6)
    assert jv == tv


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("case", ["in place", "twice", "freed attribute", "hooks", "hooked raw"])
def test_softmax_saved_result_checks_as_torch(case):
    def run(lib):
        log = []
        if case == "hooks":
            with lib.autograd.graph.saved_tensors_hooks(lambda t: (log.append("pack"), t)[1],
                                                        lambda t: (log.append("unpack"), t)[1]):
                x, y = _softmax_node(lib)
        else:
            x, y = _softmax_node(lib)
        if case == "hooked raw":
            y.grad_fn._raw_saved_result.register_hooks(
                lambda t: (log.append("pack"), t * 2)[1], lambda t: (log.append("unpack"), t)[1])
        if case == "in place":
            y.mul_(2)
        w = lib.tensor([1.0, 2.0, 3.0])
        (y * w).sum().backward(retain_graph=case not in ("twice", "freed attribute"))
        if case == "twice":
            (y * w).sum().backward()
        if case == "freed attribute":
            y.grad_fn._saved_result
        return x.grad.numpy().tolist(), log

    def outcome(lib):
        try:
            return run(lib)
        except RuntimeError as e:
            return str(e).split(" [")[0].split(": [")[0][:60]

    j, t = both(outcome)
    if isinstance(t, str):
        assert j == t
    else:
        np.testing.assert_allclose(j[0], t[0], rtol=1e-6)
        assert j[1] == t[1]


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_softmax_kept_result_twice_differentiable():
    def hessian_row(lib):
        x, y = _softmax_node(lib)
        (g,) = lib.autograd.grad((y * lib.tensor([1.0, 2.0, 3.0])).sum(), x, create_graph=True)
        return lib.autograd.grad(g[0], x)[0].numpy()

    j, t = both(hessian_row)
    np.testing.assert_allclose(j, t, rtol=1e-6, atol=1e-7)


def test_short_softmax_grad_has_the_bits_of_the_reduce():
    from jitgrad.ops.nn import _softmax_grad
    rng = np.random.default_rng(2)
    for dtype in (np.float16, np.float32, np.float64):
        for n in range(1, 10):
            for _ in range(200):
                o, g = (rng.standard_normal((2, n)) * 10.0 ** rng.integers(-3, 3)).astype(dtype)
                if n > 2:
                    g[rng.integers(n)] = rng.choice([np.inf, -np.inf, np.nan, 0.0])
                with np.errstate(all="ignore"):
                    got = _softmax_grad(o, g, 0)
                    want = o * (g - np.add.reduce(g * o, axis=0, keepdims=True))
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (o, g)
