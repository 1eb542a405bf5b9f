"""Small-op eager workloads, jitgrad beside torch in one process.

W2: fwd+bwd of sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x)), N=16 float32.
W7: fwd+bwd of a 1000-op graph on 0-d tensors (the 100 elements of one leaf).
W5: Hessian-vector product of sum(tanh(A @ w)), A 512x512 float32.

    PYTHONPATH=. python asv_bench/eager_small_ops.py            # medians and ratios
    PYTHONPATH=. python asv_bench/eager_small_ops.py --profile  # cProfile of W2, W7

The two libraries run interleaved (one repeat of each in turn), so a busy
core slows both alike; each printed time is the median over the repeats.
The header says which OpenMP wait policy the run had: OMP_WAIT_POLICY=passive
makes torch's threads sleep after each parallel region, which slows torch's W5
in a process that runs jitgrad too (0.24 -> 0.33-0.41 ms); quote ratios with it.
"""
import argparse
import cProfile
import os
import pstats
import statistics
import time

import workloads

# workload -> steps per measurement (the definitions are in workloads.py)
WORKLOADS = {"W2": 2000, "W7": 10, "W5": 500}


def _libraries():
    """jitgrad, and torch beside it when installed."""
    libs = ["jitgrad"]
    try:
        workloads.library("torch")
        libs.append("torch")
    except NotImplementedError:
        pass
    return libs


def _time(step, number):
    t = time.perf_counter()
    for _ in range(number):
        step()
    return (time.perf_counter() - t) / number


def measure(repeats=15, names=WORKLOADS):
    """{name: {lib: median seconds per step}}, the libraries interleaved."""
    result = {}
    for name in names:
        number = WORKLOADS[name]
        steps = {lib: workloads.build(name, lib).step for lib in _libraries()}
        for step in steps.values():  # warm-up: compile kernels, fill caches
            _time(step, max(1, number // 10))
        samples = {k: [] for k in steps}
        for _ in range(repeats):
            for k, step in steps.items():
                samples[k].append(_time(step, max(1, number // repeats)))
        result[name] = {k: statistics.median(v) for k, v in samples.items()}
    return result


def _report(result):
    policy = os.environ.get("OMP_WAIT_POLICY", "unset (the OpenMP default)")
    print(f"OMP_WAIT_POLICY: {policy}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'':4} {'jitgrad':>12} {'torch':>12} {'ratio':>7}")
    for name, r in result.items():
        j, t = r["jitgrad"], r.get("torch")
        line = f"{name:4} {_fmt(j):>12}"
        if t is not None:
            line += f" {_fmt(t):>12} {j / t:7.2f}"
        print(line)


def _fmt(s):
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def profile(names=("W2", "W7"), top=25):
    for name in names:
        number = WORKLOADS[name]
        step = workloads.build(name, "jitgrad").step
        _time(step, max(1, number // 10))
        prof = cProfile.Profile()
        prof.enable()
        _time(step, number)
        prof.disable()
        print(f"--- {name}: {number} steps, top {top} by own time")
        pstats.Stats(prof).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="cProfile W2 and W7 instead")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = ap.parse_args()
    if args.profile:
        profile([w for w in args.workloads if w != "W5"])
    else:
        _report(measure(args.repeats, args.workloads))
