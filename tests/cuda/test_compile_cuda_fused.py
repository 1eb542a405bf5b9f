"""jitgrad.compile on CUDA tensors: runs of elementwise work, full reductions and
gradient accumulation run as generated numba.cuda kernels (compiler/cuda_fused.py),
equal to eager mode on the device. Under the simulator the sizes stay small: the
size threshold is lowered so that a few hundred elements count as large."""
import numpy as np
import pytest

import jitgrad
from jitgrad.compiler import cuda_fused, fused

import helpers

N = 300


@pytest.fixture(autouse=True)
def launches(monkeypatch):
    """The kernel launches of the CUDA executor, counted."""
    if not jitgrad.cuda.is_available():
        pytest.skip("no usable CUDA here (numba-cuda or a GPU missing): the simulator run "
                    "covers this case (NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda)")
    monkeypatch.setattr(fused, "SMALL_ELEMENTS", 64)
    seen = []
    launch = cuda_fused.CudaLaunch.launch
    monkeypatch.setattr(cuda_fused.CudaLaunch, "launch",
                        lambda self, *a: seen.append(self) or launch(self, *a))
    return seen


def _numpy(t):
    return helpers.to_numpy(t)


def _tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


def _chain_step(x, reset):
    if reset:
        x.grad = None
    y = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * x) + 0.5 * x) * jitgrad.sigmoid(x)).sum()
    y.backward()
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reset", [True, False], ids=["fresh-grad", "accumulated-grad"])
def test_a_compiled_step_runs_as_cuda_kernels_and_equals_eager(dtype, reset, launches):
    arr = np.linspace(-2, 2, N, dtype=dtype)
    eager = jitgrad.tensor(arr, device="cuda", requires_grad=True)
    comp = jitgrad.tensor(arr, device="cuda", requires_grad=True)
    step = jitgrad.compile(_chain_step, mode="max-autotune")  # builds its kernels at once
    tol = _tolerance(dtype)
    for _ in range(4):
        want, got = _chain_step(eager, reset), step(comp, reset)
        assert got.device.type == "cuda" and comp.grad.device.type == "cuda"
        assert got.dtype == want.dtype and comp.grad.dtype == eager.grad.dtype
        np.testing.assert_allclose(_numpy(got), _numpy(want), **tol)
        np.testing.assert_allclose(_numpy(comp.grad), _numpy(eager.grad), **tol)
    # a call that traces runs eagerly; a replay is one kernel: the forward, the sum and
    # the backward into x.grad (the sum's gradient does not wait for the sum)
    assert step.traces <= 2 and len(launches) == 4 - step.traces
    report = jitgrad.compile.explain(_chain_step, comp, reset)
    claimed = report.executors["forward"]
    assert claimed["cuda"][0] == 1 and claimed.get("python", (0, 0))[1] <= 1, claimed


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_python_numbers_and_0d_tensors_broadcast_in_the_kernels(dtype, launches):
    rng = helpers.rng_for("cuda-fused-bcast")
    arr = rng.uniform(-1, 1, N).astype(dtype)

    def step(x, w, b):
        loss = ((x * w + 2.0) ** 2 / b - 1.5 * x).mean()
        loss.backward()
        return loss

    def tensors():
        return (jitgrad.tensor(arr, device="cuda", requires_grad=True),
                jitgrad.tensor(dtype(0.7), device="cuda", requires_grad=True),
                jitgrad.tensor(dtype(3.0), device="cuda"))
    eager, comp = tensors(), tensors()
    compiled = jitgrad.compile(step, mode="max-autotune")
    tol = _tolerance(dtype)
    for _ in range(3):
        want, got = step(*eager), compiled(*comp)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(_numpy(got), _numpy(want), **tol)
        for a, b in zip(comp[:2], eager[:2]):
            assert a.grad.shape == b.grad.shape and a.grad.device.type == "cuda"
            np.testing.assert_allclose(_numpy(a.grad), _numpy(b.grad), **tol)
    # the replay: w's gradient is a full sum in the kernels, x's accumulated in them
    assert any(launch.reds for launch in launches) and any(launch.sinks for launch in launches)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_full_sum_adds_up_in_float64(dtype, launches):
    arr = helpers.rng_for("cuda-fused-sum").uniform(0, 1, 1000).astype(dtype)
    x = jitgrad.tensor(arr, device="cuda")
    f = jitgrad.compile(lambda x: (x * x + 1.0).sum(), mode="max-autotune")
    f(x)  # the call that traces runs eagerly
    got = f(x)
    assert got.shape == () and got.dtype == x.dtype and got.device.type == "cuda"
    want = (arr.astype(np.float64) ** 2 + 1.0).sum()
    np.testing.assert_allclose(_numpy(got), want, rtol=1e-6 if dtype == np.float32 else 1e-13)
    assert len(launches) == 1 and launches[0].reds


def test_the_length_guard_raises_before_the_launch(launches):
    x = jitgrad.tensor(np.ones(N, np.float32), device="cuda")
    f = jitgrad.compile(lambda x: jitgrad.exp(x) * 2.0, mode="max-autotune")
    f(x)
    f(x)
    (launch,) = launches
    short = jitgrad.tensor(np.ones(N - 1, np.float32), device="cuda")._data
    out = jitgrad.tensor(np.zeros(N, np.float32), device="cuda")._data
    with pytest.raises(ValueError, match="operand 0 has 299 elements, n is 300"):
        launch.launch(("=",), N, 1, [short], [], [out], [])
    np.testing.assert_array_equal(out.get(), 0)  # nothing ran


def test_a_run_with_row_reductions_is_left_to_the_python_tier(launches):
    """fused.py plans a layer norm's row means and its per-column weight as kernels
    over rows, which the CUDA executor does not build: it declines the run, and the
    step runs op by op on the device, equal to eager mode."""
    rng = helpers.rng_for("cuda-fused-rows")
    arr = rng.uniform(-1, 1, (10, 30)).astype(np.float32)
    warr = rng.uniform(0.5, 1.5, 30).astype(np.float32)

    def step(x, w):
        d = x - x.mean(-1, keepdim=True)
        loss = (d / ((d * d).mean(-1, keepdim=True) + 1e-5) ** 0.5 * w).sum()
        loss.backward()
        return loss

    def tensors(device):
        return (jitgrad.tensor(arr, device=device, requires_grad=True),
                jitgrad.tensor(warr, device=device, requires_grad=True))
    # on CPU arrays the same step is fused kernels (over rows)
    assert "fused" in jitgrad.compile.explain(step, *tensors("cpu")).executors["forward"]
    eager, comp = tensors("cuda"), tensors("cuda")
    compiled = jitgrad.compile(step, mode="max-autotune")
    tol = _tolerance(np.float32)
    for _ in range(3):
        want, got = step(*eager), compiled(*comp)
        np.testing.assert_allclose(_numpy(got), _numpy(want), **tol)
        for a, b in zip(comp, eager):
            assert a.grad.device.type == "cuda"
            np.testing.assert_allclose(_numpy(a.grad), _numpy(b.grad), **tol)
    claimed = jitgrad.compile.explain(step, *tensors("cuda")).executors["forward"]
    assert "cuda" not in claimed and "python" in claimed, claimed
    assert launches == []


def test_the_sum_of_a_constant_gradient_is_known_without_adding_up(launches):
    """b's gradient in (f(x) + b).sum() is the sum of the loss's gradient of ones
    over x's elements: the plan knows it (N), no kernel adds it up."""
    arr = np.linspace(-1, 1, N)

    def step(x, b):
        loss = (jitgrad.exp(x) + b).sum()
        loss.backward()
        return loss

    def tensors():
        return (jitgrad.tensor(arr, device="cuda", requires_grad=True),
                jitgrad.tensor(np.float32(0.5), device="cuda", requires_grad=True))
    eager, comp = tensors(), tensors()
    compiled = jitgrad.compile(step, mode="max-autotune")
    for _ in range(3):
        np.testing.assert_allclose(_numpy(compiled(*comp)), _numpy(step(*eager)), rtol=1e-13)
        for a, b in zip(comp, eager):
            assert a.grad.dtype == b.grad.dtype and a.grad.device.type == "cuda"
            np.testing.assert_allclose(_numpy(a.grad), _numpy(b.grad), rtol=1e-13)
    assert _numpy(comp[1].grad) == 3 * N
    assert any(launch.known for launch in launches)
