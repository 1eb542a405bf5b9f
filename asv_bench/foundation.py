"""Foundation numbers in one run: import, compile and per-op costs of jitgrad
against numpy+numba, torch eager and a hand-written fused Numba kernel.

    python asv_bench/foundation.py            # about a minute on 2 cores
    python asv_bench/foundation.py --quick    # fewer repeats

Every number is a median over repeats (the machines are noisy). Timings of
(a) and (b) run in fresh subprocesses; (c) and (d) in this process after a
warm-up, so they are steady state. Uses the jitgrad of this checkout.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

# OpenMP threads that spin while waiting make torch (and parallel Numba kernels) ~100x
# slower when another process holds a core; must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

from benchmarks.common import N_OPS, array, have_torch, make_step, reference_grad  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])),
    OMP_WAIT_POLICY="passive")


def run_python(code, env=None):
    """Run `code` in a fresh interpreter; it prints one JSON object as its last line."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True,
                         capture_output=True, text=True, env=env or ENV, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(xs):
    return statistics.median(xs)


def fmt_s(t):
    if t >= 1.0:
        return f"{t:7.2f} s "
    if t >= 1e-3:
        return f"{t * 1e3:7.1f} ms"
    return f"{t * 1e6:7.1f} us"


# ---- (a) import ----------------------------------------------------------------------------


IMPORT_CODE = """
import json, time
t = time.perf_counter()
import {modules}
print(json.dumps(time.perf_counter() - t))
"""


def section_import(repeats):
    print("(a) import time, fresh interpreter, median of", repeats)
    rows = [("import jitgrad", "jitgrad"), ("import numpy, numba  (baseline)", "numpy, numba")]
    if have_torch():
        rows.append(("import torch  (reference)", "torch"))
    for label, mods in rows:
        t = median([run_python(IMPORT_CODE.format(modules=mods)) for _ in range(repeats)])
        print(f"    {label:34s} {fmt_s(t)}")
    numba_loaded = run_python("""
        import json, sys, jitgrad
        print(json.dumps('numba' in sys.modules))""")
    print(f"    numba imported by `import jitgrad`: {numba_loaded}")


# ---- (b) first call: compile, warm disk cache ------------------------------------------------


FIRST_CALL_CODE = """
import json, time
t0 = time.perf_counter()
import numpy as np, jitgrad
x = jitgrad.tensor(np.linspace(-1, 1, 1000, dtype=np.float32))
t1 = time.perf_counter()
import numba
t2 = time.perf_counter()
jitgrad.sin(x)
t3 = time.perf_counter()
jitgrad.sin(x)
t4 = time.perf_counter()
jitgrad.cos(x)
t5 = time.perf_counter()
s = jitgrad.compile_stats()
print(json.dumps({"import_numba": t2 - t1, "first": t3 - t2, "second": t4 - t3,
                  "other_op": t5 - t4, "compiled": s["kernels_compiled"],
                  "disk_hits": s["disk_hits"]}))
"""


def section_first_call(repeats):
    print(f"(b) first call of jitgrad.sin on float32[1000], fresh interpreter, median of {repeats}")
    cold, warm = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="jitgrad-foundation-") as cache:
            env = dict(ENV, JITGRAD_CACHE_DIR=cache)
            cold.append(run_python(FIRST_CALL_CODE, env))  # empty cache: compiles
            warm.append(run_python(FIRST_CALL_CODE, env))  # same cache: loads from disk
    assert all(r["compiled"] == 2 for r in cold), cold
    assert all(r["compiled"] == 0 and r["disk_hits"] == 2 for r in warm), warm
    imp = median([r["import_numba"] for r in cold + warm])
    first_cold = median([r["first"] for r in cold])
    first_warm = median([r["first"] for r in warm])
    second = median([r["second"] for r in cold + warm])
    other_cold = median([r["other_op"] for r in cold])
    other_warm = median([r["other_op"] for r in warm])
    print(f"    import numba (jitgrad imports it lazily) {fmt_s(imp)}")
    print(f"    first call, empty cache (compile)        {fmt_s(first_cold)}")
    print(f"    first call, warm disk cache (load)       {fmt_s(first_warm)}")
    print(f"    second call                              {fmt_s(second)}")
    print(f"    then jitgrad.cos, a 2nd kernel: compile  {fmt_s(other_cold)}, "
          f"load {fmt_s(other_warm).strip()}")
    print(f"    end to end, first use in a process: {fmt_s(imp + first_cold).strip()} cold, "
          f"{fmt_s(imp + first_warm).strip()} warm")


# ---- (c), (d) the 10-op chain -----------------------------------------------------------------


def time_steps(steps, number, repeats):
    """Per impl: median over `repeats` of the mean time of `number` calls. The impls
    take turns within each repeat, so a burst of load hits all of them alike."""
    times = {impl: [] for impl in steps}
    for _ in range(repeats):
        for impl, step in steps.items():
            t = time.perf_counter()
            for _ in range(number):
                step()
            times[impl].append((time.perf_counter() - t) / number)
    return {impl: median(v) for impl, v in times.items()}


def steps_for(n):
    x = array(n, "float32")
    _, ref = reference_grad(x)
    out = {}
    for impl in ("jitgrad", "torch", "numba_fused"):
        try:
            step = make_step(impl, x)
        except NotImplementedError:
            continue
        for _ in range(3):
            g = step()
        g = np.asarray(g.detach().numpy() if hasattr(g, "detach") else g, np.float64)
        err = float(np.abs(g - ref).max())
        if err > 1e-4:
            raise SystemExit(f"{impl}: gradient differs from the float64 reference by {err}")
        out[impl] = step
    return out


def section_chain(n, number, repeats, per_op):
    steps = steps_for(n)
    t = time_steps(steps, number, repeats)
    for impl, v in t.items():
        line = f"    {impl:12s} {fmt_s(v)}"
        if per_op:
            line += f"   = {v / N_OPS * 1e6:6.2f} us per op"
        print(line)
    if "torch" in t:
        print(f"    jitgrad / torch eager       = {t['jitgrad'] / t['torch']:5.2f}x")
    print(f"    jitgrad / numba_fused       = {t['jitgrad'] / t['numba_fused']:5.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args()
    r_proc = 3 if args.quick else 5
    r_time = 5 if args.quick else 15

    import numba
    torch_version = "not installed"
    if have_torch():
        import torch
        torch.set_num_threads(2)
        torch_version = f"{torch.__version__} ({torch.get_num_threads()} threads)"
    import jitgrad
    print(f"jitgrad {jitgrad.__version__} | numba {numba.__version__} | numpy {np.__version__} | "
          f"torch {torch_version} | python {sys.version.split()[0]} | {os.cpu_count()} cpus | "
          f"load average {os.getloadavg()[0]:.2f}")
    print("chain: y = x; y = y*1.5, sin, +0.5, tanh, *0.8, exp, sigmoid, -0.25, sin, tanh; "
          "then y.backward(ones)")
    print("numba_fused: the chain's forward+backward as one hand-written @njit loop "
          "(prange from 2**18 elements)\n")

    section_import(r_proc)
    print()
    section_first_call(r_proc)
    print()
    print(f"(c) 10-op chain forward+backward, float32 N=1e6, median of {r_time}")
    section_chain(1_000_000, 1, r_time, per_op=False)
    print()
    print(f"(d) per-op overhead: the same chain at N=16, median of {r_time} x 200 calls")
    section_chain(16, 200, r_time, per_op=True)


if __name__ == "__main__":
    main()
