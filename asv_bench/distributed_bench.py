"""jitgrad.distributed on this machine, each part launched under mpiexec:

  [1] all-reduce of a float32 buffer between 2 ranks, 1 KiB to 64 MiB:
      jitgrad.distributed.all_reduce on a tensor against mpi4py's own
      Allreduce on the same numpy array; bandwidth = bytes / time, and the parameters
      of the ring model t = 2(p-1)/p * bytes / bandwidth + 2(p-1) * latency
      (latency from 1 KiB, bandwidth from 64 MiB).
  [2] DistributedDataParallel on the W3 MLP (784-512-512-10, float32, SGD,
      batch 256 per rank) at 1, 2 and 4 ranks, interleaved in one run: the
      step without communication (inside no_sync: forward + backward +
      optimizer alone), with a barrier after backward (what synchronizing the
      ranks costs), with a blocking all-reduce of the buckets after backward
      (no overlap) or of the last bucket only (the floor for any overlap), and
      with DDP, its reductions polled from the gradient hooks only or from a
      progress thread too. The overlap, (serial - DDP) / (serial - sync), is the
      share of the communication cost that DDP hides.

Every rank runs one thread (OMP_NUM_THREADS=1). With fewer cores than ranks
the ranks share cores: on a 2-core machine no speed-up is possible beyond 2
ranks, and the step time at 4 ranks measures contention, not scaling.

    python asv_bench/distributed_bench.py [--quick] [--skip-ddp] [--ranks 1,2,4]
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB, by 4x


def median_times(fns, comm, repeat):
    """Median seconds of each fn() over `repeat` rounds; in a round every fn runs once,
    started together on every rank (interleaved, so that a change of the machine's
    load hits them alike). A run ends when the slowest rank ends."""
    from mpi4py import MPI  # the workers run under mpiexec: mpi4py is there
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            comm.Barrier()
            t = time.perf_counter()
            fn()
            ts.append(comm.allreduce(time.perf_counter() - t, op=MPI.MAX))
    return [statistics.median(ts) for ts in times]


def worker_allreduce(quick):
    import numpy as np
    from mpi4py import MPI
    import jitgrad
    import jitgrad.distributed as dist
    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in SIZES:
        repeat = 5 if quick else max(5, min(200, (64 << 20) // nbytes // 4))
        arr = np.ones(nbytes // 4, np.float32)
        t = jitgrad.from_numpy(np.ones(nbytes // 4, np.float32))
        raw, ours = median_times([lambda: comm.Allreduce(MPI.IN_PLACE, arr, MPI.SUM),
                                  lambda: dist.all_reduce(t)], comm, repeat)
        rows.append({"bytes": nbytes, "mpi4py": raw, "jitgrad": ours})
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps({"size": comm.Get_size(), "rows": rows}), flush=True)


def worker_ddp(quick):
    import numpy as np
    from mpi4py import MPI
    import jitgrad
    import jitgrad.distributed as dist
    import jitgrad.nn.functional as F
    from jitgrad import nn, optim
    from jitgrad.nn.parallel import DistributedDataParallel
    from jitgrad.nn.parallel.distributed import PROGRESS_THREAD_ENV
    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD

    def replica(progress_thread):
        jitgrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
        os.environ[PROGRESS_THREAD_ENV] = "1" if progress_thread else "0"
        ddp = DistributedDataParallel(model)
        del os.environ[PROGRESS_THREAD_ENV]
        return ddp, optim.SGD(ddp.parameters(), lr=0.01)

    hooks, thread = replica(False), replica(True)
    buckets = [b.flat for b in hooks[0]._reducer.buckets]
    rng = np.random.default_rng(dist.get_rank())
    x = jitgrad.from_numpy(rng.standard_normal((256, 784)).astype(np.float32))
    y = jitgrad.from_numpy(rng.integers(0, 10, 256))
    steps, repeat = (5, 3) if quick else (10, 15)
    after_backward = {  # what a step without DDP's reduction does once backward returns
        "local": lambda: None,
        "sync": comm.Barrier,
        "serial": lambda: [comm.Allreduce(MPI.IN_PLACE, b, MPI.SUM) for b in buckets],
        "last_only": lambda: comm.Allreduce(MPI.IN_PLACE, buckets[-1], MPI.SUM)}
    early = []  # per thread step: was the first bucket reduced before the last gradient?

    def steps_of(name):
        ddp, opt = thread if name == "ddp_thread" else hooks
        then = after_backward.get(name)

        def run():
            for _ in range(steps):
                with ddp.no_sync() if then else contextlib.nullcontext():
                    loss = F.cross_entropy(ddp(x), y)
                    opt.zero_grad()
                    loss.backward()
                    if then:
                        then()
                    opt.step()
                if name == "ddp_thread" and comm.Get_size() > 1:
                    t = ddp._reducer.timeline
                    early.append(t["progress_done"] is not None and
                                 t["progress_done"] < t["last_hook"])
        return run

    names = list(after_backward) + ["ddp_hooks", "ddp_thread"]
    runs = [steps_of(n) for n in names]
    for run in runs:  # warm: kernels compiled, buffers allocated
        run()
    early.clear()
    times = median_times(runs, comm, repeat)
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps({
            "size": comm.Get_size(), **{n: t / steps for n, t in zip(names, times)},
            "early": sum(early) / len(early) if early else float("nan"), "buckets": [int(b.nbytes) for b in buckets]}),
            flush=True)


def launch(nprocs, what, quick):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    cmd = ["mpiexec", "-n", str(nprocs), sys.executable, HERE, "--worker", what] + \
        (["--quick"] if quick else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout}\n"
                       f"{proc.stderr}")


def ring_parameters(rows, p):
    """(bandwidth in bytes/s, latency in s) of t = 2(p-1)/p * bytes / bw + 2(p-1) * latency:
    the latency from the smallest message (whose transfer time is negligible), the
    bandwidth from the largest once the latency is taken off."""
    small, big = rows[0], rows[-1]
    latency = small["mpi4py"] / (2 * (p - 1))
    return 2 * (p - 1) / p * big["bytes"] / (big["mpi4py"] - 2 * (p - 1) * latency), latency


def report_allreduce(quick):
    res = launch(2, "allreduce", quick)
    print("[1] all-reduce, float32, 2 ranks (median; bandwidth = bytes / time)")
    print(f"{'size':>9} {'mpi4py':>10} {'jitgrad':>10} {'ratio':>6} {'GB/s mpi4py':>12} "
          f"{'GB/s jitgrad':>13}")
    for r in res["rows"]:
        b = r["bytes"]
        size = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
        print(f"{size:>9} {r['mpi4py'] * 1e6:8.1f}us {r['jitgrad'] * 1e6:8.1f}us "
              f"{r['jitgrad'] / r['mpi4py']:6.2f} {b / r['mpi4py'] / 1e9:12.2f} "
              f"{b / r['jitgrad'] / 1e9:13.2f}")
    bw, lat = ring_parameters(res["rows"], 2)
    print(f"ring model (2 ranks): bandwidth {bw / 1e9:.2f} GB/s, latency {lat * 1e6:.1f} us")
    big = res["rows"][-1]
    print(f"target: 64 MiB within 1.5x of mpi4py: {big['jitgrad'] / big['mpi4py']:.2f}x "
          f"{'PASS' if big['jitgrad'] <= 1.5 * big['mpi4py'] else 'FAIL'}")
    return res


def report_ddp(ranks, quick):
    print("\n[2] DDP, W3 MLP 784-512-512-10, batch 256 per rank, SGD (ms per step; median of "
          "interleaved rounds)")
    print("    local: no reduction (inside no_sync); sync: + a barrier after backward; serial: "
          "+ a blocking\n    all-reduce of every bucket after backward (no overlap); last only: "
          "+ only the last bucket's\n    (the least any overlap leaves); DDP: gradient hooks "
          "polling the reductions, or a progress thread too.\n    overlap = (serial - DDP) / "
          "(serial - sync): the share of the communication cost hidden;\n    early: steps whose "
          "first bucket the thread reduced before the last gradient arrived.")
    print(f"{'ranks':>5} {'local':>7} {'sync':>7} {'serial':>7} {'last only':>9} "
          f"{'DDP hooks':>16} {'DDP thread':>16} {'overlap':>14} {'early':>6}")
    out = []
    for n in ranks:
        r = launch(n, "ddp", quick)
        r["overhead"] = {k: r[f"ddp_{k}"] / r["local"] - 1 for k in ("hooks", "thread")}
        comm = r["serial"] - r["sync"]
        r["overlap"] = {k: (r["serial"] - r[f"ddp_{k}"]) / comm if n > 1 else float("nan")
                        for k in ("hooks", "thread")}
        ms = {k: r[k] * 1e3 for k in ("local", "sync", "serial", "last_only", "ddp_hooks",
                                      "ddp_thread")}
        print(f"{n:>5} {ms['local']:7.2f} {ms['sync']:7.2f} {ms['serial']:7.2f} "
              f"{ms['last_only']:9.2f} {ms['ddp_hooks']:7.2f} ({r['overhead']['hooks']:+5.1%}) "
              f"{ms['ddp_thread']:7.2f} ({r['overhead']['thread']:+5.1%}) "
              f"{r['overlap']['hooks']:6.0%} {r['overlap']['thread']:6.0%} {r['early']:6.0%}")
        out.append(r)
    print(f"buckets (bytes): {out[-1]['buckets']}; {os.cpu_count()} cores: ranks beyond that "
          "share them")
    two = [r for r in out if r["size"] == 2]
    if two:
        best = min(two[0]["overhead"].values())
        print(f"target: 2-rank step at most 15% above the step without communication: "
              f"{best:.1%} {'PASS' if best <= 0.15 else 'FAIL'}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--skip-ddp", action="store_true")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        {"allreduce": worker_allreduce, "ddp": worker_ddp}[args.worker](args.quick)
        return 0
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    report_allreduce(args.quick)
    if not args.skip_ddp:
        report_ddp([int(n) for n in args.ranks.split(",")], args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
