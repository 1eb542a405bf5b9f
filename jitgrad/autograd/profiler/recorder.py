"""`profile`, `record_function` and `emit_nvtx`: the context managers that
record events."""
import functools
import sys
import threading
import time
import warnings

from ... import _state, cuda
from .events import EventList, FunctionEvent
from .op_detection import _INPLACE, _SHARED, _flops, _input_shapes, _op_codes, _stack_of


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
