"""First-step costs, each measured in fresh processes (medians of --repeat runs):

  import          `import jitgrad`
  first op        from the end of the import to the result of a first small op
                  (`sin` of 16 float32 elements)
  first W1        from the end of the import to the gradient of W1 at N=1e6
                  (`sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x))`, fwd+bwd);
                  then the third step, where compiled kernels take over from
                  the numpy stand-ins of the first two (docs/performance.md)

each with an empty JITGRAD_CACHE_DIR (cold) and with the folder a previous run
filled (warm). Then W3 (MLP 784-512-512-10, batch 256, float32, one SGD step,
steady state) in a process alone and in a process where torch ran a few matmuls
first, where thread pools of both libraries exist.

    python asv_bench/first_step.py [--repeat 3] [--skip-w3]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_FIRST = r"""
import json, sys, time
t0 = time.perf_counter()
import jitgrad
t1 = time.perf_counter()
what = sys.argv[1]
if what == "op":
    jitgrad.ones(16).sin().numpy()
    ends = [time.perf_counter()] * 3
else:
    sys.path.insert(0, sys.argv[2])
    from benchmarks.common import array, w1
    x = jitgrad.tensor(array(1_000_000), requires_grad=True)
    ends = []
    for _ in range(3):
        x.grad = None
        w1(x).backward()
        x.grad.numpy()
        ends.append(time.perf_counter())
print(json.dumps({"import": t1 - t0, "first": ends[0] - t1, "third": ends[2] - ends[1],
                  "compiled": jitgrad.compile_stats()["kernels_compiled"]}))
"""

_W3 = r"""
import json, sys, time
import numpy as np
if sys.argv[1] == "torch":
    import torch
    a = torch.randn(512, 512)
    for _ in range(5):
        a @ a
import jitgrad
rng = np.random.default_rng(1)
xb = jitgrad.tensor(rng.standard_normal((256, 784)).astype(np.float32))
yb = jitgrad.tensor(rng.integers(0, 10, 256))
model = jitgrad.nn.Sequential(jitgrad.nn.Linear(784, 512), jitgrad.nn.ReLU(),
                              jitgrad.nn.Linear(512, 512), jitgrad.nn.ReLU(),
                              jitgrad.nn.Linear(512, 10))
opt = jitgrad.optim.SGD(model.parameters(), lr=0.01)
def step():
    opt.zero_grad()
    jitgrad.nn.functional.cross_entropy(model(xb), yb).backward()
    opt.step()
for _ in range(5):
    step()
times = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    step()
    times.append(time.perf_counter() - t)
times.sort()
print(json.dumps({"step": times[len(times) // 2]}))
"""


def _run(script, args, env):
    out = subprocess.run([sys.executable, "-c", script, *args], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"measurement process failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_step(what, repeat):
    """{"cold": [...], "warm": [...]} of per-run dicts for `what` ("op" or "w1")."""
    res = {"cold": [], "warm": []}
    for _ in range(repeat):
        folder = tempfile.mkdtemp(prefix="jitgrad-first-step-")
        env = dict(os.environ, JITGRAD_CACHE_DIR=folder)
        try:
            res["cold"].append(_run(_FIRST, [what, HERE], env))
            res["warm"].append(_run(_FIRST, [what, HERE], env))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return res


def w3(repeat, steps=30):
    """Median W3 step (s) in a process alone and in one where torch ran first."""
    res = {}
    for mode in ("alone", "torch"):
        res[mode] = statistics.median(
            _run(_W3, [mode, str(steps)], dict(os.environ))["step"] for _ in range(repeat))
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip-w3", action="store_true")
    args = p.parse_args()
    med = statistics.median
    for what, label in (("op", "first op"), ("w1", "first W1 step, N=1e6")):
        r = first_step(what, args.repeat)
        for state in ("cold", "warm"):
            runs = r[state]
            third = "" if what == "op" else f", third step {med(x['third'] for x in runs):.3f} s"
            print(f"{label:22s} {state}: import {med(x['import'] for x in runs):.3f} s, "
                  f"then {med(x['first'] for x in runs):.3f} s{third} "
                  f"({med(x['compiled'] for x in runs):.0f} kernels compiled)")
    if not args.skip_w3:
        r = w3(args.repeat)
        print(f"W3 step: alone {r['alone'] * 1e3:.2f} ms, after torch {r['torch'] * 1e3:.2f} ms "
              f"({r['torch'] / r['alone']:.2f}x)")


if __name__ == "__main__":
    main()
