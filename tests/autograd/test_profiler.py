"""The autograd profiler: torch's docs example, nesting, key_averages and the
table, Chrome traces, compile events, and that an off or finished profiler
leaves nothing installed."""
import json
import os
import sys
import threading

import numpy as np
import pytest

import jitgrad
from jitgrad import _state
from jitgrad.autograd import Function
from jitgrad.autograd.profiler import EventList, profile, record_function


def _by_key(prof):
    return {e.key: e for e in prof.key_averages()}


def _warm(fn, *args):
    fn(*args)  # compile (or load) kernels first: the profiles below are steady state
    return fn


def _walk(events):
    for e in events:
        yield e
        yield from _walk(e.cpu_children)


# ---- torch's docs example ----------------------------------------------------------------


def test_docs_example_counts_backward_node_like_torch():
    x = jitgrad.randn((1, 1), requires_grad=True)
    with profile() as prof:
        for _ in range(100):
            y = x ** 2
            y.backward()
    avg = _by_key(prof)
    assert avg["PowBackward0"].count == 100
    assert avg["aten::pow"].count == 100
    table = prof.key_averages().table(sort_by="self_cpu_time_total")
    assert "PowBackward0" in table and "Self CPU time total:" in table


def test_docs_example_in_torch_counts_the_same_node():
    torch = pytest.importorskip("torch")
    x = torch.randn((1, 1), requires_grad=True)
    with torch.autograd.profiler.profile() as prof:
        for _ in range(100):
            y = x ** 2
            y.backward()
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["PowBackward0"].count == 100
    assert avg["aten::pow"].count >= 100


# ---- what is recorded, and how it nests ------------------------------------------------------


def test_record_function_nests_ops_and_self_time_is_smaller():
    x = jitgrad.randn(8, requires_grad=True)
    _warm(lambda: (x * 2).sin().sum())
    with profile() as prof:
        with record_function("label-z"):
            y = (x * 2).sin().sum()
    label = next(e for e in prof.function_events if e.name == "label-z")
    assert [c.name for c in label.cpu_children] == ["aten::mul", "aten::sin", "aten::sum"]
    assert all(c.cpu_parent is label for c in label.cpu_children)
    assert 0 <= label.self_cpu_time_total < label.cpu_time_total
    avg = _by_key(prof)["label-z"]
    assert avg.count == 1 and avg.self_cpu_time_total < avg.cpu_time_total
    assert y.grad_fn is not None


def test_record_function_as_decorator():
    @record_function("my_step")
    def step(t):
        return t * 3

    x = jitgrad.ones(2)
    assert step(x).tolist() == [3.0, 3.0]  # no profiler: a plain call
    with profile() as prof:
        step(x)
        step(x)
    avg = _by_key(prof)
    assert avg["my_step"].count == 2
    steps = [e for e in prof.function_events if e.name == "my_step"]
    assert all([c.name for c in e.cpu_children] == ["aten::mul"] for e in steps)


def test_ops_inside_a_backward_node_nest_under_it():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = jitgrad.randn(4, requires_grad=True)
    _warm(lambda: Scale.apply(x).sum().backward())
    with profile() as prof:
        Scale.apply(x).sum().backward()
    node = next(e for e in prof.function_events if e.name == "ScaleBackward")
    assert node.kind == "backward"
    assert [c.name for c in node.cpu_children] == ["aten::mul"]


def test_method_and_function_of_the_same_op_are_one_event():
    x = jitgrad.randn(3)
    _warm(lambda: (x + 1, x.add(1, alpha=2), 2 * x, x.mul_(1)))
    with profile() as prof:
        x + 1
        x.add(1, alpha=2)
        2 * x
        x.mul_(1)
        x.add_(0)
    names = [e.name for e in prof.function_events if e.cpu_parent is None]
    assert names == ["aten::add", "aten::add", "aten::mul", "aten::mul_", "aten::add_"]


def test_fused_group_and_node_events(monkeypatch):
    monkeypatch.setattr(jitgrad.kernels.fuse, "FUSE_MIN_ELEMENTS", 0)  # fuse this small tensor
    x = jitgrad.randn(16, requires_grad=True)

    def step():
        (x * 2).sin().exp().sum().backward()
    _warm(step)
    with jitgrad.autograd.set_fusion_enabled(True), profile() as prof:
        step()
    kinds = {e.name: e.kind for e in prof.function_events}
    fused = [n for n, k in kinds.items() if k == "fused"]
    assert fused and fused[0].startswith("Fused[")
    assert kinds["SumBackward0"] == "backward"
    with jitgrad.autograd.set_fusion_enabled(False), profile() as prof:
        step()
    names = {e.name for e in prof.function_events}
    assert {"MulBackward0", "SinBackward0", "ExpBackward0"} <= names
    assert not any(n.startswith("Fused[") for n in names)


def test_compile_events_for_a_new_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    name = f"prof_cube_{os.getpid()}_{id(tmp_path) % 100000}"
    cube = jitgrad.ops.elementwise(name, out="x * x * x", x="3 * x * x")
    # registered for this test only: tests that iterate the registry must not see it
    del jitgrad.ops.REGISTRY[name]
    x = jitgrad.randn(5, requires_grad=True)
    with profile() as prof:
        cube(x).sum().backward()
    compiles = [e for e in prof.function_events if e.kind == "compile"]
    fwd = [e for e in compiles if e.name.startswith(f"compile {name}_fwd")]
    assert fwd, [e.name for e in compiles]
    assert fwd[0].cpu_parent.name == f"aten::{name}"
    assert any(e.name.startswith(f"compile {name}_bwd") for e in compiles)
    with profile() as again:  # now in memory: nothing to compile or load
        cube(x).sum().backward()
    assert not [e for e in again.function_events if e.kind == "compile"]


def test_record_shapes_and_group_by_input_shape():
    a, b = jitgrad.ones(2, 3), jitgrad.ones(4)
    _warm(lambda: (a * a, b * 2))
    with profile(record_shapes=True) as prof:
        a * a
        b * 2
        b * 2
    grouped = {(e.key, str(e.input_shapes)): e.count
               for e in prof.key_averages(group_by_input_shape=True)}
    assert grouped[("aten::mul", "[[2, 3], [2, 3]]")] == 1
    assert grouped[("aten::mul", "[[4], []]")] == 2
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()
    plain = prof.key_averages()
    assert [(e.key, e.count, e.input_shapes) for e in plain] == [("aten::mul", 3, "")]
    assert "Input Shapes" not in plain.table()


def test_profiler_records_only_its_own_thread():
    x = jitgrad.ones(3)
    _warm(lambda: x.exp() + x.cos())
    done = threading.Event()

    def other():
        with record_function("other-thread"):
            x.exp()
        done.set()
    with profile() as prof:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        x.cos()
    assert done.is_set()
    names = [e.name for e in prof.function_events]
    assert names == ["aten::cos"]


# ---- results: key_averages, totals, the table --------------------------------------------------


def test_totals_and_averages():
    x = jitgrad.randn(4, requires_grad=True)
    _warm(lambda: x.sin().sum().backward())
    with profile() as prof:
        for _ in range(3):
            x.sin().sum().backward()
    events = prof.function_events
    assert isinstance(events, EventList)
    total = prof.key_averages().total_average()
    assert total.key == "Total"
    assert total.count == len(events)
    assert total.self_cpu_time_total == pytest.approx(prof.self_cpu_time_total)
    assert total.cpu_time_total >= total.self_cpu_time_total
    # self times partition the wall time of the top-level events
    top = sum(e.cpu_time_total for e in events if e.cpu_parent is None)
    assert prof.self_cpu_time_total == pytest.approx(top)
    sin = _by_key(prof)["aten::sin"]
    assert sin.count == 3
    assert sin.cpu_time == pytest.approx(sin.cpu_time_total / 3)
    assert isinstance(prof.self_cpu_time_total, float)


def test_table_layout_like_torch():
    x = jitgrad.randn(4, requires_grad=True)
    _warm(lambda: x.sin().sum().backward())
    with profile() as prof:
        x.sin().sum().backward()
    lines = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=2).splitlines()
    header = lines[1].split()
    assert " ".join(header) == ("Name Self CPU % Self CPU CPU total % CPU total CPU time avg # of "
                                "Calls")
    assert lines[0] == lines[2] == lines[-2] and set(lines[0]) == {"-", " "}
    assert len(lines) == 3 + 2 + 2  # header block, 2 rows (row_limit), rule and footer
    assert lines[-1].startswith("Self CPU time total: ")
    rows = [ln.split() for ln in lines[3:5]]
    selfs = [r[2] for r in rows]
    assert all(s.endswith(("us", "ms", "s")) for s in selfs)
    assert prof.key_averages().table(sort_by="count")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="no_such_column")


def test_time_formatting_matches_torch():
    from jitgrad.autograd.profiler.tables import _format_time
    assert _format_time(12.3451) == "12.345us"
    assert _format_time(1500.0) == "1.500ms"
    assert _format_time(2_500_000.0) == "2.500s"
    pytest.importorskip("torch")
    from torch.autograd.profiler_util import _format_time as torch_format
    for t in (0.0, 0.5, 12.3451, 999.9994, 1000.0, 1234.5, 2_500_000.0):
        assert _format_time(t) == torch_format(t)


def test_results_before_exit_raise():
    with profile() as prof:
        with pytest.raises(RuntimeError, match="Profiler didn't finish running"):
            prof.key_averages()
    assert isinstance(prof.key_averages(), EventList)


# ---- Chrome trace ------------------------------------------------------------------------------


def _traced(tmp_path):
    x = jitgrad.randn(4, requires_grad=True)
    _warm(lambda: x.sin().sum().backward())
    with profile(record_shapes=True) as prof:
        with record_function("outer"):
            x.sin().sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return prof, path


def test_chrome_trace_is_valid_and_nested(tmp_path):
    prof, path = _traced(tmp_path)
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    assert len(events) == len(prof.function_events)
    for e in events:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "cat", "args"} <= set(e)
        assert e["ph"] == "X" and e["dur"] >= 0
    by_name = {e["name"]: e for e in events}
    outer = by_name["outer"]
    assert outer["cat"] == "user_annotation"
    assert by_name["aten::sin"]["args"]["Input Dims"] == [[4]]
    # every recorded child lies inside its parent's [ts, ts + dur]
    index = {id(ev): e for ev, e in zip(prof.function_events, events)}
    checked = 0
    for ev in prof.function_events:
        if ev.cpu_parent is None:
            continue
        c, p = index[id(ev)], index[id(ev.cpu_parent)]
        assert p["ts"] - 1e-6 <= c["ts"]
        assert c["ts"] + c["dur"] <= p["ts"] + p["dur"] + 1e-6
        checked += 1
    assert checked >= 3
    assert [n for n in os.listdir(tmp_path)] == ["trace.json"]


def test_chrome_trace_unwritable_path(tmp_path):
    prof, _ = _traced(tmp_path)
    missing = tmp_path / "no" / "such" / "folder" / "trace.json"
    with pytest.raises(OSError) as err:
        prof.export_chrome_trace(str(missing))
    assert str(missing) in str(err.value)
    assert "export_chrome_trace" in str(err.value)
    assert not missing.parent.exists()
    folder = tmp_path / "a_folder"
    folder.mkdir()
    with pytest.raises(OSError) as err:
        prof.export_chrome_trace(str(folder))
    assert str(folder) in str(err.value)
    assert sorted(os.listdir(tmp_path)) == ["a_folder", "trace.json"]
    assert os.listdir(folder) == []


def test_chrome_trace_failure_keeps_the_old_file(tmp_path, monkeypatch):
    prof, path = _traced(tmp_path)
    path.write_text("old content")

    def fail(src, dst):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(PermissionError, match="trace.json"):
        prof.export_chrome_trace(str(path))
    assert path.read_text() == "old content"
    assert os.listdir(tmp_path) == ["trace.json"]


# ---- off, finished, nested ---------------------------------------------------------------------


def test_disabled_profiler_records_nothing_and_installs_nothing():
    x = jitgrad.randn(3, requires_grad=True)
    before = sys.getprofile()
    with profile(enabled=False) as prof:
        assert sys.getprofile() is before
        assert _state.local.profiler is None
        with record_function("ignored"):
            x.sin().sum().backward()
    assert len(prof.function_events) == 0
    assert prof.key_averages().table() == ""
    assert prof.self_cpu_time_total == 0


def test_exited_profiler_leaves_nothing_installed():
    before = sys.getprofile()
    x = jitgrad.randn(3)
    with profile() as prof:
        assert sys.getprofile() is not before
        assert _state.local.profiler is prof
        x.exp()
    assert sys.getprofile() is before
    assert _state.local.profiler is None
    n = len(prof.function_events)
    x.exp()
    assert len(prof.function_events) == n


def test_exception_inside_the_block_uninstalls():
    before = sys.getprofile()
    with pytest.raises(ZeroDivisionError):
        with profile() as prof:
            with record_function("boom"):
                jitgrad.ones(2).exp()
                1 / 0
    assert sys.getprofile() is before and _state.local.profiler is None
    boom = next(e for e in prof.function_events if e.name == "boom")
    assert boom.end_ns is not None and boom.cpu_time_total >= 0


def test_nested_profiles_are_refused():
    with profile() as prof:
        with pytest.raises(RuntimeError, match="not reentrant"):
            prof.__enter__()
        with pytest.raises(RuntimeError, match="already recording in this thread"):
            with profile():
                pass
    assert _state.local.profiler is None


def test_acc_events_accumulates_across_blocks():
    x = jitgrad.ones(2)
    _warm(lambda: x.exp())
    prof = profile(acc_events=True)
    for _ in range(2):
        with prof:
            x.exp()
    assert _by_key(prof)["aten::exp"].count == 2
    plain = profile()
    for _ in range(2):
        with plain:
            x.exp()
    assert _by_key(plain)["aten::exp"].count == 1


def test_unsupported_options_warn():
    with pytest.warns(UserWarning, match="profile_memory"):
        profile(profile_memory=True)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        profile(use_cuda=True)
    with pytest.raises(ValueError, match="use_cpu=False"):
        profile(use_cpu=False)


def test_with_stack_and_with_flops():
    a, b = jitgrad.ones(2, 3), jitgrad.ones(3, 4)
    _warm(lambda: a @ b)
    with profile(with_stack=True, with_flops=True) as prof:
        a @ b
    ev = next(e for e in prof.function_events if e.name == "aten::matmul")
    assert ev.flops == 2 * 2 * 3 * 4
    assert ev.stack and "test_profiler.py" in ev.stack[0]
    table = prof.key_averages().table()
    assert "Source Location" not in table  # key_averages drops stacks unless grouped by them
    assert "Total FLOPs" in table
    assert "Source Location" in prof.key_averages(group_by_stack_n=1).table()
    assert np.isfinite(prof.self_cpu_time_total)


def test_cprofile_around_a_profile_keeps_running():
    import cProfile
    x = jitgrad.ones(3)
    x.exp()
    outer = cProfile.Profile()
    outer.enable()
    try:
        with profile() as prof:
            x.exp()
        hook = sys.getprofile()
        x.exp()
    finally:
        outer.disable()
    assert hook is outer
    assert [e.name for e in prof.function_events] == ["aten::exp"]
