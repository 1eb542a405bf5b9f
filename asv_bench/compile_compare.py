"""W1-W7 on jitgrad eager, jitgrad.compile, torch eager, torch.compile and
jax.jit, side by side in one run (workload definitions in workloads.py):

    python asv_bench/compile_compare.py                  # everything, 20-30 minutes on 2 cores
    python asv_bench/compile_compare.py --only W2,W7     # some rows (W6: the memory row)
    python asv_bench/compile_compare.py --quick          # smoke run: 3 samples, first call of one row
    python asv_bench/compile_compare.py --only W2 --no-first  # step times only (minutes)
    python asv_bench/compile_compare.py --only W3 --alone     # each library alone on the cores

What each implementation compiles (torch.compile and jax.jit as their users
write a training step):
  jitgrad.compile  the whole step: forward, backward, the SGD step for W3, both
                   autograd.grad calls for W5
  torch.compile    the forward (loss) only: dynamo does not capture .backward(),
                   which runs AOTAutograd's compiled backward outside it; W3's
                   optimizer step runs eagerly; W5 is torch.func jvp(grad(f)),
                   compiled (double backward through a compiled forward is not
                   supported by torch.compile)
  jax.jit          jax.jit(jax.value_and_grad(loss)); W3 the SGD update too;
                   W5 jax.jit(jvp(grad(f)))

Tables:
  time     median seconds per step over --repeat samples. Every implementation
           runs in its own long-lived worker process (no thread pools of other
           libraries in it), and the parent asks each worker in turn for one
           sample (rotating the order), so a burst of load hits all of them alike.
           Before timing, each result is checked: jitgrad.compile against jitgrad
           eager in the same process on full arrays over 3 steps (MISMATCH instead
           of a time if they differ), the others against jitgrad eager on 256
           sampled elements (a note if they differ). A build that takes longer
           than --timeout seconds (torch.compile can) is abandoned: n/a.
  first    seconds from the end of `import` to the first result (the step run
           and its numbers read back), in a fresh process with empty caches
           (JITGRAD_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR and a JAX persistent
           compilation cache), then in a second fresh process with the same,
           now filled, caches: "cold / warm".
  second   the second (warm) process of "first": seconds from its launch to
           the end of `import` (interpreter start-up and imports), and from
           there to the result of its first compiled step: for jitgrad.compile
           the first step run by the compiled program (after its kernels are
           loaded and any trace again), for jax.jit and torch.compile the first
           step. The kernels the warm process compiled are counted once its
           kernels are loaded (a note if any).
  W6       peak memory of W1 at N=1e7, MiB above the baseline, in a fresh
           process per implementation (a previous process filled the caches, so
           the compiler's own memory does not count): VmHWM during the first
           step, and during 11 steady steps, above VmRSS just before (after gc
           and malloc_trim; the previous step's gradients and outputs dropped and
           jitgrad's array pool emptied, so buffers a step takes back count), and
           "held": VmRSS after the steady steps above that baseline (what stays
           allocated between steps: the last gradient, jitgrad's pool).
           RSS counts every allocator alike (numpy's, torch's, XLA's);
           tracemalloc would see numpy's only. Needs Linux (/proc/self/clear_refs).
  ratios   each time / torch eager's and / jax.jit's (below 1: faster).
  --alone  the time table measured another way: each sample is ALONE_S seconds of
           steps, each step timed and the sample's median taken, after a pause
           of SETTLE_S in which the other workers' threads fall asleep, and
           OpenBLAS's threads keep their default wait (OPENBLAS_THREAD_TIMEOUT is
           not set). So each library runs as in a process of its own, threads
           spinning between products where their defaults say so, instead of
           taking turns every 50 ms with the others. Implies --no-first.

Every figure comes from a shared machine: compare ratios within one run and
read them with the load average printed beside them.
"""
import argparse
import gc
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# Spinning OpenMP threads make torch (and parallel Numba kernels) much slower when
# another process holds a core; must be set before either is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

import numpy as np  # noqa: E402

import workloads  # noqa: E402
from workloads import IMPLS  # noqa: E402

# label -> (workload, size, unit of its time cell)
ROWS = {
    "W1 N=1e6": ("W1", {"n": 10 ** 6}, "ms"),
    "W1 N=1e7": ("W1", {"n": 10 ** 7}, "ms"),
    "W2": ("W2", {}, "us"),
    "W3": ("W3", {}, "ms"),
    "W4": ("W4", {}, "ms"),
    "W5": ("W5", {}, "ms"),
    "W7": ("W7", {}, "ms"),
}
FIRST_CALL_SKIP = {"W1 N=1e7"}  # the same kernels and compile work as W1 N=1e6
MEMORY_ROW = "W1 N=1e7"
SCALE = {"us": 1e6, "ms": 1e3, "s": 1.0}
CHECK_STEPS = 3  # steps of jitgrad.compile compared with eager (W3's parameters move)
SAMPLED = 256    # elements per result sent to the parent for the cross-library check
LAUNCHED = "COMPILE_COMPARE_LAUNCHED"  # the wall-clock time a child process was started
RETRACES = 3     # calls a warm jitgrad.compile process may trace in before a compiled step


# ---- child processes ----------------------------------------------------------------------------


def child_env(alone=False, **extra):
    path = [ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    # The workers take turns on the same cores: OpenBLAS's threads (numpy's BLAS, in the
    # jitgrad workers) spin long after each product and would slow whichever worker runs
    # next (docs/performance.md, "Two numpy processes on the same cores"). Alone, the
    # pause before each sample lets them fall asleep instead.
    blas = {} if alone else {"OPENBLAS_THREAD_TIMEOUT": "4"}
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), OMP_WAIT_POLICY="passive",
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", **blas, **extra)


ALONE_S = 1.0   # --alone: seconds of steps per sample
SETTLE_S = 0.3  # --alone: pause before each sample


def stop(proc):
    """Kill a child and whatever it started (torch.compile's compile workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_child(args, env, timeout):
    """Run this script in a fresh process; its last stdout line is a JSON object."""
    with tempfile.TemporaryFile("w+") as err:
        env = dict(env, **{LAUNCHED: repr(time.time())})
        proc = subprocess.Popen([sys.executable, __file__] + args, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            return {"na": f"more than {timeout:.0f} s"}
        lines = out.strip().splitlines()
        if proc.returncode != 0 or not lines:
            err.seek(0)
            return {"error": f"exit {proc.returncode}: " + tail(err.read())}
        return json.loads(lines[-1])


def tail(text, lines=2, width=240):
    return " | ".join(text.strip().splitlines()[-lines:])[-width:]


class Worker:
    """One implementation in its own process, answering one JSON request at a time."""

    def __init__(self, impl, env):
        self.impl = impl
        self.err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", impl], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, start_new_session=True)
        self.buffer = b""

    def ask(self, timeout, **request):
        """The reply to request, or {"na": reason} after timeout seconds (the
        worker is then killed), or {"error": ...} if it died."""
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                return {"na": f"more than {timeout:.0f} s", "dead": True}
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.close()
                self.err.seek(0)
                return {"error": f"worker died: {tail(self.err.read())}", "dead": True}
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            stop(self.proc)


# ---- what the child processes run ---------------------------------------------------------------


def digest(arrays):
    """Shapes and SAMPLED evenly spaced elements of each result array."""
    out = []
    for a in arrays:
        flat = a.ravel()
        picks = np.unique(np.linspace(0, flat.size - 1, min(flat.size, SAMPLED)).astype(int))
        out.append({"shape": list(a.shape), "values": flat[picks].tolist()})
    return out


def explain_summary(case):
    import jitgrad
    try:
        report = str(jitgrad.compile.explain(case.fn, *case.args))
    except Exception as e:  # explain is diagnostics: its failure must not hide the timing
        return f"explain failed: {type(e).__name__}: {e}"
    summary = report.split("\nGuards:")[0]  # graphs, breaks with reasons, ops, executors
    return "; ".join(line.strip() for line in summary.splitlines())


def build_checked(impl, row):
    """(case, reply): the case built, run once, checked and warmed."""
    workload, size, _ = ROWS[row]
    t = time.perf_counter()
    case = workloads.build(workload, impl, **size)
    case.step()
    result = case.result()
    reply = {"first_s": time.perf_counter() - t, "digest": digest(result)}
    case.wait()
    if impl == "jitgrad.compile":
        reference = workloads.build(workload, "jitgrad", **size)
        for i in range(CHECK_STEPS):
            if i:
                case.step()
                result = case.result()
            reference.step()
            bad = workloads.mismatch(reference.result(), result)
            if bad:
                return None, {"mismatch": f"step {i + 1}: {bad}"}
        del reference
        gc.collect()
        reply["explain"] = explain_summary(case)
    case.warm_up()
    t = time.perf_counter()
    case.step()
    reply["step_s"] = time.perf_counter() - t
    return case, reply


def worker_main(impl):
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # library output goes to stderr; stdout carries replies only
    case = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "build":
                case = None
                gc.collect()
                case, reply = build_checked(impl, request["row"])
            elif request["op"] == "time" and request.get("per_step"):
                n, steps = request["number"], []
                for _ in range(n):
                    t = time.perf_counter()
                    case.step()
                    steps.append(time.perf_counter() - t)
                reply = {"s": statistics.median(steps)}
            elif request["op"] == "time":
                n = request["number"]
                t = time.perf_counter()
                for _ in range(n):
                    case.step()
                reply = {"s": (time.perf_counter() - t) / n}
            else:
                raise ValueError(f"unknown request {request!r}")
        except NotImplementedError as e:
            reply = {"na": str(e)}
        except Exception as e:
            import traceback
            traceback.print_exc()
            reply = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def first_main(impl, row):
    workload, size, _ = ROWS[row]
    t0 = time.perf_counter()
    lib = workloads.library(impl)
    t1 = time.perf_counter()
    started_s = time.time() - float(os.environ[LAUNCHED])
    case = workloads.build(workload, impl, **size)
    case.step()
    case.result()
    t2 = time.perf_counter()
    compiled_at = first_compiled_step(case) if impl == "jitgrad.compile" else t2
    compiled = lib.compile_stats()["kernels_compiled"] if impl.startswith("jitgrad") else None
    print(json.dumps({"import_s": t1 - t0, "started_s": started_s, "first_s": t2 - t1,
                      "compiled_s": compiled_at - t1, "kernels_compiled": compiled}))


def first_compiled_step(case):
    """perf_counter() at the result of the first step that a jitgrad.compile case runs
    as its compiled program: after its kernels are ready, a call that traced nothing
    (a step whose backward accumulates into .grad traces again once it is set)."""
    for _ in range(RETRACES):
        traces = case.fn.traces
        case.wait()
        case.step()
        case.result()
        if case.fn.traces == traces:
            case.wait()  # kernels this call's program may still build are counted too
            return time.perf_counter()
    raise RuntimeError(f"jitgrad.compile traced in each of {RETRACES} calls")


def memory_main(impl):
    from benchmarks import common
    workload, size, _ = ROWS[MEMORY_ROW]
    case = workloads.build(workload, impl, **size)

    def prepare():
        case.release()
        if impl.startswith("jitgrad"):
            from jitgrad.kernels.pool import clear_pool
            clear_pool()

    prepare()
    gc.collect()
    common._malloc_trim()
    base = common.proc_status_mib("VmRSS")
    if base is None or not common.reset_peak_rss():
        raise NotImplementedError("needs Linux /proc/self/status and clear_refs")
    case.step()
    first = common.proc_status_mib("VmHWM")["VmHWM"] - base["VmRSS"]
    case.warm_up()
    steady, _, held = common.peak_above_baseline(case.step, prepare, steps=10)
    print(json.dumps({"first_mib": first, "steady_mib": steady, "held_mib": held}))


# ---- sections -----------------------------------------------------------------------------------


def load():
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def progress(text):
    print(f"  .. {text}", flush=True)


def reason(reply):
    return reply.get("na") or reply.get("error") or ""


def not_available(reply, what, notes):
    """The cell of a failed build or run: short reasons (a library or
    jitgrad.compile missing, a timeout) in the cell, errors in the notes."""
    if "na" in reply:
        return f"n/a ({reply['na']})"
    notes.append(f"{what}: n/a ({reply['error']})")
    return "n/a"


def time_rows(rows, repeat, sample_s, timeout, notes, alone=False):
    """{row: {impl: median seconds or a str saying why there is none}}; `alone`:
    see --alone."""
    env = child_env(alone)
    workers = {}
    table = {}
    for row in rows:
        progress(f"{row}: building ({load()})")
        built, cells, digests = {}, {}, {}
        for impl in IMPLS:
            if impl not in workers:
                workers[impl] = Worker(impl, env)
            reply = workers[impl].ask(timeout, op="build", row=row)
            if reply.get("dead"):
                del workers[impl]
            if "mismatch" in reply:
                cells[impl] = "MISMATCH"
                notes.append(f"{row} {impl}: MISMATCH with jitgrad eager: {reply['mismatch']}")
            elif "na" in reply or "error" in reply:
                cells[impl] = not_available(reply, f"{row} {impl}", notes)
            else:
                built[impl] = max(1, min(5000, int(sample_s / max(reply["step_s"], 1e-7))))
                digests[impl] = reply["digest"]
                if impl not in ("jitgrad", "torch"):
                    notes.append(f"{row} {impl}: first call in the timing process "
                                 f"{reply['first_s']:.2f} s")
                if "explain" in reply:
                    notes.append(f"{row} jitgrad.compile explain: {reply['explain']}")
        check_digests(row, digests, notes)
        samples = {impl: [] for impl in built}
        order = list(built)
        for r in range(repeat):
            for impl in order[r % len(order):] + order[:r % len(order)]:
                if impl not in workers:
                    continue
                if alone:
                    time.sleep(SETTLE_S)
                reply = workers[impl].ask(timeout, op="time", number=built[impl], per_step=alone)
                if "s" in reply:
                    samples[impl].append(reply["s"])
                elif reply.get("dead"):
                    del workers[impl]
                    notes.append(f"{row} {impl}: timing stopped ({reason(reply)})")
        for impl, s in samples.items():
            cells[impl] = statistics.median(s) if s else "n/a"
        table[row] = cells
        progress(row + ": " + "  ".join(f"{i} {cell(c, ROWS[row][2])}" for i, c in cells.items()))
    for w in workers.values():
        w.close()
    return table


def check_digests(row, digests, notes):
    ref = digests.get("jitgrad")
    if ref is None:
        return
    for impl, d in digests.items():
        if impl == "jitgrad.compile":
            continue  # compared on full arrays in its own process
        bad = workloads.mismatch([np.array(a["values"]) for a in ref],
                                 [np.array(a["values"]) for a in d], rtol=1e-3, atol=1e-4)
        if bad or [a["shape"] for a in ref] != [a["shape"] for a in d]:
            notes.append(f"{row} {impl}: differs from jitgrad eager ({bad or 'shapes'})")


def first_calls(rows, timeout, skip, notes):
    """({row: {impl: (cold s, warm s) or a str}}, {row: {impl: (the warm process's
    start-up s, its first compiled step s) or a str}}), two fresh processes each."""
    table, second = {}, {}
    for row in rows:
        if row in FIRST_CALL_SKIP:
            continue
        cells, warm = {}, {}
        for impl in IMPLS:
            if (row, impl) in skip:
                cells[impl] = warm[impl] = skip[row, impl]
                continue
            progress(f"first call {row} {impl} ({load()})")
            with tempfile.TemporaryDirectory(prefix="compile-compare-") as tmp:
                env = child_env(**{k: os.path.join(tmp, k.lower()) for k in (
                    "JITGRAD_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR")})
                runs = [run_child(["--first", impl, row], env, timeout) for _ in range(2)]
            bad = next((r for r in runs if "first_s" not in r), None)
            if bad is not None:
                cells[impl] = warm[impl] = not_available(bad, f"first call {row} {impl}", notes)
                continue
            cells[impl] = tuple(r["first_s"] for r in runs)
            warm[impl] = (runs[1]["started_s"], runs[1]["compiled_s"])
            if runs[1]["kernels_compiled"]:
                notes.append(f"first call {row} {impl}: the warm process compiled "
                             f"{runs[1]['kernels_compiled']} kernels")
        table[row], second[row] = cells, warm
    return table, second


def memory(timeout, notes):
    """{impl: (first, steady, held MiB) or a str}; the first process fills the caches."""
    cells = {}
    for impl in IMPLS:
        progress(f"W6 memory {impl} ({load()})")
        with tempfile.TemporaryDirectory(prefix="compile-compare-jax-") as jax_cache:
            env = child_env(JAX_COMPILATION_CACHE_DIR=jax_cache)
            runs = [run_child(["--memory", impl], env, timeout) for _ in range(2)]
        r = runs[-1]
        if "first_mib" not in r:
            cells[impl] = not_available(r, f"W6 {impl}", notes)
        else:
            cells[impl] = (r["first_mib"], r["steady_mib"], r["held_mib"])
    return cells


# ---- report -------------------------------------------------------------------------------------


def cell(v, unit):
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        return " / ".join(f"{x:.3g}" for x in v)
    return f"{v * SCALE[unit]:.3g}"


def print_table(title, rows):
    """rows: [(label, {impl: text})], one column per implementation."""
    label_w = max([len(title)] + [len(label) for label, _ in rows])
    widths = [max([len(i)] + [len(cells.get(i, "")) for _, cells in rows]) + 2 for i in IMPLS]
    print(f"{title:<{label_w}}" + "".join(f"{i:>{w}}" for i, w in zip(IMPLS, widths)))
    for label, cells in rows:
        print(f"{label:<{label_w}}"
              + "".join(f"{cells.get(i, ''):>{w}}" for i, w in zip(IMPLS, widths)))


def report(times, firsts, seconds, mem, notes):
    rows = [(f"{row} ({ROWS[row][2]})", {i: cell(v, ROWS[row][2]) for i, v in c.items()})
            for row, c in times.items()]
    rows += [(f"first call {row}, cold / warm (s)", {i: cell(v, "s") for i, v in c.items()})
             for row, c in firsts.items()]
    rows += [(f"second process {row}: start-up / first compiled step (s)",
              {i: cell(v, "s") for i, v in c.items()}) for row, c in seconds.items()]
    if mem:
        rows.append(("W6 MiB: first / steady peak / held", {i: cell(v, "s")
                                                          for i, v in mem.items()}))
    print()
    print_table("workload (median per step)", rows)
    ratios = []
    for row, c in times.items():
        line = {}
        for i, v in c.items():
            refs = [c.get(ref) for ref in ("torch", "jax.jit")]
            if isinstance(v, float):
                line[i] = " / ".join(f"{v / r:.3g}" if isinstance(r, float) else "-"
                                     for r in refs)
        ratios.append((row, line))
    if ratios:
        print()
        print_table("time / torch eager, / jax.jit", ratios)
    if notes:
        print("\nnotes:")
        for n in notes:
            print(f"  {n}")


def header():
    from importlib import metadata
    versions = []
    for name in ("numba", "torch", "jax", "jaxlib"):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} not installed")
    print(" | ".join(versions) + f" | numpy {np.__version__} | python "
          f"{sys.version.split()[0]} | {os.cpu_count()} cpus")
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    import jitgrad
    print(f"jitgrad {jitgrad.__version__} from {os.path.dirname(jitgrad.__file__)}, checkout "
          f"{head or '?'}; jitgrad.compile "
          f"{'available' if hasattr(jitgrad, 'compile') else 'not available'}; {load()}")
    print("torch.compile compiles the forward only (backward runs outside the graph); "
          "jitgrad.compile and jax.jit the whole step")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="workloads to run, e.g. W2,W7 (W6: memory)")
    ap.add_argument("--repeat", type=int, help="timing samples per implementation (default 11, "
                    "--quick 3)")
    ap.add_argument("--quick", action="store_true", help="smoke run: few samples, first call of "
                    "the first row only")
    ap.add_argument("--timeout", type=float, help="seconds a build or first call may take "
                    "(default 240, --quick 120)")
    ap.add_argument("--no-first", action="store_true", help="skip the first-call table (fresh "
                    "processes with empty caches: most of a full run's time)")
    ap.add_argument("--alone", action="store_true", help="time each library alone on the cores "
                    "(longer samples after a pause, OpenBLAS's default wait); implies --no-first")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--first", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--memory", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args.worker)
    try:
        if args.first:
            return first_main(*args.first)
        if args.memory:
            return memory_main(args.memory)
    except NotImplementedError as e:  # a library or jitgrad.compile missing: say so, as n/a
        print(json.dumps({"na": str(e)}))
        return

    only = {w.strip() for w in args.only.split(",") if w.strip()}
    known = {w for w, _, _ in ROWS.values()} | {"W6"}
    if only - known:
        ap.error(f"unknown workloads {sorted(only - known)}; choose from {sorted(known)}")
    rows = [r for r, (w, _, _) in ROWS.items() if not only or w in only]
    repeat = args.repeat or (3 if args.quick else 11)
    timeout = args.timeout or (120 if args.quick else 240)
    started = time.perf_counter()
    header()
    notes = []
    sample_s = ALONE_S if args.alone else 0.02 if args.quick else 0.05
    if args.alone:
        print(f"alone: samples of {ALONE_S} s (per-step medians) after {SETTLE_S} s pauses, "
              "OpenBLAS's default wait")
    times = time_rows(rows, repeat, sample_s, timeout, notes, args.alone)
    # A build that failed or took too long would do the same in a fresh process.
    skip = {(r, i): v for r, c in times.items() for i, v in c.items() if isinstance(v, str)}
    firsts, seconds = ({}, {}) if args.no_first or args.alone else first_calls(
        rows[:1] if args.quick else rows, timeout, skip, notes)
    mem = memory(timeout, notes) if not only or "W6" in only else {}
    report(times, firsts, seconds, mem, notes)
    print(f"\ndone in {time.perf_counter() - started:.0f} s; {load()}")


if __name__ == "__main__":
    main()
