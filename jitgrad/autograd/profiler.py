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
import functools
import json
import math
import os
import sys
import tempfile
import threading
import time
import types
import warnings

import numpy as np

from .. import _state, cuda
from ..ops import formulas, inplace, registry
from ..tensor import Tensor

_SEAM_KINDS = frozenset({"backward", "fused", "compile"})
_SHARED = object()   # a code object behind several ops: its name comes from the frame
_INPLACE = object()  # ops/inplace.py's inplace_elementwise(op, x, ...): "<op.name>_"
_NOT_OPS = frozenset({"manual_seed"})
_CO_VARARGS = 0x04
_JITGRAD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


# ---------------------------------------------------------------------------------
# Which Python functions are ops


def _op_codes():
    """{code object: op name, _SHARED or _INPLACE} for jitgrad's public ops:
    functions of `jitgrad` and `jitgrad.nn.functional`, Tensor methods and
    operators, registered functions, and the elementwise ops' shared `fn`
    (registry.elementwise makes every formula-table function from one `def`).
    Rebuilt on each profile start, so ops registered later are included."""
    import jitgrad  # the package and nn sit above autograd: read once they are loaded
    from ..nn import functional as F  # (as above)

    codes = {}

    def add(fn):
        if not isinstance(fn, types.FunctionType):
            return
        name = fn.__name__
        mod = fn.__module__ or ""
        if name == "<lambda>" or name.startswith("_") or name in _NOT_OPS:
            return
        if not (mod.startswith("jitgrad.ops") or mod.startswith("jitgrad.nn")):
            return
        prev = codes.get(fn.__code__)
        codes[fn.__code__] = name if prev is None or prev == name else _SHARED

    for source in (vars(jitgrad).values(), vars(F).values(), vars(jitgrad.Tensor).values()):
        for fn in list(source):
            add(fn)
    for fn, _ in list(registry.FUNCTIONS.values()):
        add(fn)
    codes[formulas.mul.__code__] = _SHARED
    codes[inplace.inplace_elementwise.__code__] = _INPLACE
    return codes


def _shape_of(v):
    """torch's "Input Shapes" entry: a tensor's shape, a list of them for a
    sequence of tensors, [] for anything else."""
    if isinstance(v, Tensor):
        return list(v._data.shape)
    if isinstance(v, (list, tuple)) and v and all(isinstance(t, Tensor) for t in v):
        return [list(t._data.shape) for t in v]
    return []


def _input_shapes(frame, local):
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:n]
    shapes = [_shape_of(local.get(a)) for a in names]
    if code.co_flags & _CO_VARARGS:
        shapes.extend(_shape_of(v) for v in local.get(code.co_varnames[n], ()))
    return shapes


def _stack_of(frame):
    """Source locations outside jitgrad, innermost first (torch's with_stack)."""
    out = []
    f = frame.f_back
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_JITGRAD_DIR):
            out.append(f"{fn}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return out


def _flops(name, shapes):
    """Multiply-adds x 2 of the matrix products (torch's with_flops covers these too)."""
    try:
        if name in ("aten::matmul", "aten::mm", "aten::bmm"):
            a, b = shapes[0], shapes[1]
            if len(a) < 1 or len(b) < 1:
                return 0
            m = a[-2] if len(a) > 1 else 1
            k = a[-1]
            n = b[-1] if len(b) > 1 else 1
            batch = 1
            for s in np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])):
                batch *= s
            return 2 * batch * m * k * n
        if name == "aten::linear":
            x, w = shapes[0], shapes[1]
            rows = 1
            for s in x[:-1]:
                rows *= s
            return 2 * rows * x[-1] * (w[0] if len(w) == 2 else 1)
    except (IndexError, TypeError, ValueError):
        pass
    return 0


# ---------------------------------------------------------------------------------
# Events


def _format_time(time_us):
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def _format_time_share(time_us, total_time_us):
    if total_time_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_time_us:.2f}%"


class _FormattedTimes:
    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def cpu_time_str(self):
        return _format_time(self.cpu_time)

    @property
    def cpu_time_total_str(self):
        return _format_time(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self):
        return _format_time(self.self_cpu_time_total)

    # CUDA kernel time in microseconds (profile(use_cuda=True) on CUDA tensors);
    # zero otherwise.
    device_time_total = self_device_time_total = 0.0

    @property
    def device_time(self):
        return 0.0 if self.count == 0 else self.device_time_total / self.count


class Interval:
    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class FunctionEvent(_FormattedTimes):
    """One recorded call. `kind`: "cpu_op" (a forward op), "backward" (a
    backward node), "fused" (a fused backward group), "compile" (a kernel
    compilation or load) or "user_annotation" (record_function)."""
    count = 1
    node_id = -1
    is_async = False

    def __init__(self, id, name, kind, thread, start_ns, parent, input_shapes=None, stack=None,
                 args=None):
        self.id = id
        self.name = name
        self.kind = kind
        self.thread = thread
        self.start_ns = start_ns
        self.end_ns = None
        self.cpu_parent = parent
        self.cpu_children = []
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self.args = args
        self.flops = 0
        self._frame = None
        self._pushed = False
        self._kernels = None  # [(start, end) CUDA event pairs] with use_cuda

    @property
    def key(self):
        return self.name

    @property
    def trace_name(self):
        return self.name

    @property
    def time_range(self):
        return Interval(self.start_ns / 1000.0, self.end_ns / 1000.0)

    @property
    def cpu_time_total(self):
        return (self.end_ns - self.start_ns) / 1000.0

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} kind={self.kind} "
                f"cpu_time={self.cpu_time_total_str} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_children={[c.id for c in self.cpu_children]} thread={self.thread} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg(_FormattedTimes):
    """Sums of the events that share a key (see EventList.key_averages)."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id = -1
        self.is_async = False
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.input_shapes = None
        self.stack = None
        self.kind = None
        self.cpu_parent = None
        self.cpu_children = None
        self.flops = 0

    def add(self, other):
        if self.key is None:
            self.key = other.key
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.kind = other.kind
            self.cpu_parent = other.cpu_parent
            self.cpu_children = other.cpu_children
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.count += other.count
        self.flops += other.flops
        return self

    __iadd__ = add

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str} count={self.count} "
                f"input_shapes={self.input_shapes}>")


class EventList(list):
    """A list of FunctionEvent (or FunctionEventAvg) with torch's helpers."""

    def __init__(self, *args, with_flops=False, **kwargs):
        super().__init__(*args, **kwargs)
        self._with_flops = with_flops

    def __str__(self):
        return self.table()

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Sum the events per name (and input shapes / top stack entries if asked)."""
        stats = {}
        for evt in self:
            key = (evt.key,)
            if group_by_input_shape:
                key += (str(evt.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(evt.stack[:group_by_stack_n])
            avg = stats.get(key)
            if avg is None:
                avg = stats[key] = FunctionEventAvg()
            avg.add(evt)
        out = EventList(stats.values(), with_flops=self._with_flops)
        for avg in out:
            avg.stack = avg.stack[:group_by_stack_n] if avg.stack else []
            if not group_by_input_shape:
                avg.input_shapes = ""
        return out

    def total_average(self):
        total = FunctionEventAvg()
        for evt in self:
            total.cpu_time_total += evt.cpu_time_total
            total.self_cpu_time_total += evt.self_cpu_time_total
            total.count += evt.count
            total.flops += evt.flops
        total.key = "Total"
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """The events as torch's table: Name, Self CPU %, Self CPU, CPU total %,
        CPU total, CPU time avg, # of Calls (+ Input Shapes, Source Location,
        Total FLOPs when recorded), and a "Self CPU time total" footer.
        sort_by: an attribute, largest first, e.g. "self_cpu_time_total",
        "cpu_time_total", "cpu_time", "count"."""
        return _build_table(self, sort_by, row_limit, max_src_column_width,
                            max_name_column_width, max_shapes_column_width, header,
                            top_level_events_only, time_unit, self._with_flops)

    def export_chrome_trace(self, path):
        """Write the events as Chrome trace JSON (chrome://tracing, Perfetto):
        {"traceEvents": [{"name", "ph": "X", "ts", "dur", "pid", "tid", "cat",
        "args"}, ...]} with ts and dur in microseconds. The file is written to a
        temporary file in the same folder and renamed over `path`, so `path`
        holds either its old content or the whole trace, never half of it."""
        t0 = min((e.start_ns for e in self), default=0)
        pid = os.getpid()
        trace = []
        for e in self:
            args = {}
            if e.input_shapes:
                args["Input Dims"] = e.input_shapes
            if e.args is not None:
                args["args"] = e.args
            trace.append({"name": e.name, "ph": "X", "ts": (e.start_ns - t0) / 1000.0,
                          "dur": (e.end_ns - e.start_ns) / 1000.0, "pid": pid, "tid": e.thread,
                          "cat": e.kind, "args": args})
        _write_atomically(path, json.dumps({"traceEvents": trace, "displayTimeUnit": "ms"}))


def _write_atomically(path, text):
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                                   suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise OSError(e.errno, f"export_chrome_trace could not write the trace "
                      f"({e.strerror or e}); pass a file path in an existing, writable folder",
                      path) from e
    finally:
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:
                pass


def _build_table(events, sort_by, row_limit, max_src_column_width, max_name_column_width,
                 max_shapes_column_width, header, top_level_events_only, time_unit, with_flops):
    """torch.autograd.profiler_util._build_table for CPU events."""
    if len(events) == 0:
        return ""
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device").replace("xpu", "device")
        if not hasattr(events[0], attr):
            raise ValueError(f"table(sort_by={sort_by!r}): no such column; use one of "
                             "'cpu_time', 'cpu_time_total', 'self_cpu_time_total', 'count'")
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)
    has_input_shapes = any(e.input_shapes for e in events)
    stacks = [e.stack for e in events if e.stack]
    has_stack = bool(stacks)

    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    src_width = None
    if has_stack:
        src_width = max(len(entry) for s in stacks for entry in s) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
               "# of Calls"]
    spacing = 2
    row_format, header_sep, line_length = "", "", -spacing

    def add_column(padding, text_dir=">"):
        nonlocal row_format, header_sep, line_length
        row_format += "{: " + text_dir + str(padding) + "}" + " " * spacing
        header_sep += "-" * padding + " " * spacing
        line_length += padding + spacing

    add_column(name_width)
    for _ in headers[1:]:
        add_column(12)
    if has_input_shapes:
        headers.append("Input Shapes")
        add_column(shapes_width)
    if has_stack:
        headers.append("Source Location")
        add_column(src_width, text_dir="<")
    flops_scale = None
    if with_flops:
        raw = [e.flops for e in events if e.flops > 0]
        if raw:
            units = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
            k = int(max(0, min(math.log10(min(raw)) / 3, len(units) - 1)))
            flops_scale = 10.0 ** (-3 * k)
            headers.append(f"Total {units[k]}")
            add_column(12)

    def fmt(t):
        if time_unit == "s":
            return f"{t / 1e6:.3f}s"
        if time_unit == "ms":
            return f"{t / 1e3:.3f}ms"
        if time_unit == "us":
            return f"{t:.3f}us"
        return _format_time(t)

    def trim_path(path):
        if len(path) > src_width:
            path = path[len(path) - src_width:]
            if len(path) > 3:
                path = "..." + path[3:]
        return path

    total_self = sum(e.self_cpu_time_total for e in events)
    out = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_events_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [header_sep, row_format.format(*headers), header_sep]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_time_share(e.self_cpu_time_total, total_self),
               fmt(e.self_cpu_time_total), _format_time_share(e.cpu_time_total, total_self),
               fmt(e.cpu_time_total), fmt(e.cpu_time), e.count]
        if has_input_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if has_stack:
            row.append(trim_path(e.stack[0]) if e.stack else "")
        if flops_scale is not None:
            row.append("--" if e.flops <= 0 else f"{e.flops * flops_scale:8.3f}")
        out.append(row_format.format(*row))
        if has_stack and e.stack:
            blank = [""] * (len(headers) - 1)
            for entry in e.stack[1:]:
                out.append(row_format.format(*(blank + [trim_path(entry)])))
    out += [header_sep, f"Self CPU time total: {fmt(total_self)}"]
    return "".join(s + "\n" for s in out)


# ---------------------------------------------------------------------------------
# The profiler


def _restore_profile_hook(prev):
    """Put back the profile hook a profile block replaced. sys.getprofile()
    returns cProfile's profiler object, which is not a Python hook: it goes back
    with its own enable()."""
    if prev is None or callable(prev) or not hasattr(prev, "enable"):
        sys.setprofile(prev)
    else:
        sys.setprofile(None)
        prev.enable()


class profile:
    """Record what jitgrad runs in this thread inside a `with` block.

    torch.autograd.profiler.profile's arguments. `use_cuda=True` (with CUDA
    available) also times the CUDA kernels each event launches with CUDA
    events, into `device_time_total`/`self_device_time_total`; without CUDA it
    warns and records CPU events only. `profile_memory` and `with_modules` warn and are ignored, `use_kineto`
    and `experimental_config` are accepted and ignored. `record_shapes` keeps
    the input shapes of forward ops (for `key_averages(group_by_input_shape=
    True)`), `with_stack` their source locations outside jitgrad, `with_flops`
    the FLOPs of matrix products. `enabled=False` records nothing and costs
    nothing. Unlike torch, a finished profile may be entered again: its events
    are replaced, or with `acc_events=True` added to.

    >>> import jitgrad
    >>> from jitgrad.autograd.profiler import profile, record_function
    >>> x = jitgrad.tensor([[0.5]], requires_grad=True)
    >>> def step():
    ...     with record_function("step"):
    ...         y = (x ** 2).sum()
    ...         y.backward()
    >>> step()  # compiles (or loads) the kernels, so the profile shows steady state
    >>> with profile() as prof:
    ...     for _ in range(3):
    ...         step()
    >>> averages = {e.key: e for e in prof.key_averages()}
    >>> [(k, averages[k].count) for k in ("step", "aten::pow", "aten::sum", "PowBackward0")]
    [('step', 3), ('aten::pow', 3), ('aten::sum', 3), ('PowBackward0', 3)]
    >>> averages["step"].self_cpu_time_total < averages["step"].cpu_time_total
    True
    >>> print(prof.key_averages().table(sort_by="self_cpu_time_total"))  # doctest: +SKIP
    ------------  ------------  ------------  ------------  ------------  ------------  ------------
            Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls
    ------------  ------------  ------------  ------------  ------------  ------------  ------------
            step        21.43%      31.221us       100.00%     145.710us      48.570us             3
    SumBackward0        14.86%      21.651us        35.02%      51.030us      17.010us             3
       aten::pow        13.61%      19.830us        13.61%      19.830us       6.610us             3
    ...
    """

    def __init__(self, enabled=True, *, use_cuda=False, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False,
                 use_cpu=True, experimental_config=None, acc_events=False):
        self.enabled = bool(enabled)
        self.use_cuda = False
        self._loose_kernels = []
        self.record_shapes = bool(record_shapes or with_flops)
        self.with_flops = bool(with_flops)
        self.profile_memory = False
        self.with_stack = bool(with_stack)
        self.with_modules = False
        self.use_kineto = use_kineto
        self.use_cpu = use_cpu
        self.experimental_config = experimental_config
        self.acc_events = bool(acc_events)
        self.entered = False
        self._events = []
        self._function_events = EventList()
        self._finished = True
        if not self.enabled:
            return
        if use_cuda:
            if cuda.is_available():
                self.use_cuda = True
            else:
                warnings.warn("CUDA is not available, disabling CUDA profiling: recording CPU "
                              "events only", stacklevel=2)
        if profile_memory:
            warnings.warn("profile_memory=True is not supported by jitgrad's profiler; memory "
                          "is not recorded", stacklevel=2)
        if with_modules:
            warnings.warn("with_modules=True is not supported by jitgrad's profiler (torch "
                          "supports it for TorchScript only); module scopes are not recorded",
                          stacklevel=2)
        if not use_cpu:
            raise ValueError("use_cpu=False: jitgrad's profiler records CPU events only, so it "
                             "would record nothing; leave use_cpu=True")

    # ---- recording ----------------------------------------------------------------
    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        loc = _state.local
        if loc.profiler is not None:
            raise RuntimeError("another profiler is already recording in this thread; nested "
                               "profile() blocks are not supported (nor are they in torch): "
                               "use record_function() to label a region inside one profile")
        self.entered = True
        self._finished = False
        if not self.acc_events:
            self._events = []
        self._stack = []
        self._thread = threading.get_native_id()
        self._next_id = len(self._events)
        self._prev_profile = sys.getprofile()
        loc.profiler = self
        sys.setprofile(self._make_callback())
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.enabled or not self.entered:
            return False
        _restore_profile_hook(self._prev_profile)
        _state.local.profiler = None
        now = time.perf_counter_ns()
        while self._stack:
            ev = self._stack.pop()
            ev.end_ns = now
            ev._frame = None
        self._prev_profile = None
        self.entered = False
        self._finished = True
        if self.use_cuda:
            self._device_times()
        self._function_events = EventList(self._events, with_flops=self.with_flops)
        return False

    def _make_callback(self):
        codes = _op_codes()
        stack = self._stack
        open_op = self._open_op
        close_op = self._close_op

        def callback(frame, event, arg):
            # An exception escaping a profile hook would switch the hook off and
            # surface in the user's op call: drop that one event instead.
            try:
                if event == "call":
                    name = codes.get(frame.f_code)
                    if name is not None:
                        open_op(frame, name)
                elif event == "return":
                    if frame.f_code in codes and stack:
                        close_op(frame)
            except Exception:
                pass
        return callback

    def _new_event(self, name, kind, input_shapes=None, stack=None, args=None):
        parent = self._stack[-1] if self._stack else None
        ev = FunctionEvent(self._next_id, name, kind, self._thread, 0, parent, input_shapes,
                           stack, args)
        self._next_id += 1
        if parent is not None:
            parent.cpu_children.append(ev)
        self._stack.append(ev)
        self._events.append(ev)
        return ev

    def _open_op(self, frame, name):
        local = None
        if name is _SHARED or name is _INPLACE:
            local = frame.f_locals
            if name is _SHARED:
                n = local.get("name")
                name = "aten::" + (n if isinstance(n, str) else frame.f_code.co_name)
            else:
                name = "aten::" + getattr(local.get("op"), "name", "inplace") + "_"
        else:
            name = "aten::" + name
        stack = self._stack
        if stack:
            top = stack[-1]
            if top._frame is not None and top.name == name:
                return  # a method delegating to the function of the same name: one event
        shapes = None
        if self.record_shapes:
            shapes = _input_shapes(frame, local if local is not None else frame.f_locals)
        ev = self._new_event(name, "cpu_op", shapes, _stack_of(frame) if self.with_stack else None)
        if self.with_flops:
            ev.flops = _flops(name, shapes)
        ev._frame = frame
        ev.start_ns = time.perf_counter_ns()

    def _close_op(self, frame):
        stack = self._stack
        for k in range(len(stack) - 1, -1, -1):
            if stack[k]._frame is frame:
                self._close_from(k, time.perf_counter_ns())
                return

    def _close_from(self, k, now):
        """Close the event at stack depth k and any left open above it (an
        exception skipped their ends)."""
        stack = self._stack
        while len(stack) > k:
            ev = stack.pop()
            ev.end_ns = now
            ev._frame = None

    def device_kernel(self, start, end):
        """A CUDA kernel ran between events `start` and `end` (called by
        jitgrad/_cuda/kernels.launch): charge it to the innermost open event."""
        target = self._stack[-1] if self._stack else None
        if target is None:
            self._loose_kernels.append((start, end))
        elif target._kernels is None:
            target._kernels = [(start, end)]
        else:
            target._kernels.append((start, end))

    def _device_times(self):
        cuda.synchronize()
        for ev in reversed(self._events):  # children come after their parents
            own = sum(max(0.0, s.elapsed_time(e)) * 1000.0 for s, e in ev._kernels or ())
            ev.self_device_time_total = own
            ev.device_time_total = own + sum(c.device_time_total for c in ev.cpu_children)
            ev._kernels = None

    # The seam the engine and the kernel cache call (see _state.local.profiler).
    def push(self, name, kind):
        ev = self._new_event(name, kind)
        ev._pushed = True
        ev.start_ns = time.perf_counter_ns()
        return ev

    def pop(self):
        now = time.perf_counter_ns()
        stack = self._stack
        for k in range(len(stack) - 1, -1, -1):
            if stack[k]._pushed:
                self._close_from(k, now)
                return

    def _open_annotation(self, name, args):
        ev = self._new_event(name, "user_annotation", args=args)
        ev.start_ns = time.perf_counter_ns()
        return ev

    def _close_event(self, ev):
        now = time.perf_counter_ns()
        stack = self._stack
        for k in range(len(stack) - 1, -1, -1):
            if stack[k] is ev:
                self._close_from(k, now)
                return

    # ---- results ------------------------------------------------------------------
    def _check_finished(self):
        if not self._finished:
            raise RuntimeError("Profiler didn't finish running: read its results after the "
                               "`with profile() as prof:` block has exited")

    @property
    def function_events(self):
        """Every recorded event, in the order they started (an EventList)."""
        self._check_finished()
        return self._function_events

    def events(self):
        return self.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Events summed per name (and per input shapes, with record_shapes=True
        and group_by_input_shape=True): an EventList of FunctionEventAvg."""
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        """Sum of the self times of all events, in microseconds."""
        return self.function_events.self_cpu_time_total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width, header,
                                          top_level_events_only)

    def export_chrome_trace(self, path):
        return self.function_events.export_chrome_trace(path)

    export_chrome_trace.__doc__ = EventList.export_chrome_trace.__doc__

    def __str__(self):
        if not self._finished:
            return "<unfinished jitgrad.autograd.profiler.profile>"
        return self.table()

    def __repr__(self):
        if not self._finished:
            return "<unfinished jitgrad.autograd.profiler.profile>"
        return repr(self._function_events)


class record_function:
    """Label a block (context manager) or every call of a function (decorator)
    in the profile recording in this thread; a no-op costing one thread-local
    read when none is.

    >>> import jitgrad
    >>> from jitgrad.autograd.profiler import profile, record_function
    >>> @record_function("double")
    ... def double(t):
    ...     return t * 2
    >>> z = double(jitgrad.ones(2))  # not recorded: no profile is on
    >>> with profile() as prof:
    ...     with record_function("label-z"):
    ...         z = double(jitgrad.ones(2))
    >>> [(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in prof.function_events]
    [('label-z', None), ('aten::ones', 'label-z'), ('double', 'label-z'), ('aten::mul', 'double')]
    """

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._prof = None
        self._event = None

    def __enter__(self):
        prof = _state.local.profiler
        if prof is not None:
            self._prof = prof
            self._event = prof._open_annotation(self.name, self.args)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        prof, ev = self._prof, self._event
        self._prof = self._event = None
        if prof is not None and _state.local.profiler is prof:
            prof._close_event(ev)
        return False

    def __call__(self, fn):
        name, args = self.name, self.args

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with record_function(name, args):
                return fn(*a, **k)
        return wrapped


class emit_nvtx(profile):
    """Mark every op, backward node and `record_function` range as an NVTX range
    (nested as they run), for NVIDIA Nsight Systems, as torch's emit_nvtx does.
    Needs the `nvtx` package (`pip install nvtx`); `record_shapes=True` appends
    the input shapes to each range's name. It records the same events as
    `profile`, which can be read afterwards as well."""

    def __init__(self, enabled=True, record_shapes=False):
        super().__init__(enabled, record_shapes=record_shapes)
        self._nvtx = None

    def __enter__(self):
        if self.enabled:
            try:
                import nvtx
            except ImportError:
                raise RuntimeError("emit_nvtx needs the nvtx package: pip install nvtx") from None
            self._nvtx = nvtx
        return super().__enter__()

    def _new_event(self, name, kind, input_shapes=None, stack=None, args=None):
        ev = super()._new_event(name, kind, input_shapes, stack, args)
        label = name if not input_shapes else f"{name}, sizes = {input_shapes}"
        self._nvtx.push_range(label)
        return ev

    def _close_from(self, k, now):
        for _ in range(len(self._stack) - k):
            self._nvtx.pop_range()
        super()._close_from(k, now)

    def __exit__(self, exc_type, exc_val, exc_tb):
        for _ in self._stack if self.entered else ():
            self._nvtx.pop_range()
        return super().__exit__(exc_type, exc_val, exc_tb)


__all__ = ["profile", "record_function", "emit_nvtx", "EventList", "FunctionEvent",
           "FunctionEventAvg"]
