"""A second process running the same compiled training step loads every kernel
(fused kernels and the small-op interpreter) from the disk cache: it compiles none."""
import textwrap

from helpers import run_isolated

# Prints: kernels compiled, the loss of each step.
SCRIPT = textwrap.dedent("""
    import jitgrad
    import jitgrad.nn.functional as F
    from jitgrad import nn

    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.Tanh(), nn.Linear(96, 10))
    opt = jitgrad.optim.Adam(model.parameters(), lr=0.01)

    @jitgrad.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = jitgrad.randn(128, 64), jitgrad.randint(0, 10, (128,))
    losses = [float(step(x, y)) for _ in range(4)]
    assert step.traces == 1 and step.eager_calls == 0, (step.traces, step.breaks)
    assert step.wait()  # the executors' kernels, built in a worker thread, are ready
    # both compiled executors run: the fused kernels and the small-op interpreter
    executors = jitgrad.compile.explain(step, x, y).executors["forward"]
    assert {"fused", "scalar tape"} <= set(executors), executors
    print(jitgrad.compile_stats()["kernels_compiled"], *losses)
""")


def test_second_process_compiles_no_kernel(tmp_path):
    runs = []
    for _ in range(2):
        r = run_isolated(SCRIPT, JITGRAD_CACHE_DIR=str(tmp_path))
        assert r.returncode == 0, r.stderr[-3000:]
        compiled, *losses = r.stdout.split()
        runs.append((int(compiled), losses))
    (first, losses1), (second, losses2) = runs
    assert first > 0, "the first process compiled nothing: the test would prove nothing"
    assert second == 0 and losses1 == losses2


def test_a_trace_runs_inexact_eager_kernels_of_the_disk_cache_without_numba(tmp_path):
    """The disk cache holds, from eager runs, kernels of formulas whose numpy form
    differs in the last bit (exp, tanh): eager calls load them at once, for their
    bits, but a trace runs the numpy form rather than start Numba (0.3 s) for them;
    eager calls after the trace give the kernels' bits."""
    code = """
        import os, sys
        import numpy as np, jitgrad
        x = jitgrad.tensor(np.linspace(-3, 3, 1000, dtype=np.float32), requires_grad=True)

        def step(x):
            x.grad = None
            y = (x.exp() * x.tanh()).sum()  # small tensors: eager ufuncs, not deferred
            y.backward()
            return y
        if os.environ["STEP"] == "eager":
            for _ in range(4):  # (the third step compiles and caches the kernels)
                step(x)
        else:
            jitgrad.compile(step)(x)
            print("numba" in sys.modules)
            step(x)
        print(x.grad.numpy().tobytes().hex())
    """
    eager = run_isolated(code, JITGRAD_CACHE_DIR=str(tmp_path), STEP="eager")
    assert eager.returncode == 0, eager.stderr
    traced = run_isolated(code, JITGRAD_CACHE_DIR=str(tmp_path), STEP="trace")
    assert traced.returncode == 0, traced.stderr
    numba, bits = traced.stdout.split()
    assert numba == "False"
    assert bits == eager.stdout.split()[-1]  # the kernels' bits, not numpy's
