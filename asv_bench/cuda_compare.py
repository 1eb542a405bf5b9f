"""jitgrad on CUDA against torch CUDA eager and a hand-written one-pass
numba.cuda kernel, in one run, with the issue's targets as PASS/FAIL:

    python asv_bench/cuda_compare.py                          # on a GPU: N = 1e7 and 1e8
    python asv_bench/cuda_compare.py --sizes 1e7 --repeat 30
    NUMBA_ENABLE_CUDASIM=1 python asv_bench/cuda_compare.py --smoke   # logic only, no GPU

Sections (float32; every timed sample ends with a device synchronize):
  [1] W1 = sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x)) (asv_bench/benchmarks/
      common.py): backward alone (graph built untimed) and the full step, for
      jitgrad (fused backward), torch eager, and the hand kernel that computes
      the gradient in one pass over x.
  [2] MLP training step 784-512-512-10, batch 256, ReLU, cross-entropy, SGD.
  [3] matmul 4096 x 4096: jitgrad's tiled kernel against cuBLAS (through torch).
Timings are medians; compare ratios taken in the same run.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import numpy as np  # noqa: E402

import jitgrad  # noqa: E402
from benchmarks.common import w1  # noqa: E402


def median_time(fn, sync, repeat):
    fn()  # warm: compile, allocate
    sync()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def fmt(t):
    return "n/a" if t is None else (f"{t * 1e3:.3f} ms" if t < 1 else f"{t:.2f} s")


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


_HAND = []


def hand_kernel():
    """dW1/dx in one pass: read x, write the gradient (the memory-bound floor)."""
    if not _HAND:
        # module globals: the simulator swaps a kernel's global `cuda` for its fake
        global cuda, math
        import math

        from numba import cuda

        @cuda.jit
        def grad(x, out):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < x.size:
                v = x[i]
                s, c = math.sin(v), math.cos(v)
                e = math.exp(-v * v)
                t = math.tanh(s * e + np.float32(0.5) * v)
                g = np.float32(1) / (np.float32(1) + math.exp(-v))
                du = c * e - np.float32(2) * v * s * e + np.float32(0.5)
                out[i] = (np.float32(1) - t * t) * du * g + t * g * (np.float32(1) - g)
                i += step
        _HAND.append(grad)
    return _HAND[0]


def w1_times(x, sync, repeat):
    """(full step, backward alone) medians of W1 on leaf x (jitgrad or torch)."""
    def step():
        x.grad = None
        w1(x).backward()

    def backward():
        x.grad = None
        loss = w1(x)
        sync()
        t = time.perf_counter()
        loss.backward()
        sync()
        return time.perf_counter() - t

    full = median_time(step, sync, repeat)
    backward()
    return full, statistics.median(backward() for _ in range(repeat))


def w1_section(n, repeat, th):
    sync = jitgrad.cuda.synchronize
    x_np = np.random.default_rng(0).uniform(-2, 2, n).astype(np.float32)
    x = jitgrad.tensor(x_np, device="cuda", requires_grad=True)
    res = dict(zip(("jitgrad step", "jitgrad backward"), w1_times(x, sync, repeat)))
    groups = jitgrad.autograd.fusion.explain(w1(x))
    from jitgrad._cuda.kernels import launch_1d
    out = jitgrad.empty(n, device="cuda")
    xd, od = x.detach()._data.flat_view(), out._data.flat_view()
    blocks, threads = launch_1d(n)
    kern = hand_kernel()
    res["hand 1-pass"] = median_time(lambda: kern[blocks, threads](xd, od), sync, repeat)
    err = float(np.max(np.abs(x.grad.cpu().numpy() - out.cpu().numpy())))
    if th is not None:
        tx = th.tensor(x_np, device="cuda", requires_grad=True)
        res.update(zip(("torch step", "torch backward"),
                       w1_times(tx, th.cuda.synchronize, repeat)))
    return res, groups, err


def mlp_step(lib, xb, yb, sizes):
    """One SGD training step of a ReLU MLP with `sizes`, built with `lib` (jitgrad or
    torch, the same API) on the GPU."""
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [lib.nn.Linear(a, b), lib.nn.ReLU()]
    model = lib.nn.Sequential(*layers[:-1]).cuda()
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    x, y = lib.tensor(xb, device="cuda"), lib.tensor(yb, device="cuda")

    def step():
        opt.zero_grad()
        lib.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def mlp_section(repeat, th, batch=256, sizes=(784, 512, 512, 10)):
    rng = np.random.default_rng(1)
    xb = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    yb = rng.integers(0, sizes[-1], batch)
    res = {"jitgrad": median_time(mlp_step(jitgrad, xb, yb, sizes), jitgrad.cuda.synchronize,
                                  repeat)}
    if th is not None:
        res["torch"] = median_time(mlp_step(th, xb, yb, sizes), th.cuda.synchronize, repeat)
    return res


def matmul_section(n, repeat, th):
    a = jitgrad.randn(n, n, device="cuda")
    b = jitgrad.randn(n, n, device="cuda")
    res = {"jitgrad tiled": median_time(lambda: a @ b, jitgrad.cuda.synchronize, repeat)}
    if th is not None:
        ta, tb = th.randn(n, n, device="cuda"), th.randn(n, n, device="cuda")
        res["cuBLAS (torch)"] = median_time(lambda: ta @ tb, th.cuda.synchronize, repeat)
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1e7,1e8", help="W1 sizes, comma-separated")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes, 2 repeats: checks the script (e.g. under the simulator)")
    args = p.parse_args()
    if not jitgrad.cuda.is_available():
        print("no usable CUDA here (jitgrad.cuda.is_available() is False): nothing to measure")
        return 0
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    repeat = args.repeat
    mlp_batch, mlp_sizes, mm = 256, (784, 512, 512, 10), 4096
    if args.smoke:
        sizes, repeat, mlp_batch, mlp_sizes, mm = [16384], 2, 8, (16, 8, 8, 4), 16
    th = torch_cuda()
    print(f"device: {jitgrad.cuda.get_device_name()}"
          f"{' (SIMULATOR: timings mean nothing)' if jitgrad.cuda.is_simulator() else ''}; "
          f"torch CUDA: {'yes, ' + th.__version__ if th else 'no'}")
    verdicts = []
    print("\n[1] W1, float32")
    for n in sizes:
        r, groups, err = w1_section(n, repeat, th)
        print(f"  N={n:.0e}: " + ", ".join(f"{k} {fmt(v)}" for k, v in r.items()))
        print(f"    fused groups: {[len(g) for g in groups]}; max |grad - hand| = {err:.2e}")
        hand = r["hand 1-pass"]
        verdicts.append((f"W1 {n:.0e}: fused backward within 1.5x of the hand kernel",
                         r["jitgrad backward"] / hand, 1.5, "<="))
        if th is not None:
            verdicts.append((f"W1 {n:.0e}: backward >= 3x faster than torch eager",
                             r["torch backward"] / r["jitgrad backward"], 3.0, ">="))
            verdicts.append((f"W1 {n:.0e}: full step >= 1.5x faster than torch eager",
                             r["torch step"] / r["jitgrad step"], 1.5, ">="))
    print(f"\n[2] MLP {'-'.join(map(str, mlp_sizes))}, batch {mlp_batch}, SGD step")
    r = mlp_section(repeat, th, mlp_batch, mlp_sizes)
    print("  " + ", ".join(f"{k} {fmt(v)}" for k, v in r.items()))
    if th is not None:
        verdicts.append(("MLP step within 1.5x of torch CUDA", r["jitgrad"] / r["torch"], 1.5,
                         "<="))
    print(f"\n[3] matmul {mm} x {mm}, float32")
    r = matmul_section(mm, repeat, th)
    print("  " + ", ".join(f"{k} {fmt(v)}" for k, v in r.items()))
    if th is not None:
        print(f"  jitgrad / cuBLAS time: {r['jitgrad tiled'] / r['cuBLAS (torch)']:.2f}x")
    print("\n[4] targets")
    for what, ratio, bound, rel in verdicts:
        ok = ratio <= bound if rel == "<=" else ratio >= bound
        print(f"  {'PASS' if ok else 'FAIL'}  {what}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
