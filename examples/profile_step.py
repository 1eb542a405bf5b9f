"""Profile one training step with `jitgrad.autograd.profiler`.

Two warm-up steps compile the kernels (or load them from the disk cache); the
profiled step then shows the steady state: forward ops (`aten::...`),
backward nodes (`...Backward0`), fused backward groups (`Fused[...]`) and the
optimizer, each region labelled with `record_function`. The script prints
torch's table, sorted by self CPU time, and writes a Chrome trace (open it in
chrome://tracing or https://ui.perfetto.dev).

    python examples/profile_step.py
    python examples/profile_step.py --quick     # a smaller model: a smoke test
"""
import argparse
import json
import os
import sys
import tempfile
import time

import jitgrad
import jitgrad.nn.functional as F
from jitgrad import nn, optim
from jitgrad.autograd.profiler import profile, record_function


def make_step(batch, width):
    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width), nn.GELU(),
                          nn.Linear(width, 10))
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = jitgrad.randn(batch, width), jitgrad.randint(0, 10, (batch,))

    def step():
        with record_function("forward"):
            # a custom elementwise chain on top of the MLP: its backward is one fused group
            logits = model(x)
            loss = F.cross_entropy(logits, y) + 1e-3 * (logits.sin() * logits).tanh().pow(2).mean()
        opt.zero_grad()
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer.step"):
            opt.step()
        return loss.item()

    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller model")
    ap.add_argument("--trace", default=None, help="where to write the Chrome trace "
                    "(default: a new file in the temp folder)")
    args = ap.parse_args(argv)
    batch, width = (32, 64) if args.quick else (256, 512)
    step = make_step(batch, width)

    before = jitgrad.compile_stats()
    start = time.perf_counter()
    step()
    step()  # the first step also creates the optimizer's momentum buffers
    after = jitgrad.compile_stats()
    print(f"2 warm-up steps: {time.perf_counter() - start:.2f} s, "
          f"{after['kernels_compiled'] - before['kernels_compiled']} kernels compiled, "
          f"{after['disk_hits'] - before['disk_hits']} loaded from the disk cache")

    with profile(record_shapes=True) as prof:
        loss = step()
    print(f"profiled step (batch {batch}, width {width}): loss {loss:.4f}, "
          f"{len(prof.function_events)} events, self CPU total {prof.self_cpu_time_total / 1e3:.2f} ms")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))

    fused = sorted({e.name for e in prof.function_events if e.name.startswith("Fused[")})
    print("fused backward groups in this step:", fused or "none")

    path = args.trace
    if path is None:
        fd, path = tempfile.mkstemp(prefix="jitgrad_step_", suffix=".json")
        os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    print(f"Chrome trace with {len(events)} events written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
