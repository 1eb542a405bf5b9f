"""jitgrad's backward fusion against torch eager, torch.compile and a hand-written
one-pass Numba kernel, in one run:

    python asv_bench/compare.py                       # N = 1e6 and 1e7, ~10 minutes on 2 cores
    python asv_bench/compare.py --sizes 1e6 --repeat 5 --no-compile

Workloads (float32, gradient wrt x, both end in a sum; see benchmarks/common.py):
  W1     y = sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x))
  arith  a 10-op arithmetic-only chain with fan-out, then a sum

Sections:
  [1] time: forward+backward ("step") and backward alone (graph built untimed,
      `.backward()` timed); medians over --repeat samples, impls interleaved
      within each sample so a burst of load hits all of them alike.
  [2] memory: a fresh process per impl; peak RSS (VmHWM) during 11 steady-state
      steps above the RSS before them, and minor page faults per step.
  [3] replay cost: what the engine adds per backward to find the fused groups
      (fusion.plan) and their compiled kernels (signature lookup).
  [4] cold start: a fresh process with an empty JITGRAD_CACHE_DIR runs one W1
      step, then a second fresh process with the same cache dir.
  [5] the targets, each PASS or FAIL with the numbers above.

Every figure is measured on a shared machine: compare medians and ratios, and
read them with the load average printed beside them.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

# OpenMP threads that spin while waiting make torch (and parallel Numba kernels) ~100x
# slower when another process holds a core; must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.common import LossCase, array, have_torch, make_loss_case  # noqa: E402

WORKLOADS = ("w1", "arith")
LABEL = {"fused": "jitgrad fused", "unfused": "jitgrad unfused", "torch": "torch eager",
         "torch_compile": "torch.compile", "numba_hand": "hand 1-pass libm",
         "numba_hand_vm": "hand 1-pass vmath"}
IMPLS = ("fused", "unfused", "torch", "torch_compile", "numba_hand", "numba_hand_vm")


def hand_ref(d):
    """The hand kernel a workload is compared with: the one with jitgrad's vmath
    where there is one (W1: the same math as jitgrad's kernels), else libm's."""
    return "numba_hand_vm" if "numba_hand_vm" in d else "numba_hand"
COMPILE_LIMIT_S = 60.0
WORKER_TIMEOUT_S = 600


def load():
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def fmt_t(t):
    if t is None:
        return "n/a"
    if t >= 1.0:
        return f"{t:.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.1f} us"


def fmt_n(n):
    e = int(round(np.log10(n)))
    return f"1e{e}" if 10 ** e == n else str(n)


def env_for_children(**extra):
    path = [ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), OMP_WAIT_POLICY="passive", **extra)


def run_json(args, env, timeout=WORKER_TIMEOUT_S):
    """Run a child python; its last stdout line is a JSON object."""
    try:
        out = subprocess.run([sys.executable] + args, capture_output=True, text=True, env=env,
                             timeout=timeout, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {out.returncode}: " + " | ".join(tail)}
    return json.loads(lines[-1])


# ---- building the implementations -----------------------------------------------------------


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def build_torch_compile(workload, n):
    """(case, compile seconds) or (None, reason). The first call compiles; it is
    abandoned after COMPILE_LIMIT_S."""
    if not have_torch():
        return None, "torch is not installed"
    try:
        case = LossCase("torch_compile", workload, array(n, "float32"))
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, COMPILE_LIMIT_S)
        t = time.perf_counter()
        try:
            case.step()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        compile_s = time.perf_counter() - t
        case.step()
        case.check()
    except _Timeout:
        return None, f"compile took more than {COMPILE_LIMIT_S:.0f} s"
    except Exception as e:  # torch.compile has many ways to fail (no compiler, ...)
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    return case, compile_s


def build_cases(workload, n, with_compile):
    cases, notes = {}, {}
    for impl in ("fused", "unfused", "torch", "numba_hand", "numba_hand_vm"):
        try:
            cases[impl] = make_loss_case(impl, workload, n)
        except NotImplementedError as e:
            notes[impl] = str(e)
    if with_compile:
        case, info = build_torch_compile(workload, n)
        if case is None:
            notes["torch_compile"] = info
        else:
            cases["torch_compile"] = case
            notes["torch_compile"] = f"first call (compile) {info:.1f} s"
    else:
        notes["torch_compile"] = "skipped (--no-compile)"
    return cases, notes


# ---- [1] time -------------------------------------------------------------------------------


def time_cases(cases, repeat):
    """Medians of step and backward-only time per impl."""
    number = {}
    for impl, case in cases.items():  # calls per sample: at least ~20 ms of work
        t = time.perf_counter()
        case.step()
        number[impl] = max(1, min(200, int(0.02 / max(time.perf_counter() - t, 1e-7))))
    step = {impl: [] for impl in cases}
    bwd = {impl: [] for impl in cases}
    order = list(cases)
    for r in range(repeat):
        for impl in order[r % len(order):] + order[:r % len(order)]:
            case, k = cases[impl], number[impl]
            t = time.perf_counter()
            for _ in range(k):
                case.step()
            step[impl].append((time.perf_counter() - t) / k)
            total = 0.0
            for _ in range(k):
                y = case.forward()
                t = time.perf_counter()
                case.backward(y)
                total += time.perf_counter() - t
            bwd[impl].append(total / k)
    return ({i: statistics.median(v) for i, v in step.items()},
            {i: statistics.median(v) for i, v in bwd.items()})


def section_time(sizes, repeat, with_compile, results):
    print(f"[1] time per step (forward+backward) and backward alone; median of {repeat} samples")
    print("    speed-up = torch eager time / this time (>1: faster than torch eager);")
    print("    / hand = this time / the hand-written one-pass kernel's time (1.0: as fast): for W1")
    print("    the one using jitgrad's vmath (the math jitgrad's kernels use), for arith the only")
    print("    one")
    for workload in WORKLOADS:
        for n in sizes:
            cases, notes = build_cases(workload, n, with_compile)
            step, bwd = time_cases(cases, repeat)
            results[("time", workload, n)] = (step, bwd)
            print(f"\n  {workload}  N={fmt_n(n)}   ({load()})")
            print(f"    {'impl':18s} {'step':>10s} {'speed-up':>9s} {'/ hand':>7s}   "
                  f"{'backward':>10s} {'speed-up':>9s} {'/ hand':>7s}")
            ref = hand_ref(step)
            for impl in IMPLS:
                if impl not in step:
                    print(f"    {LABEL[impl]:18s} n/a: {notes.get(impl, '')}")
                    continue
                row = [f"    {LABEL[impl]:18s}"]
                for d in (step, bwd):
                    t = d[impl]
                    su = f"{d['torch'] / t:8.2f}x" if "torch" in d else "      n/a"
                    vh = f"{t / d[ref]:6.2f}x" if ref in d else "    n/a"
                    row.append(f"{fmt_t(t):>10s} {su} {vh}  ")
                print(" ".join(row).rstrip())
            if "torch_compile" in notes and "torch_compile" in step:
                print(f"    (torch.compile: {notes['torch_compile']})")
            del cases
    print("\n    The hand kernels have no separate backward: both columns time their one pass,")
    print("    which writes into a preallocated gradient buffer.")


# ---- [2] memory -----------------------------------------------------------------------------


MEMORY_WORKER = """
import gc, json, sys
sys.path.insert(0, {here!r})
from benchmarks import common
impl, workload, n = {impl!r}, {workload!r}, {n!r}
case = common.LossCase(impl, workload, common.array(n, "float32"))
for _ in range(2):
    case.step()      # kernels were compiled by the parent: these load them
case.check()
def prepare():
    if impl in ("fused", "unfused"):
        from jitgrad.kernels.pool import clear_pool
        case.x.grad = None
        clear_pool()   # buffers the pool keeps between steps count as the step's
    elif impl != "numba_hand":
        case.x.grad = None
peak, faults, held = common.peak_above_baseline(case.step, prepare, steps=10)
print(json.dumps({{"peak_mib": peak, "faults": faults, "held_mib": held}}))
"""


def section_memory(sizes, impls, results):
    print(f"\n[2] memory: a fresh process per impl ({load()})")
    print("    peak = VmHWM during 11 steady-state steps - VmRSS just before them (after warm-up,")
    print("    gc, malloc_trim and, for jitgrad, emptying its array pool: memory the steps take")
    print("    back counts); held = VmRSS after the steps - that baseline (kept between steps);")
    print("    pf = minor page faults per step over the last 10 steps. Cells: peak/held MiB pf")
    print(f"    {'':12s}" + "".join(f"{LABEL[i]:>27s}" for i in impls))
    env = env_for_children()
    for workload in WORKLOADS:
        for n in sizes:
            cells = []
            for impl in impls:
                code = MEMORY_WORKER.format(here=HERE, impl=impl, workload=workload, n=n)
                r = run_json(["-c", textwrap.dedent(code)], env)
                results[("mem", workload, n, impl)] = r
                cells.append("n/a" if "error" in r else
                             f"{r['peak_mib']:.1f}/{r['held_mib']:.1f} MiB {r['faults']:.0f} pf")
            print(f"    {workload:5s} {fmt_n(n):6s}" + "".join(f"{c:>27s}" for c in cells))
    for key, r in results.items():
        if key[0] == "mem" and "error" in r:
            print(f"    n/a {key[1]} {fmt_n(key[2])} {key[3]}: {r['error'][:150]}")


# ---- [3] replay cost ------------------------------------------------------------------------


def _median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def replay_cost(n, reps):
    """Planning and signature-lookup time of one W1 backward at size n, measured the
    way autograd/engine.py run() calls them."""
    from jitgrad._node import count_dependencies
    from jitgrad.autograd import fusion
    from jitgrad.kernels import cache, fuse
    case = make_loss_case("fused", "w1", n)
    y = case.forward()
    roots = [y.grad_fn]
    deps = count_dependencies(roots)
    owner = fusion.plan(deps, set(roots), set())
    groups = list({id(g): g for g in owner.values()}.values())
    keys = []  # the kernel-cache keys the fused groups of this graph hit
    for g in groups:
        keys += [k for k in cache._memory if isinstance(k, tuple) and k and k[0] == "fused"
                 and k[1] == g.kernel_spec]
    t_deps = _median_time(lambda: count_dependencies(roots), reps)
    t_plan = _median_time(lambda: fusion.plan(deps, set(roots), set()), reps)
    t_lookup = _median_time(lambda: [fuse.fused_kernel(k[1], k[2], k[3]) for k in keys], reps)
    t_bwd = []
    for _ in range(max(5, reps // 10)):
        y = case.forward()
        t = time.perf_counter()
        case.backward(y)
        t_bwd.append(time.perf_counter() - t)
    del y
    fused_nodes = sum(len(g.members) for g in groups)
    return {"nodes": len(deps), "fused_nodes": fused_nodes, "groups": len(groups),
            "deps": t_deps, "plan": t_plan, "lookup": t_lookup,
            "backward": statistics.median(t_bwd)}


def section_replay(sizes, results):
    from jitgrad.kernels import fuse
    print(f"\n[3] replay cost of the fused backward: W1 graph ({load()})")
    min_fuse = getattr(fuse, "FUSE_MIN_ELEMENTS", None)
    if min_fuse:
        print(f"    (kernels/fuse.py FUSE_MIN_ELEMENTS = {min_fuse}: smaller nodes are not fused)")
    print(f"    {'N':>6s} {'nodes':>5s} {'fused':>5s} {'groups':>6s} {'count_deps':>11s} "
          f"{'plan()':>9s} {'lookup':>9s} {'plan+lookup':>11s} {'per node':>9s} "
          f"{'backward':>10s} {'share':>6s}")
    for n in [16, 1 << 14] + list(sizes):
        r = replay_cost(n, 400 if n < 1e5 else 40)
        results[("replay", n)] = r
        pl = r["plan"] + r["lookup"]
        print(f"    {fmt_n(n):>6s} {r['nodes']:5d} {r['fused_nodes']:5d} {r['groups']:6d} "
              f"{fmt_t(r['deps']):>11s} {fmt_t(r['plan']):>9s} {fmt_t(r['lookup']):>9s} "
              f"{fmt_t(pl):>11s} {pl / r['nodes'] * 1e6:6.2f} us {fmt_t(r['backward']):>10s} "
              f"{pl / r['backward'] * 100:5.1f}%")
    print("    plan() runs on every backward (the partition is not cached; the kernel is, keyed by")
    print("    the group's signature); per node = (plan + lookup) / all nodes of the graph;")
    print("    share = (plan + lookup) / fused backward time")


# ---- [4] cold start -------------------------------------------------------------------------


COLD_WORKER = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import jitgrad
t1 = time.perf_counter()
sys.path.insert(0, {here!r})
from benchmarks.common import array, w1
x = jitgrad.tensor(array({n!r}, "float32").copy(), requires_grad=True)
t2 = time.perf_counter()
w1(x).backward()
t3 = time.perf_counter()
x.grad = None
w1(x).backward()
t4 = time.perf_counter()
s = jitgrad.compile_stats()
print(json.dumps(dict(import_s=t1 - t0, first_step_s=t3 - t2, second_step_s=t4 - t3,
                      kernels_compiled=s["kernels_compiled"], compile_s=s["compile_seconds"],
                      disk_hits=s["disk_hits"])))
"""


def section_cold(n, results):
    print(f"\n[4] cold start: one W1 step at N={fmt_n(n)} in a fresh process ({load()})")
    with tempfile.TemporaryDirectory(prefix="jitgrad-compare-cold-") as cache:
        env = env_for_children(JITGRAD_CACHE_DIR=cache)
        code = textwrap.dedent(COLD_WORKER.format(here=HERE, n=n))
        first = run_json(["-c", code], env)
        second = run_json(["-c", code], env)
    results["cold"] = (first, second)
    for label, r in (("empty cache ", first), ("same cache  ", second)):
        if "error" in r:
            print(f"    {label} n/a: {r['error']}")
            continue
        print(f"    {label} import jitgrad {fmt_t(r['import_s'])}, first step "
              f"{fmt_t(r['first_step_s'])} (kernels compiled {r['kernels_compiled']}, compile "
              f"{r['compile_s']:.2f} s, loaded from disk {r['disk_hits']}), second step "
              f"{fmt_t(r['second_step_s'])}")


# ---- [5] targets ----------------------------------------------------------------------------


def section_targets(sizes, results):
    print("\n[5] targets (W1; PASS/FAIL from the medians above)")
    lines = []

    def check(name, ok, detail):
        lines.append((name, ok, detail))

    def speedup(n, kind, impl="fused"):
        key = ("time", "w1", n)
        if key not in results:
            return None
        d = results[key][0 if kind == "step" else 1]
        return d["torch"] / d[impl] if "torch" in d and impl in d else None

    for n, want in ((1_000_000, 1.5), (10_000_000, 3.0)):
        s = speedup(n, "step")
        if s is not None:
            check(f"full step >= {want}x faster than torch eager at N={fmt_n(n)}", s >= want,
                  f"{s:.2f}x")
    for n in sizes:
        s = speedup(n, "backward")
        key = ("time", "w1", n)
        if s is not None:
            check(f"backward >= 3x faster than torch eager's backward at N={fmt_n(n)}", s >= 3,
                  f"{s:.2f}x")
            bwd = results[key][1]
            step = results[key][0]
            ref = hand_ref(step)
            if ref in step:
                r = step["fused"] / step[ref]
                check(f"(stricter) full step within 1.5x of the hand one-pass kernel "
                      f"({LABEL[ref]}) at N={fmt_n(n)}", r <= 1.5,
                      f"{r:.2f}x the hand kernel's time")
            for ref in ("numba_hand_vm", "numba_hand"):
                if ref in bwd:
                    r = bwd["fused"] / bwd[ref]
                    check(f"backward within 1.5x of the hand one-pass kernel ({LABEL[ref]}) at "
                          f"N={fmt_n(n)}", r <= 1.5, f"{r:.2f}x the hand kernel's time")
    mem = results.get(("mem", "w1", 10_000_000, "fused"))
    if mem and "error" not in mem:
        check("steady-state peak at N=1e7 < 150 MiB above baseline", mem["peak_mib"] < 150,
              f"{mem['peak_mib']:.1f} MiB")
        tm = results.get(("mem", "w1", 10_000_000, "torch"))
        if tm and "error" not in tm:
            check("far fewer page faults than torch at N=1e7 (<= 1/10)",
                  mem["faults"] <= tm["faults"] / 10,
                  f"{mem['faults']:.0f} vs torch {tm['faults']:.0f} per step")
    r = results.get(("replay", 1_000_000))
    if r:
        share = (r["plan"] + r["lookup"]) / r["backward"]
        check("planning + lookup < 5% of backward at N=1e6", share < 0.05, f"{share * 100:.2f}%")
    r = results.get(("replay", 16))
    if r:
        per = (r["plan"] + r["lookup"]) / r["nodes"] * 1e6
        check("planning + lookup < 5 us/node at N=16", per < 5,
              f"{per:.2f} us/node ({r['fused_nodes']} of {r['nodes']} nodes fused at this size)")
    r16k = results.get(("replay", 1 << 14))
    if r16k:
        per = (r16k["plan"] + r16k["lookup"]) / r16k["nodes"] * 1e6
        lines.append(("  (same, on the graph at N=16384, where W1 fuses)", None,
                      f"{per:.2f} us/node"))
    cold = results.get("cold")
    if cold:
        first, second = cold
        if "error" not in second:
            check("second process compiles nothing", second["kernels_compiled"] == 0,
                  f"kernels_compiled={second['kernels_compiled']}, first step "
                  f"{fmt_t(second['first_step_s'])}")
        if "error" not in first:
            check("cold first W1 step compiles in < 3 s", first["compile_s"] < 3.0,
                  f"compile {first['compile_s']:.2f} s, first step wall "
                  f"{fmt_t(first['first_step_s'])}")
    for name, ok, detail in lines:
        mark = "    " if ok is None else ("PASS" if ok else "FAIL")
        print(f"    {mark}  {name}: {detail}")


# ---- main -----------------------------------------------------------------------------------


def header():
    import numba

    import jitgrad
    torch_v = "not installed"
    if have_torch():
        torch = common.torch_threads()
        torch_v = f"{torch.__version__} ({torch.get_num_threads()} threads)"
    print(f"jitgrad {jitgrad.__version__} | numba {numba.__version__} | numpy {np.__version__} | "
          f"torch {torch_v} | python {sys.version.split()[0]} | {os.cpu_count()} cpus")
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "jitgrad"],
                               capture_output=True, text=True).stdout.split("\n")
        dirty = [d[3:] for d in dirty if d.strip()]
        print(f"checkout {head}" + (f", jitgrad/ changed in the work tree: {' '.join(dirty)}"
                                    if dirty else ", jitgrad/ clean"))
    except OSError:
        pass
    vm, all_math = common.vm_state()
    w1_math = ("sin", "cos", "exp", "tanh")
    print(f"math in float kernels: {len(vm)} of {len(all_math)} formula functions use jitgrad's "
          f"vectorizable math (kernels/vmath.py{', JITGRAD_VMATH=0' if not vm else ''}); W1's "
          f"{'/'.join(w1_math)}: "
          + ("vectorized" if all(m in vm for m in w1_math) else "scalar libm calls"))
    if vm:
        print("    vectorized: " + " ".join(vm) + " | libm or inline: "
              + " ".join(m for m in all_math if m not in vm))
    print(f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} "
          f"JITGRAD_PARALLEL={os.environ.get('JITGRAD_PARALLEL', '1')} | {load()}")
    print("W1: y = sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x)); arith: 10 arithmetic ops "
          "+ sum; float32, dy/dx\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7", help="comma-separated N (default 1e6,1e7)")
    ap.add_argument("--repeat", type=int, default=11, help="timing samples per impl (default 11)")
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    ap.add_argument("--skip", default="", help="sections to leave out, e.g. 2,4")
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()]
    skip = set(args.skip.split(","))
    # torch.compile's own on-disk caches would make its compile time depend on earlier
    # runs: compile into a fresh folder (the memory workers reuse it).
    inductor_tmp = None
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        inductor_tmp = tempfile.TemporaryDirectory(prefix="jitgrad-compare-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_tmp.name
    started = time.perf_counter()
    header()
    results = {}
    if "1" not in skip:
        section_time(sizes, args.repeat, not args.no_compile, results)
    if "2" not in skip:
        impls = ["fused", "unfused", "torch", "numba_hand"]
        timed = [results[("time", w, n)][0] for w in WORKLOADS for n in sizes
                 if ("time", w, n) in results]
        compiled = all("torch_compile" in t for t in timed)
        if not args.no_compile and compiled:
            impls.insert(3, "torch_compile")
        section_memory(sizes, impls, results)
    if "3" not in skip:
        section_replay(sizes, results)
    if "4" not in skip:
        section_cold(1_000_000, results)
    section_targets(sizes, results)
    print(f"\ndone in {time.perf_counter() - started:.0f} s; {load()}")


if __name__ == "__main__":
    main()
