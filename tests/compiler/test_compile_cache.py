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
