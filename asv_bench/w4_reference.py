"""W4 (layer norm written out, 4096x1024 float32, loss and the gradients of x,
weight and bias) against a hand-written Numba kernel of the same math: what
jitgrad.compile's generated kernel could reach, beside torch.compile.

    python asv_bench/w4_reference.py [--repeat 15]

The hand kernel does what an engineer would write: per row, the mean, the
variance, the loss and the weight's gradient in three passes over the row, and
x.grad in a fourth (x.grad = rs * (w - mean(w) - xhat * mean(w * xhat))); the
bias's gradient is the row count. Its row sums are float64, in vector lanes
(reassociation allowed in the sum only), as jitgrad's kernels add up. Timed
interleaved in one process (medians); the hand kernel's results are checked
against jitgrad eager first.
"""
import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import numba  # noqa: E402
import numpy as np  # noqa: E402

import workloads  # noqa: E402

from jitgrad.compiler.fused import SUM_SOURCE  # noqa: E402

ROW_BLOCKS = 64
_namespace = {"numba": numba}
exec(SUM_SOURCE, _namespace)
_sum = _namespace["_sum"]  # the row sum jitgrad's kernels use: both add up alike


@numba.njit(parallel=True, nogil=True, error_model="numpy")
def w4_kernel(x, w, b, eps, gx, gw_parts, loss_parts):
    rows, cols = x.shape
    nblk = gw_parts.shape[0]
    mean_w = np.float32(_sum(w, cols) / cols)
    for blk in numba.prange(nblk):
        buf = np.empty(cols, np.float32)
        gw = gw_parts[blk]
        total = 0.0
        for r in range(blk * rows // nblk, (blk + 1) * rows // nblk):
            xr = x[r]
            mean = np.float32(_sum(xr, cols) / cols)
            for j in range(cols):
                c = xr[j] - mean
                buf[j] = c * c
            rs = np.float32(1.0) / math.sqrt(np.float32(_sum(buf, cols) / cols) + eps)
            for j in range(cols):
                xh = (xr[j] - mean) * rs
                buf[j] = xh * w[j] + b[j]
                gw[j] += xh
            total += _sum(buf, cols)
            for j in range(cols):
                buf[j] = w[j] * ((xr[j] - mean) * rs)
            a = np.float32(_sum(buf, cols) / cols)
            gr = gx[r]
            for j in range(cols):
                gr[j] = rs * (w[j] - mean_w - (xr[j] - mean) * rs * a)
        loss_parts[blk] = total


def hand_step(x, w, b, eps=1e-5):
    """(loss, x.grad, weight.grad, bias.grad) of W4 by the hand kernel."""
    rows, cols = x.shape
    gx = np.empty_like(x)
    gw_parts = np.zeros((ROW_BLOCKS, cols))
    loss_parts = np.zeros(ROW_BLOCKS)
    w4_kernel(x, w, b, np.float32(eps), gx, gw_parts, loss_parts)
    return [np.float64(loss_parts.sum()), gx, gw_parts.sum(0).astype(np.float32),
            np.full(cols, rows, np.float32)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    (x, w, b), _ = workloads.w4_inputs()
    reference = workloads.build("W4", "jitgrad")
    reference.step()
    bad = workloads.mismatch(reference.result(),
                             [np.asarray(a, np.float64) for a in hand_step(x, w, b)])
    if bad:
        raise SystemExit(f"the hand kernel differs from jitgrad eager: {bad}")
    steps = {"numba (hand)": lambda: hand_step(x, w, b)}
    for impl in ("jitgrad.compile", "torch.compile"):
        try:
            case = workloads.build("W4", impl)
        except NotImplementedError as e:
            print(f"{impl}: n/a ({e})")
            continue
        case.step()
        case.wait()
        case.warm_up()
        steps[impl] = case.step
    samples = {name: [] for name in steps}
    for r in range(args.repeat):
        for name, step in steps.items():
            t = time.perf_counter()
            for _ in range(5):
                step()
            samples[name].append((time.perf_counter() - t) / 5)
    median = {name: statistics.median(s) for name, s in samples.items()}
    base = median.get("torch.compile")
    print(f"W4 median ms per step, {args.repeat} interleaved samples; load average "
          + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    for name, m in median.items():
        ratio = f"   {m / base:.2f}x torch.compile" if base else ""
        print(f"  {name:<16} {m * 1e3:8.2f}{ratio}")


if __name__ == "__main__":
    main()
