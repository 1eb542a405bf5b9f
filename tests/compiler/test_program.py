"""The captured program (jitgrad/compiler/program.py): which tapes a replay runs,
and the cyclic garbage collector, paused while a trace or a lowering runs."""
import gc
import threading

import numpy as np
import pytest

import jitgrad
from jitgrad.compiler import program


def step(x):
    x.grad = None
    y = (x.sin() * x).sum()
    y.backward()
    return y


def leaf():
    return jitgrad.tensor(np.linspace(-1, 1, 8), requires_grad=True)


@pytest.fixture
def python_tier_builds(monkeypatch):
    """How many times a program built the tapes of its Python tier (no executors)."""
    calls = []
    tapes = program.Program._tapes

    def counted(self, executors, deferring=False):
        calls.append(not executors)
        return tapes(self, executors, deferring)
    monkeypatch.setattr(program.Program, "_tapes", counted)
    return lambda: sum(calls)


def test_a_program_built_before_its_first_replay_never_builds_its_python_tier(
        python_tier_builds):
    f, x = jitgrad.compile(step), leaf()
    want = step(leaf())
    f(x)
    assert f.wait()
    for _ in range(2):
        y = f(x)
    assert python_tier_builds() == 0
    np.testing.assert_allclose(y.item(), want.item())
    tapes = f.entries()[0].program.tapes()
    assert any(seg.executor == "scalar tape" for seg in tapes[0].segments)


def test_replays_before_the_build_make_the_python_tier_once(monkeypatch, python_tier_builds):
    monkeypatch.setattr(program.Program, "_start_build", lambda self: None)  # never built
    f, x, e = jitgrad.compile(step), leaf(), leaf()
    for _ in range(3):
        np.testing.assert_allclose(f(x).item(), step(e).item())
        np.testing.assert_allclose(x.grad.numpy(), e.grad.numpy())
    assert python_tier_builds() == 1
    assert not f.entries()[0].program.tapes()[0].segments  # every call in Python


@pytest.fixture
def no_build_running():
    """Programs of earlier tests may still be building in their worker threads, which
    pause the collector while they lower: the tests below see only their own pauses."""
    for t in threading.enumerate():
        if t.name == "jitgrad.compile build":
            t.join(60)
    assert gc.isenabled()


def test_a_trace_pauses_the_collector_and_gives_it_back(no_build_running):
    seen = []

    def traced(x):
        seen.append(gc.isenabled())
        return step(x)
    jitgrad.compile(traced)(leaf())
    assert seen == [False] and gc.isenabled()


def test_a_trace_leaves_a_collector_the_caller_turned_off_off(no_build_running):
    gc.disable()
    try:
        jitgrad.compile(step)(leaf())
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_trace_that_raises_gives_the_collector_back(no_build_running):
    def fails(x):
        step(x)
        raise KeyError("from the step")
    with pytest.raises(KeyError, match="from the step"):
        jitgrad.compile(fails)(leaf())
    assert gc.isenabled()


def test_what_a_pause_made_is_old_when_it_ends(no_build_running):
    """The objects made while paused are not walked by the next young collection."""
    with program.paused_gc():
        made = [[i] for i in range(20000)]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(m) in oldest for m in made) and gc.get_freeze_count() == 0


def test_a_pause_leaves_the_callers_frozen_objects_frozen(no_build_running):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with program.paused_gc():
            [[i] for i in range(100)]
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()


def test_overlapping_pauses_turn_the_collector_on_when_the_last_one_ends(no_build_running):
    """A trace in one thread and a lowering in another may overlap in any order."""
    first, second = program.paused_gc(), program.paused_gc()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first to start ends first
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()
    entered, done = threading.Event(), threading.Event()

    def other():
        with program.paused_gc():
            entered.set()
            done.wait(5)
    t = threading.Thread(target=other)
    with program.paused_gc():
        t.start()
        assert entered.wait(5)
    assert not gc.isenabled()  # the other thread's pause is still on
    done.set()
    t.join()
    assert gc.isenabled()


def test_an_instruction_reads_the_slots_its_arguments_hold():
    """The tracer records the slots each call reads while it puts Refs in place of
    tensors: the slots its arguments and keywords hold, nested lists and tuples
    included, in order (what every pass over the program asks of it)."""
    def nested(x):
        y = jitgrad.stack([x, x * 2, (x, x)[1]]).sum(dim=0, keepdim=True)
        return jitgrad.cat((y, x.unsqueeze(0)), dim=0).softmax(dim=-1).amax(1)

    prog = jitgrad.compile.explain(nested, leaf()).program
    assert "amax" in [ins.name for ins in prog.instrs]  # (a composite recorded as itself)
    assert any(ins.kwargs for ins in prog.instrs)
    assert any(type(a) in (list, tuple) for ins in prog.instrs for a in ins.args)
    for ins in prog.instrs:
        assert ins._reads is not None, ins  # recorded, not found again
        assert ins.reads() == tuple(program.iter_refs(ins.args) +
                                    program.iter_refs(ins.kwargs)), ins
