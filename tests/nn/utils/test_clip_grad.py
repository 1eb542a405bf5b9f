"""clip_grad_norm_, clip_grad_value_, get_total_norm and clip_grads_with_norm_ against
torch.nn.utils: returned norms, clipped gradients (in place), norm types and errors."""
import math

import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


def params_with_grads(lib, scale, dtype="float64"):
    rng = np.random.default_rng(3)
    ps = []
    for shape in ((3, 4), (4,), (2, 2, 2)):
        p = lib.nn.Parameter(lib.tensor(rng.standard_normal(shape).astype(dtype)))
        p.grad = lib.tensor((rng.standard_normal(shape) * scale).astype(dtype))
        ps.append(p)
    ps.append(lib.nn.Parameter(lib.zeros(2, dtype=getattr(lib, dtype))))  # no grad: skipped
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, "inf", -math.inf, 0])
@pytest.mark.parametrize("scale", [0.01, 10.0])
def test_clip_grad_norm_matches_torch(norm_type, scale):
    results = []
    for lib in (jitgrad, torch):
        ps = params_with_grads(lib, scale)
        grads = [p.grad for p in ps if p.grad is not None]
        total = lib.nn.utils.clip_grad_norm_(ps, max_norm=1.5, norm_type=norm_type)
        assert all(p.grad is g for p, g in zip(ps, grads))  # clipped in place
        results.append([total] + grads)
    for a, b in zip(*results):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]


def test_single_tensor_empty_list_float32_and_generator():
    for lib in (jitgrad, torch):
        p = lib.nn.Parameter(lib.ones(3))
        p.grad = lib.full((3,), 4.0)
        total = lib.nn.utils.clip_grad_norm_(p, 2.0)
        assert abs(total.item() - math.sqrt(48)) < 1e-5 and total.dtype == lib.float32
        assert abs(float(p.grad.norm()) - 2.0) < 1e-5
        empty = lib.nn.utils.clip_grad_norm_([], 1.0)
        assert empty.item() == 0.0 and empty.ndim == 0
        gen = (q for q in [p])
        assert lib.nn.utils.clip_grad_norm_(gen, 10.0).item() > 0


def test_error_if_nonfinite_matches_torch():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(2))
        p.grad = lib.tensor([1.0, float("inf")])
        with pytest.raises(RuntimeError) as info:
            lib.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        assert p.grad.tolist() == [1.0, float("inf")]  # unchanged
        return str(info.value)
    assert run(jitgrad) == run(torch)
    p = nn.Parameter(jitgrad.ones(2))
    p.grad = jitgrad.tensor([1.0, float("nan")])
    assert math.isnan(nn.utils.clip_grad_norm_([p], 1.0).item())  # default: scale anyway


def test_total_norm_and_clip_with_norm_match_torch():
    results = []
    for lib in (jitgrad, torch):
        ps = params_with_grads(lib, 5.0)
        total = lib.nn.utils.get_total_norm([p.grad for p in ps if p.grad is not None], 2.0)
        lib.nn.utils.clip_grads_with_norm_(ps, 2.0, total)
        results.append([total] + [p.grad for p in ps if p.grad is not None])
    for a, b in zip(*results):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_clip_grad_value_matches_torch():
    results = []
    for lib in (jitgrad, torch):
        ps = params_with_grads(lib, 2.0)
        grads = [p.grad for p in ps if p.grad is not None]
        assert lib.nn.utils.clip_grad_value_(ps, clip_value=0.7) is None
        assert all(p.grad is g for p, g in zip(ps, grads))
        results.append(grads)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_clipping_does_not_record_a_graph():
    for lib in (jitgrad, torch):
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0, 3.0]))
        (p * p).sum().backward(create_graph=True)
        node = p.grad.grad_fn
        total = lib.nn.utils.clip_grad_norm_([p], 1.0)
        assert not total.requires_grad and p.grad.grad_fn is node
        np.testing.assert_allclose(p.grad.detach().numpy(), np.array([1, 2, 3]) / np.sqrt(14),
                                   rtol=1e-5)
