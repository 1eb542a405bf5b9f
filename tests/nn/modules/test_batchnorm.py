"""BatchNorm1d/2d/3d against torch.nn: training and eval outputs, gradients, running
statistics (momentum, cumulative average), buffers and state_dict names, options, reprs
and errors."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

import helpers

torch = pytest.importorskip("torch")

SHAPES = {"BatchNorm1d": [(6, 3), (4, 3, 5)], "BatchNorm2d": [(4, 3, 2, 5)],
          "BatchNorm3d": [(2, 3, 2, 2, 3)]}
OPTIONS = [dict(), dict(momentum=None), dict(momentum=0.3, eps=1e-3), dict(affine=False),
           dict(track_running_stats=False), dict(bias=False)]


def pair(cls, **kwargs):
    jg = getattr(nn, cls)(3, dtype=jitgrad.float64, **kwargs)
    th = getattr(torch.nn, cls)(3, dtype=torch.float64, **kwargs)
    with torch.no_grad():
        for p in th.parameters():
            p.uniform_(0.5, 1.5)
    jg.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in th.state_dict().items()})
    return jg, th


def assert_state_equal(jg, th):
    js, ts = jg.state_dict(), th.state_dict()
    assert list(js) == list(ts)
    for k in ts:
        helpers.assert_same(js[k], ts[k], rtol=1e-12, atol=1e-12, what=k)


@pytest.mark.parametrize("kwargs", OPTIONS, ids=lambda k: ",".join(map(str, k.items())) or "default")
@pytest.mark.parametrize("cls, shape", [(c, s) for c, shapes in SHAPES.items() for s in shapes])
def test_training_steps_then_eval_match_torch(cls, shape, kwargs):
    jg, th = pair(cls, **kwargs)
    rng = helpers.rng_for("bn", cls, shape, tuple(kwargs.items()))
    for step in range(3):
        x = rng.standard_normal(shape) * 2 + step
        xj = jitgrad.tensor(x, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        w = rng.standard_normal(shape)
        oj, ot = jg(xj), th(xt)
        helpers.assert_same(oj, ot, rtol=1e-10, atol=1e-12)
        (oj * jitgrad.tensor(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        helpers.assert_same(xj.grad, xt.grad, rtol=1e-8, atol=1e-10, what="input grad")
        for (name, a), b in zip(jg.named_parameters(), th.parameters()):
            helpers.assert_same(a.grad, b.grad, rtol=1e-8, atol=1e-10, what=name)
        assert_state_equal(jg, th)
    jg.eval(), th.eval()
    x = rng.standard_normal(shape)
    helpers.assert_same(jg(jitgrad.tensor(x)), th(torch.tensor(x)), rtol=1e-10, atol=1e-12)
    assert_state_equal(jg, th)  # eval leaves the statistics alone


def test_buffers_state_dict_and_repr_match_torch():
    for kwargs in OPTIONS:
        for cls in SHAPES:
            jg, th = getattr(nn, cls)(4, **kwargs), getattr(torch.nn, cls)(4, **kwargs)
            assert repr(jg) == repr(th)
            assert list(jg.state_dict()) == list(th.state_dict())
            assert [n for n, _ in jg.named_buffers()] == [n for n, _ in th.named_buffers()]
            assert [n for n, _ in jg.named_parameters()] == [n for n, _ in th.named_parameters()]
    bn = nn.BatchNorm2d(4)
    assert bn.num_batches_tracked.dtype == jitgrad.int64 and bn.num_batches_tracked.item() == 0
    assert bn.running_var.tolist() == [1.0] * 4 and bn.weight.requires_grad


def test_running_stats_are_updated_in_place_without_grad():
    bn = nn.BatchNorm1d(2)
    mean, var = bn.running_mean, bn.running_var
    v0 = mean._version
    bn(jitgrad.tensor([[1.0, 2.0], [3.0, 6.0]], requires_grad=True))
    assert bn.running_mean is mean and bn.running_var is var and mean._version > v0
    assert not mean.requires_grad and mean.grad_fn is None
    np.testing.assert_allclose(mean.numpy(), [0.2, 0.4])
    np.testing.assert_allclose(var.numpy(), [0.9 + 0.1 * 2.0, 0.9 + 0.1 * 8.0])


def test_reset_running_stats_and_eval_without_stats():
    bn = nn.BatchNorm1d(2)
    bn(jitgrad.tensor([[1.0, 2.0], [3.0, 6.0]]))
    bn.reset_running_stats()
    assert bn.running_mean.tolist() == [0.0, 0.0] and bn.num_batches_tracked.item() == 0
    # without running statistics, eval mode normalizes with the batch's, as torch
    x = np.array([[1.0, 2.0], [3.0, 6.0], [0.0, -1.0]], dtype=np.float32)
    jg = nn.BatchNorm1d(2, track_running_stats=False).eval()
    th = torch.nn.BatchNorm1d(2, track_running_stats=False).eval()
    helpers.assert_same(jg(jitgrad.tensor(x)), th(torch.tensor(x)), rtol=1e-6, atol=1e-6)


def test_state_dict_round_trip_with_torch():
    th = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    th(torch.randn(5, 3))
    jg = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    jg.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in th.state_dict().items()})
    assert jg[1].num_batches_tracked.item() == 1
    assert list(jg.state_dict()) == list(th.state_dict())


def test_checkpoint_without_num_batches_tracked_loads_as_in_torch():
    """State dicts from before torch 0.4 lack the counter; torch keeps the module's own."""
    old = {k: v for k, v in torch.nn.BatchNorm1d(3).state_dict().items()
           if k != "num_batches_tracked"}
    th = torch.nn.BatchNorm1d(3)
    th.num_batches_tracked.fill_(5)
    th.load_state_dict(old)
    jg = nn.BatchNorm1d(3)
    jg.num_batches_tracked.fill_(5)
    assert repr(jg.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in old.items()})) == \
        "<All keys matched successfully>"
    assert jg.num_batches_tracked.item() == th.num_batches_tracked.item() == 5
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "running_var"'):
        nn.BatchNorm1d(3).load_state_dict({"weight": jitgrad.ones(3), "bias": jitgrad.zeros(3),
                                           "running_mean": jitgrad.zeros(3)})


@pytest.mark.parametrize("cls, shape", [("BatchNorm1d", (2, 3, 2, 2)), ("BatchNorm1d", (3,)),
                                        ("BatchNorm2d", (2, 3)), ("BatchNorm3d", (2, 3, 4)),
                                        ("BatchNorm1d", (1, 3)), ("BatchNorm2d", (1, 3, 1, 1))])
def test_errors_match_torch(cls, shape):
    jg, th = getattr(nn, cls)(3), getattr(torch.nn, cls)(3)
    with pytest.raises(ValueError) as e_th:
        th(torch.zeros(shape))
    with pytest.raises(ValueError) as e_jg:
        jg(jitgrad.zeros(shape))
    assert str(e_jg.value) == str(e_th.value).replace("torch.Size", "jitgrad.Size")
    # refused before anything changed (torch counts the refused batch)
    assert jg.num_batches_tracked.item() == 0


def test_dtype_and_device_conversion_keep_buffers():
    bn = nn.BatchNorm1d(2).double()
    assert bn.running_mean.dtype == jitgrad.float64 and bn.num_batches_tracked.dtype == jitgrad.int64
    out = bn(jitgrad.tensor([[1.0, 2.0], [3.0, 6.0]], dtype=jitgrad.float64))
    assert out.dtype == jitgrad.float64
