"""The scalar tape executor (jitgrad/compiler/scalar.py): compiled steps on small
tensors give eager mode's values and gradients, the tape really runs them, and
a second process loads its interpreter from the disk cache."""
import functools
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitgrad
from jitgrad.compiler import scalar
from jitgrad.compiler.program import Ref
from jitgrad.kernels import cache, interp
from jitgrad.ops.registry import FUNCTIONS, REGISTRY
from jitgrad.testing import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "asv_bench"))
from workloads import ops as _ops, w7_loss  # noqa: E402

# float32 rows compute in float32 as eager kernels do, with the C library's math
# functions where eager kernels use kernels/vmath.py's: an ulp or two apart.
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}


def assert_close(compiled, eager):
    a, b = np.asarray(compiled), np.asarray(eager)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "b":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, equal_nan=True, **TOL[a.dtype.type])


def leaves(*arrays):
    return [jitgrad.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]


def check_steps(step, arrays, steps=4):
    """Run `step` eagerly and compiled on twin leaves; compare results and .grad
    after every step.
    Returns the explain() report of the capture."""
    eager, comp = leaves(*arrays), leaves(*arrays)
    f = jitgrad.compile(step, mode="max-autotune")  # the tape is built before replays
    for _ in range(steps):
        for x in eager + comp:
            x.grad = None
        want, got = step(*eager), f(*comp)
        for w, g in zip(jitgrad.testing.outputs_of(want), jitgrad.testing.outputs_of(got)):
            assert_close(g._data, w._data)
        for e, c in zip(eager, comp):
            assert (e.grad is None) == (c.grad is None)
            if e.grad is not None:
                assert_close(c.grad._data, e.grad._data)
    return jitgrad.compile.explain(step, *leaves(*arrays))


def scalar_instructions(report):
    return report.executors["forward"].get(scalar.NAME, (0, 0))[1]


def w2(x):
    y = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * x) + 0.5 * x) * jitgrad.sigmoid(x)).sum()
    y.backward()
    return y


def w7(ops):
    def step(x):
        y = w7_loss(_ops(jitgrad), x, ops)
        y.backward()
        return y
    return step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_w2_matches_eager_and_runs_on_the_scalar_tape(dtype):
    report = check_steps(w2, [np.linspace(-2, 2, 16, dtype=dtype)])
    # everything, the accumulation into .grad included, in one segment
    assert report.executors["forward"] == {scalar.NAME: (1, report.forward_ops)}


def test_without_a_native_file_the_interpreter_runs_through_numba(monkeypatch):
    """Where the interpreter's native file cannot be used (another system, a file
    refused: kernels/native.py), it loads through Numba and gives the same steps."""
    monkeypatch.setattr(scalar, "_interp", [])
    monkeypatch.setattr(cache, "load_native", lambda name, source: None)
    monkeypatch.setattr(cache, "save_native", lambda name, source, kernel: False)
    report = check_steps(w2, [np.linspace(-2, 2, 16, dtype=np.float32)])
    assert report.executors["forward"] == {scalar.NAME: (1, report.forward_ops)}
    assert scalar._interp[0].func is functools.partial  # (Numba's entry point, bound)


@pytest.mark.parametrize("ops", [40, 200])
def test_w7_matches_eager(ops):
    # from about 100 ops on, float32 overflows to NaN in some gradients, in eager
    # jitgrad and torch alike: compared NaN for NaN
    report = check_steps(w7(ops), [np.linspace(-1, 1, 100, dtype=np.float32)])
    assert report.executors["forward"] == {scalar.NAME: (1, report.forward_ops)}


def test_grad_written_on_the_tape_is_eager_grad():
    """A step that sets .grad to None and runs backward: the run's gradient becomes
    .grad without a copy, yet a .grad the caller kept from the last step keeps its
    values; without the reset, the next step adds into .grad in place."""
    def fresh(x):
        x.grad = None
        return w2(x)
    x = jitgrad.tensor(np.linspace(-2, 2, 16, dtype=np.float32), requires_grad=True)
    xe = jitgrad.tensor(x._data.copy(), requires_grad=True)
    f = jitgrad.compile(fresh, mode="max-autotune")
    kept = []
    for i in range(4):
        assert_close(f(x)._data, fresh(xe)._data)
        assert_close(x.grad._data, xe.grad._data)
        kept.append((x.grad, x.grad._data.copy()))
    for g, values in kept:  # each step's .grad is its own
        np.testing.assert_array_equal(g._data, values)
    assert f.entries()[-1].program.forward_tape.describe() == {scalar.NAME: (1, 37)}

    g = jitgrad.compile(w2, mode="max-autotune")  # accumulates into the .grad set above
    held = x.grad
    for i in range(4):
        assert_close(g(x)._data, w2(xe)._data)
        assert_close(x.grad._data, xe.grad._data)
        assert x.grad is held  # added into in place, as eager mode does
    assert g.traces == 1


def test_the_tape_runs_when_the_program_runs(monkeypatch):
    calls = []
    run = scalar._Compiled.run

    def counted(self, env):
        calls.append(len(self.code))
        return run(self, env)
    monkeypatch.setattr(scalar._Compiled, "run", counted)
    x = jitgrad.tensor(np.linspace(-2, 2, 16, dtype=np.float32), requires_grad=True)
    f = jitgrad.compile(w2)
    f(x)  # the trace: eager
    assert calls == []
    f.wait()  # the tape builds in a worker thread; replays before that run in Python
    x.grad = None
    f(x)
    assert len(calls) == 1 and calls[0] > 16


def _samples(op, dtype, rng):
    """Operands of `op`: tensors in its domain (bool masks for bool operands; the
    second tensor operand broadcast from a row), its scalar parameters as numbers."""
    lo, hi = op.domain
    out = []
    for k, a in enumerate(op.args):
        if a in op.scalars:
            out.append(op.scalars[a])
        elif a in op.bool_args:
            out.append(rng.random((3, 4)) < 0.5)
        else:
            out.append(rng.uniform(lo, hi, (3, 4) if k == 0 else (4,)).astype(dtype))
    return out


OWN_OPS = sorted(op.name for op in scalar._TABLE_OPS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", OWN_OPS)
def test_every_formula_op_matches_eager(name, dtype):
    op = REGISTRY[name]
    values = _samples(op, dtype, np.random.default_rng(len(name)))
    tensors = [v for v in values if isinstance(v, np.ndarray)]

    def step(*ts):
        it = iter(ts)
        y = op.function(*(next(it) if isinstance(v, np.ndarray) else v for v in values))
        z = jitgrad.where(y, ts[-1], 0.5) if y.dtype == jitgrad.bool else y
        (z * z).sum().backward()
        return y
    report = check_steps(step, tensors)
    assert set(report.executors["forward"]) == {scalar.NAME}, report


def test_broadcasting_reductions_and_means():
    def step(a, b, c):
        y = a * b + c               # (3, 1) * (4,) + 0-d
        z = y.sum(0) + y.sum(1, keepdim=True).mean() + y.mean(dim=(0, 1))
        w = (y - z).sum(dim=(0, 1), keepdim=True) * 0.5
        out = (z * z).sum() + w.sum()
        out.backward()
        return out, y
    check_steps(step, [np.linspace(-1, 1, 3).reshape(3, 1), np.linspace(0.5, 2, 4),
                       np.array(0.25)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_reductions_match_numpys_pairwise_sums(dtype):
    def step(x):
        y = (x.sin() * 1e3).sum() + x.exp().sum(1).sum() + x.cos().sum(0).sum()
        y.backward()
        return y
    report = check_steps(step, [np.linspace(-3, 3, 3 * 700, dtype=dtype).reshape(3, 700)])
    assert scalar_instructions(report) == report.forward_ops


def test_stack_unbind_narrow_getitem_select():
    def step(x):
        a, b, c = x.unbind(0)
        s = jitgrad.stack([a * 2, b.exp(), c[1:3].sum().expand(4)], 1)  # (4, 3)
        t = s.narrow(0, 1, 2).reshape(-1) + s[..., 0].select(0, 2) + s[[0, 3], 1].sum()
        u = jitgrad.cat([t, s.t().flatten()[::5], s.permute(1, 0)[2]]).unsqueeze(0)
        out = (u.squeeze(0) * x[1, 2]).sum()
        out.backward()
        return out, u
    report = check_steps(step, [np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)])
    assert scalar_instructions(report) == report.forward_ops


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax(dim):
    def step(x):
        p = jitgrad.softmax(x, dim)
        q = x.log_softmax(dim)
        out = (p * q).sum() + jitgrad.softmax(x[0, 0], 0) + x[1, 2].log_softmax(0)
        out.backward()
        return out, p, q
    report = check_steps(step, [np.array([[1.0, 2.0, -3.0], [0.5, 0.0, 40.0]], np.float32)])
    assert scalar_instructions(report) == report.forward_ops


def test_dtype_casts_and_mixed_dtypes():
    def step(x, y):
        z = x.double() * y + y.float().double()
        out = (z.float() * x).sum() + z.sum().float()
        out.backward()
        return out
    check_steps(step, [np.linspace(-1, 1, 5, dtype=np.float32), np.linspace(1, 2, 5)])


@pytest.mark.parametrize("view", [lambda y: y[1:3], lambda y: y.reshape(3, 3).diagonal(1)],
                         ids=["getitem", "diagonal"])
def test_a_view_changed_in_place_stays_in_python(view):
    def step(x):
        y = x * 2
        v = view(y)
        v.mul_(3)  # changes y too, eagerly
        return (y * y).sum(), y
    x = jitgrad.tensor(np.linspace(-1, 1, 9, dtype=np.float32))
    f = jitgrad.compile(step, mode="max-autotune")  # the tape is built before replays
    f(x)
    for want, got in zip(step(x), f(x)):
        assert_close(got._data, want._data)
    prog = f.entries()[0].program
    for ins, claimed in zip(prog.instrs, _claimed(prog)):
        if ins.name in ("getitem", "reshape", "diagonal") or ins.inplace:
            assert not claimed


def test_a_diagonal_that_is_only_read_is_lowered():
    def step(x):
        x.grad = None
        loss = (x.reshape(3, 3).diagonal(-1).exp() * 2).sum()
        loss.backward()
        return loss
    x = jitgrad.tensor(np.linspace(-1, 1, 9), requires_grad=True)
    f = jitgrad.compile(step, mode="max-autotune")
    want, want_grad = step(x), x.grad
    f(x)
    got = f(x)
    assert_close(got._data, want._data)
    assert_close(x.grad._data, want_grad._data)
    prog = f.entries()[0].program
    assert any(ins.name == "diagonal" and claimed
               for ins, claimed in zip(prog.instrs, _claimed(prog)))


def _claimed(prog):
    taken = set()
    for seg in prog.forward_tape.segments:
        if seg.executor == scalar.NAME:
            taken.update(range(seg.start, seg.stop))
    return [i in taken for i in range(len(prog.instrs))]


def test_a_returned_view_of_an_input_stays_a_view():
    x = jitgrad.tensor(np.linspace(-1, 1, 6, dtype=np.float32))
    f = jitgrad.compile(lambda x: (x.reshape(2, 3), (x * 2).sum()), mode="max-autotune")
    f(x)
    v, _ = f(x)
    x.add_(1.0)
    np.testing.assert_array_equal(v._data.reshape(-1), x._data)


def test_large_tensors_and_user_ops_are_left_to_others(register):
    softsign = register("test_scalar_softsign", out="x / (1 + abs(x))",
                        x="1 / ((1 + abs(x)) * (1 + abs(x)))")

    def step(x, big):
        y = softsign(x * 2)
        out = y.sum() + (big * 2).sum()
        out.backward()
        return out
    n = scalar.SMALL_ELEMENTS + 1
    report = check_steps(step, [np.linspace(-1, 1, 7, dtype=np.float32),
                                np.linspace(-1, 1, n, dtype=np.float32)])
    for ins, claimed in zip(report.program.instrs, _claimed(report.program)):
        if ins.op is not None and ins.op.name == "test_scalar_softsign":
            assert not claimed
        big = any(report.program.meta[r] is not None and report.program.meta[r].size == n
                  for r in ins.reads() + ins.writes())
        if big:
            assert not claimed


def test_forward_only_capture_runs_its_backward_on_the_tape():
    f = jitgrad.compile(lambda x: (x.sin() * x).sum(), mode="max-autotune")
    x = jitgrad.tensor([0.5, 1.0], requires_grad=True)
    f(x).backward()
    want = x.grad._data.copy()
    x.grad = None
    f(x).backward()
    np.testing.assert_array_equal(x.grad._data, want)
    prog = f.entries()[0].program
    assert {s.executor for s in prog.backward_tape.segments} == {scalar.NAME}


SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import jitgrad
    x = jitgrad.tensor(np.linspace(-2, 2, 16, dtype=np.float32), requires_grad=True)

    @jitgrad.compile(mode="max-autotune")
    def step(x):
        x.grad = None
        y = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * x) + 0.5 * x)
             * jitgrad.sigmoid(x)).sum()
        y.backward()
        return y
    for _ in range(3):
        y = step(x)
    segs = step.entries()[0].program.forward_tape.segments
    print(jitgrad.compile_stats()["kernels_compiled"], "numba" in sys.modules,
          [s.executor for s in segs], float(y), float(x.grad.sum()))
""")


def test_a_second_process_compiles_nothing(tmp_path):
    """...and, on Linux, loads the interpreter's native file (kernels/native.py)
    without importing Numba, giving the first process's bits."""
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")

    def run():
        proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
        compiled, numba_started, rest = proc.stdout.split(" ", 2)
        return int(compiled), numba_started, rest
    first, numba1, out1 = run()
    second, numba2, out2 = run()
    assert first > 0 and second == 0
    assert out1 == out2 and "'scalar tape'" in out1
    assert numba1 == "True" and numba2 == str(not sys.platform.startswith("linux"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_matmuls_and_extremes(dtype):
    rng = np.random.default_rng(0)

    def step(a, b, v, w):
        h = (a @ w.t()).tanh()                                    # (3, 4) @ (4, 5)
        m = h @ b + jitgrad.mm(a, w.t()).sum()                    # (3, 5) @ (5,)
        out = m.dot(v) + h.amax() + h.amin(0).sum() + h.amax(1, True).sum()
        bb = jitgrad.bmm(h.reshape(1, 3, 5), jitgrad.stack([w]))  # (1, 3, 4)
        out = out + bb.sum()
        out.backward()
        return out
    report = check_steps(step, [rng.standard_normal(s).astype(dtype)
                                for s in ((3, 4), (5,), (3,), (5, 4))])
    assert scalar_instructions(report) == report.forward_ops  # accumulations included


def test_a_large_matmul_is_left_to_blas():
    def step(a, b):
        return (a @ b).sum() * 2
    report = check_steps(step, [np.ones((64, 64)), np.ones((64, 64))])
    matmuls = [c for ins, c in zip(report.program.instrs, _claimed(report.program))
               if ins.name == "matmul"]
    assert matmuls and not any(matmuls)


@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_a_training_step_matches_eager(opt):
    """Parameters are read by identity and changed in place by the optimizer."""
    def model():
        rng = np.random.default_rng(0)
        return [jitgrad.tensor(rng.uniform(-0.5, 0.5, s).astype(np.float32), requires_grad=True)
                for s in ((4, 8), (8,), (8, 3), (3,))]
    rng = np.random.default_rng(1)
    x = jitgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    t = jitgrad.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    kw = dict(lr=0.1, momentum=0.9) if opt == "SGD" else dict(lr=0.01)

    def step(ps, o):
        o.zero_grad()
        w1, b1, w2, b2 = ps
        loss = ((((x @ w1 + b1).tanh() @ w2 + b2) - t) ** 2).mean()
        loss.backward()
        o.step()
        return loss
    pe, pc = model(), model()
    oe, oc = (getattr(jitgrad.optim, opt)(p, **kw) for p in (pe, pc))
    f = jitgrad.compile(step, mode="max-autotune")  # the tape is built before replays
    for _ in range(5):
        assert_close(f(pc, oc)._data, step(pe, oe)._data)
        for a, b in zip(pc, pe):
            assert_close(a._data, b._data)
    assert any(s.executor == scalar.NAME for s in f.entries()[-1].program.forward_tape.segments)


def test_index_put_and_the_where_method():
    from jitgrad.ops.indexing import index_put

    def step(x, v):
        y = index_put(x * 2, (slice(0, 2),), v.exp())       # rows 0 and 1 from v
        z = index_put(y, ([2, 0, 2],), 0.5)                  # a repeated index: last wins
        return z.where(z > 0.3, -z)
    x = jitgrad.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    v = jitgrad.tensor(np.linspace(0, 1, 3, dtype=np.float32))
    f = jitgrad.compile(step, mode="max-autotune")  # the tape is built before replays
    for _ in range(3):
        assert_close(f(x, v)._data, step(x, v)._data)
    prog = f.entries()[0].program
    assert all(_claimed(prog)), prog.forward_tape.describe()


def test_building_a_program_compiles_nothing():
    """The interpreter is fixed: a program of any size is data for it."""
    scalar._interpreter()
    for ops in (8, 120):
        x = jitgrad.tensor(np.linspace(-1, 1, 100, dtype=np.float32), requires_grad=True)
        prog = jitgrad.compile.explain(w7(ops), x).program
        before = jitgrad.compile_stats()["kernels_compiled"]
        prog.build()
        assert jitgrad.compile_stats()["kernels_compiled"] == before
        assert prog.forward_tape.describe() == {scalar.NAME: (1, len(prog.instrs))}


def test_a_program_without_a_run_to_lower_does_not_load_the_interpreter(monkeypatch):
    """Loading it (0.04 s from the disk cache) waits for a run of MIN_RUN instructions."""
    monkeypatch.setattr(scalar, "_interp", [])
    x = jitgrad.tensor(np.linspace(-1, 1, 8, dtype=np.float32))
    prog = jitgrad.compile.explain(lambda x: x * 2, x).program
    prog.build()
    assert prog.forward_tape.describe() == {"python": (1, 1)} and scalar._interp == []
    prog = jitgrad.compile.explain(lambda x: (x * 2).sin(), x).program
    prog.build()
    assert prog.forward_tape.describe() == {scalar.NAME: (1, 2)} and len(scalar._interp) == 1


def test_tracing_and_lowering_leave_no_garbage_cycles():
    """A trace and a lowering are freed as they end (paused_gc then ages what they
    made without a collection: a cycle left behind would wait for a full one)."""
    x = jitgrad.tensor(np.linspace(-1, 1, 100, dtype=np.float32), requires_grad=True)
    f = jitgrad.compile(w7(40), mode="max-autotune")  # (the tapes are built in the call)
    f(x)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        f = jitgrad.compile(w7(40), mode="max-autotune")
        y = f(x)  # alive, as the trace's weak references to it
        del f
        gc.collect()
        assert y.shape == ()
        left = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []


SAMPLED = sorted(n for n in FUNCTIONS if n in scalar._RULES or n in scalar._MOVES)


def _sample_leaves(sample, seed, dtype):
    """(args, kwargs) of a registry sample with placeholders, and a function making
    one set of leaf tensors for them (floats require grad, "const" ones do not)."""
    drawn = []

    def make(arg, values):
        drawn.append((arg.kind, values))
        return Ref(len(drawn) - 1)
    args, kwargs = build(sample, np.random.default_rng(seed), make, dtype=dtype)

    def tensors():
        return [jitgrad.tensor(v.copy(), requires_grad=kind == "float") for kind, v in drawn]
    return args, kwargs, tensors


def _fill(v, ts):
    if type(v) is Ref:
        return ts[v]
    if type(v) in (list, tuple):
        return type(v)(_fill(x, ts) for x in v)
    return v


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", SAMPLED)
def test_every_lowered_op_sample_matches_eager(name, dtype):
    fn, samples = FUNCTIONS[name]
    for k, sample in enumerate(samples):
        args, kwargs, tensors = _sample_leaves(sample, k, dtype)

        def step(*ts):
            outs = jitgrad.testing.outputs_of(fn(*_fill(args, ts), **_fill(kwargs, ts)))
            grads = [(o.double() * o.double()).sum() for o in outs if o.requires_grad]
            if grads:
                sum(grads).backward()
            return [o * 2 if o._data.dtype.kind == "f" else o for o in outs]  # views: copies
        eager, comp = tensors(), tensors()
        f = jitgrad.compile(step, mode="max-autotune")  # the tape is built before replays
        for _ in range(3):
            for x in eager + comp:
                x.grad = None
            for w, g in zip(step(*eager), f(*comp)):
                assert_close(g._data, w._data)
            for e, c in zip(eager, comp):
                if e.grad is not None:
                    assert_close(c.grad._data, e.grad._data)
        prog = f.entries()[-1].program  # None: the trace broke (index_put's backward)
        if prog is not None and all(t._data.dtype.kind == "f" for t in comp):
            # (index tensors are data: an op reading one is the Python tier's)
            # an op made of other ops is recorded as the calls it makes: then those run
            # on the tape
            named = any(ins.name == name for ins in prog.instrs)
            assert any((ins.name == name or not named) and c
                       for ins, c in zip(prog.instrs, _claimed(prog))), \
                prog.forward_tape.describe()


def _repeats_row_by_row(rows):
    """REPEAT compaction written as the interpreter reads it: a stretch starts at
    each row not yet taken and takes the following rows while they continue it."""
    out, i = [], 0
    while i < len(rows):
        k, o, *ops = rows[i]
        j = i + 1
        if j < len(rows) and rows[j][0] == k and rows[j][1] == o + 1:
            steps = [b - a for a, b in zip(ops, rows[j][2:])]
            if min(steps) >= 0:
                while j < len(rows) and rows[j][0] == k and rows[j][1] == o + j - i and \
                        rows[j][2:] == [a + s * (j - i) for a, s in zip(ops, steps)]:
                    j += 1
                out.append([interp.REPEAT, j - i, *steps])
        out.append(rows[i])
        i = max(j, i + 1)
    return out


def test_repeat_compaction_takes_stretches_first_come():
    rng = np.random.default_rng(0)
    compacted = 0
    for _ in range(500):
        rows = []
        for _ in range(rng.integers(0, 6)):  # stretches that may touch, overlap, break
            k, o = rng.integers(6, 8), rng.integers(0, 5)
            base, step = rng.integers(0, 5, 3), rng.integers(-1, 3, 3)
            rows += [[k, o + j, *np.maximum(base + step * j, 0)] for j in range(rng.integers(1, 6))]
        code = np.array(rows, dtype=np.int64).reshape(-1, 5)
        want = np.array(_repeats_row_by_row(code.tolist()), dtype=np.int64).reshape(-1, 5)
        np.testing.assert_array_equal(scalar._repeats(code), want)
        compacted += len(want) < len(code)
    assert compacted > 100


def _chains(n_chains, length):
    """A tape of `n_chains` identical chains of unary rows from cell 0 (two opcodes in
    turn: no REPEAT stretch), each storing its end: every chain after the first
    repeats the first, row for row, so merging them takes `length` whole-tape rounds."""
    n, rows = 1, []
    for c in range(n_chains):
        prev = 0
        for j in range(length):
            rows.append([7 + j % 2, n, prev, 0, 0])
            prev, n = n, n + 1
        rows.append([interp.STORE_F64, 2 * c, prev, 0, 0])  # (2 * c: no REPEAT)
    return np.array(rows, dtype=np.int64), n


@pytest.mark.parametrize("rounds", [0, 1, 4, 50])
def test_merging_repeated_rows_needs_no_fixed_number_of_rounds(monkeypatch, rounds):
    code, n = _chains(3, 10)
    monkeypatch.setattr(scalar, "_MERGE_ROUNDS", rounds)
    tape = scalar._optimize(code, n)
    # one chain is left, and all three stores read its end
    assert np.isin(tape[:, 0], (7, 8)).sum() == 10
    stores = tape[tape[:, 0] == interp.STORE_F64]
    assert len(stores) == 3 and len(set(stores[:, 2].tolist())) == 1


def test_the_w7_tape_is_the_same_merged_either_way(monkeypatch):
    """Real tapes (W7's) come out of whole-tape rounds as out of the row-by-row pass."""
    seen = []
    optimize = scalar._optimize
    monkeypatch.setattr(scalar, "_optimize", lambda code, n: seen.append((code, n)) or
                        optimize(code, n))
    x = jitgrad.tensor(np.linspace(-1, 1, 100, dtype=np.float32), requires_grad=True)
    jitgrad.compile.explain(w7(60), x)
    assert seen
    for code, n in seen:
        want = optimize(code, n)
        monkeypatch.setattr(scalar, "_MERGE_ROUNDS", 0)
        np.testing.assert_array_equal(optimize(code, n), want)
        monkeypatch.setattr(scalar, "_MERGE_ROUNDS", 4)
