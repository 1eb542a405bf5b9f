"""The events a profile records (`FunctionEvent`), their per-name averages
(`FunctionEventAvg`) and the list holding them (`EventList`)."""
from .chrome_trace import write_chrome_trace
from .tables import _build_table, _format_time


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
        write_chrome_trace(self, path)
