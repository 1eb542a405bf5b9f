"""NUMBA_DISABLE_JIT=1, Numba's switch for debugging kernels: every @njit kernel
then runs as Python. jitgrad's must give what the compiled ones give, edges
included (exp overflowing to inf, log(0) = -inf, where Python's math raises),
through each kind of kernel: an op's ufunc, the loop kernels of large
tensors, optimizer updates, and a compiled step's scalar tape and fused
kernels. Each side runs in a fresh process (the switch is read at start-up)."""
import json

import numpy as np

from helpers import run_isolated

SCRIPT = """
import json, numba, numpy as np, jitgrad
from jitgrad.kernels import cpu
out = {"jit": not numba.config.DISABLE_JIT}

def run(n, steps):
    rng = np.random.default_rng(0)
    x = jitgrad.tensor(rng.uniform(-3, 3, n).astype(np.float32), requires_grad=True)
    w = jitgrad.tensor(rng.uniform(-1, 1, n).astype(np.float32), requires_grad=True)
    opt = jitgrad.optim.Adam([x], lr=0.01)
    sgd = jitgrad.optim.SGD([w], lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad(); sgd.zero_grad()
        y = (x.sin() * x.tanh() + (x * w).exp() * 0.25 + (x * x).log1p() - w.sigmoid()).sum()
        y.backward()
        opt.step(); sgd.step()
        losses.append(float(y))
    return losses, x.detach().numpy().tolist(), w.detach().numpy().tolist()

# eager: small tensors (ufuncs), then large ones until loop kernels replace numpy
out["small"] = run(7, 3)
out["large"] = run(300_000, cpu.PROMOTE_AFTER_STEPS + 1)[0]

# edges where Python's math raises and compiled code gives inf or nan
e = jitgrad.tensor([100.0, 0.0, -1.0, 1e30], dtype=jitgrad.float32)
out["edges"] = [str(v) for v in (e.exp() + e.log() + e.sqrt()).tolist()]

@jitgrad.compile
def step(x, w):
    x.grad = None
    w.grad = None
    loss = ((x * w).exp().tanh() + (x - w).abs().sqrt()).sum()
    loss.backward()
    return loss

for n, key in ((16, "scalar tape"), (300_000, "fused")):
    x = jitgrad.linspace(-2, 2, n, requires_grad=True)
    w = jitgrad.linspace(1, -3, n, requires_grad=True)
    for _ in range(3):
        loss = step(x, w)
        step.wait()
    out[key] = [float(loss), float(x.grad.sum()), float(w.grad.sum()),
                key in str(jitgrad.compile.explain(step, x, w))]
print(json.dumps(out))
"""


def _results(**env):
    r = run_isolated(SCRIPT, **env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_kernels_run_as_python_with_numbas_jit_disabled_and_match_compiled_ones(tmp_path):
    compiled = _results()  # (the session's kernel cache: kernels compiled once)
    python = _results(NUMBA_DISABLE_JIT="1", JITGRAD_CACHE_DIR=str(tmp_path / "python"))
    assert compiled["jit"] and not python["jit"]
    assert python["edges"] == compiled["edges"] == ["inf", "-inf", "nan", "inf"]
    for key in ("small", "large"):
        np.testing.assert_allclose(np.concatenate([np.ravel(v) for v in python[key]]),
                                   np.concatenate([np.ravel(v) for v in compiled[key]]),
                                   rtol=2e-5, atol=1e-5, err_msg=key)
    for key in ("scalar tape", "fused"):
        assert python[key][3] and compiled[key][3], f"the {key} did not run"
        np.testing.assert_allclose(python[key][:3], compiled[key][:3], rtol=2e-5, err_msg=key)
