"""The autograd profiler (torch.autograd.profiler's API): `profile`,
`record_function`, and the event lists they produce.

What gets recorded, each as one timed event nested under whatever event was
open when it started:
- forward ops: every call of a public jitgrad op, named "aten::" + the op's
  name (the formula-table name for elementwise ops, `mul`, `sin`, ...; the
  Python function's name otherwise, `sum`, `matmul`, `reshape`; in-place
  variants end in `_`, `mul_`). An op that calls an op of the same name (a
  Tensor method delegating to the function) is one event. Ops are plain
  Python functions, so they are seen through `sys.setprofile`, installed for
  this thread only while a profile is recording: a profiler that is off or
  has exited costs nothing per op.
- backward nodes ("MulBackward0"), fused backward groups
  ("Fused[MulBackward0, SinBackward0]") and kernel compilations or disk-cache
  loads ("compile mul_fwd", "load mul_fwd"): the engine and the kernel cache
  report them through `_state.local.profiler.push(name, kind)` / `pop()`.
- `record_function(name)` blocks.
Times are microseconds (float), from `time.perf_counter_ns`.
"""
from .events import EventList, FunctionEvent, FunctionEventAvg
from .recorder import emit_nvtx, profile, record_function

__all__ = ["profile", "record_function", "emit_nvtx", "EventList", "FunctionEvent",
           "FunctionEventAvg"]
