"""Conv2d forward, backward and forward+backward: jitgrad against torch eager,
side by side in one process, interleaved rounds, medians and ratios.

    python asv_bench/conv_compare.py [--rounds 7] [--repeat 5]

The default case is the issue's target: a (64, 16, 32, 32) float32 batch,
32 3x3 filters, padding 1, bias. A ratio below 1 means jitgrad is faster.
"""
import argparse
import statistics
import time

import numpy as np

SHAPE, OUT_CHANNELS, KERNEL, PADDING = (64, 16, 32, 32), 32, 3, 1


def _case(lib, rng):
    """(forward, backward, forward+backward) callables on lib's tensors."""
    nn = lib.nn
    lib.manual_seed(0)
    conv = nn.Conv2d(SHAPE[1], OUT_CHANNELS, KERNEL, padding=PADDING)
    x = lib.tensor(rng.standard_normal(SHAPE).astype(np.float32), requires_grad=True)
    grad = lib.ones(SHAPE[0], OUT_CHANNELS, SHAPE[2], SHAPE[3])
    state = {}

    def forward():
        state["y"] = conv(x)

    def backward():
        x.grad = None
        conv.zero_grad()
        state["y"].backward(grad)

    def forward_backward():
        forward()
        backward()

    for _ in range(3):  # warm: allocations, and jitgrad's kernels take over from their
        forward()       # numpy stand-ins in the third step (see docs/performance.md)
        backward()
    return {"forward": forward, "backward": backward, "forward+backward": forward_backward}


def _time(fn, repeat):
    """(median wall time, median CPU time of the whole process) of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    return tuple(statistics.median(t[k] for t in times) for k in (0, 1))


def compare(rounds=7, repeat=5):
    """{phase: (jitgrad median s, torch median s, ratio, CPU-time ratio)}, rounds
    interleaved. The CPU time (all of the process's threads) tells how much work each
    does; on a loaded machine it moves less than the wall time."""
    import torch

    import jitgrad
    rng = np.random.default_rng(0)
    cases = {"jitgrad": _case(jitgrad, rng), "torch": _case(torch, rng)}
    samples = {(lib, phase): [] for lib in cases for phase in cases[lib]}
    for _ in range(rounds):
        for phase in ("forward", "backward", "forward+backward"):
            for lib in cases:
                if phase == "backward":
                    cases[lib]["forward"]()
                samples[lib, phase].append(_time(cases[lib][phase], 1 if phase == "backward"
                                                 else repeat))
    out = {}
    for phase in ("forward", "backward", "forward+backward"):
        (j, jc), (t, tc) = ([statistics.median(s[k] for s in samples[lib, phase]) for k in (0, 1)]
                            for lib in ("jitgrad", "torch"))
        out[phase] = (j, t, j / t, jc / tc)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import torch
    print(f"Conv2d({SHAPE[1]}, {OUT_CHANNELS}, {KERNEL}, padding={PADDING}) on {SHAPE} float32, "
          f"torch {torch.__version__} with {torch.get_num_threads()} threads")
    print(f"{'phase':<18}{'jitgrad ms':>12}{'torch ms':>12}{'ratio':>8}{'CPU ratio':>11}")
    for phase, (j, t, r, cpu) in compare(args.rounds, args.repeat).items():
        print(f"{phase:<18}{j * 1e3:>12.2f}{t * 1e3:>12.2f}{r:>8.2f}{cpu:>11.2f}")


if __name__ == "__main__":
    main()
