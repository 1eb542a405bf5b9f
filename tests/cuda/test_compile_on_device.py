"""jitgrad.compile on device tensors (the `device` fixture: the CPU, and CUDA on a
GPU or under Numba's CUDA simulator): the capture replays the same ops on the
device, equal to eager mode there. Tensors this small are no executor's on the
device, so the program runs on the Python tier; the test checks that too
(test_compile_cuda_fused.py covers the CUDA executor)."""
import numpy as np

import jitgrad
import jitgrad.nn.functional as F

import helpers


def _chain_step(x):
    x.grad = None
    y = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * x) + 0.5 * x) * jitgrad.sigmoid(x)).sum()
    y.backward()
    return y


def test_a_compiled_step_equals_eager_on_the_device(device):
    arr = np.linspace(-2, 2, 12, dtype=np.float32)
    eager = jitgrad.tensor(arr, device=device, requires_grad=True)
    comp = jitgrad.tensor(arr, device=device, requires_grad=True)
    step = jitgrad.compile(_chain_step, mode="max-autotune")
    for _ in range(4):
        want, got = _chain_step(eager), step(comp)
        assert got.device == eager.device and comp.grad.device == eager.device
        np.testing.assert_allclose(helpers.to_numpy(got), helpers.to_numpy(want), rtol=1e-6)
        np.testing.assert_allclose(helpers.to_numpy(comp.grad), helpers.to_numpy(eager.grad),
                                   rtol=1e-6, atol=1e-7)
    # The step clears .grad before anything reads it, so its state is no guard: one trace.
    assert step.traces == 1 and not step.breaks
    report = jitgrad.compile.explain(_chain_step, comp)
    if device == "cuda":
        assert set(report.executors["forward"]) == {"python"}


def test_a_compiled_training_step_on_the_device(device):
    rng = np.random.default_rng(0)
    xb = jitgrad.tensor(rng.standard_normal((6, 4)).astype(np.float32), device=device)
    yb = jitgrad.tensor(np.array([0, 1, 2, 0, 1, 2]), device=device)
    models = []
    for _ in range(2):
        jitgrad.manual_seed(0)
        m = jitgrad.nn.Linear(4, 3).to(device)
        models.append((m, jitgrad.optim.Adam(m.parameters(), lr=0.1)))

    def step(model, opt):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss
    compiled = jitgrad.compile(step)
    for _ in range(3):
        want, got = step(*models[0]), compiled(*models[1])
        np.testing.assert_allclose(helpers.to_numpy(got), helpers.to_numpy(want), rtol=1e-5)
    for p, q in zip(models[0][0].parameters(), models[1][0].parameters()):
        np.testing.assert_allclose(helpers.to_numpy(q), helpers.to_numpy(p), rtol=1e-5,
                                   atol=1e-6)
    assert compiled.traces == 1 and not compiled.breaks
